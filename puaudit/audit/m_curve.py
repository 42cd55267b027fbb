"""The "verdicts reversed vs m" curve's numbers: the m values it is drawn at and one audit's curve.

The Audit page draws the curve beside its m slider and the audit report (``puaudit report``)
carries it, both with :func:`puaudit.report.figures.m_curve.m_curve_figure`; both take their m
values from :func:`m_grid` and each point from :func:`reversals_vs_m`.
:func:`audit_with_m_curve` runs an audit and draws its curve from that audit's own split and
scores (nothing is scored twice).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from puaudit.audit.config import AuditConfig
from puaudit.audit.stages import audit_table, human_labels
from puaudit.audit.splits import PreparedSplit, prepare_split
from puaudit.audit.scorers.scoring import score_split
from puaudit.audit.relabel import GROUP_NEG, beats_base_rate, relabel_split
from puaudit.audit.scorers import SCORER_SPECS
from puaudit.audit.scorers.calibration import prior_shift
from puaudit.audit.scorers.crossfit import ScoredSplit
from puaudit.audit.result import AuditResult
from puaudit.data.schema import ComparisonTable
from puaudit.embed.pairs import PairEmbeddings
from puaudit.errors import PUAuditError

__all__ = ["M_RANGE", "m_grid", "with_current_point", "audit_with_m_curve", "stage_curve",
           "reversals_vs_m"]

#: the Audit page's m slider: (lowest, highest); the curve spans exactly this range
M_RANGE = (0.05, 1.0)


def m_grid(current_m: float | None = None) -> tuple[float, ...]:
    """The m values the curve is drawn at.

    Parameters
    ----------
    current_m : float, optional
        The audit's m: added (replacing a grid value within 1e-9 of it), so the curve's point
        there is the audit the page or report shows.

    Returns
    -------
    tuple of float
        Sorted: both ends of :data:`M_RANGE`, every 0.2 between, 0.9 (where the judge is
        usually trusted) and ``current_m``; eight points at most, since a scorer that uses m is
        fitted again for each.
    """
    lo, hi = M_RANGE
    grid = {lo, hi, 0.9, *np.round(np.arange(0.2, hi, 0.2), 2).tolist()}
    if current_m is not None:
        grid = {v for v in grid if abs(v - current_m) > 1e-9} | {float(current_m)}
    return tuple(sorted(float(v) for v in grid if lo <= v <= hi))


def with_current_point(curve: list[dict], m: float, n_reversed: int) -> list[dict]:
    """The curve with its point at the current ``m`` taken from the audit that is shown.

    Parameters
    ----------
    curve : list of dict
        :func:`reversals_vs_m`'s points (``m``, ``n_reversed``, …).
    m : float
        The audit's m.
    n_reversed : int
        The rows the audit reversed.

    Returns
    -------
    list of dict
        Copies of the points, sorted by ``m``; the one at ``m`` is ``{"m", "n_reversed"}`` of
        the audit, so the curve and the headline can never disagree there.
    """
    out = [dict(c) for c in curve if abs(c["m"] - m) > 1e-9]
    out.append({"m": float(m), "n_reversed": int(n_reversed)})
    return sorted(out, key=lambda c: c["m"])


def audit_with_m_curve(table: ComparisonTable, embeddings: PairEmbeddings,
                       config: AuditConfig) -> tuple[AuditResult, list[dict]]:
    """One audit (as :func:`~puaudit.audit.stages.audit_table` runs it) and its reversals vs
    m, drawn from the audit's own split and scores.

    Parameters
    ----------
    table : ComparisonTable
    embeddings : PairEmbeddings
    config : AuditConfig

    Returns
    -------
    (AuditResult, list of dict or None)
        The audit, and :func:`reversals_vs_m` over
        :func:`m_grid` of the audit's m with its point there set to the audit's own reversals
        (:func:`with_current_point`); None when a refit at some m fails (the audit stands
        without its curve, as on the Audit page).

    Raises
    ------
    PUAuditError
        When the audit itself cannot run.
    """
    prep = prepare_split(table, embeddings, config,
                         human=human_labels(table, config, embeddings))
    scored = score_split(prep, config)
    # the audit first: reversals_vs_m shifts copies of the scores, the audit reads them as fitted
    result = audit_table(table, embeddings, config, prep=prep, scored=scored)
    try:
        curve = reversals_vs_m(prep, config, m_grid(result.m), scored=scored)
    except PUAuditError:
        return result, None
    return result, with_current_point(curve, result.m, int((result.group == GROUP_NEG).sum()))


def stage_curve(stages, config: AuditConfig, *, m_values=None, checkpoint=None,
                progress=None) -> list[dict]:
    """Reversals vs m over :func:`m_grid` (or ``m_values``) from a
    :class:`~puaudit.audit.stages.StageCache`: once per split and scorer settings.

    The split and the scores come from the cache at ``m`` = the estimate (``config.m`` is
    ignored), each m shifts their prior (:func:`reversals_vs_m`), and a
    scorer that transports m is fitted again through the cache (kept for the next call and for
    the audits at those m). The dashboard marks the current m with the audit it shows
    (:func:`with_current_point`).

    Parameters
    ----------
    stages : StageCache
    config : AuditConfig
    m_values : sequence of float, optional
        Default :func:`m_grid` ``()``.
    checkpoint : callable, optional
        Run before each point and each scoring job (the dashboard's job runner stops there).
    progress : callable, optional
        ``progress(done, total, text)`` after each point.
    """
    config = config.replace(m=None)
    grid = m_grid() if m_values is None else tuple(m_values)
    prep = stages.split(config, checkpoint=checkpoint)
    scored = stages.scored(config, checkpoint=checkpoint)

    def refit(prep_, cfg):
        return stages.scored(cfg, checkpoint=checkpoint)

    out = []
    for i, mv in enumerate(grid):
        if progress is not None:
            progress(i, len(grid), f"Reversals vs m: m = {mv:.2f}")
        if checkpoint is not None:
            checkpoint()
        out += reversals_vs_m(prep, config, [mv], scored=scored, refit=refit)
    return out


def reversals_vs_m(prep: PreparedSplit, config: AuditConfig, m_values, *,
                   scored: ScoredSplit | None = None,
                   refit: Callable | None = None) -> list[dict]:
    """Guarded reversals and expected consistency on the audited rows for each ``m``.

    For scorers whose scores do not depend on ``m`` (:attr:`ScorerSpec.uses_m`; the stack and
    the evidence scorer count as not), the scores and calibration of ``scored`` are reused and
    only the prior shift (and the paper rule's kept share) changes; otherwise each ``m`` is
    scored again. With reused scores the reversals never increase as ``m`` rises (the shift
    raises every probability, the paper rule keeps more rows); a scorer fitted again at each
    ``m`` carries no such guarantee. Where the audit's automatic choice found its scorer no
    better than P's base rate (so the guarded rule reverses nothing), every refit keeps that
    finding, so the curve agrees with the audit at every ``m``. ``refit(prep, config)``: how
    such a scorer is fitted again (default :func:`score_split`; a :class:`StageCache` passes
    its own, which keeps the fits).
    """
    if scored is None:
        scored = score_split(prep, config)
    spec = SCORER_SPECS.get(scored.scorer)
    reuse = spec is None or not spec.uses_m
    out = []
    u = prep.u_rows
    for mv in m_values:
        cfg = config.replace(m=float(mv))
        if reuse:
            s = dataclasses.replace(scored)
            s.p_judge_right = _unshifted(scored, scored.p_judge_right)
            s.p_upper = None if scored.p_upper is None else _unshifted(scored, scored.p_upper)
            s.p_judge_right = prior_shift(s.p_judge_right, base_rate=scored.base_rate,
                                          target=cfg.m)
            if s.p_upper is not None:
                s.p_upper = prior_shift(s.p_upper, base_rate=scored.base_rate, target=cfg.m)
            s.prior_target = cfg.m
            s.m = cfg.m  # the paper rule keeps the top m share of each type
        else:
            s = (score_split if refit is None else refit)(
                prep, cfg.replace(scorer=scored.scorer) if spec is not None else cfg)
            if not beats_base_rate(scored):
                # the audit found this scorer no better than the base rate and reverses nothing;
                # a refit at another m must not reverse on that same evidence
                s.diagnostics = {**(s.diagnostics or {}), "auto": scored.diagnostics["auto"]}
        rel = relabel_split(prep, s, cfg, n_boot=0)
        out.append({"m": float(mv), "n_reversed": int((rel["group"][u] == GROUP_NEG).sum()),
                    "n_audited": int(len(u)),
                    "expected_cons_orig": rel["expected"]["expected_cons_orig"],
                    "expected_cons_adj": rel["expected"]["expected_cons_adj"]})
    return out


def _unshifted(scored: ScoredSplit, p: np.ndarray) -> np.ndarray:
    """Undo the prior shift of ``scored`` (back to P's base rate)."""
    if scored.prior_target is None:
        return p
    return prior_shift(p, base_rate=scored.prior_target, target=scored.base_rate)
