"""Relabelling rules: which audited verdicts to keep, reverse, or send to a person."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from puaudit.audit.scorers.calibration import MonotoneCalibrator, prior_shift
from puaudit.audit.config import RULES, AuditConfig
from puaudit.audit.metrics import consistency, consistency_by_type
from puaudit.audit.splits import SPLIT_P, SPLIT_VAL
from puaudit.errors import PUAuditError
from puaudit.stats.bootstrap import cluster_bootstrap_indices

if TYPE_CHECKING:
    from puaudit.audit.scorers.crossfit import ScoredSplit
    from puaudit.audit.splits import PreparedSplit

__all__ = ["GROUP_POS", "GROUP_NEG", "GROUP_UNCERTAIN", "GROUP_VERIFIED", "GROUP_EXCLUDED",
           "relabel_paper", "relabel_guarded", "adjust_verdicts", "reverse", "relabel_split",
           "beats_base_rate"]

GROUP_POS = "positive"
GROUP_NEG = "negative"
GROUP_UNCERTAIN = "uncertain"
#: P rows (their verdict is the human's) and rows the audit does not touch
GROUP_VERIFIED = "verified"
GROUP_EXCLUDED = "excluded"


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


def _expected_consistency(p: np.ndarray, reversed_: np.ndarray, cal: MonotoneCalibrator | None,
                          scores: np.ndarray, cv_scores: np.ndarray, cv_correct: np.ndarray, *,
                          n_boot: int = 100, random_state: int | None = 0,
                          prior_target: float | None = None,
                          groups: np.ndarray | None = None) -> dict:
    """Expected share of audited rows whose verdict matches a person, before and after relabelling.

    :math:`E_{orig} = \\mathrm{mean}_j\\, p_j`, :math:`E_{adj} = \\mathrm{mean}_j\\, (r_j(1-p_j) + (1-r_j)p_j)`
    with ``p`` the calibrated P(judge right) and ``r`` the reversal indicator; the 95% interval of
    the change comes from refitting the calibrator on bootstrap resamples of the cross-fitted P
    rows' items (:func:`puaudit.stats.bootstrap.cluster_bootstrap_indices`): ``groups`` holds
    the item id of each of ``cv_scores``' rows (None: each row its own item).
    """
    if cal is None or len(p) == 0:
        nan = float("nan")
        return {"expected_cons_orig": nan, "expected_cons_adj": nan, "expected_delta": nan,
                "expected_delta_ci": (nan, nan)}
    r = reversed_.astype(float)

    def adj(pp):
        return float(np.mean(r * (1 - pp) + (1 - r) * pp))

    e_orig, e_adj = float(np.mean(p)), adj(p)
    deltas = []
    items = len(cv_scores) if groups is None else groups
    for idx in cluster_bootstrap_indices(items, n_boot, random_state=random_state):
        c = MonotoneCalibrator(cal.method, bounds=False).fit(cv_scores[idx], cv_correct[idx])
        pb = prior_shift(c.predict(scores), base_rate=c.base_rate_, target=prior_target)
        deltas.append(adj(pb) - float(np.mean(pb)))
    lo, hi = (np.percentile(deltas, [2.5, 97.5]) if deltas else (np.nan, np.nan))
    return {"expected_cons_orig": e_orig, "expected_cons_adj": e_adj,
            "expected_delta": e_adj - e_orig, "expected_delta_ci": (float(lo), float(hi))}


def beats_base_rate(scored: ScoredSplit) -> bool:
    """Whether the automatic choice found a scorer whose cross-fitted log loss on P is below
    that of P's base rate alone (True when no comparison was made: a scorer named by the user,
    or too few items to cross-fit)."""
    info = (scored.diagnostics or {}).get("auto") or {}
    return bool(info.get("beats_base_rate", True))


def relabel_split(prep: PreparedSplit, scored: ScoredSplit, config: AuditConfig | None = None, *,
                  n_boot: int = 100, confidence_guard: bool = True) -> dict:
    """Apply the relabel rule of ``config`` to the audited rows and measure on validation rows.

    ``guarded`` reverses a row only when its calibrated P(judge right) is below 0.5 − ``margin``
    and (with ``confidence_guard``) the one-sided 95% upper bound of that probability is below 0.5.
    ``config`` gives ``rule``, ``margin``, ``review_band`` and ``per_type`` (default
    :class:`AuditConfig`).

    Returns a dict with ``group``, ``adjusted`` (arrays over all rows), ``metrics`` (overall),
    ``per_type``, ``thresholds`` and ``expected`` (expected consistency on the audited rows).
    """
    config = AuditConfig() if config is None else config
    rule, margin = config.rule, config.margin
    if rule not in RULES:
        raise PUAuditError(f"Unknown relabel rule '{rule}': choose one of {list(RULES)}.")
    n = len(prep.split)
    u = prep.u_rows
    group = np.full(n, GROUP_EXCLUDED, dtype=object)
    group[prep.split == SPLIT_P] = GROUP_VERIFIED
    thresholds: dict = {}
    if len(u):
        if rule == "paper":
            by = (prep.question_type[u] if config.per_type
                  else np.full(len(u), "all", dtype=object))
            g, thresholds = relabel_paper(scored.score[u], by, scored.m,
                                          review_band=config.review_band, log=True)
        else:
            p = scored.p_judge_right[u]
            if np.isnan(p).any():  # no calibration possible: never reverse without evidence
                p = np.where(np.isnan(p), 1.0, p)
            upper = None
            if confidence_guard and scored.p_upper is not None:
                upper = scored.p_upper[u]
            elif confidence_guard and scored.calibrator is not None:
                upper = scored.calibrator.predict_upper(scored.score[u])
            g = relabel_guarded(p, margin=margin, p_upper=upper)
            if not beats_base_rate(scored):
                # the probabilities are no better than P's base rate: a low one is noise, so
                # those verdicts are flagged for a person, never reversed
                g = np.where(g == GROUP_NEG, GROUP_UNCERTAIN, g)
            thresholds = _guarded_thresholds(scored, margin)
        group[u] = g
    adjusted = np.asarray(prep.judge, dtype=object).copy()
    adjusted[u] = adjust_verdicts(prep.judge[u], group[u])
    p_rows = prep.split == SPLIT_P
    adjusted[p_rows] = prep.human[p_rows]
    val = prep.split == SPLIT_VAL
    metrics = consistency(prep.human[val], prep.judge[val], adjusted[val])
    per_type = consistency_by_type(prep.human[val], prep.judge[val], adjusted[val],
                                   prep.question_type[val])
    expected = _expected_consistency(
        scored.p_judge_right[u], group[u] == GROUP_NEG, scored.calibrator, scored.score[u],
        scored.cv_scores, scored.cv_correct, n_boot=n_boot, random_state=prep.random_state,
        prior_target=scored.prior_target, groups=_cv_items(prep, scored))
    return {"group": group, "adjusted": adjusted, "metrics": metrics, "per_type": per_type,
            "thresholds": thresholds, "expected": expected}


def _cv_items(prep, scored: ScoredSplit) -> np.ndarray | None:
    """The item id of each cross-fitted P row (None when the rows are not known: each row is
    then its own item)."""
    rows = np.asarray(scored.cv_rows, dtype=int)
    if len(rows) != len(scored.cv_scores) or getattr(prep, "item_id", None) is None:
        return None
    return np.asarray(prep.item_id)[rows]


def _guarded_thresholds(scored: ScoredSplit, margin: float) -> dict:
    """Scores where the calibrated probability crosses 0.5 − margin and 0.5 + margin."""
    cal = scored.calibrator
    if cal is None or not hasattr(cal, "bin_centres_"):
        return {}
    grid = np.linspace(np.nanmin(scored.score) if np.isfinite(scored.score).any() else 0,
                       np.nanmax(scored.score) if np.isfinite(scored.score).any() else 1, 512)
    pv = prior_shift(cal.predict(grid), base_rate=cal.base_rate_, target=scored.prior_target)
    out = {}
    for name, level in (("reverse_below", 0.5 - margin), ("keep_above", 0.5 + margin)):
        above = np.flatnonzero(pv >= level) if name == "reverse_below" else np.flatnonzero(pv > level)
        out[name] = float(grid[above[0]]) if len(above) else float("inf")
    return {"all": out}
