r"""Each annotator's skill, biases, tie habit and confusion matrix under a fitted latent-truth
model, and the kappas.

Per-annotator statistics
------------------------
For annotator :math:`w` with votes :math:`r` on items :math:`i(r)`, the soft confusion counts in
the shown orientation are :math:`C^w_{tv} = \sum_r b_{i(r)}\, q_{i(r)}(t)\, [v_r = v]` with
:math:`q_i` the model's posterior of item :math:`i`'s truth (in that row's orientation) and
:math:`b_i` the item's bootstrap multiplicity (1 for the point estimate). This is the M-step of
Dawid–Skene in the shown orientation; on data whose rows all share one orientation it equals
crowd-kit's ``errors_`` of the fitted model. With :math:`a_{t v} = C_{tv} / (C_{tA} + C_{tB})`
(the share of strict votes for :math:`v` given the truth :math:`t`):

* ``skill`` :math:`= \tfrac12 (a_{AA} + a_{BB})`: how often a strict vote names the true winner,
  balanced over the two winners (chance 0.5, whatever the annotator's habits);
* ``position_bias`` :math:`= \tfrac12 (a_{AA} + a_{BA})`: share of strict votes for the
  first-shown response, balanced over the truth (0.5 = none, 1 = always A);
* ``p_a_given_b`` :math:`= a_{BA}` and ``p_b_given_a`` :math:`= a_{AB}`;
* ``tie_given_strict`` :math:`= (C_{A,tie} + C_{B,tie}) / (C_{A\cdot} + C_{B\cdot})` and
  ``tie_given_tie`` :math:`= C_{tie,tie} / C_{tie\cdot}`: the tie habit;
* ``length_bias`` :math:`= \tfrac12 (a_{LL} + a_{SL})` with the truth written as "the longer
  (L) / the shorter (S) response won" and votes on rows of equal lengths left out: share of
  strict votes for the longer response, balanced over which one is truly better (0.5 = none);
* ``confusion``: :math:`\pi_{tv} = C_{tv} / \sum_{v'} C_{tv'}` (rows A, B, tie truths).

CROWDLAB's posterior is a weighted average of votes and model, not a calibrated posterior, so
its statistics count against its consensus label (:math:`q_i` one-hot). Only the items with two
or more votes in the model count (see :attr:`TruthFit.fit_items`).

Intervals are percentiles of the bootstrap over items: items are drawn with replacement, the
model is **refitted** on each replicate (a vectorised port of crowd-kit's EM for ``ds`` and
``mace``, checked against crowd-kit in the tests; cleanlab itself for ``crowdlab``), and every
statistic is recomputed.

Cohen's kappa of an annotator is computed against the consensus *of the others*: the model's
posterior with the annotator's own vote divided out (exact for Dawid–Skene, MACE and CROWDLAB,
whose posteriors factorise over votes or average them), over the votes whose item has at least
one other vote in the model (statsmodels ``cohens_kappa``, asymptotic 95% interval). Fleiss'
kappa (statsmodels ``fleiss_kappa``) uses the items with exactly ``k`` people's votes, ``k`` the
most common count of two or more.
"""

from __future__ import annotations

import numpy as np

from puaudit.annotators.latent_truth import TruthFit, _consensus_of
from puaudit.annotators.votes import _SWAP, VoteData

__all__ = ["STAT_COLUMNS", "annotator_stats", "fleiss_kappa_items"]

STAT_COLUMNS = ("skill", "position_bias", "length_bias", "p_a_given_b", "p_b_given_a",
                "tie_given_strict", "tie_given_tie")


def _div(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.divide(a, b, out=np.full(np.broadcast(a, b).shape, np.nan), where=b > 0)


def annotator_stats(votes: VoteData, posterior: np.ndarray, *,
                    weights: np.ndarray | None = None) -> dict:
    """Skill, biases, tie habit and confusion matrix of every annotator (see the module notes).

    Parameters
    ----------
    votes : VoteData
    posterior : ndarray (n_items, 3)
        P(truth = A / B / tie) per item in its reference orientation.
    weights : ndarray (n_items,), optional
        Item multiplicities (bootstrap).

    Returns
    -------
    dict of arrays, one value per annotator: the :data:`STAT_COLUMNS`, ``confusion``
    (n_workers, 3 truth, 3 vote; rows sum to 1) and ``counts`` (the soft counts :math:`C`).
    """
    W = votes.n_workers
    w = np.ones(len(votes.item)) if weights is None else np.asarray(weights, float)[votes.item]
    q = posterior[votes.item]
    q_shown = np.where(votes.flip[:, None], q[:, _SWAP], q)
    ct = np.zeros((W, 3, 3))                                 # (worker, vote, truth)
    np.add.at(ct, (votes.worker, votes.shown), w[:, None] * q_shown)
    C = ct.transpose(0, 2, 1)                                # (worker, truth, vote)
    strict = C[:, :2, :2]
    a = _div(strict, strict.sum(2, keepdims=True))           # share of strict votes given truth
    # length orientation: truth and vote as "the longer (0) / the shorter (1) won"
    has_len = votes.longer >= 0
    b_long = votes.longer[has_len] == 1
    q_len = np.where(b_long[:, None], q_shown[has_len][:, _SWAP], q_shown[has_len])
    v_len = np.where(b_long & (votes.shown[has_len] < 2), 1 - votes.shown[has_len],
                     votes.shown[has_len])
    lt = np.zeros((W, 3, 3))
    np.add.at(lt, (votes.worker[has_len], v_len), w[has_len, None] * q_len)
    L = lt.transpose(0, 2, 1)[:, :2, :2]
    aL = _div(L, L.sum(2, keepdims=True))
    return {
        "skill": (a[:, 0, 0] + a[:, 1, 1]) / 2,
        "position_bias": (a[:, 0, 0] + a[:, 1, 0]) / 2,
        "length_bias": (aL[:, 0, 0] + aL[:, 1, 0]) / 2,
        "p_a_given_b": a[:, 1, 0],
        "p_b_given_a": a[:, 0, 1],
        "tie_given_strict": _div(C[:, 0, 2] + C[:, 1, 2], C[:, :2, :].sum((1, 2))),
        "tie_given_tie": _div(C[:, 2, 2], C[:, 2, :].sum(1)),
        "confusion": _div(C, C.sum(2, keepdims=True)),
        "counts": C,
        "length_counts": L,
    }


def _count_intervals(point: dict, confidence: float, rng: np.random.Generator,
                     n_draws: int = 4000) -> dict:
    r"""Jeffreys intervals of every statistic given the soft counts of the point fit.

    Each share :math:`a = x / n` gets the Beta(:math:`x + \tfrac12, n - x + \tfrac12`)
    posterior; averages of two shares (``skill``, ``position_bias``, ``length_bias``) the
    percentiles of the average of independent draws. These stay honest where the bootstrap
    collapses: an annotator who never lost a disagreement has the share 1.00 in every
    replicate, while 15 such items only show that the error rate is below about 0.2.
    """
    from statsmodels.stats.proportion import proportion_confint

    a = (1 - confidence) / 2
    C, L = point["counts"], point["length_counts"]
    out = {}

    def share(x, n):
        x = np.asarray(x, float)
        n = np.asarray(n, float)
        ok = n > 0
        # soft counts may pass n by a rounding error; statsmodels divides by n
        lo, hi = proportion_confint(np.minimum(x, n), np.where(ok, n, 1.0),
                                    alpha=1 - confidence, method="jeffreys")
        return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)

    def draws(x, n):
        x = np.asarray(x, float)
        n = np.asarray(n, float)
        d = rng.beta(x + 0.5, np.maximum(n - x, 0) + 0.5, size=(n_draws, len(x)))
        return np.where(n > 0, d, np.nan)

    def mean_of(d1, d2):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            m = (d1 + d2) / 2
            return np.nanquantile(m, a, axis=0), np.nanquantile(m, 1 - a, axis=0)

    nA, nB = C[:, 0, :2].sum(1), C[:, 1, :2].sum(1)
    dAA, dBA, dBB = draws(C[:, 0, 0], nA), draws(C[:, 1, 0], nB), draws(C[:, 1, 1], nB)
    out["skill"] = mean_of(dAA, dBB)
    out["position_bias"] = mean_of(dAA, dBA)
    nLt, nSt = L[:, 0, :].sum(1), L[:, 1, :].sum(1)
    out["length_bias"] = mean_of(draws(L[:, 0, 0], nLt), draws(L[:, 1, 0], nSt))
    out["p_a_given_b"] = share(C[:, 1, 0], nB)
    out["p_b_given_a"] = share(C[:, 0, 1], nA)
    out["tie_given_strict"] = share(C[:, 0, 2] + C[:, 1, 2], C[:, :2, :].sum((1, 2)))
    out["tie_given_tie"] = share(C[:, 2, 2], C[:, 2, :].sum(1))
    out["confusion"] = share(C, np.broadcast_to(C.sum(2, keepdims=True), C.shape))
    return out


def _cohen_kappas(votes: VoteData, fit: TruthFit, confidence: float) -> dict:
    """Cohen's kappa of each annotator's shown votes against the others' consensus."""
    from scipy.stats import norm
    from statsmodels.stats.inter_rater import cohens_kappa

    loo, other = fit.loo_posterior(votes)
    loo_shown = np.where(votes.flip[:, None], loo[:, _SWAP], loo)
    cons = _consensus_of(loo_shown)
    z = float(norm.ppf(0.5 + confidence / 2))
    W = votes.n_workers
    out = {k: np.full(W, np.nan) for k in ("cohen_kappa", "cohen_kappa_lo", "cohen_kappa_hi")}
    out["n_kappa"] = np.zeros(W, dtype=int)
    for w in range(W):
        sel = (votes.worker == w) & other
        out["n_kappa"][w] = int(sel.sum())
        if sel.sum() < 2:
            continue
        tab = np.zeros((3, 3))
        np.add.at(tab, (votes.shown[sel], cons[sel]), 1.0)
        keep = (tab.sum(0) + tab.sum(1)) > 0
        tab = tab[np.ix_(keep, keep)]
        if len(tab) < 2:
            continue
        n = tab.sum()
        pe = float((tab.sum(0) / n) @ (tab.sum(1) / n))
        if pe >= 1 - 1e-12:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            res = cohens_kappa(tab)
        k, sd = float(res.kappa), float(res.std_kappa)
        out["cohen_kappa"][w] = k
        if np.isfinite(sd):
            out["cohen_kappa_lo"][w] = max(-1.0, k - z * sd)
            out["cohen_kappa_hi"][w] = min(1.0, k + z * sd)
    return out


def fleiss_kappa_items(votes: VoteData, *, votes_per_item: int | None = None) -> dict:
    """Fleiss' kappa (statsmodels) over the items with exactly ``k`` people's votes.

    ``k`` defaults to the most common count among items with two or more votes (the larger
    count on a draw). Categories: A / B / tie in each item's reference orientation.

    Returns
    -------
    dict with ``fleiss_kappa`` (NaN when undefined), ``fleiss_items``, ``fleiss_votes_per_item``.
    """
    from statsmodels.stats.inter_rater import fleiss_kappa

    people = votes.model_mask(False)
    counts = np.zeros((votes.n_items, 3))
    np.add.at(counts, (votes.item[people], votes.label[people]), 1.0)
    n = counts.sum(1).astype(int)
    if votes_per_item is None:
        vals, freq = np.unique(n[n >= 2], return_counts=True)
        if not len(vals):
            return {"fleiss_kappa": float("nan"), "fleiss_items": 0, "fleiss_votes_per_item": None}
        votes_per_item = int(vals[np.flatnonzero(freq == freq.max())[-1]])
    tab = counts[n == votes_per_item]
    if len(tab) < 2 or (tab.sum(0) > 0).sum() < 2:
        kappa = float("nan")
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa = float(fleiss_kappa(tab, method="fleiss"))
    return {"fleiss_kappa": kappa, "fleiss_items": int(len(tab)),
            "fleiss_votes_per_item": int(votes_per_item)}


def _percentiles(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    import warnings

    a = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanquantile(boot, a, axis=0)
        hi = np.nanquantile(boot, 1 - a, axis=0)
    return lo, hi
