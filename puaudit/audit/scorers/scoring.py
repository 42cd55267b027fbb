r"""The scoring stage: cross-fit the scorer(s) on P and, with ``scorer="auto"``, choose one.

:func:`score_split` denoises P, scores the audited rows and cross-fits the score -> P(judge
right) map on P (:mod:`puaudit.audit.scorers.crossfit`). ``auto`` cross-fits every candidate of
:data:`puaudit.audit.scorers.AUTO_CANDIDATES`, calibrates each one's out-of-fold scores on P
again out of fold (the calibrator of fold k is fitted on the other folds), adds their mean in
logit space (``stacked``) and the evidence scorer (:mod:`puaudit.audit.scorers.evidence`), and
keeps the lowest log loss of ``judge == human`` on P. Validation rows are never read
(docs/method.md, "The automatic choice").
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.special import expit
from scipy.stats import norm

from puaudit.audit.scorers.calibration import (cross_fitted_probabilities, gain_over_base_rate,
                                       log_loss, logit, paired_gain)
from puaudit.audit.config import AuditConfig
from puaudit.audit.scorers.crossfit import (ScoredSplit, apply_prior, crossfit_scorer,
                                            pooled_probabilities)
from puaudit.audit.scorers.evidence import EVIDENCE, score_evidence
from puaudit.audit.scorers import AUTO_CANDIDATES, MAX_FIT_ROWS, SCORER_SPECS, SCORERS
from puaudit.audit.splits import PreparedSplit
from puaudit.errors import PUAuditError

__all__ = ["score_split", "STACKED", "KNN_AUTO_MAX_PAIRS"]

STACKED = "stacked"
#: ``knn`` compares every audited row with every reference row; above this many pairs the
#: automatic choice leaves it out (it is still available by name).
KNN_AUTO_MAX_PAIRS = 2_000_000_000


def score_split(prep: PreparedSplit, config: AuditConfig | None = None, *,
                candidates: tuple[str, ...] = AUTO_CANDIDATES, calibrate: bool = True,
                denoise: bool | None = None, n_neighbors: int = 15,
                map_fn: Callable | None = None,
                crossfit: Callable | None = None) -> ScoredSplit:
    r"""Denoise P, score audited rows, and cross-fit the score -> P(judge right) map on P.

    ``config`` (default :class:`AuditConfig`) gives the scorer and every parameter
    (``m``, ``alpha1``, ``alpha2``, ``per_type``, ``ot_method``, ``reg``, ``n_folds``,
    ``calibration``, ``cv_repeats``, ``calibration_bags``, ``random_state``).

    ``m``: the share of audited verdicts believed right. ``None`` uses P's agreement rate and
    leaves the calibrated probabilities as fitted; a value moves them from P's base rate
    :math:`\pi` to ``m`` by Bayes' prior shift
    (:func:`puaudit.audit.scorers.calibration.prior_shift`), for every scorer; the scorers that transport mass (:attr:`ScorerSpec.uses_m`) also use it
    as their mass.

    ``candidates``: the scorers ``auto`` compares. ``calibrate=False``: no cross-fitting (scores
    only). ``denoise``: fit on the denoised P' or all of P (default: each scorer's
    :attr:`ScorerSpec.denoise`). ``map_fn(fn, prep, jobs)`` runs the independent per-type jobs
    of the full fit and of every fold (the Ray backend passes
    :class:`puaudit.scale.ray_score.RayMap`); same results either way. ``crossfit``: what fits
    one scorer, called as :func:`~puaudit.audit.scorers.crossfit.crossfit_scorer` is (default that
    function; :class:`puaudit.audit.stages.StageCache` passes one that reuses earlier fits).
    """
    config = AuditConfig() if config is None else config
    scorer, m = config.scorer, config.m
    if scorer not in ("auto", EVIDENCE) and scorer not in SCORERS:
        raise PUAuditError(f"Unknown scorer '{scorer}': choose 'auto', '{EVIDENCE}' or one of "
                           f"{list(SCORERS)}.")
    bad = [c for c in candidates if c not in SCORERS]
    if bad or not candidates:
        raise PUAuditError(f"Unknown candidate scorer(s) {bad}: choose from {list(SCORERS)}.")
    m_used = prep.m_estimate if m is None else float(m)
    if not (0 < m_used <= 1) or math.isnan(m_used):
        raise PUAuditError(f"m must be in (0, 1]; got {m_used}" + (
            " (estimated from P: the judge agrees with no verified positive; set m explicitly)"
            if m is None else "."))
    if not config.texts:  # the evidence-only audit: no embeddings, the evidence scorer alone
        from puaudit.audit.scorers.evidence import score_evidence_only

        return apply_prior(prep, score_evidence_only(prep, config, m_used=m_used), m)
    # Many small matrix products: BLAS threads cost more to wake than they save (4x slower on
    # 2 busy cores, measured), so small audits run single-threaded.
    from threadpoolctl import threadpool_limits

    small = len(prep.p_rows) * len(prep.u_rows) < 20_000_000
    kw = dict(m_used=m_used, calibrate=calibrate, n_neighbors=n_neighbors, map_fn=map_fn)
    fit = crossfit_scorer if crossfit is None else crossfit
    with threadpool_limits(limits=1 if small else None):
        if scorer in ("auto", EVIDENCE):
            scored = _score_auto(prep, config, candidates=candidates, denoise=denoise,
                                 force=EVIDENCE if scorer == EVIDENCE else None, fit=fit, **kw)
        else:
            scored = fit(prep, config, scorer, denoise=_denoise_default(denoise, scorer), **kw)
    return apply_prior(prep, scored, m)


def _denoise_default(denoise: bool | None, scorer: str) -> bool:
    return SCORER_SPECS[scorer].denoise if denoise is None else bool(denoise)


def _score_auto(prep: PreparedSplit, config: AuditConfig, *, candidates, denoise,
                force: str | None = None, fit: Callable = crossfit_scorer, **kw) -> ScoredSplit:
    """Cross-fit every candidate, compare them by out-of-fold log loss on P, keep the best
    (``force``: keep that one whatever the comparison says)."""
    n_ref = 2 * min(len(prep.p_rows), MAX_FIT_ROWS["knn"])
    if len(candidates) > 1 and len(prep.u_rows) * n_ref > KNN_AUTO_MAX_PAIRS:
        candidates = tuple(c for c in candidates if c != "knn")
    fitted = {c: fit(prep, config, c, denoise=_denoise_default(denoise, c), **kw)
              for c in candidates}
    first = fitted[candidates[0]]
    usable = [c for c in candidates if fitted[c].calibrator is not None
              and len(fitted[c].cv_scores) == len(first.cv_scores)
              and np.array_equal(fitted[c].cv_rows, first.cv_rows)]
    if not usable:  # too few P items to cross-fit: nothing to compare, keep the first
        first.diagnostics["auto"] = {"chosen": candidates[0], "reason": (
            "too few annotated items to cross-fit, so no comparison was possible")}
        if force == EVIDENCE:
            raise PUAuditError("The evidence scorer needs enough annotated items to cross-fit "
                               f"({config.n_folds} folds); this P has too few.")
        return first
    ev_scored = score_evidence(prep, fitted, usable, config)
    if ev_scored is None and force == EVIDENCE:
        raise PUAuditError("The evidence scorer has no signal to learn from: this table's "
                           "verdicts carry no evidence (evidence='none', or every signal is "
                           "constant). Choose another scorer.")
    info = _compare(prep, fitted, usable, ev_scored, config.calibration, force)
    chosen = info["chosen"]
    if chosen == EVIDENCE:
        ev_scored.diagnostics["auto"] = info
        return ev_scored
    if chosen != STACKED:
        out = fitted[chosen]
        out.diagnostics["auto"] = info
        return out
    return _stack(prep, fitted, usable, info, config)


def _compare(prep: PreparedSplit, fitted: dict, usable: list, ev_scored: ScoredSplit | None,
             method: str, force: str | None) -> dict:
    """Each candidate's (and the stack's, and the evidence scorer's) cross-fitted log loss and
    Brier score on P, the choice and why."""
    first = fitted[usable[0]]
    y = first.cv_correct.astype(float)
    folds, groups = first.cv_folds, prep.item_id[first.cv_rows]
    q = {c: cross_fitted_probabilities(fitted[c].cv_scores, y, folds, groups, method)
         for c in usable}
    if len(usable) > 1:
        q[STACKED] = expit(np.mean([logit(q[c]) for c in usable], axis=0))
    if ev_scored is not None:
        q[EVIDENCE] = cross_fitted_probabilities(ev_scored.cv_scores, y, folds, groups, method)
    losses = {c: log_loss(v, y) for c, v in q.items()}
    briers = {c: float(np.mean((v - y) ** 2)) for c, v in q.items()}
    base_loss = log_loss(np.full(len(y), y.mean()), y)
    chosen = force or min(losses, key=losses.get)
    kept_confidence = None
    if (not force and ev_scored is not None and chosen != EVIDENCE
            and "p_chosen" in ev_scored.diagnostics.get("evidence", {}).get("signals", ())):
        # the evidence scorer reads the judge's own confidence: a text scorer replaces it only
        # when it predicts better on P beyond noise (paired, items as clusters), never on a
        # log-loss tie (a tie gave away the judge's confidence on 4-5 of 20 seeds)
        z_pair = paired_gain(q[EVIDENCE], q[chosen], y, groups)
        if z_pair <= float(norm.ppf(0.95)):
            kept_confidence = (chosen, z_pair)
            chosen = EVIDENCE
    ranked = sorted(losses, key=losses.get)
    runner = ranked[1] if len(ranked) > 1 else None
    reason = (f"lowest cross-fitted log loss on {len(y)} P rows ({losses[chosen]:.4f}"
              + (f"; next {runner} {losses[runner]:.4f}" if runner else "")
              + f"; base rate alone {base_loss:.4f})")
    if force:
        reason = f"{force} was asked for; " + reason.replace("lowest ", "its ", 1)
    if kept_confidence is not None:
        reason = (f"evidence kept: it reads the judge's own probabilities, and {kept_confidence[0]}"
                  f"'s lower log loss ({losses[kept_confidence[0]]:.4f} against "
                  f"{losses[EVIDENCE]:.4f}) is within noise (paired z = "
                  f"{kept_confidence[1]:.2f}, needs 1.64); base rate alone {base_loss:.4f}")
    z = gain_over_base_rate(q[chosen], y, groups)
    # the winner of several candidates: its gain must clear a one-sided 5% test corrected for
    # the number compared (Bonferroni), else its low probabilities may be noise
    z_needed = float(norm.ppf(1 - 0.05 / len(q)))
    beats = bool(losses[chosen] < base_loss and z > z_needed)
    if not beats:
        reason += (f"; its gain over the base rate is within noise (z = {z:.2f}, needs "
                   f"{z_needed:.2f}), so nothing is reversed")
    info = {"chosen": chosen, "candidates": list(usable) + ([EVIDENCE] if ev_scored else []),
            "log_loss": losses, "brier": briers,
            "base_rate_log_loss": base_loss, "n_p_rows": int(len(y)), "reason": reason,
            "gain_z": z, "gain_z_needed": z_needed, "beats_base_rate": beats}
    if ev_scored is not None:
        info["evidence"] = ev_scored.diagnostics["evidence"]
    return info


def _stack(prep: PreparedSplit, fitted: dict, usable: list, info: dict,
           config: AuditConfig) -> ScoredSplit:
    """The stacked scorer: mean logit of the candidates' calibrated probabilities, recalibrated
    (on the out-of-fold scores of every cross-fitting repetition)."""
    u = prep.u_rows
    first = fitted[usable[0]]
    cv_rows = first.cv_rows
    score = np.full(len(first.score), np.nan)
    score[u] = expit(np.mean(
        [logit(fitted[c].calibrator.predict(fitted[c].score[u])) for c in usable], axis=0))
    cv = expit(np.mean(
        [logit(fitted[c].calibrator.predict(fitted[c].cv_scores)) for c in usable], axis=0))
    y = first.cv_correct
    # every repetition's stacked out-of-fold probability (NaN where a candidate had none); the
    # usable candidates all cross-fitted, with the same repetitions of the same P rows
    with np.errstate(invalid="ignore"):
        stacked = expit(np.mean(
            [logit(fitted[c].calibrator.predict(fitted[c].cv_repeat_scores)) for c in usable],
            axis=0))
    score[cv_rows] = cv
    cal, p_right = pooled_probabilities(prep, stacked, config, score, cv_rows, cv)
    diagnostics = {**first.diagnostics, "auto": info,
                   "total_seconds": sum(fitted[c].diagnostics["total_seconds"] for c in usable)}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=first.in_p_prime,
                       m=first.m, scorer=STACKED, calibrator=cal, cv_scores=cv, cv_correct=y,
                       cv_rows=cv_rows, cv_folds=first.cv_folds, diagnostics=diagnostics,
                       cv_repeat_scores=stacked, cv_repeat_folds=first.cv_repeat_folds)
