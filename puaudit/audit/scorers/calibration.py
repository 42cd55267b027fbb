"""Monotone maps from a scorer's output to the probability that the judge was right.

Fitted on cross-fitted scores of P rows (both verdicts are known there), so the map is learnt on
rows the scorer never saw.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from puaudit.errors import PUAuditError
from puaudit.stats.bootstrap import cluster_bootstrap_indices
from puaudit.stats.proportions import wilson_interval

__all__ = ["MonotoneCalibrator", "CALIBRATIONS", "sorted_quantiles", "prior_shift", "logit",
           "log_loss", "row_log_loss", "cross_fitted_probabilities", "out_of_fold_probabilities",
           "gain_over_base_rate", "paired_gain"]


CALIBRATIONS = ("isotonic", "platt")


class MonotoneCalibrator(BaseEstimator):
    r"""Non-decreasing map ``score -> P(judge right)`` (docs/method.md, "Calibration").

    ``isotonic``: local means of the outcome at ``G = max(2, round(n / min_bin))`` quantiles
    ``t_j`` of the scores, each with Epanechnikov weights over a window whose half-width is twice
    the distance to the ``min_bin``-th nearest score (:func:`_kernel_levels`), each shrunk towards
    the base rate with ``k = prior_strength`` pseudo-rows, :math:`(n_j\,m_j + k\,\bar y)/(n_j + k)`
    with weight :math:`n_j + k`; isotonic regression on them, then linear interpolation between
    the ``t_j`` (flat beyond the ends). ``predict_upper``: the Wilson bound of the pooled block.
    ``platt``: logistic regression of the outcome on the score, coefficient forced non-negative.

    ``n_bags > 0`` (isotonic, with ``bounds``): the map is refitted on ``n_bags`` bootstrap
    resamples of the groups (items), and

    .. math:: \hat p(s) = \tfrac1B \sum_b \hat p_b(s), \qquad
              \hat p^{\uparrow}(s) = \text{quantile}_{\Phi(z)}\{\hat p_b(s)\}_b

    Parameters
    ----------
    method : {"isotonic", "platt"}
    min_bin : int
        Rows behind each isotonic level.
    prior_strength : float
        Pseudo-rows at the base rate joining every level.
    z : float
        One-sided normal quantile of the upper bound (1.645: 95%).
    bounds : bool
        Compute upper bounds (``predict_upper``).
    n_bags : int, default 0
        Bootstrap refits of the bagged map; 0 fits once (Wilson bounds per isotonic block).
    random_state : int or None, default 0
        Seeds the bootstrap of the bags.
    """

    def __init__(self, method: str = "isotonic", *, min_bin: int = 20, prior_strength: float = 2.0,
                 z: float = 1.645, bounds: bool = True, n_bags: int = 0,
                 random_state: int | None = 0):
        self.method = method
        self.bounds = bounds
        self.min_bin = min_bin
        self.prior_strength = prior_strength
        self.z = z
        self.n_bags = n_bags
        self.random_state = random_state

    def fit(self, scores: np.ndarray, y: np.ndarray, *, groups: np.ndarray | None = None
            ) -> "MonotoneCalibrator":
        """Fit on scores and outcomes (1 = judge right).

        ``groups`` (e.g. item ids): rows of one group are not independent evidence (several votes
        on one item), so the confidence bounds count distinct groups, not rows.
        """
        s = np.asarray(scores, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        ok = np.isfinite(s)
        s, y = s[ok], y[ok]
        g = None if groups is None else np.asarray(groups, dtype=object)[ok]
        if self.method not in CALIBRATIONS:
            raise PUAuditError(f"Unknown calibration '{self.method}': choose {list(CALIBRATIONS)}.")
        if len(s) == 0:
            raise PUAuditError("Calibration needs cross-fitted scores of P rows; none were available.")
        self.base_rate_ = float(y.mean())
        self.n_ = len(s)
        if self.method == "platt":
            from sklearn.linear_model import LogisticRegression

            if len(np.unique(y)) < 2 or np.ptp(s) == 0:
                self.coef_, self.intercept_ = 0.0, float(np.log((y.mean() + 1e-3) / (1 - y.mean() + 1e-3)))
            else:
                clf = LogisticRegression(C=1.0).fit(s[:, None], y)
                self.coef_ = max(0.0, float(clf.coef_[0, 0]))
                self.intercept_ = float(clf.intercept_[0]) if self.coef_ > 0 else float(
                    np.log((y.mean() + 1e-3) / (1 - y.mean() + 1e-3)))
            return self
        from scipy.optimize import isotonic_regression

        order = np.argsort(s, kind="stable")
        s, y = s[order], y[order]
        g = None if g is None else g[order]
        centres, means, counts, win_lo, win_hi = _kernel_levels(s, y, self.min_bin)
        k = self.prior_strength
        # k pseudo-rows at the base rate join every level before pooling, so the pooled map is
        # monotone whatever the levels' weights (shrinking after pooling bends it where a light
        # level meets a heavy one)
        shrunk = (counts * means + k * self.base_rate_) / (counts + k)
        fitted = isotonic_regression(shrunk, weights=counts + k, increasing=True).x
        self.bin_centres_ = centres
        self.bin_counts_ = counts
        self.bin_values_ = fitted
        if not self.bounds:
            return self
        # Evidence behind each level: levels that isotonic pooled to one value form a block; the
        # rows under its windows (distinct groups, when given) set how sure we are of it (Wilson)
        upper = np.empty(len(centres))
        lower = np.empty(len(centres))
        from scipy.stats import norm

        confidence = 2 * float(norm.cdf(self.z)) - 1  # one-sided bounds at level Φ(z)
        start = 0
        while start < len(centres):
            end = start + 1
            while end < len(centres) and np.isclose(fitted[end], fitted[start]):
                end += 1
            a, b = win_lo[start], win_hi[end - 1]
            share = (counts[start:end] * means[start:end]).sum() / counts[start:end].sum()
            n_block = float(b - a) if g is None else float(len(set(g[a:b].tolist())))
            lower[start:end], upper[start:end] = wilson_interval(share * n_block, n_block,
                                                                 confidence=confidence)
            start = end
        self.bin_upper_ = upper
        self.bin_lower_ = lower
        if self.n_bags and self.n_bags > 0:
            self._fit_bags(s, y, g)
        return self

    def _fit_bags(self, s: np.ndarray, y: np.ndarray, g: np.ndarray | None) -> None:
        """Bagged map on a grid of score quantiles: the bags' mean and upper quantile."""
        from scipy.stats import norm

        n = len(s)
        grid = np.unique(sorted_quantiles(s, np.linspace(0.0, 1.0, min(n, 1024))))
        single = MonotoneCalibrator("isotonic", min_bin=self.min_bin,
                                    prior_strength=self.prior_strength, bounds=False)
        curves = np.empty((int(self.n_bags), len(grid)))
        # resample groups (items), each drawn group bringing all of its rows
        draws = cluster_bootstrap_indices(n if g is None else g, int(self.n_bags),
                                          random_state=self.random_state)
        for b, idx in enumerate(draws):
            curves[b] = single.fit(s[idx], y[idx]).predict(grid)
        self.grid_ = grid
        self.grid_mean_ = curves.mean(axis=0)
        self.grid_upper_ = np.quantile(curves, float(norm.cdf(self.z)), axis=0)

    @property
    def bagged_(self) -> bool:
        return hasattr(self, "grid_")

    def predict_upper(self, scores: np.ndarray) -> np.ndarray:
        """One-sided upper confidence bound of P(judge right) (level set by ``z``; 1.645 = 95%).

        Isotonic: the Wilson bound of the isotonic block the score falls in. Platt: the point
        estimate (no bound is computed).
        """
        s = np.asarray(scores, dtype=np.float64)
        if self.method == "platt":
            return self.predict(s)
        if self.bagged_:
            return np.interp(s, self.grid_, self.grid_upper_)
        if len(self.bin_centres_) == 1:
            return np.full(s.shape, self.bin_upper_[0])
        return np.interp(s, self.bin_centres_, self.bin_upper_)

    def predict(self, scores: np.ndarray) -> np.ndarray:
        s = np.asarray(scores, dtype=np.float64)
        if self.method == "platt":
            from scipy.special import expit

            return expit(self.coef_ * s + self.intercept_)
        if self.bagged_:
            return np.interp(s, self.grid_, self.grid_mean_)
        if len(self.bin_centres_) == 1:
            return np.full(s.shape, self.bin_values_[0])
        return np.interp(s, self.bin_centres_, self.bin_values_)


def sorted_quantiles(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    r"""``np.quantile(s, q)`` (its default ``"linear"`` method) of an already sorted float array,
    bit for bit, without numpy's copy and partition.

    A bagged calibrator fits hundreds of isotonic maps (certification's out-of-fold maps: 15
    calibrators x 51 fits on MT-Bench), and ``np.quantile``'s set-up was a quarter of that
    time. Same virtual index :math:`(n - 1) q`, same neighbours, same interpolation as numpy's
    ``_lerp`` (``b - (b - a)(1 - g)`` where :math:`g \ge 0.5`), so the values are identical
    (``tests/test_audit_calibration.py`` checks it against ``np.quantile``).
    """
    n = len(s)
    vi = (n - 1) * np.asarray(q, dtype=np.float64)
    prev = np.floor(vi)
    nxt = prev + 1
    top = vi >= n - 1
    prev[top] = -1
    nxt[top] = -1
    prev, nxt = prev.astype(np.intp), nxt.astype(np.intp)
    a, b = s[prev], s[nxt]
    gamma = vi - prev
    diff = b - a
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


def _kernel_levels(s: np.ndarray, y: np.ndarray, min_bin: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Local means of the outcome at score quantiles: the levels the isotonic fit pools.

    With ``s`` sorted, ``t_j`` the ``G = max(2, round(n / min_bin))`` quantiles of ``s`` (equal
    ones merged) and :math:`d_j` the distance from :math:`t_j` to its ``min_bin``-th nearest score,

    .. math:: h_j = 2 d_j, \qquad w_{ij} = \max\{0,\ 1 - ((s_i - t_j)/h_j)^2\}, \qquad
              m_j = \frac{\sum_i w_{ij} y_i}{\sum_i w_{ij}}.

    Each piece (quantiles, order statistics of distances, the kernel) is continuous in the
    scores, so the levels are too. A tie of at least ``min_bin`` equal scores has ``d_j = 0``
    and a level of its own (``h_j`` floors at 1e-12 of the span).

    Returns
    -------
    centres, means, weights, lo, hi : ndarray
        ``t_j``, ``m_j``, ``sum_i w_ij`` scaled to sum to ``n``, and each window's first and
        one-past-last row in ``s``.
    """
    n = len(s)
    k = int(min(max(min_bin, 1), n))
    # the k nearest scores to t_j lie among the k sorted ones either side of its position
    t = np.unique(sorted_quantiles(s, np.linspace(0.0, 1.0, max(2, int(round(n / max(min_bin, 1)))))))
    pos = np.searchsorted(s, t)
    cand = pos[:, None] + np.arange(-k, k)[None, :]
    ok = (cand >= 0) & (cand < n)
    d = np.where(ok, np.abs(s[np.clip(cand, 0, n - 1)] - t[:, None]), np.inf)
    kth = np.partition(d, k - 1, axis=1)[:, k - 1]
    span = float(s[-1] - s[0])
    h = np.maximum(2.0 * kth, 1e-12 * max(span, 1.0))
    lo = np.searchsorted(s, t - h, side="right")
    hi = np.searchsorted(s, t + h, side="left")
    width = hi - lo
    # every (window, row) pair laid out flat: one bincount per sum instead of a loop over windows
    rows = np.repeat(lo - np.r_[0, np.cumsum(width)[:-1]], width) + np.arange(width.sum())
    owner = np.repeat(np.arange(len(t)), width)
    w = np.clip(1.0 - ((s[rows] - t[owner]) / h[owner]) ** 2, 0.0, None)
    w_sum = np.bincount(owner, weights=w, minlength=len(t))
    means = np.bincount(owner, weights=w * y[rows], minlength=len(t)) / w_sum
    counts = w_sum * (n / w_sum.sum())
    return t, means, counts, lo, hi


def prior_shift(p, *, base_rate: float, target: float | None) -> np.ndarray:
    r"""Move calibrated probabilities from the base rate they were fitted at to a new prior.

    Bayes' prior shift (Saerens et al., 2002): the odds are multiplied by

    .. math:: \frac{m\,(1-\pi)}{\pi\,(1-m)}

    with :math:`\pi` the base rate of the calibration rows (P's judge–human agreement) and
    :math:`m` the share of audited verdicts believed right. ``target=None`` or a target equal to
    the base rate leaves ``p`` unchanged; ``target=1`` makes every probability 1.
    """
    p = np.asarray(p, dtype=np.float64)
    if target is None or not np.isfinite(base_rate) or abs(float(target) - base_rate) < 1e-12:
        return p
    eps = 1e-9
    pi = min(max(float(base_rate), eps), 1 - eps)
    m = min(max(float(target), eps), 1 - eps)
    from scipy.special import expit
    from scipy.special import logit as _logit

    out = expit(_logit(np.clip(p, eps, 1 - eps)) + _logit(m) - _logit(pi))
    return np.where(np.isnan(p), np.nan, out)


# Probabilities are kept this far from 0 and 1 before a logit or a log loss: a calibrated
# probability of exactly 0 or 1 (an isotonic level of a pure block) would otherwise weigh
# infinitely in the stacked scorer and the scorer choice.
_CLIP = 1e-4


def logit(p: np.ndarray) -> np.ndarray:
    """``log(p / (1 − p))`` (scipy's ``logit``) with ``p`` clipped to ``[1e-4, 1 − 1e-4]``."""
    from scipy.special import logit as _logit

    return _logit(np.clip(p, _CLIP, 1 - _CLIP))


def row_log_loss(q: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Log loss of each probability ``q`` (clipped to ``[1e-4, 1 − 1e-4]``) for outcome ``y``:
    :math:`-[y \log q + (1-y) \log(1-q)]` (the rows of :func:`log_loss`)."""
    from scipy.special import xlog1py, xlogy

    q = np.clip(q, _CLIP, 1 - _CLIP)
    return -(xlogy(y, q) + xlog1py(1 - y, -q))


def log_loss(q: np.ndarray, y: np.ndarray) -> float:
    """Mean log loss of probabilities ``q`` (clipped as in :func:`row_log_loss`) for 0/1
    outcomes ``y`` (scikit-learn's ``log_loss``)."""
    from sklearn.metrics import log_loss as _log_loss

    return float(_log_loss(np.asarray(y, dtype=float), np.clip(q, _CLIP, 1 - _CLIP),
                           labels=[0.0, 1.0]))


def out_of_fold_probabilities(scores: np.ndarray, correct: np.ndarray, folds: np.ndarray, *,
                              groups: np.ndarray | None = None, method: str = "isotonic",
                              bags: int = 0, random_state: int | None = 0) -> np.ndarray:
    """Calibrated P(judge right) of each P row from a calibrator that never saw that row.

    For each fold ``f`` the calibrator (same ``method`` and ``bags`` as the audit's) is fitted
    on the other folds' out-of-fold scores and outcomes and predicts fold ``f``'s rows — the
    audit's calibrator is fitted on every P row, so its probabilities of P rows have seen their
    own labels. NaN where a fold's complement is too small to fit.
    """
    scores = np.asarray(scores, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    folds = np.asarray(folds)
    q = np.full(len(scores), np.nan)
    for f in np.unique(folds):
        held = folds == f
        if held.all() or (~held).sum() < 2:
            continue
        cal = MonotoneCalibrator(method, n_bags=bags, random_state=random_state).fit(
            scores[~held], correct[~held], groups=None if groups is None else groups[~held])
        q[held] = cal.predict(scores[held])
    return q


def cross_fitted_probabilities(cv_scores: np.ndarray, correct: np.ndarray, folds: np.ndarray,
                               groups: np.ndarray, method: str) -> np.ndarray:
    """Out-of-fold calibrated probabilities of the out-of-fold scores (second level of folds;
    :func:`out_of_fold_probabilities`), P's base rate where a fold could not be fitted."""
    q = out_of_fold_probabilities(cv_scores, correct, folds, groups=groups, method=method)
    base = float(np.mean(correct)) if len(correct) else 0.5
    return np.where(np.isnan(q), base, q)


def gain_over_base_rate(q: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
    r"""z statistic of the log-loss gain of ``q`` over P's base rate, items as clusters
    (:func:`paired_gain` of the base rate :math:`\bar y` and ``q``)."""
    return paired_gain(np.full(len(y), np.mean(y)), q, y, groups)


def paired_gain(q_ref: np.ndarray, q_new: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
    r"""z statistic of the log-loss gain of ``q_new`` over ``q_ref`` on the same rows, items as
    clusters: :math:`d_i = \ell(q^{ref}_i, y_i) - \ell(q^{new}_i, y_i)` summed per item,
    :math:`z = \bar d / (s_d / \sqrt{n_{items}})` (0 when it cannot be computed)."""
    d = row_log_loss(q_ref, y) - row_log_loss(q_new, y)
    _, inv = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    per_item = np.bincount(inv, weights=d)
    if len(per_item) < 2 or per_item.std(ddof=1) == 0:
        return 0.0
    return float(per_item.mean() / (per_item.std(ddof=1) / np.sqrt(len(per_item))))
