r"""The evidence scorer: P(judge right) from verdict evidence, learned on P and cross-fitted
(docs/method.md, "Verdict evidence and the evidence scorer").

Fitted on P rows *as the judge oriented them*, with the outcome ``judge == human``, on the
verdict evidence (:mod:`puaudit.audit.evidence`), the question type and the embedding scorers'
own calibrated probabilities:

.. math:: P(\text{judge right} \mid x) = \sigma(\beta_0 + \beta^\top \tilde x)

with :math:`\tilde x` standardised and mean-imputed (plus missing-value indicators), by
L2-penalised logistic regression; cross-fitted by item folds and calibrated like every scorer.

The evidence-only audit (``AuditConfig(texts=False)``, ``--no-texts``; :func:`score_evidence_only`)
fits the same model without the embedding scorers' probabilities: no encoder is loaded, the split
and the folds are the full audit's, and its gain over P's base rate must pass the same one-sided
5% test or nothing is reversed. It is the dashboard's first look while the texts are embedded
(:data:`PRELIMINARY`), measured in docs/encoders.md ("The first look").
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.base import BaseEstimator, ClassifierMixin

from puaudit.audit.config import AuditConfig
from puaudit.audit.scorers.calibration import (cross_fitted_probabilities, gain_over_base_rate,
                                               log_loss, logit)
from puaudit.audit.scorers.crossfit import (ScoredSplit, default_cv_repeats, fold_sets_of,
                                            pooled_probabilities, snap)
from puaudit.audit.splits import PreparedSplit
from puaudit.errors import PUAuditError

__all__ = ["EvidenceModel", "EVIDENCE", "score_evidence", "PRELIMINARY", "EVIDENCE_ONLY",
           "score_evidence_only"]

#: The scorer learned from verdict evidence and the candidates' probabilities; ``auto``
#: compares it with the others.
EVIDENCE = "evidence"


class EvidenceModel(ClassifierMixin, BaseEstimator):
    """L2-penalised logistic regression on standardised, mean-imputed evidence.

    Parameters
    ----------
    C : float, default 0.03
        Inverse L2 strength. Standardised features and a few hundred P rows: of {0.03, 0.1,
        0.3}, 0.03 gave the default audit the best validation AUROC of P(judge right) on
        MT-Bench (GPT-4 judge, 10 seeds: 0.744 / 0.738 / 0.727), and no worse on MT-Bench with
        the "longer answer wins" judge or llmfao (6 seeds).
    feature_names : sequence of str, optional
        Names of the columns of ``X`` (for :attr:`coef_`).

    Attributes
    ----------
    coef_ : dict
        Feature name -> coefficient on the standardised scale (``missing:<name>`` for the
        missing-value indicators).
    base_rate_ : float
        Share of right verdicts in the fitted rows; the prediction when they are all one class.
    """

    def __init__(self, *, C: float = 0.03, feature_names=None):
        self.C = C
        self.feature_names = feature_names

    def fit(self, X, y) -> "EvidenceModel":
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y).astype(int)
        if X.ndim != 2 or len(X) != len(y):
            raise PUAuditError(f"Evidence needs an (n, k) feature array and n outcomes; got "
                               f"{X.shape} and {y.shape}.")
        names = (list(self.feature_names) if self.feature_names is not None
                 else [f"x{i}" for i in range(X.shape[1])])
        self.base_rate_ = float(y.mean()) if len(y) else 0.5
        self.classes_ = np.array([0, 1])
        self.pipeline_ = None
        self.coef_ = {}
        if len(np.unique(y)) < 2 or X.shape[1] == 0:
            return self  # nothing to separate: the base rate
        pipe = make_pipeline(
            SimpleImputer(strategy="mean", add_indicator=True, keep_empty_features=False),
            StandardScaler(), LogisticRegression(C=self.C, max_iter=2000))
        pipe.fit(X, y)
        self.pipeline_ = pipe
        imp = pipe[0]
        kept = [n for n, empty in zip(names, np.isnan(imp.statistics_)) if not empty]
        missing = ([f"missing:{names[i]}" for i in imp.indicator_.features_]
                   if imp.indicator_ is not None else [])
        self.coef_ = dict(zip(kept + missing, pipe[-1].coef_[0].tolist()))
        return self

    def predict_proba(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if self.pipeline_ is None or len(X) == 0:
            p = np.full(len(X), self.base_rate_)
        else:
            p = self.pipeline_.predict_proba(X)[:, 1]
        return np.column_stack([1 - p, p])


def _one_hot(values: np.ndarray, levels: list) -> np.ndarray:
    return (np.asarray(values, dtype=object)[:, None] == np.asarray(levels, dtype=object)[None, :]
            ).astype(np.float64)


def _type_levels(prep: PreparedSplit) -> tuple[list, list[str]]:
    """P's question types, and their one-hot feature names (none with a single type)."""
    levels = sorted(set(prep.question_type[prep.p_rows].tolist()))
    return levels, [f"type={t}" for t in levels] if len(levels) > 1 else []


def _evidence_features(prep: PreparedSplit, rows: np.ndarray, levels: list, probs=()
                       ) -> np.ndarray:
    """Verdict evidence, the question type (one-hot, several types only) and the logit of each
    candidate's calibrated probability in ``probs``."""
    parts = [prep.evidence.matrix(rows)]
    if len(levels) > 1:
        parts.append(_one_hot(prep.question_type[rows], levels))
    if len(probs):
        parts.append(np.column_stack([logit(q) for q in probs]))
    return np.hstack(parts)


def _cross_fit_model(x_of, y: np.ndarray, fold_sets, names: list[str]
                     ) -> tuple[np.ndarray, list[dict]]:
    """(repeats, len(P rows)) out-of-fold probabilities (snapped; NaN: no fit) of the evidence
    model of each repetition's fold ``f``, fitted on the other folds' P rows (``x_of(r)``: P's
    features in repetition ``r``), and the fold fits' coefficients."""
    cv_all = np.full((len(fold_sets), len(y)), np.nan)
    coefs = []
    for r, folds in enumerate(fold_sets):
        x = x_of(r)
        for f in np.unique(folds):
            held = folds == f
            if held.all():
                continue
            model = EvidenceModel(feature_names=names).fit(x[~held], y[~held])
            cv_all[r, held] = model.predict_proba(x[held])[:, 1]
            coefs.append(model.coef_)
    return snap(cv_all), coefs


def _evidence_info(ev, full: EvidenceModel, coefs: list[dict]) -> dict:
    return {"signals": ev.names, "sources": ev.sources, "messages": list(ev.messages),
            "coef": _coef_summary(full.coef_, coefs), "n_fits": len(coefs)}


def score_evidence(prep: PreparedSplit, fitted: dict, usable: list, config: AuditConfig
                   ) -> ScoredSplit | None:
    """The evidence scorer, cross-fitted on the candidates' folds (None: nothing to learn from).

    Features of a row: its verdict evidence (:mod:`puaudit.audit.evidence`), its question type
    (one-hot) and the logit of every usable candidate's calibrated probability; on P rows the
    candidates' *out-of-fold* probabilities of the same repetition, so the model learns how far
    to trust them on rows they were not fitted on. Outcome: ``judge == human``. The model of
    fold ``f`` is fitted on the other folds' P rows and scores fold ``f``; the full model (on
    every P row, the candidates' probabilities averaged over repetitions) scores the audited
    rows; the calibrator is fitted on every repetition's out-of-fold probabilities.
    """
    ev = prep.evidence
    if ev is None or not ev.values or not usable:
        return None
    first = fitted[usable[0]]
    if first.cv_repeat_scores is None:
        return None
    p_rows, u = prep.p_rows, prep.u_rows
    repeats = first.cv_repeat_scores.shape[0]
    levels, type_names = _type_levels(prep)
    names = ev.names + type_names + [f"scorer:{c}" for c in usable]

    def calibrated(c, scores):
        out = np.full(scores.shape, np.nan)
        ok = np.isfinite(scores)
        out[ok] = fitted[c].calibrator.predict(scores[ok])
        return out

    y = (prep.judge[p_rows] == prep.human[p_rows]).astype(int)
    reps = [[calibrated(c, fitted[c].cv_repeat_scores[r]) for c in usable] for r in range(repeats)]
    cv_all, coefs = _cross_fit_model(
        lambda r: _evidence_features(prep, p_rows, levels, reps[r]), y, first.cv_repeat_folds,
        names)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no repetition scored
        mean_probs = [np.nanmean([reps[r][i] for r in range(repeats)], axis=0)
                      for i in range(len(usable))]
    full = EvidenceModel(feature_names=names).fit(
        _evidence_features(prep, p_rows, levels, mean_probs), y)
    pos = np.searchsorted(p_rows, first.cv_rows)
    cv_scores = cv_all[0][pos]
    if np.isnan(cv_scores).any():
        return None
    score = np.full(len(first.score), np.nan)
    u_probs = [fitted[c].calibrator.predict(fitted[c].score[u]) for c in usable]
    score[u] = snap(full.predict_proba(_evidence_features(prep, u, levels, u_probs))[:, 1])
    score[first.cv_rows] = cv_scores
    cal, p_right = pooled_probabilities(prep, cv_all, config, score, first.cv_rows, cv_scores)
    diagnostics = {**first.diagnostics, "evidence": _evidence_info(ev, full, coefs),
                   "total_seconds": sum(fitted[c].diagnostics["total_seconds"] for c in usable)}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=first.in_p_prime,
                       m=first.m, scorer=EVIDENCE, calibrator=cal, cv_scores=cv_scores,
                       cv_correct=first.cv_correct, cv_rows=first.cv_rows,
                       cv_folds=first.cv_folds, diagnostics=diagnostics, cv_repeat_scores=cv_all,
                       cv_repeat_folds=first.cv_repeat_folds)


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


#: The dashboard's label of the evidence-only audit shown while the texts are embedded.
PRELIMINARY = "preliminary: judge evidence only; text scorers join when embedding finishes"
#: The label of an evidence-only audit asked for (``--no-texts``): no text scorer will join.
EVIDENCE_ONLY = "evidence only: judge evidence, no text scorers (texts not embedded)"
#: the one-sided level of the base-rate test (as in the automatic choice)
_ALPHA = 0.05


def score_evidence_only(prep: PreparedSplit, config: AuditConfig, *, m_used: float
                        ) -> ScoredSplit:
    """Cross-fit the evidence scorer on P without text scorers; the audited rows' scores and
    the calibrated P(judge right) (before any prior shift).

    Features: the verdict evidence of :attr:`PreparedSplit.evidence` and, with several question
    types in P, the type (one-hot). Folds: :func:`puaudit.audit.scorers.crossfit.fold_sets_of`,
    the ones every scorer of the full audit uses. ``diagnostics["auto"]`` holds the base-rate
    test the guarded rule reads (:func:`puaudit.audit.relabel.beats_base_rate`).
    """
    t0 = time.perf_counter()
    ev = prep.evidence
    if ev is None or not ev.values:
        raise PUAuditError("The evidence-only audit (texts=False, --no-texts) has nothing to "
                           "learn from: this table carries no verdict evidence that varies "
                           "(lengths, position, the judge's favourite models, probabilities, "
                           "other judges). Embed the texts (leave out --no-texts).")
    p_rows, u = prep.p_rows, prep.u_rows
    k = min(config.n_folds, len(set(prep.item_id[p_rows].tolist())))
    if k < 2:
        raise PUAuditError("The evidence-only audit needs at least two annotated items in P to "
                           "cross-fit; add human labels or raise p_ratio.")
    repeats = default_cv_repeats(len(p_rows)) if config.cv_repeats is None else config.cv_repeats
    fold_sets = fold_sets_of(prep, k, repeats, config.random_state)
    levels, type_names = _type_levels(prep)
    names = ev.names + type_names
    y = (prep.judge[p_rows] == prep.human[p_rows]).astype(int)
    x_p = _evidence_features(prep, p_rows, levels)
    cv_all, coefs = _cross_fit_model(lambda r: x_p, y, fold_sets, names)
    full = EvidenceModel(feature_names=names).fit(x_p, y)
    n = len(prep.split)
    score = np.full(n, np.nan)
    score[u] = snap(full.predict_proba(_evidence_features(prep, u, levels))[:, 1])
    ok = np.isfinite(cv_all[0])
    cv_rows, cv_scores, cv_folds = p_rows[ok], cv_all[0][ok], fold_sets[0][ok]
    cv_correct = y[ok].astype(bool)
    score[cv_rows] = cv_scores
    cal, p_right = pooled_probabilities(prep, cv_all, config, score, cv_rows, cv_scores)
    in_p = np.zeros(n, bool)
    in_p[p_rows] = True  # fitted on every P row: no denoising without embeddings
    ev_info = _evidence_info(ev, full, coefs)
    info = _base_rate_test(prep, cv_scores, cv_correct, cv_folds, cv_rows, config.calibration)
    info["evidence"] = ev_info
    seconds = time.perf_counter() - t0
    diagnostics = {"n_p": int(len(p_rows)), "n_p_prime": int(len(p_rows)), "denoised": False,
                   "n_audited": int(len(u)), "n_folds": int(k), "cv_repeats": int(repeats),
                   "calibration_bags": int(config.calibration_bags), "score_seconds": seconds,
                   "total_seconds": seconds, "texts": False, "evidence": ev_info, "auto": info}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=in_p, m=m_used,
                       scorer=EVIDENCE, calibrator=cal, cv_scores=cv_scores,
                       cv_correct=cv_correct, cv_rows=cv_rows, cv_folds=cv_folds,
                       diagnostics=diagnostics, cv_repeat_scores=cv_all,
                       cv_repeat_folds=np.asarray(fold_sets))


def _base_rate_test(prep: PreparedSplit, cv_scores: np.ndarray, y: np.ndarray,
                    folds: np.ndarray, cv_rows: np.ndarray, method: str) -> dict:
    """The automatic choice's test, for its one candidate: the evidence scorer's cross-fitted
    log loss on P against P's base rate, and the one-sided z test of the gain over items."""
    yf = y.astype(float)
    groups = prep.item_id[cv_rows]
    q = cross_fitted_probabilities(cv_scores, yf, folds, groups, method)
    loss = log_loss(q, yf)
    base_loss = log_loss(np.full(len(yf), yf.mean()), yf)
    z = gain_over_base_rate(q, yf, groups)
    z_needed = float(norm.ppf(1 - _ALPHA))
    beats = bool(loss < base_loss and z > z_needed)
    reason = (f"evidence only (the texts are not embedded): cross-fitted log loss on {len(yf)} "
              f"P rows {loss:.4f}; base rate alone {base_loss:.4f}")
    if not beats:
        reason += (f"; its gain over the base rate is within noise (z = {z:.2f}, needs "
                   f"{z_needed:.2f}), so nothing is reversed")
    return {"chosen": EVIDENCE, "candidates": [EVIDENCE], "log_loss": {EVIDENCE: loss},
            "brier": {EVIDENCE: float(np.mean((q - yf) ** 2))}, "base_rate_log_loss": base_loss,
            "n_p_rows": int(len(yf)), "reason": reason, "gain_z": z, "gain_z_needed": z_needed,
            "beats_base_rate": beats}
