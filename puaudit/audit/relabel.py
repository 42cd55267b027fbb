"""Relabelling rules: which audited verdicts to keep, reverse, or send to a person."""

from __future__ import annotations

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["RULES", "GROUP_POS", "GROUP_NEG", "GROUP_UNCERTAIN", "relabel_paper",
           "relabel_guarded", "adjust_verdicts", "reverse"]

RULES = ("guarded", "paper")
GROUP_POS = "positive"
GROUP_NEG = "negative"
GROUP_UNCERTAIN = "uncertain"


def relabel_paper(scores: np.ndarray, groups_by: np.ndarray, m: float, *,
                  review_band: tuple[float, float] | None = None, log: bool = False):
    """The paper's rule: per group, the top ``⌊m·|U|⌋`` scores keep the judge's verdict.

    The rest are ``negative`` (reversed). With ``review_band=(lo, hi)``, rows with
    ``lo <= score < hi`` become ``uncertain`` instead (kept, flagged for review).

    Returns
    -------
    groups : ndarray of str
    thresholds : dict (with ``log=True``): per group, the lowest kept score.
    """
    if not (0 < m <= 1):
        raise PUAuditError(f"m must be in (0, 1], got {m}.")
    scores = np.asarray(scores, dtype=np.float64)
    out = np.full(len(scores), GROUP_NEG, dtype=object)
    thresholds: dict = {}
    for g in sorted(set(np.asarray(groups_by).tolist())):
        idx = np.flatnonzero(np.asarray(groups_by) == g)
        k = int(np.floor(m * len(idx)))
        # stable sort on -score keeps earlier rows first among equal scores: deterministic
        order = idx[np.argsort(-scores[idx], kind="stable")]
        out[order[:k]] = GROUP_POS
        thresholds[g] = float(scores[order[k - 1]]) if k > 0 else float("inf")
    if review_band is not None:
        lo, hi = review_band
        band = (scores >= lo) & (scores < hi)
        out[band] = GROUP_UNCERTAIN
    return (out, thresholds) if log else out


def relabel_guarded(p_judge_right: np.ndarray, *, margin: float = 0.05,
                    p_upper: np.ndarray | None = None) -> np.ndarray:
    """The guarded rule: reverse only where the calibrated P(judge right) < 0.5 − margin.

    Rows with ``0.5 − margin <= p <= 0.5 + margin`` are ``uncertain``; above, ``positive``.
    With ``p_upper`` (an upper confidence bound of p), a row is reversed only when that bound is
    below 0.5 as well; rows that fail only this test are ``uncertain``. When no row qualifies,
    nothing is reversed.
    """
    if not (0 <= margin < 0.5):
        raise PUAuditError(f"margin must be in [0, 0.5), got {margin}.")
    p = np.asarray(p_judge_right, dtype=np.float64)
    out = np.full(len(p), GROUP_POS, dtype=object)
    out[p <= 0.5 + margin] = GROUP_UNCERTAIN
    reverse_ = p < 0.5 - margin
    if p_upper is not None:
        out[reverse_ & ~(np.asarray(p_upper, dtype=np.float64) < 0.5)] = GROUP_UNCERTAIN
        reverse_ &= np.asarray(p_upper, dtype=np.float64) < 0.5
    out[reverse_] = GROUP_NEG
    return out


def reverse(verdicts: np.ndarray) -> np.ndarray:
    """A <-> B; anything else unchanged."""
    v = np.asarray(verdicts, dtype=object)
    return np.where(v == "A", "B", np.where(v == "B", "A", v)).astype(object)


def adjust_verdicts(judge: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The judge's verdict, reversed on ``negative`` rows."""
    judge = np.asarray(judge, dtype=object)
    return np.where(np.asarray(groups) == GROUP_NEG, reverse(judge), judge).astype(object)
