"""The evidence scorer's model: P(judge right) from verdict evidence, learned on P.

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

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from puaudit.errors import PUAuditError

__all__ = ["EvidenceModel"]


class EvidenceModel(ClassifierMixin, BaseEstimator):
    """L2-penalised logistic regression on standardised, mean-imputed evidence.

    Parameters
    ----------
    C : float, default 0.1
        Inverse L2 strength. Standardised features and a few hundred P rows: 0.1 was the best
        of {0.1, 1} on MT-Bench (both judges) and llmfao in held-out AUROC, and never worse.
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

    def __init__(self, *, C: float = 0.1, feature_names=None):
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
