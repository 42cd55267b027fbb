r"""Judges with their own verdict probabilities, simulated from known verdicts.

No public pairwise data set carries a judge's probabilities, so the likelihood-aware paths
(the evidence signal ``p_chosen``, the confidence certificate, a cascade whose every stage has
its own confidence) are checked on probabilities generated here, with the separation a real
judge's probabilities have (AUROC about 0.75 between right and wrong verdicts, as measured on
held-out human labels of judges that report them).

The model, per item :math:`i` (a pair; every vote on it sees one verdict and one probability):
a latent confidence :math:`z_i = \mu\, a_i + \varepsilon_i`, :math:`\varepsilon_i \sim N(0, 1)`,
where :math:`a_i` is the share of the item's votes that agree with the judge. For one vote per
item the AUROC of :math:`z` is :math:`\Phi(\mu / \sqrt 2)`, so :math:`\mu = \sqrt 2\,
\Phi^{-1}(\text{AUROC})` (0.954 at 0.75). The reported probability of the verdict given is
:math:`\sigma(\beta_0 + \beta_1 z)`, kept in [0.34, 0.999] (a three-way distribution whose
largest entry is the verdict), with the rest split 4 : 1 between the other answer and a tie.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm

__all__ = ["simulated_confidence", "add_judge_probabilities", "simulated_judge"]


def simulated_confidence(agree: np.ndarray, items: np.ndarray, *, auroc: float = 0.75,
                         scale: float = 3.0, random_state: int | None = 0) -> np.ndarray:
    r"""(n,) a judge's probability of its verdict per row, one per item (module docstring).

    ``agree``: per row 1 when the judge's verdict equals the people's, 0 when not, NaN when
    unknown (an unlabelled row's item takes the labelled rows' mean). :math:`\mu` is found by
    bisection so that the AUROC over the labelled *rows* is ``auroc`` (several votes on one item
    that disagree lower it below :math:`\Phi(\mu / \sqrt 2)`). ``scale``: the slope of the
    logistic map; at 3 about a fifth of the items saturate at 0.999, as a real judge's
    probabilities bunch near 1.
    """
    from sklearn.metrics import roc_auc_score

    agree = np.asarray(agree, dtype=np.float64)
    _, inv = np.unique(np.asarray(items).astype(str), return_inverse=True)
    n_items = int(inv.max()) + 1 if len(inv) else 0
    known = np.isfinite(agree)
    cnt = np.bincount(inv[known], minlength=n_items).astype(float)
    tot = np.bincount(inv[known], weights=agree[known], minlength=n_items)
    base = float(agree[known].mean()) if known.any() else 0.7
    a = np.where(cnt > 0, tot / np.maximum(cnt, 1), base)
    noise = np.random.default_rng(random_state).standard_normal(n_items)
    two_classes = known.any() and 0 < agree[known].mean() < 1

    logit_base = np.log(base / (1 - base)) if 0 < base < 1 else 0.0

    def item_probability(mu: float) -> np.ndarray:
        z = mu * a + noise
        return np.clip(expit(logit_base + scale * (z - mu * base)), 0.34, 0.999)

    def row_auroc(mu: float) -> float:
        # of the reported probabilities: the clip's ties count, as they do for a reader
        return float(roc_auc_score(agree[known], item_probability(mu)[inv][known]))

    mu = np.sqrt(2.0) * norm.ppf(auroc)
    if two_classes:
        lo, hi = 0.0, 8.0
        for _ in range(40):
            mu = 0.5 * (lo + hi)
            lo, hi = (mu, hi) if row_auroc(mu) < auroc else (lo, mu)
    return item_probability(mu)[inv]


def add_judge_probabilities(frame: pd.DataFrame, verdict_column: str, confidence, *,
                            prefix: str | None = None) -> pd.DataFrame:
    """``frame`` with ``<prefix>_p_A``, ``_p_B``, ``_p_tie`` (``prefix`` None: the verdict
    column's name; ``""``: unprefixed ``p_A`` ...) whose entry for the verdict in
    ``verdict_column`` (A / B / tie after normalisation) is ``confidence``."""
    from puaudit.data.schema import normalize_verdicts

    get = lambda c: frame[c].tolist() if c in frame.columns else None  # noqa: E731
    v = normalize_verdicts(frame[verdict_column].tolist(), column=verdict_column,
                           model_a=get("model_a"), model_b=get("model_b"))
    p = np.asarray(confidence, dtype=np.float64)
    rest = 1.0 - p
    pa = np.where(v == "A", p, np.where(v == "B", 0.8 * rest, 0.5 * rest))
    pb = np.where(v == "B", p, np.where(v == "A", 0.8 * rest, 0.5 * rest))
    pt = np.where(v == "tie", p, 0.2 * rest)
    none = np.array([x is None for x in v])
    name = verdict_column if prefix is None else prefix
    out = frame.copy()
    for letter, vals in (("A", pa), ("B", pb), ("tie", pt)):
        out[f"{name}_p_{letter}" if name else f"p_{letter}"] = np.where(none, np.nan, vals)
    return out


def simulated_judge(human, items, *, accuracy: float, random_state: int | None = 0
                    ) -> np.ndarray:
    """(n,) verdicts of a judge that gives each item's majority people's verdict with
    probability ``accuracy`` and the other answer otherwise (one verdict per item; an item
    without a strict majority gets A or B at random)."""
    human = np.asarray(human, dtype=object)
    _, inv = np.unique(np.asarray(items).astype(str), return_inverse=True)
    n_items = int(inv.max()) + 1 if len(inv) else 0
    a = np.bincount(inv, weights=(human == "A").astype(float), minlength=n_items)
    b = np.bincount(inv, weights=(human == "B").astype(float), minlength=n_items)
    rng = np.random.default_rng(random_state)
    coin = rng.random(n_items) < 0.5
    major = np.where(a > b, "A", np.where(b > a, "B", np.where(coin, "A", "B")))
    right = rng.random(n_items) < accuracy
    other = np.where(major == "A", "B", "A")
    return np.where(right, major, other).astype(object)[inv]
