"""Cross-fitting: one scorer fitted on P by item folds, its out-of-fold scores calibrated.

For each of ``cv_repeats`` draws of the folds, the scorer is fitted on the other folds' (denoised)
P rows and scores the held-out fold's rows *in the judge's order*, together with the audited
rows, so held-out scores live on the same scale as audited ones; a full fit on all of P scores
the audited rows. The score -> P(judge right) map (:class:`MonotoneCalibrator`) is fitted on
every repetition's out-of-fold scores (docs/method.md, "Cross-fitting" and "Calibration").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from puaudit.audit.scorers.calibration import MonotoneCalibrator, prior_shift
from puaudit.audit.config import AuditConfig
from puaudit.audit.denoise import denoise_by_type
from puaudit.audit.scorers import score_targets, transport_prior
from puaudit.audit.splits import PreparedSplit

__all__ = ["ScoredSplit", "crossfit_scorer", "fit_pooled", "pooled_probabilities",
           "default_cv_repeats", "fold_sets_of", "apply_prior", "snap", "CV_POOL_TARGET"]


@dataclass
class ScoredSplit:
    """Scores of the audited rows and the cross-fitted calibration."""

    score: np.ndarray            # (n,) NaN where not scored; P rows carry out-of-fold scores
    p_judge_right: np.ndarray    # (n,) NaN where not available
    in_p_prime: np.ndarray       # (n,) bool
    m: float
    scorer: str
    calibrator: MonotoneCalibrator | None
    cv_scores: np.ndarray        # out-of-fold scores of P rows (judge orientation)
    cv_correct: np.ndarray       # judge == human on those rows
    cv_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # their rows
    cv_folds: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # their folds
    diagnostics: dict = field(default_factory=dict)
    #: upper confidence bound of ``p_judge_right`` (audited rows; NaN elsewhere)
    p_upper: np.ndarray | None = None
    base_rate: float = float("nan")       # P's agreement rate the calibrator was fitted at
    prior_target: float | None = None     # the m the probabilities were shifted to (None: none)
    #: (repeats, len(P rows)) out-of-fold scores of every cross-fitting repetition (NaN: none)
    cv_repeat_scores: np.ndarray | None = None
    #: (repeats, len(P rows)) the fold of each P row in every repetition (:func:`fold_sets_of`)
    cv_repeat_folds: np.ndarray | None = None



def _type_jobs(prep: PreparedSplit, p_prime: np.ndarray, targets: np.ndarray, *,
               per_type: bool, score_from: int = 0) -> list[tuple]:
    """One job per question type of ``targets``: ``(src, target_rows, score_rows, want)``.

    ``src`` are the verified positives the scorer is fitted on (that type's rows of ``p_prime``,
    or all of them when the type has none), ``target_rows`` the type's targets (every one is in
    the transport scorers' target measure), ``score_rows`` which of them to score (None: all),
    ``want`` where the scores go in ``targets``.
    """
    jobs: list[tuple] = []
    if len(targets) == 0:
        return jobs
    qt = prep.question_type
    groups = sorted(set(qt[targets].tolist())) if per_type else [None]
    for t in groups:
        sel = np.ones(len(targets), bool) if t is None else (qt[targets] == t)
        want = sel.copy()
        want[:score_from] = False
        if not want.any():
            continue
        src = p_prime if t is None else p_prime[qt[p_prime] == t]
        if len(src) == 0:  # no verified positives of this type: borrow the pooled ones
            src = p_prime
        pos = np.flatnonzero(sel)
        score_rows = None if score_from == 0 else np.flatnonzero(pos >= score_from)
        jobs.append((src, targets[sel], score_rows, want))
    return jobs


def _score_job(prep: PreparedSplit, job: tuple, *, scorer: str, m: float, opts: dict) -> np.ndarray:
    """Scores of one per-type job of :func:`_type_jobs` (what one Ray task runs)."""
    src, target_rows, score_rows = job[:3]
    return score_targets(scorer, prep.z_human(src)[:], prep.z_judge(target_rows), m=m,
                         score_rows=score_rows, **opts)


def _score_by_type(prep: PreparedSplit, calls: list[tuple], *, scorer: str, m: float,
                   per_type: bool, opts: dict, map_fn: Callable | None = None) -> list[np.ndarray]:
    """Score ``targets[score_from:]`` (row indices, judge orientation) against ``p_prime`` rows,
    per question type, for each ``(p_prime, targets, score_from)`` in ``calls``.

    Every target is part of the transport scorers' target measure; only the rows from
    ``score_from`` on are scored and returned (cross-fitting needs the held-out rows' scores).
    The per-type jobs of all calls are independent: ``map_fn(fn, prep, jobs)`` (the Ray
    backend, :class:`puaudit.scale.ray_score.RayMap`) gets them all at once; by default they
    run here, one after the other. Either way the results are the same.
    """
    from functools import partial

    plans = [_type_jobs(prep, pp, targets, per_type=per_type, score_from=sf)
             for pp, targets, sf in calls]
    jobs = [job[:3] for plan in plans for job in plan]
    fn = partial(_score_job, scorer=scorer, m=m, opts=opts)
    results = iter(map_fn(fn, prep, jobs) if map_fn is not None else [fn(prep, j) for j in jobs])
    out = []
    for (_, targets, sf), plan in zip(calls, plans):
        o = np.full(len(targets), np.nan)
        for job in plan:
            o[job[3]] = next(results)
        out.append(o[sf:])
    return out


#: out-of-fold scores the default number of cross-fitting repetitions aims at
CV_POOL_TARGET = 20_000


def default_cv_repeats(n_p: int, *, most: int = 3) -> int:
    r"""Cross-fitting repetitions for ``n_p`` P rows: :math:`\min(3, \max(1,
    \lceil 20000 / n_P \rceil))`.

    One draw of the folds moves a calibrator fitted on a few thousand rows (on llmfao, 1,582 P
    rows: 541 of 3,776 audited rows change groups between fold seeds; 107 with three
    repetitions and bagging, ``bench/calibration_stability.py``); from about 20,000 rows one
    draw already moves little, and each repetition costs a full set of fold fits.
    """
    if n_p <= 0:
        return 1
    return int(min(most, max(1, math.ceil(CV_POOL_TARGET / n_p))))


def _item_folds(items: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    uniq = np.array(sorted(set(items.tolist())), dtype=object)
    perm = rng.permutation(len(uniq))
    fold_of = {uniq[j]: k % n_folds for k, j in enumerate(perm)}
    return np.array([fold_of[i] for i in items])


def fold_sets_of(prep: PreparedSplit, k: int, repeats: int, random_state: int | None
               ) -> list[np.ndarray]:
    """Each cross-fitting repetition's fold of every P row (the same for every scorer)."""
    # one generator for every repetition: the first repetition's folds are the same whatever
    # the number of repetitions
    rng = np.random.default_rng(None if random_state is None else random_state + 7919)
    return [_item_folds(prep.item_id[prep.p_rows], k, rng) for _ in range(repeats)]



def snap(x: np.ndarray) -> np.ndarray:
    """Scores rounded to 12 decimals: identical rows (several votes on one item) then tie
    exactly, whatever block of a matrix product they were computed in (BLAS may differ in the
    last bit), so the calibrator's levels do not depend on how rows were batched."""
    return np.round(x, 12)


def crossfit_scorer(prep: PreparedSplit, config: AuditConfig, scorer: str, *, m_used: float,
                    denoise: bool, calibrate: bool = True, n_neighbors: int = 15,
                    map_fn: Callable | None = None) -> ScoredSplit:
    """One scorer: the full fit scores the audited rows, each repetition's fold fits score
    their held-out P rows, and the calibrator is fitted on every repetition's out-of-fold
    scores (:func:`fit_pooled`). ``denoise``: fit on the denoised P' (else all of P)."""
    t0 = time.perf_counter()
    random_state = config.random_state
    opts = {"ot_method": config.ot_method, "reg": config.reg, "n_neighbors": n_neighbors,
            "random_state": random_state}
    n = len(prep.split)
    p_rows, u_rows = prep.p_rows, prep.u_rows
    p_prime = denoise_by_type(prep, p_rows, config, enabled=denoise)
    in_pp = np.zeros(n, bool)
    in_pp[p_prime] = True
    score = np.full(n, np.nan)
    calibrator = None
    cv_scores = np.zeros(0)
    cv_correct = np.zeros(0, dtype=bool)
    cv_rows = np.zeros(0, dtype=int)
    cv_folds = np.zeros(0, dtype=int)
    p_right = np.full(n, np.nan)
    k = min(config.n_folds, len(set(prep.item_id[p_rows].tolist())))
    crossfit = calibrate and k >= 2
    repeats = (default_cv_repeats(len(p_rows)) if config.cv_repeats is None
               else config.cv_repeats) if crossfit else 0
    if crossfit:
        fold_sets = fold_sets_of(prep, k, repeats, random_state)
    # the full fit, then each repetition's fold fits scoring their held-out rows (all
    # independent jobs)
    calls, fold_of_call = [(p_prime, u_rows, 0)], []
    for r in range(repeats):
        folds = fold_sets[r]
        for f in range(k):
            pp = denoise_by_type(prep, p_rows[folds != f], config, enabled=denoise)
            if len(pp):
                calls.append((pp, np.concatenate([u_rows, p_rows[folds == f]]), len(u_rows)))
                fold_of_call.append((r, f))
    mass = transport_prior(scorer, m=m_used, base_rate=prep.m_estimate)
    scores = _score_by_type(prep, calls, scorer=scorer, m=mass, per_type=config.per_type,
                            opts=opts, map_fn=map_fn)
    score[u_rows] = snap(scores[0])
    t_score = time.perf_counter() - t0  # full fit and folds
    if crossfit:
        cv_all = np.full((repeats, len(p_rows)), np.nan)
        for (r, f), s in zip(fold_of_call, scores[1:]):
            cv_all[r, fold_sets[r] == f] = s
        cv_all = snap(cv_all)
        # the first repetition is the cross-fit the rest of the audit reads (one out-of-fold
        # score per P row: the automatic choice, the stack, the bootstrap of the expected
        # consistency); the calibrator is fitted on every repetition's scores
        ok = np.isfinite(cv_all[0])
        cv_scores = cv_all[0][ok]
        cv_rows = p_rows[ok]
        cv_folds = fold_sets[0][ok]
        cv_correct = (prep.judge[p_rows] == prep.human[p_rows])[ok]
        score[cv_rows] = cv_scores
        if ok.sum() >= 2:
            calibrator, p_right = pooled_probabilities(prep, cv_all, config, score, cv_rows,
                                                       cv_scores)
    diagnostics = {"n_p": int(len(p_rows)), "n_p_prime": int(len(p_prime)), "denoised": denoise,
                   "n_audited": int(len(u_rows)), "n_folds": int(k) if calibrate else 0,
                   "cv_repeats": int(repeats), "calibration_bags": int(config.calibration_bags),
                   "score_seconds": t_score, "total_seconds": time.perf_counter() - t0}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=in_pp, m=m_used,
                       scorer=scorer, calibrator=calibrator, cv_scores=cv_scores,
                       cv_correct=cv_correct, cv_rows=cv_rows, cv_folds=cv_folds,
                       diagnostics=diagnostics,
                       cv_repeat_scores=cv_all if crossfit else None,
                       cv_repeat_folds=np.asarray(fold_sets) if crossfit else None)


def fit_pooled(prep: PreparedSplit, oof: np.ndarray, config: AuditConfig) -> MonotoneCalibrator:
    """The calibrator (``config.calibration``, ``calibration_bags``, ``random_state``) fitted on
    every cross-fitting repetition's out-of-fold scores of P.

    ``oof`` is (repeats, len(P rows)), NaN where a row had no score; outcomes and groups (items,
    so the bounds count each item once) are P's, repeated for every repetition.
    """
    p_rows = prep.p_rows
    pooled = np.isfinite(oof)
    correct = prep.judge[p_rows] == prep.human[p_rows]
    return MonotoneCalibrator(config.calibration, n_bags=config.calibration_bags,
                              random_state=config.random_state).fit(
        oof[pooled], np.broadcast_to(correct, oof.shape)[pooled],
        groups=np.broadcast_to(prep.item_id[p_rows], oof.shape)[pooled])


def pooled_probabilities(prep: PreparedSplit, oof: np.ndarray, config: AuditConfig,
                         score: np.ndarray, cv_rows: np.ndarray, cv_scores: np.ndarray
                         ) -> tuple[MonotoneCalibrator, np.ndarray]:
    """:func:`fit_pooled`'s calibrator and the (n,) P(judge right) it gives the audited rows
    (from ``score``) and the P rows ``cv_rows`` (from their out-of-fold ``cv_scores``)."""
    cal = fit_pooled(prep, oof, config)
    p_right = np.full(len(score), np.nan)
    p_right[prep.u_rows] = cal.predict(score[prep.u_rows])
    p_right[cv_rows] = cal.predict(cv_scores)
    return cal, p_right


def apply_prior(prep: PreparedSplit, scored: ScoredSplit, m: float | None) -> ScoredSplit:
    """Calibrated probabilities (and their upper bounds) moved from P's base rate to ``m``."""
    u = prep.u_rows
    upper = np.full(len(scored.score), np.nan)
    cal = scored.calibrator
    if cal is not None and len(u):
        upper[u] = cal.predict_upper(scored.score[u])
    base = cal.base_rate_ if cal is not None else float("nan")
    scored.base_rate = base
    scored.prior_target = None if m is None else float(m)
    scored.p_judge_right = prior_shift(scored.p_judge_right, base_rate=base, target=m)
    scored.p_upper = prior_shift(upper, base_rate=base, target=m)
    return scored
