"""The evidence scorer: P(judge right) from verdict evidence, learned on P and cross-fitted.

Unlike the embedding scorers, which see P only as verified human preferences, this model is
fitted on P rows *as the judge oriented them*, with the outcome ``judge == human``: P holds
both the rows where the judge agreed with people and those where it did not, so the verdict
evidence (:mod:`puaudit.audit.evidence`), the question type and the embedding scorers' own
calibrated probabilities can be weighed against that outcome directly.

.. math:: P(\\text{judge right} \\mid x) = \\sigma(\\beta_0 + \\beta^\\top \\tilde x)

with :math:`\\tilde x` the standardised features (a missing value is imputed by the column
mean, with a 0/1 column saying it was missing), fitted by L2-penalised logistic regression
(inverse strength ``C``). The audit cross-fits it by item folds and calibrates its out-of-fold
probabilities like every other scorer.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from puaudit.audit.calibration import logit
from puaudit.audit.config import AuditConfig
from puaudit.audit.crossfit import ScoredSplit, fit_pooled, snap
from puaudit.audit.splits import PreparedSplit
from puaudit.errors import PUAuditError

__all__ = ["EvidenceModel", "EVIDENCE", "score_evidence"]

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
    fold_sets = first.cv_repeat_folds
    levels = sorted(set(prep.question_type[p_rows].tolist()))
    names = ev.names + ([f"type={t}" for t in levels] if len(levels) > 1 else []) + [
        f"scorer:{c}" for c in usable]

    def features(rows, probs):
        parts = [ev.matrix(rows)]
        if len(levels) > 1:
            parts.append(_one_hot(prep.question_type[rows], levels))
        return np.hstack(parts + [np.column_stack([logit(q) for q in probs])])

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
    cv_all = snap(cv_all)
    cv_scores = cv_all[0][pos]
    if np.isnan(cv_scores).any():
        return None
    score = np.full(len(first.score), np.nan)
    score[u] = snap(full.predict_proba(features(u, [fitted[c].calibrator.predict(fitted[c].score[u])
                                                     for c in usable]))[:, 1])
    score[first.cv_rows] = cv_scores
    cal = fit_pooled(prep, cv_all, config.calibration, bags=config.calibration_bags,
                     random_state=config.random_state)
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
