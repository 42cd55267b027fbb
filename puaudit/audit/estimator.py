"""The PUAudit estimator and the functional stages under it (docs/method.md).

Stages, each a plain function so the dashboard can rerun only what a widget changed:

1. :func:`embed_table` — frozen encoder, once per distinct (prompt, response) text (slow; cached).
2. :func:`prepare_split` — seeded split and oriented difference vectors (fast).
3. :func:`score_split` — denoise P per type, score the audited rows, cross-fit a calibrator on P.
4. :func:`relabel_split` — apply the relabel rule, adjust verdicts, measure on validation rows.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from puaudit.audit.calibration import MonotoneCalibrator, prior_shift
from puaudit.embed.pairs import PairEmbeddings, embed_table
from puaudit.audit.denoise import denoise_positives
from puaudit.audit.config import AuditConfig
from puaudit.errors import PUAuditError
from puaudit.data.jsonsafe import to_jsonable
from puaudit.audit.metrics import consistency, consistency_by_type
from puaudit.audit.relabel import (GROUP_NEG, RULES, adjust_verdicts, relabel_guarded, relabel_paper)
from puaudit.data.schema import ComparisonTable, load_comparisons
from puaudit.audit.scorers import SCORERS, score_targets
from puaudit.audit.splits import (MIN_ANNOTATED, SPLIT_EXCLUDED, SPLIT_P, SPLIT_U, SPLIT_VAL, split_rows)

__all__ = ["PairEmbeddings", "embed_table", "PreparedSplit", "prepare_split", "ScoredSplit",
           "score_split", "relabel_split", "AuditResult", "InputInfo", "PUAudit", "EXPORT_COLUMNS",
           "AuditConfig", "audit_table", "score_with_config", "relabel_with_config",
           "reversals_vs_m", "human_labels", "AUTO_CANDIDATES",
           "GROUP_VERIFIED", "GROUP_EXCLUDED"]

GROUP_VERIFIED = "verified"
GROUP_EXCLUDED = "excluded"
EXPORT_COLUMNS = ("puaudit_split", "puaudit_score", "puaudit_p_judge_right", "puaudit_group",
                  "puaudit_adjusted", "puaudit_reason")


#: rows per block when difference vectors are built for many rows at once (~100 MB of float64)
DIFF_BLOCK = 32_768


def _row_norms(emb: PairEmbeddings, rows: np.ndarray) -> np.ndarray:
    out = np.empty(len(rows))
    for s in range(0, len(rows), DIFF_BLOCK):
        out[s:s + DIFF_BLOCK] = np.linalg.norm(emb.diff(rows[s:s + DIFF_BLOCK]), axis=1)
    return out


class DiffRows:
    r"""Lazy ``(len(rows), d)`` array of normalised difference vectors oriented by ``sign``.

    :math:`z_i = s_i\,(F(x,o_A) - F(x,o_B)) / \lVert F(x,o_A) - F(x,o_B) \rVert`, built only
    for the rows a scorer asks for (slices or index arrays), so scoring a million audited rows
    never holds a million vectors.
    """

    def __init__(self, emb: PairEmbeddings, rows: np.ndarray, sign: np.ndarray):
        self.emb, self.rows, self.sign = emb, np.asarray(rows), np.asarray(sign, dtype=np.float64)
        self.shape = (len(self.rows), emb.dim)
        self.ndim = 2

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key) -> np.ndarray:
        r = self.rows[key]
        d = self.emb.diff(np.atleast_1d(r))
        d /= np.maximum(np.linalg.norm(d, axis=1), 1e-12)[:, None]
        d *= self.sign[np.atleast_1d(r)][:, None]
        return d if np.ndim(r) else d[0]

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype)


def _sign(verdicts: np.ndarray) -> np.ndarray:
    v = np.asarray(verdicts, dtype=object)
    return np.where(v == "A", 1.0, np.where(v == "B", -1.0, 0.0))


@dataclass
class PreparedSplit:
    """One seeded split with difference vectors oriented by the human and by the judge."""

    split: np.ndarray
    reason: np.ndarray
    emb: PairEmbeddings
    sign_human: np.ndarray  # (n,) +1 human says A, -1 B, 0 otherwise
    sign_judge: np.ndarray  # (n,) the same for the judge
    judge: np.ndarray
    human: np.ndarray
    question_type: np.ndarray
    item_id: np.ndarray
    p_ratio: float
    random_state: int | None
    m_estimate: float
    split_log: dict = field(default_factory=dict)
    #: label-free signals about each verdict (:mod:`puaudit.audit.evidence`); None: not computed
    evidence: object = None

    @property
    def p_rows(self) -> np.ndarray:
        return np.flatnonzero(self.split == SPLIT_P)

    @property
    def u_rows(self) -> np.ndarray:
        """Audited rows: unlabelled and validation (both ordered by the judge)."""
        return np.flatnonzero((self.split == SPLIT_U) | (self.split == SPLIT_VAL))

    def z_human(self, rows: np.ndarray) -> DiffRows:
        """Difference vectors of ``rows`` oriented by the human (winner minus loser), lazily."""
        return DiffRows(self.emb, rows, self.sign_human)

    def z_judge(self, rows: np.ndarray) -> DiffRows:
        """Difference vectors of ``rows`` oriented by the judge, lazily."""
        return DiffRows(self.emb, rows, self.sign_judge)

    def win_lose(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings of the human-preferred and the other response of ``rows`` (float64)."""
        rows = np.asarray(rows)
        a_wins = (self.sign_human[rows] >= 0)[:, None]
        e_a = self.emb.vectors[self.emb.idx_a[rows]].astype(np.float64)
        e_b = self.emb.vectors[self.emb.idx_b[rows]].astype(np.float64)
        return np.where(a_wins, e_a, e_b), np.where(a_wins, e_b, e_a)


def prepare_split(table: ComparisonTable, emb: PairEmbeddings, *, p_ratio: float = 0.3,
                  random_state: int | None = 0, human: np.ndarray | None = None,
                  evidence="auto") -> PreparedSplit:
    """Split rows (seeded, per type, by item) and build the oriented difference vectors.

    ``human`` overrides the table's human verdicts (e.g. item-level consensus labels).
    ``evidence``: which verdict-evidence signals to compute (:func:`puaudit.audit.evidence.
    verdict_evidence`; ``"none"``: none, and the ``evidence`` scorer is unavailable).
    """
    if len(emb) != len(table):
        raise PUAuditError(f"Embeddings have {len(emb)} rows but the table has {len(table)}; "
                           "embed this table again.")
    human = table.human if human is None else np.asarray(human, dtype=object)
    norms = _row_norms(emb, np.arange(len(emb)))
    identical = norms < 1e-6
    # Say what is wrong with the embeddings themselves, rather than "too few annotated rows".
    if not np.isfinite(norms).all():
        bad = np.flatnonzero(~np.isfinite(norms))
        raise PUAuditError(
            f"The embeddings of row {bad[0] + 1} hold NaN or infinite values ({len(bad)} such "
            "rows): the encoder failed on them. Embed the table again (or recompute those rows of "
            "the --embeddings file).", row=int(bad[0]) + 1)
    if len(norms) and identical.all():
        what = ("are all zero" if not emb.vectors.any() else
                "of response A and response B are identical on every row")
        raise PUAuditError(
            f"The embeddings {what} ({len(norms)} rows), so no response can be told from the "
            "other and nothing can be audited. Check the encoder (or the --embeddings file: e_a "
            "must embed response A, e_b response B) and that the two response columns differ.")
    split, reason, slog = split_rows(table.judge, human, table.question_type, table.item_id,
                                     p_ratio=p_ratio, random_state=random_state,
                                     identical=identical, log=True)
    n_ann = int(((split == SPLIT_P) | (split == SPLIT_VAL)).sum())
    if n_ann < MIN_ANNOTATED:
        n_strict_j = int(sum(j in ("A", "B") for j in table.judge))
        if n_strict_j == 0:
            n_ties = int(sum(j == "tie" for j in table.judge))
            raise PUAuditError(
                f"Every judge verdict is a tie or empty ({n_ties} ties, {len(table) - n_ties} "
                f"empty, in column '{table.judge_column}'): the audit needs judge verdicts A or B. "
                "If another column holds the judge's verdicts, choose it (CLI: --judge-col NAME).",
                column=table.judge_column)
        n_strict_h = int(sum(h in ("A", "B") for h in human))
        raise PUAuditError(
            f"The audit needs at least {MIN_ANNOTATED} annotated rows (a human verdict A or B on a "
            f"row whose judge verdict is A or B); this table has {n_ann} "
            f"({n_strict_h} strict human verdicts in all, {len(table)} rows). Add human labels "
            "for more rows (a few dozen per question type work best), or check that the human "
            f"column ('{table.columns.get('human', 'none found')}') is the right one.")
    sh, sj = _sign(human), _sign(table.judge)
    p = split == SPLIT_P
    m_est = float(np.mean(table.judge[p] == human[p])) if p.any() else float("nan")
    ev = None
    if evidence != "none":
        from puaudit.audit.evidence import verdict_evidence

        ev = verdict_evidence(table, signals=evidence)
    return PreparedSplit(split=split, reason=reason, emb=emb, sign_human=sh, sign_judge=sj,
                         judge=table.judge, human=human,
                         question_type=np.asarray(table.question_type, dtype=object),
                         item_id=table.item_id, p_ratio=p_ratio, random_state=random_state,
                         m_estimate=m_est, split_log=slog, evidence=ev)


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


def _denoise_by_type(prep: PreparedSplit, rows: np.ndarray, *, alpha1: float, alpha2: float,
                     enabled: bool = True) -> np.ndarray:
    """Subset of ``rows`` (P rows) kept after per-type denoising."""
    if not enabled:
        return np.asarray(rows)
    kept = []
    qt = prep.question_type
    for t in sorted(set(qt[rows].tolist())):
        r = rows[qt[rows] == t]
        e_win, e_lose = prep.win_lose(r)
        keep = denoise_positives(e_win, e_lose, prep.z_human(r)[:], alpha1=alpha1, alpha2=alpha2)
        kept.append(r[keep])
    return np.concatenate(kept) if kept else np.zeros(0, dtype=int)


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


def _fold_sets(prep: PreparedSplit, k: int, repeats: int, random_state: int | None
               ) -> list[np.ndarray]:
    """Each cross-fitting repetition's fold of every P row (the same for every scorer)."""
    # one generator for every repetition: the first repetition's folds are the same whatever
    # the number of repetitions
    rng = np.random.default_rng(None if random_state is None else random_state + 7919)
    return [_item_folds(prep.item_id[prep.p_rows], k, rng) for _ in range(repeats)]


#: Scorers the automatic choice compares (``pot`` is left out: its 0/1 scores give the
#: calibrated map nothing to grade, so it cannot win on log loss and only costs time).
AUTO_CANDIDATES = ("prior-ot", "probe", "knn", "centroid")
STACKED = "stacked"
#: The scorer learned from verdict evidence and the candidates' probabilities
#: (:mod:`puaudit.audit.evidence_model`); ``auto`` compares it with the others.
EVIDENCE = "evidence"


def score_split(prep: PreparedSplit, *, scorer: str = "auto", m: float | None = None,
                alpha1: float = 0.7, alpha2: float = 0.7, per_type: bool = True,
                ot_method: str = "auto", reg: float | None = None, n_folds: int = 5,
                calibration: str = "isotonic", calibrate: bool = True, n_neighbors: int = 15,
                denoise: bool | None = None, candidates: tuple[str, ...] = AUTO_CANDIDATES,
                cv_repeats: int | None = None, calibration_bags: int = 50,
                random_state: int | None = 0, map_fn: Callable | None = None) -> ScoredSplit:
    r"""Denoise P, score audited rows, and cross-fit the score -> P(judge right) map on P.

    Cross-fitting: P items are cut into ``n_folds`` folds; for each fold the scorer is fitted on
    the other folds' (denoised) P rows and scores the held-out fold's rows *in the judge's order*,
    together with the audited rows, so held-out scores live on the same scale as audited ones.
    A :class:`MonotoneCalibrator` is then fitted on (held-out score, judge == human).

    ``cv_repeats``: the folds are drawn that many times and the calibrator is fitted on the
    out-of-fold scores of every repetition (each P row ``cv_repeats`` times; its confidence
    bounds still count items once); ``None``: :func:`default_cv_repeats`.
    ``calibration_bags``: bagged isotonic calibration (see :class:`MonotoneCalibrator`). Both
    make the calibrated probabilities depend less on one draw of the folds; with 1 and 0 the
    audit is the single cross-fit.

    ``m``: the share of audited verdicts believed right. ``None`` (default) uses P's agreement
    rate and leaves the calibrated probabilities as fitted; a value moves them from P's base
    rate :math:`\pi` to ``m`` by Bayes' prior shift (:func:`puaudit.audit.calibration.prior_shift`),
    for every scorer. ``prior-ot`` and ``pot`` also use it as their transported mass.

    ``scorer="auto"``: every scorer in ``candidates`` is cross-fitted, and each one's
    out-of-fold scores on P are calibrated again out of fold (the calibrator of fold k is fitted
    on the other folds), so the log loss of ``judge == human`` on P compares them honestly,
    without touching validation rows. The average of the candidates in logit space
    (``stacked``) competes too. The lowest log loss wins; the comparison is in
    ``diagnostics["auto"]``.

    ``denoise``: fit the scorer on the denoised P' (docs/method.md) or on all of P. Default ``None``:
    P' for the paper's transport scorers (``pot``, ``full-ot``), all of P for the others
    (``prior-ot``, ``centroid``, ``probe``, ``knn`` average noise out themselves; on MT-Bench
    with the "longer wins" judge, dropping half of P cost the probe about half its gain).

    ``map_fn(fn, prep, jobs)``: runs the independent per-type jobs of the full fit and of every
    fold (default: here, in order; the Ray backend passes
    :class:`puaudit.scale.ray_score.RayMap` to run them as Ray tasks). Same results either way.
    """
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
    # Many small matrix products: BLAS threads cost more to wake than they save (4x slower on
    # 2 busy cores, measured), so small audits run single-threaded.
    from threadpoolctl import threadpool_limits

    small = len(prep.p_rows) * len(prep.u_rows) < 20_000_000
    kw = dict(m_used=m_used, alpha1=alpha1, alpha2=alpha2, per_type=per_type,
              ot_method=ot_method, reg=reg, n_folds=n_folds, calibration=calibration,
              calibrate=calibrate, n_neighbors=n_neighbors, random_state=random_state,
              cv_repeats=cv_repeats, calibration_bags=calibration_bags, map_fn=map_fn)
    with threadpool_limits(limits=1 if small else None):
        if scorer in ("auto", EVIDENCE):
            scored = _score_auto(prep, candidates=candidates, denoise=denoise,
                                 force=EVIDENCE if scorer == EVIDENCE else None, **kw)
        else:
            scored = _score_split(prep, scorer=scorer, denoise=_denoise_default(denoise, scorer),
                                  **kw)
    return _apply_prior(prep, scored, m)


def _denoise_default(denoise: bool | None, scorer: str) -> bool:
    return scorer in ("pot", "full-ot") if denoise is None else bool(denoise)


def _apply_prior(prep: PreparedSplit, scored: ScoredSplit, m: float | None) -> ScoredSplit:
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


def _cross_fitted_log_loss(cv_scores: np.ndarray, correct: np.ndarray, folds: np.ndarray,
                           groups: np.ndarray, method: str) -> np.ndarray:
    """Out-of-fold calibrated probabilities of the out-of-fold scores (second level of folds)."""
    q = np.full(len(cv_scores), np.nan)
    for f in np.unique(folds):
        held = folds == f
        if held.all() or (~held).sum() < 2:
            continue
        cal = MonotoneCalibrator(method, bounds=False).fit(cv_scores[~held], correct[~held],
                                                           groups=groups[~held])
        q[held] = cal.predict(cv_scores[held])
    base = float(np.mean(correct)) if len(correct) else 0.5
    return np.where(np.isnan(q), base, q)


def _log_loss(q: np.ndarray, y: np.ndarray) -> float:
    q = np.clip(q, 1e-4, 1 - 1e-4)
    return float(-np.mean(y * np.log(q) + (1 - y) * np.log1p(-q)))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p) - np.log1p(-p)


#: ``knn`` compares every audited row with every reference row; above this many pairs the
#: automatic choice leaves it out (it is still available by name).
KNN_AUTO_MAX_PAIRS = 2_000_000_000


def _score_auto(prep: PreparedSplit, *, candidates, denoise, force: str | None = None,
                **kw) -> ScoredSplit:
    """Cross-fit every candidate, compare them by out-of-fold log loss on P, keep the best
    (``force``: keep that one whatever the comparison says)."""
    from puaudit.audit.scorers import MAX_FIT_ROWS

    n_ref = 2 * min(len(prep.p_rows), MAX_FIT_ROWS["knn"])
    if len(candidates) > 1 and len(prep.u_rows) * n_ref > KNN_AUTO_MAX_PAIRS:
        candidates = tuple(c for c in candidates if c != "knn")
    fitted = {c: _score_split(prep, scorer=c, denoise=_denoise_default(denoise, c), **kw)
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
                               f"({kw['n_folds']} folds); this P has too few.")
        return first
    y = first.cv_correct.astype(float)
    folds, groups = first.cv_folds, prep.item_id[first.cv_rows]
    method = kw["calibration"]
    q = {c: _cross_fitted_log_loss(fitted[c].cv_scores, y, folds, groups, method)
         for c in usable}
    if len(usable) > 1:
        q[STACKED] = 1 / (1 + np.exp(-np.mean([_logit(q[c]) for c in usable], axis=0)))
    ev_scored = _score_evidence(prep, fitted, usable, **kw)
    if ev_scored is not None:
        q[EVIDENCE] = _cross_fitted_log_loss(ev_scored.cv_scores, y, folds, groups, method)
    elif force == EVIDENCE:
        raise PUAuditError("The evidence scorer has no signal to learn from: this table's "
                           "verdicts carry no evidence (evidence='none', or every signal is "
                           "constant). Choose another scorer.")
    losses = {c: _log_loss(v, y) for c, v in q.items()}
    briers = {c: float(np.mean((v - y) ** 2)) for c, v in q.items()}
    base_loss = _log_loss(np.full(len(y), y.mean()), y)
    chosen = force or min(losses, key=losses.get)
    ranked = sorted(losses, key=losses.get)
    runner = ranked[1] if len(ranked) > 1 else None
    reason = (f"lowest cross-fitted log loss on {len(y)} P rows ({losses[chosen]:.4f}"
              + (f"; next {runner} {losses[runner]:.4f}" if runner else "")
              + f"; base rate alone {base_loss:.4f})")
    if force:
        reason = f"{force} was asked for; " + reason.replace("lowest ", "its ", 1)
    info = {"chosen": chosen, "candidates": list(usable) + ([EVIDENCE] if ev_scored else []),
            "log_loss": losses, "brier": briers,
            "base_rate_log_loss": base_loss, "n_p_rows": int(len(y)), "reason": reason}
    if ev_scored is not None:
        info["evidence"] = ev_scored.diagnostics["evidence"]
    if chosen == EVIDENCE:
        ev_scored.diagnostics["auto"] = info
        return ev_scored
    if chosen != STACKED:
        out = fitted[chosen]
        out.diagnostics["auto"] = info
        return out
    return _stack(prep, fitted, usable, info, method, bags=kw["calibration_bags"],
                  random_state=kw["random_state"])


def _stack(prep: PreparedSplit, fitted: dict, usable: list, info: dict, method: str, *,
           bags: int = 0, random_state: int | None = 0) -> ScoredSplit:
    """The stacked scorer: mean logit of the candidates' calibrated probabilities, recalibrated
    (on the out-of-fold scores of every cross-fitting repetition)."""
    u = prep.u_rows
    first = fitted[usable[0]]
    cv_rows = first.cv_rows
    score = np.full(len(first.score), np.nan)
    score[u] = 1 / (1 + np.exp(-np.mean(
        [_logit(fitted[c].calibrator.predict(fitted[c].score[u])) for c in usable], axis=0)))
    cv = 1 / (1 + np.exp(-np.mean(
        [_logit(fitted[c].calibrator.predict(fitted[c].cv_scores)) for c in usable], axis=0)))
    y = first.cv_correct
    # every repetition's stacked out-of-fold probability (NaN where a candidate had none); the
    # usable candidates all cross-fitted, with the same repetitions of the same P rows
    with np.errstate(invalid="ignore"):
        stacked = 1 / (1 + np.exp(-np.mean(
            [_logit(fitted[c].calibrator.predict(fitted[c].cv_repeat_scores)) for c in usable],
            axis=0)))
    cal = _fit_pooled(prep, stacked, method, bags=bags, random_state=random_state)
    score[cv_rows] = cv
    p_right = np.full(len(score), np.nan)
    p_right[u] = cal.predict(score[u])
    p_right[cv_rows] = cal.predict(cv)
    diagnostics = {**first.diagnostics, "auto": info,
                   "total_seconds": sum(fitted[c].diagnostics["total_seconds"] for c in usable)}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=first.in_p_prime,
                       m=first.m, scorer=STACKED, calibrator=cal, cv_scores=cv, cv_correct=y,
                       cv_rows=cv_rows, cv_folds=first.cv_folds, diagnostics=diagnostics,
                       cv_repeat_scores=stacked)


def _one_hot(values: np.ndarray, levels: list) -> np.ndarray:
    return (np.asarray(values, dtype=object)[:, None] == np.asarray(levels, dtype=object)[None, :]
            ).astype(np.float64)


def _score_evidence(prep: PreparedSplit, fitted: dict, usable: list, *, calibration: str,
                    calibration_bags: int, random_state: int | None, **_) -> ScoredSplit | None:
    """The evidence scorer, cross-fitted on the candidates' folds (None: nothing to learn from).

    Features of a row: its verdict evidence (:mod:`puaudit.audit.evidence`), its question type
    (one-hot) and the logit of every usable candidate's calibrated probability; on P rows the
    candidates' *out-of-fold* probabilities of the same repetition, so the model learns how far
    to trust them on rows they were not fitted on. Outcome: ``judge == human``. The model of
    fold ``f`` is fitted on the other folds' P rows and scores fold ``f``; the full model (on
    every P row, the candidates' probabilities averaged over repetitions) scores the audited
    rows; the calibrator is fitted on every repetition's out-of-fold probabilities.
    """
    from puaudit.audit.evidence_model import EvidenceModel

    ev = prep.evidence
    if ev is None or not ev.values or not usable:
        return None
    first = fitted[usable[0]]
    if first.cv_repeat_scores is None:
        return None
    p_rows, u = prep.p_rows, prep.u_rows
    repeats = first.cv_repeat_scores.shape[0]
    fold_sets = _fold_sets(prep, first.diagnostics["n_folds"], repeats, random_state)
    levels = sorted(set(prep.question_type[p_rows].tolist()))
    names = ev.names + ([f"type={t}" for t in levels] if len(levels) > 1 else []) + [
        f"scorer:{c}" for c in usable]

    def features(rows, probs):
        parts = [ev.matrix(rows)]
        if len(levels) > 1:
            parts.append(_one_hot(prep.question_type[rows], levels))
        return np.hstack(parts + [np.column_stack([_logit(q) for q in probs])])

    def calibrated(c, scores):
        out = np.full(scores.shape, np.nan)
        ok = np.isfinite(scores)
        out[ok] = fitted[c].calibrator.predict(scores[ok])
        return out

    y = (prep.judge[p_rows] == prep.human[p_rows]).astype(int)
    reps = [[calibrated(c, fitted[c].cv_repeat_scores[r]) for c in usable] for r in range(repeats)]
    cv_all = np.full((repeats, len(p_rows)), np.nan)
    coefs = []
    for r in range(repeats):
        x = features(p_rows, reps[r])
        for f in np.unique(fold_sets[r]):
            held = fold_sets[r] == f
            if held.all():
                continue
            model = EvidenceModel(feature_names=names).fit(x[~held], y[~held])
            cv_all[r, held] = model.predict_proba(x[held])[:, 1]
            coefs.append(model.coef_)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no repetition scored
        mean_probs = [np.nanmean([reps[r][i] for r in range(repeats)], axis=0)
                      for i in range(len(usable))]
    full = EvidenceModel(feature_names=names).fit(features(p_rows, mean_probs), y)
    pos = np.searchsorted(p_rows, first.cv_rows)
    cv_all = _snap(cv_all)
    cv_scores = cv_all[0][pos]
    if np.isnan(cv_scores).any():
        return None
    score = np.full(len(first.score), np.nan)
    score[u] = _snap(full.predict_proba(features(u, [fitted[c].calibrator.predict(fitted[c].score[u])
                                                     for c in usable]))[:, 1])
    score[first.cv_rows] = cv_scores
    cal = _fit_pooled(prep, cv_all, calibration, bags=calibration_bags, random_state=random_state)
    p_right = np.full(len(score), np.nan)
    p_right[u] = cal.predict(score[u])
    p_right[first.cv_rows] = cal.predict(cv_scores)
    diagnostics = {**first.diagnostics, "evidence": {
        "signals": ev.names, "sources": ev.sources, "messages": list(ev.messages),
        "coef": _coef_summary(full.coef_, coefs), "n_fits": len(coefs)},
        "total_seconds": sum(fitted[c].diagnostics["total_seconds"] for c in usable)}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=first.in_p_prime,
                       m=first.m, scorer=EVIDENCE, calibrator=cal, cv_scores=cv_scores,
                       cv_correct=first.cv_correct, cv_rows=first.cv_rows,
                       cv_folds=first.cv_folds, diagnostics=diagnostics, cv_repeat_scores=cv_all)


def _coef_summary(full: dict, folds: list[dict]) -> list[dict]:
    """Each feature's coefficient (standardised scale) in the full fit, and its 2.5–97.5%
    range over the fold fits, largest |coefficient| first."""
    rows = []
    for name, value in full.items():
        per_fold = np.array([c[name] for c in folds if name in c])
        lo, hi = (np.percentile(per_fold, [2.5, 97.5]) if len(per_fold) else (np.nan, np.nan))
        rows.append({"feature": name, "coef": float(value), "lo": float(lo), "hi": float(hi),
                     "n_folds": int(len(per_fold))})
    return sorted(rows, key=lambda r: -abs(r["coef"]))


def _snap(x: np.ndarray) -> np.ndarray:
    """Scores rounded to 12 decimals: identical rows (several votes on one item) then tie
    exactly, whatever block of a matrix product they were computed in (BLAS may differ in the
    last bit), so the calibrator's bins do not depend on how rows were batched."""
    return np.round(x, 12)


def _score_split(prep: PreparedSplit, *, scorer, m_used, alpha1, alpha2, per_type, ot_method, reg,
                 n_folds, calibration, calibrate, n_neighbors, denoise, random_state,
                 cv_repeats=1, calibration_bags=0, map_fn=None) -> ScoredSplit:
    t0 = time.perf_counter()
    opts = {"ot_method": ot_method, "reg": reg, "n_neighbors": n_neighbors,
            "random_state": random_state}
    n = len(prep.split)
    p_rows, u_rows = prep.p_rows, prep.u_rows
    p_prime = _denoise_by_type(prep, p_rows, alpha1=alpha1, alpha2=alpha2, enabled=denoise)
    in_pp = np.zeros(n, bool)
    in_pp[p_prime] = True
    score = np.full(n, np.nan)
    calibrator = None
    cv_scores = np.zeros(0)
    cv_correct = np.zeros(0, dtype=bool)
    cv_rows = np.zeros(0, dtype=int)
    cv_folds = np.zeros(0, dtype=int)
    p_right = np.full(n, np.nan)
    k = min(n_folds, len(set(prep.item_id[p_rows].tolist())))
    crossfit = calibrate and k >= 2
    repeats = (default_cv_repeats(len(p_rows)) if cv_repeats is None
               else max(1, int(cv_repeats))) if crossfit else 0
    if crossfit:
        fold_sets = _fold_sets(prep, k, repeats, random_state)
    # the full fit, then each repetition's fold fits scoring their held-out rows (all
    # independent jobs)
    calls, fold_of_call = [(p_prime, u_rows, 0)], []
    for r in range(repeats):
        folds = fold_sets[r]
        for f in range(k):
            pp = _denoise_by_type(prep, p_rows[folds != f], alpha1=alpha1, alpha2=alpha2,
                                  enabled=denoise)
            if len(pp):
                calls.append((pp, np.concatenate([u_rows, p_rows[folds == f]]), len(u_rows)))
                fold_of_call.append((r, f))
    scores = _score_by_type(prep, calls, scorer=scorer, m=m_used, per_type=per_type, opts=opts,
                            map_fn=map_fn)
    score[u_rows] = _snap(scores[0])
    t_score = time.perf_counter() - t0  # full fit and folds
    if crossfit:
        cv_all = np.full((repeats, len(p_rows)), np.nan)
        for (r, f), s in zip(fold_of_call, scores[1:]):
            cv_all[r, fold_sets[r] == f] = s
        cv_all = _snap(cv_all)
        # the first repetition is the cross-fit the rest of the audit reads (one out-of-fold
        # score per P row: the automatic choice, the stack, the bootstrap of the expected
        # consistency); the calibrator is fitted on every repetition's scores
        ok = np.isfinite(cv_all[0])
        cv_scores = cv_all[0][ok]
        cv_rows = p_rows[ok]
        cv_folds = fold_sets[0][ok]
        cv_correct = (prep.judge[p_rows] == prep.human[p_rows])[ok]
        if ok.sum() >= 2:
            calibrator = _fit_pooled(prep, cv_all, calibration, bags=calibration_bags,
                                     random_state=random_state)
            p_right[u_rows] = calibrator.predict(score[u_rows])
            p_right[p_rows[ok]] = calibrator.predict(cv_scores)
        score[p_rows[ok]] = cv_scores
    diagnostics = {"n_p": int(len(p_rows)), "n_p_prime": int(len(p_prime)), "denoised": denoise,
                   "n_audited": int(len(u_rows)), "n_folds": int(k) if calibrate else 0,
                   "cv_repeats": int(repeats), "calibration_bags": int(calibration_bags),
                   "score_seconds": t_score, "total_seconds": time.perf_counter() - t0}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=in_pp, m=m_used,
                       scorer=scorer, calibrator=calibrator, cv_scores=cv_scores,
                       cv_correct=cv_correct, cv_rows=cv_rows, cv_folds=cv_folds,
                       diagnostics=diagnostics,
                       cv_repeat_scores=cv_all if crossfit else None)


def _fit_pooled(prep: PreparedSplit, oof: np.ndarray, method: str, *, bags: int,
                random_state: int | None) -> MonotoneCalibrator:
    """The calibrator fitted on every cross-fitting repetition's out-of-fold scores of P.

    ``oof`` is (repeats, len(P rows)), NaN where a row had no score; outcomes and groups (items,
    so the bounds count each item once) are P's, repeated for every repetition.
    """
    p_rows = prep.p_rows
    pooled = np.isfinite(oof)
    correct = prep.judge[p_rows] == prep.human[p_rows]
    return MonotoneCalibrator(method, n_bags=bags, random_state=random_state).fit(
        oof[pooled], np.broadcast_to(correct, oof.shape)[pooled],
        groups=np.broadcast_to(prep.item_id[p_rows], oof.shape)[pooled])


def _expected_consistency(p: np.ndarray, reversed_: np.ndarray, cal: MonotoneCalibrator | None,
                          scores: np.ndarray, cv_scores: np.ndarray, cv_correct: np.ndarray, *,
                          n_boot: int = 100, random_state: int | None = 0,
                          prior_target: float | None = None) -> dict:
    """Expected share of audited rows whose verdict matches a person, before and after relabelling.

    :math:`E_{orig} = \\mathrm{mean}_j\\, p_j`, :math:`E_{adj} = \\mathrm{mean}_j\\, (r_j(1-p_j) + (1-r_j)p_j)`
    with ``p`` the calibrated P(judge right) and ``r`` the reversal indicator; the 95% interval of
    the change comes from refitting the calibrator on bootstrap resamples of the cross-fitted P rows.
    """
    if cal is None or len(p) == 0:
        nan = float("nan")
        return {"expected_cons_orig": nan, "expected_cons_adj": nan, "expected_delta": nan,
                "expected_delta_ci": (nan, nan)}
    r = reversed_.astype(float)

    def adj(pp):
        return float(np.mean(r * (1 - pp) + (1 - r) * pp))

    e_orig, e_adj = float(np.mean(p)), adj(p)
    rng = np.random.default_rng(random_state)
    deltas = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(cv_scores), len(cv_scores))
        c = MonotoneCalibrator(cal.method, bounds=False).fit(cv_scores[idx], cv_correct[idx])
        pb = prior_shift(c.predict(scores), base_rate=c.base_rate_, target=prior_target)
        deltas.append(adj(pb) - float(np.mean(pb)))
    lo, hi = (np.percentile(deltas, [2.5, 97.5]) if deltas else (np.nan, np.nan))
    return {"expected_cons_orig": e_orig, "expected_cons_adj": e_adj,
            "expected_delta": e_adj - e_orig, "expected_delta_ci": (float(lo), float(hi))}


def relabel_split(prep: PreparedSplit, scored: ScoredSplit, *, rule: str = "guarded",
                  margin: float = 0.05, review_band: tuple[float, float] | None = None,
                  per_type: bool = True, n_boot: int = 100, confidence_guard: bool = True) -> dict:
    """Apply a relabel rule to the audited rows and measure on validation rows.

    ``guarded`` reverses a row only when its calibrated P(judge right) is below 0.5 − ``margin``
    and (with ``confidence_guard``) the one-sided 95% upper bound of that probability is below 0.5.

    Returns a dict with ``group``, ``adjusted`` (arrays over all rows), ``metrics`` (overall),
    ``per_type``, ``thresholds`` and ``expected`` (expected consistency on the audited rows).
    """
    if rule not in RULES:
        raise PUAuditError(f"Unknown relabel rule '{rule}': choose one of {list(RULES)}.")
    n = len(prep.split)
    u = prep.u_rows
    group = np.full(n, GROUP_EXCLUDED, dtype=object)
    group[prep.split == SPLIT_P] = GROUP_VERIFIED
    thresholds: dict = {}
    if len(u):
        if rule == "paper":
            by = prep.question_type[u] if per_type else np.full(len(u), "all", dtype=object)
            g, thresholds = relabel_paper(scored.score[u], by, scored.m, review_band=review_band,
                                          log=True)
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
        prior_target=scored.prior_target)
    return {"group": group, "adjusted": adjusted, "metrics": metrics, "per_type": per_type,
            "thresholds": thresholds, "expected": expected}


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


@dataclass(frozen=True)
class InputInfo:
    """What an audit keeps of its input: enough to check that a table is the one it audited.

    Attributes
    ----------
    content_hash : str
        :meth:`ComparisonTable.content_hash` of the audited table.
    n_rows : int
    columns : dict
        Role -> column name used.
    judge_column : str
    """

    content_hash: str
    n_rows: int
    columns: dict
    judge_column: str

    @classmethod
    def of(cls, table: ComparisonTable) -> "InputInfo":
        return cls(content_hash=table.content_hash(), n_rows=len(table),
                   columns=dict(table.columns), judge_column=table.judge_column)


@dataclass
class AuditResult:
    """Everything one audit produced; arrays are aligned with the input rows.

    The result does not carry the input table (a million-row table is the caller's to keep or
    drop): :meth:`to_frame` takes it and checks it against :attr:`input`.
    """

    input: InputInfo
    split: np.ndarray
    reason: np.ndarray
    score: np.ndarray
    p_judge_right: np.ndarray
    group: np.ndarray
    adjusted: np.ndarray
    in_p_prime: np.ndarray
    m: float
    m_estimate: float
    metrics: dict
    per_type: dict
    expected: dict
    thresholds: dict
    params: dict
    diagnostics: dict = field(default_factory=dict)
    #: certified trust or escalate (``target_agreement`` set): :class:`puaudit.audit.certify.Certification`
    certification: object = None
    #: verdict evidence signal -> (n,) values, exported as ``puaudit_evidence_<signal>``
    evidence: dict = field(default_factory=dict)
    # a weak reference to the fitted table, only so the deprecated ``to_frame()`` keeps working
    _table_ref: object = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict:
        # a weak reference cannot be pickled (caches, worker processes): it stays behind
        return {**self.__dict__, "_table_ref": None}

    def columns(self) -> dict:
        """The ``puaudit_*`` columns (name -> array aligned with the input rows)."""
        adjusted = np.array([("" if v is None else v) for v in self.adjusted], dtype=object)
        cols = {
            "puaudit_split": self.split.astype(object),
            "puaudit_score": self.score,
            "puaudit_p_judge_right": self.p_judge_right,
            "puaudit_group": self.group.astype(object),
            "puaudit_adjusted": adjusted,
            "puaudit_reason": self.reason.astype(object),
        }
        if self.certification is not None:
            cols["puaudit_trusted"] = self.certification.trusted
        for name, values in self.evidence.items():
            cols[f"puaudit_evidence_{name}"] = values
        return cols

    def check_table(self, table) -> None:
        """Raise :class:`PUAuditError` unless ``table`` (ComparisonTable or DataFrame) has the
        audited number of rows (and, for a ComparisonTable, the audited content)."""
        if isinstance(table, ComparisonTable) and table.extra.get("streamed_from"):
            raise PUAuditError("This table was read column by column from "
                               f"{table.extra['streamed_from']} and keeps no frame: write the "
                               "export with puaudit.data.parquet_stream.write_export_parquet.")
        n = len(table)
        if n != self.input.n_rows:
            raise PUAuditError(f"This table has {n} rows; the audit was run on "
                               f"{self.input.n_rows}. Pass the table that was audited.")
        if isinstance(table, ComparisonTable) and table.content_hash() != self.input.content_hash:
            raise PUAuditError("This table's texts or verdicts differ from the audited table's. "
                               "Pass the table that was audited (or audit this one).")

    def to_frame(self, table=None) -> pd.DataFrame:
        """Every input row and column unchanged and in order, plus the ``puaudit_*`` columns.

        Parameters
        ----------
        table : ComparisonTable or DataFrame
            The audited input (its ``frame`` is used for a ComparisonTable).

        If the input already has a column of that name (re-auditing an export), the new column
        gets the suffix ``_new`` (repeated as needed) so no input column is overwritten.
        """
        if table is None:
            table = self._table_ref() if callable(self._table_ref) else None
            if table is None:
                raise PUAuditError("AuditResult.to_frame needs the audited table: "
                                   "result.to_frame(table) (or PUAudit.to_frame()).")
            warnings.warn("AuditResult.to_frame() without the table is deprecated; pass it: "
                          "result.to_frame(table), or use PUAudit.to_frame().",
                          DeprecationWarning, stacklevel=2)
        self.check_table(table)
        df = (table.frame if isinstance(table, ComparisonTable) else table).copy()
        for name, v in self.columns().items():
            col = name
            while col in df.columns:
                col += "_new"
            df[col] = v
        return df

    def per_type_frame(self) -> pd.DataFrame:
        """Per question type: n, Cons_orig, Cons_adj, change, reversals (validation rows)."""
        rows = []
        for t, m in self.per_type.items():
            rows.append({"question_type": t, "n_validation": m["n"], "cons_orig": m["cons_orig"],
                         "cons_adj": m["cons_adj"], "delta": m["delta"],
                         "n_reversed": m["n_reversed"], "reversal_precision": m["reversal_precision"]})
        return pd.DataFrame(rows)

    def _evidence_summary(self) -> dict | None:
        diag = self.diagnostics or {}
        info = (diag.get("auto") or {}).get("evidence") or diag.get("evidence")
        if not info:
            return None
        return {k: info[k] for k in ("signals", "messages", "coef") if k in info}

    def summary(self) -> dict:
        """JSON-ready numbers (the CLI's ``--json`` line)."""
        counts = pd.Series(self.split).value_counts().to_dict()
        groups = pd.Series(self.group).value_counts().to_dict()
        return to_jsonable({
            "n_rows": len(self.split),
            "n_p": int(counts.get(SPLIT_P, 0)),
            "n_p_prime": int(self.in_p_prime.sum()),
            "n_validation": int(counts.get(SPLIT_VAL, 0)),
            "n_unlabelled": int(counts.get(SPLIT_U, 0)),
            "n_excluded": int(counts.get(SPLIT_EXCLUDED, 0)),
            "groups": {str(k): int(v) for k, v in groups.items()},
            "m": self.m,
            "m_estimate": self.m_estimate,
            "cons_orig": self.metrics["cons_orig"],
            "cons_adj": self.metrics["cons_adj"],
            "delta": self.metrics["delta"],
            "cons_orig_ci": self.metrics["cons_orig_ci"],
            "cons_adj_ci": self.metrics["cons_adj_ci"],
            "reversed_share": self.metrics["reversed_share"],
            "reversal_precision": self.metrics["reversal_precision"],
            "expected": self.expected,
            "per_type": {t: {k: v for k, v in m.items() if k in (
                "n", "cons_orig", "cons_adj", "delta", "n_reversed", "reversal_precision")}
                for t, m in self.per_type.items()},
            "params": self.params,
            "scorer_used": self.params.get("scorer_used", self.params.get("scorer")),
            # scorer="auto": each candidate's cross-fitted log loss / Brier score on P, the choice
            "scorer_choice": (self.diagnostics or {}).get("auto"),
            # verdict evidence: signals computed, columns left out, the model's weights if fitted
            "evidence": self._evidence_summary(),
            # target_agreement set: coverage, certified_lower, threshold and "certification"
            **(self.certification.summary() if self.certification is not None else {}),
        })


class PUAudit:
    """Audit an LLM judge's pairwise verdicts against scarce human labels (docs/method.md).

    Parameters
    ----------
    config : AuditConfig, optional
        Every audit parameter with its default (see :class:`puaudit.audit.config.AuditConfig`).
    encoder : str or TextEncoder, optional
        Model name or local Hugging Face directory; default all-MiniLM-L6-v2.
    backend : {"local", "ray"}
        ``ray``: embed the distinct texts with Ray Data and run the scoring and cross-fitting
        jobs as Ray tasks on the connected cluster (a local one is started when none is), same
        result as ``local`` (:mod:`puaudit.scale`, ``pip install -e .[ray]``, docs/ray.md).
    **params
        Any :class:`AuditConfig` field, overriding ``config`` (``PUAudit(scorer="probe")``).

    Attributes (after :meth:`fit`)
    ------------------------------
    config_ : AuditConfig
        The configuration used.
    result_ : AuditResult
    split_, scores_, p_judge_right_, groups_, adjusted_, m_, m_estimate_, metrics_, per_type_
        Shortcuts into ``result_``.
    table_, embeddings_ : ComparisonTable, PairEmbeddings
        The fitted input (references, not copies) — :meth:`to_frame` uses ``table_``.
    """

    def __init__(self, config: AuditConfig | None = None, *, encoder=None, backend: str = "local",
                 **params):
        self.config = config
        self.encoder = encoder
        self.backend = backend
        self.params = params

    def __getattr__(self, name):
        # read access to the resolved parameters (``est.scorer``), as before the config existed
        if name in AuditConfig.__dataclass_fields__:
            return getattr(self.resolved_config(), name)
        raise AttributeError(name)

    def resolved_config(self) -> AuditConfig:
        """``config`` (or the defaults) with ``params`` applied; validates."""
        base = self.config if self.config is not None else AuditConfig()
        return base.replace(**self.params) if self.params else base

    def get_params(self) -> dict:
        return self.resolved_config().to_dict()

    def fit(self, table, embeddings: PairEmbeddings | None = None, *,
            progress: Callable | None = None, show_progress: bool = False) -> "PUAudit":
        """Run the audit on ``table`` (a DataFrame or :class:`ComparisonTable`).

        Sets ``config_``, ``result_`` (:class:`AuditResult`) and the shortcuts ``split_``,
        ``scores_``, ``p_judge_right_``, ``groups_``, ``adjusted_``, ``m_``, ``m_estimate_``,
        ``metrics_``, ``per_type_``, ``table_``, ``embeddings_``.
        """
        cfg = self.resolved_config()
        if isinstance(table, pd.DataFrame):
            table = load_comparisons(table)
        map_fn = None
        if self.backend == "ray":
            from puaudit.scale.ray_embed import embed_table_ray
            from puaudit.scale.ray_score import RayMap

            if embeddings is None:
                embeddings = embed_table_ray(table, self.encoder, progress=progress,
                                             show_progress=show_progress)
            map_fn = RayMap()
        elif self.backend != "local":
            raise PUAuditError(f"Unknown backend {self.backend!r}: choose 'local' or 'ray'.")
        if embeddings is None:
            embeddings = embed_table(table, self.encoder, progress=progress,
                                     show_progress=show_progress)
        self.config_ = cfg
        self.result_ = audit_table(table, embeddings, cfg, map_fn=map_fn)
        r = self.result_
        self.table_, self.embeddings_ = table, embeddings
        self.split_, self.scores_, self.p_judge_right_ = r.split, r.score, r.p_judge_right
        self.groups_, self.adjusted_ = r.group, r.adjusted
        self.m_, self.m_estimate_ = r.m, r.m_estimate
        self.metrics_, self.per_type_ = r.metrics, r.per_type
        return self

    def to_frame(self) -> pd.DataFrame:
        """The fitted table with the ``puaudit_*`` columns (:meth:`AuditResult.to_frame`)."""
        if not hasattr(self, "result_"):
            raise PUAuditError("Call fit(table) before to_frame().")
        return self.result_.to_frame(self.table_)


def human_labels(table: ComparisonTable, config: AuditConfig,
                 embeddings: PairEmbeddings | None = None) -> np.ndarray | None:
    """The human verdicts the audit uses: the table's votes, item majority, or a latent-truth
    model's consensus (``ds``; ``crowdlab`` needs ``embeddings``: it audits the single votes
    first for its probabilities)."""
    if config.human_source == "consensus":
        from puaudit.annotators.agreement import consensus_labels

        return consensus_labels(table)
    if config.human_source in ("ds", "crowdlab"):
        from puaudit.annotators.models import model_consensus_labels

        if config.human_source == "ds":
            return model_consensus_labels(table, model="ds")
        if embeddings is None:
            raise PUAuditError("human_source='crowdlab' needs the embeddings: it runs the audit "
                               "once on single votes first.")
        # CROWDLAB's model is this audit on single votes: out of fold on P, fitted without the
        # validation labels elsewhere (the annotator models get the probabilities, not the audit)
        first = audit_table(table, embeddings, config.replace(human_source="votes"))
        return model_consensus_labels(table, model="crowdlab", p_judge_right=first.p_judge_right,
                                      random_state=0 if config.random_state is None
                                      else int(config.random_state))
    return None


def score_with_config(prep: PreparedSplit, config: AuditConfig, *,
                      map_fn: Callable | None = None) -> ScoredSplit:
    """:func:`score_split` with the parameters of ``config`` (``map_fn``: see there)."""
    return score_split(prep, scorer=config.scorer, m=config.m, alpha1=config.alpha1,
                       alpha2=config.alpha2, per_type=config.per_type,
                       ot_method=config.ot_method, reg=config.reg, n_folds=config.n_folds,
                       calibration=config.calibration, cv_repeats=config.cv_repeats,
                       calibration_bags=config.calibration_bags,
                       random_state=config.random_state, map_fn=map_fn)


def relabel_with_config(prep: PreparedSplit, scored: ScoredSplit, config: AuditConfig, *,
                        n_boot: int = 100) -> dict:
    """:func:`relabel_split` with the parameters of ``config``."""
    return relabel_split(prep, scored, rule=config.rule, margin=config.margin,
                         review_band=config.review_band, per_type=config.per_type, n_boot=n_boot)


class _StageLog:
    """Seconds and the process's peak resident memory after each stage of one audit."""

    def __init__(self):
        self.rows: list[dict] = []
        self._t = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.rows.append({"stage": stage, "seconds": round(now - self._t, 3),
                          "peak_rss_mb": _peak_rss_mb()})
        self._t = now


def _peak_rss_mb() -> float | None:
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 if sys.platform != "darwin" else 1024 * 1024), 1)


def audit_table(table: ComparisonTable, embeddings: PairEmbeddings, config: AuditConfig, *,
                prep: PreparedSplit | None = None, map_fn: Callable | None = None) -> AuditResult:
    """One audit: split, score, relabel and measure (the functional form of :class:`PUAudit`).

    ``map_fn``: runs the scoring jobs (see :func:`score_split`; the Ray backend's tasks).
    """
    stages = _StageLog()
    if prep is None:
        prep = prepare_split(table, embeddings, p_ratio=config.p_ratio,
                             random_state=config.random_state,
                             human=human_labels(table, config, embeddings),
                             evidence=config.evidence)
    stages.done("split + evidence")
    scored = score_with_config(prep, config, map_fn=map_fn)
    stages.done("score + cross-fit" + (" (auto)" if config.scorer == "auto" else ""))
    rel = relabel_with_config(prep, scored, config)
    stages.done("relabel + measure")
    certification = None
    if config.target_agreement is not None:
        from puaudit.audit.certify import certify_split

        certification = certify_split(prep, scored, target=config.target_agreement,
                                      risk=config.risk, method=config.calibration,
                                      bags=config.calibration_bags,
                                      random_state=config.random_state,
                                      reversed_rows=rel["group"] == GROUP_NEG)
        stages.done("certify")
    params = {**config.to_dict(), "m_used": scored.m, "scorer_used": scored.scorer,
              "encoder": embeddings.encoder}
    diagnostics = {**scored.diagnostics, "split": prep.split_log, "stages": stages.rows}
    if prep.evidence is not None:
        diagnostics.setdefault("evidence", {"signals": prep.evidence.names,
                                            "sources": prep.evidence.sources,
                                            "messages": list(prep.evidence.messages)})
    return AuditResult(
        input=InputInfo.of(table), split=prep.split, reason=prep.reason, score=scored.score,
        p_judge_right=scored.p_judge_right, group=rel["group"], adjusted=rel["adjusted"],
        in_p_prime=scored.in_p_prime, m=scored.m, m_estimate=prep.m_estimate,
        metrics=rel["metrics"], per_type=rel["per_type"], expected=rel["expected"],
        thresholds=rel["thresholds"], params=params, diagnostics=diagnostics,
        certification=certification,
        evidence={} if prep.evidence is None else dict(prep.evidence.values),
        _table_ref=weakref.ref(table))


def reversals_vs_m(prep: PreparedSplit, config: AuditConfig, m_values, *,
                   scored: ScoredSplit | None = None) -> list[dict]:
    """Guarded reversals and expected consistency on the audited rows for each ``m``.

    For scorers whose scores do not depend on ``m`` (all but ``prior-ot`` and ``pot``, and
    ``auto`` when it chose one of them), the scores and calibration of ``scored`` are reused
    and only the prior shift changes; otherwise each ``m`` is scored again.
    """
    if scored is None:
        scored = score_with_config(prep, config)
    reuse = scored.scorer not in ("prior-ot", "pot")
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
        else:
            s = score_with_config(prep, cfg.replace(scorer=scored.scorer)
                                  if scored.scorer in SCORERS else cfg)
        rel = relabel_with_config(prep, s, cfg, n_boot=0)
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
