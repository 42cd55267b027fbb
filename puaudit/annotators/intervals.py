"""Two-sided intervals for the shares the annotator audit reports (statsmodels underneath)."""

from __future__ import annotations

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["CI_METHODS", "share_interval", "share_columns"]

CI_METHODS = ("wilson", "jeffreys")


def share_interval(k, n, *, method: str = "wilson",
                   confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    r"""Two-sided interval for a share :math:`\hat p = k / n`, elementwise (statsmodels'
    ``proportion_confint``; ``k`` may be fractional).

    ``"wilson"``, with :math:`z` the normal quantile of the confidence:

    .. math:: \frac{\hat p + \frac{z^2}{2n}}{1 + \frac{z^2}{n}} \pm
              \frac{z}{1 + \frac{z^2}{n}} \sqrt{\frac{\hat p (1-\hat p)}{n} + \frac{z^2}{4n^2}}

    clipped to [0, 1]; ``"jeffreys"``: the quantiles of Beta(:math:`k+\tfrac12, n-k+\tfrac12`),
    with the lower bound 0 when :math:`k = 0` and the upper bound 1 when :math:`k = n` (an
    annotator who never did something is not shown a positive lower bound). NaN where
    ``n == 0``.
    """
    from puaudit.stats.proportions import proportion_interval

    if method not in CI_METHODS:
        raise PUAuditError(f"Unknown interval method '{method}': choose one of {list(CI_METHODS)}.")
    if not 0 < confidence < 1:
        raise PUAuditError(f"confidence must lie strictly between 0 and 1, got {confidence}.")
    return proportion_interval(k, n, alpha=1.0 - confidence, method=method)


def share_columns(prefix: str, k, n, method: str, confidence: float) -> dict:
    """``{prefix: k / n, prefix_lo, prefix_hi}`` (NaN where ``n == 0``), ready to become columns."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    lo, hi = share_interval(k, n, method=method, confidence=confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(n > 0, k / n, np.nan)
    return {prefix: share, f"{prefix}_lo": lo, f"{prefix}_hi": hi}
