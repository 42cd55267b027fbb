"""Intervals for a share :math:`\\hat p = k / n`: one wrapper of statsmodels'
``proportion_confint`` for the whole tool (the audit's Wilson bounds, the annotator audit's
Wilson / Jeffreys intervals, certification's Clopper–Pearson bounds)."""

from __future__ import annotations

import numpy as np

__all__ = ["PROPORTION_METHODS", "proportion_interval", "wilson_interval"]

PROPORTION_METHODS = ("wilson", "jeffreys", "beta")


def proportion_interval(k, n, *, alpha: float,
                        method: str = "wilson") -> tuple[np.ndarray, np.ndarray]:
    r"""Two-sided interval of level :math:`1 - \alpha` for shares ``k / n``, elementwise.

    Parameters
    ----------
    k, n : array_like
        Successes (may be fractional: a share times ``n``) and trials.
    alpha : float
        One minus the confidence level (a one-sided bound at level :math:`1 - \delta` is the
        lower end at ``alpha = 2 * delta``).
    method : {"wilson", "jeffreys", "beta"}, default "wilson"
        ``"wilson"``: the score interval; ``"jeffreys"``: the quantiles of
        Beta(:math:`k+\tfrac12, n-k+\tfrac12`); ``"beta"``: exact Clopper–Pearson.

    Returns
    -------
    lo, hi : ndarray
        Within [0, 1]; the lower bound is 0 when :math:`k = 0` and the upper bound 1 when
        :math:`k = n` for the two Beta methods (nothing seen is never given a positive lower
        bound); NaN where ``n <= 0``.
    """
    from statsmodels.stats.proportion import proportion_confint

    if method not in PROPORTION_METHODS:
        raise ValueError(f"method must be one of {PROPORTION_METHODS}, got {method!r}")
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    ok = n > 0
    # statsmodels divides by n: give it 1 where n <= 0 and blank those entries afterwards
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = proportion_confint(np.where(ok, k, 0.0), np.where(ok, n, 1.0), alpha=alpha,
                                    method=method)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    if method != "wilson":
        lo = np.where(k > 0, lo, 0.0)
        hi = np.where(k < n, hi, 1.0)
    lo = np.where(ok, np.clip(lo, 0.0, 1.0), np.nan)
    hi = np.where(ok, np.clip(hi, 0.0, 1.0), np.nan)
    return lo, hi


def wilson_interval(k, n, *, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    r"""Wilson score interval for shares :math:`\hat p = k / n`, elementwise: the one Wilson
    interval of the tool (the audit's consistency, the calibrator's level bounds, the annotator
    audit's shares, the report's judge tendencies).

    .. math::
        \frac{\hat p + \frac{z^2}{2n}}{1 + \frac{z^2}{n}} \pm
        \frac{z}{1 + \frac{z^2}{n}} \sqrt{\frac{\hat p (1-\hat p)}{n} + \frac{z^2}{4n^2}}

    with :math:`z` the normal quantile :math:`\Phi^{-1}(\tfrac{1 + \text{confidence}}{2})`
    (statsmodels' ``proportion_confint(method="wilson")``, via :func:`proportion_interval`).

    Parameters
    ----------
    k, n : array_like
        Successes (may be fractional: a share times ``n``) and trials.
    confidence : float, default 0.95
        Two-sided level, strictly between 0 and 1.

    Returns
    -------
    lo, hi : ndarray
        Within [0, 1]; NaN where ``n <= 0``. ``float(lo)`` for a single share.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    return proportion_interval(k, n, alpha=1.0 - confidence, method="wilson")
