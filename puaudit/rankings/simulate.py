"""Pairwise comparisons with planted strengths, a length-biased judge and scarce labels: data
with known answers for the leaderboards' tests and benchmarks."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

from puaudit.rankings.bradley_terry import bradley_terry

__all__ = ["simulate_comparisons"]


def simulate_comparisons(n_comparisons: int = 5000, *, n_models: int = 8,
                         label_share: float = 0.1, length_bias: float = 1.5,
                         quality_sd: float = 0.8, sharpness: float = 3.0,
                         human_tie: float = 0.1, judge_tie: float = 0.03,
                         random_state: int | None = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    r"""Pairwise comparisons with planted strengths, a length-biased judge and scarce labels.

    Model ``k`` has mean answer quality :math:`\beta_k` (evenly spaced in [−1.2, 1.2]) and a
    typical answer length :math:`e^{\mu_k}` characters, unrelated to its quality. Each row draws
    an ordered pair uniformly, one answer per side with quality :math:`q = \beta + s\,\varepsilon`
    (:math:`s` = ``quality_sd``) and length :math:`e^{\mu + 0.3\varepsilon'}`, and

    * a human verdict: ``tie`` with probability ``human_tie``, else A wins with probability
      :math:`\sigma(\kappa (q_A - q_B))` (:math:`\kappa` = ``sharpness``; people ignore
      length), kept on a uniform random ``label_share`` of the rows (None elsewhere);
    * a judge verdict on the same answers: ``tie`` with probability ``judge_tie``, else A wins
      with probability :math:`\sigma(\kappa (q_A - q_B) + \gamma \tanh\log(\ell_A /
      \ell_B))`, :math:`\gamma` = ``length_bias`` (the judge likes long answers).

    Judge and people see the same answers, so they agree on most rows (about 0.85 on strict rows
    with the defaults), as real judges do; only the length term sets them apart.

    Returns
    -------
    frame : DataFrame
        ``model_a, model_b, length_a, length_b, judge_winner, human_winner``.
    truth : DataFrame
        Per model: ``model``, ``quality`` (:math:`\beta`), ``winrate_true`` — the expected human
        score against a uniformly drawn opponent, :math:`\frac{1}{K-1}\sum_{l\ne k}
        \big[(1 - t)\,E\,\sigma(\kappa(\beta_k - \beta_l + \sqrt2 s Z)) + t/2\big]`
        (:math:`t` = ``human_tie``, :math:`Z` standard normal, by Gauss–Hermite quadrature) — and
        ``bt_true``, the Bradley–Terry strengths those expected outcomes imply (the population
        value the ``human`` and ``ppi`` strengths estimate).
    """
    rng = np.random.default_rng(random_state)
    k = int(n_models)
    beta = np.linspace(-1.2, 1.2, k)
    mu = np.log(300.0) + rng.permutation(np.linspace(-0.8, 0.8, k))
    names = np.array([f"model-{c:02d}" for c in range(k)])
    pairs = np.array([(a, b) for a in range(k) for b in range(k) if a != b])
    draw = pairs[rng.integers(0, len(pairs), n_comparisons)]
    a, b = draw[:, 0], draw[:, 1]
    q_a = beta[a] + quality_sd * rng.normal(size=n_comparisons)
    q_b = beta[b] + quality_sd * rng.normal(size=n_comparisons)
    len_a = np.round(np.exp(mu[a] + 0.3 * rng.normal(size=n_comparisons)))
    len_b = np.round(np.exp(mu[b] + 0.3 * rng.normal(size=n_comparisons)))

    def verdicts(logit, p_tie):
        win_a = rng.random(n_comparisons) < expit(logit)
        tie = rng.random(n_comparisons) < p_tie
        return np.where(tie, "tie", np.where(win_a, "A", "B")).astype(object)

    human = verdicts(sharpness * (q_a - q_b), human_tie)
    judge = verdicts(sharpness * (q_a - q_b) + length_bias * np.tanh(np.log(len_a / len_b)),
                     judge_tie)
    human[rng.random(n_comparisons) >= label_share] = None
    frame = pd.DataFrame({"model_a": names[a], "model_b": names[b], "length_a": len_a,
                          "length_b": len_b, "judge_winner": judge, "human_winner": human})
    nodes, weights = np.polynomial.hermite_e.hermegauss(64)  # E f(Z), Z ~ N(0, 1)
    weights = weights / weights.sum()
    diff = beta[:, None, None] - beta[None, :, None] + np.sqrt(2.0) * quality_sd * nodes
    expected = (1 - human_tie) * (expit(sharpness * diff) @ weights) + human_tie / 2
    np.fill_diagonal(expected, np.nan)
    iu, ju = np.triu_indices(k, 1)
    bt_true, _ = bradley_terry(iu, ju, expected[iu, ju], np.ones(len(iu)), n_models=k, prior=0.0)
    truth = pd.DataFrame({"model": names, "quality": beta,
                          "winrate_true": np.nanmean(expected, axis=1), "bt_true": bt_true})
    return frame, truth
