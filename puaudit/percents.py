"""Shares as percents and changes as points, written once for the CLI, the dashboard and the
report.

A change is shown beside the two numbers it joins, so it is computed from those numbers *as
shown*: 74.2% → 74.6% is "+0.4 pts", never the "+0.3 pts" of the unrounded difference
(0.7458 − 0.7425). Unknown values (None, NaN, ±inf) read "n/a", never "nan%".
"""

from __future__ import annotations

import math

__all__ = ["is_known", "percent", "shown_change", "points", "points_between"]


def is_known(x) -> bool:
    """True for a finite number (not None, NaN or ±inf)."""
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def percent(x, *, digits: int = 1, missing: str = "n/a") -> str:
    """A share in [0, 1] as ``"74.2%"``; ``missing`` when it is unknown."""
    return f"{100 * float(x):.{digits}f}%" if is_known(x) else missing


def shown_change(before, after, *, digits: int = 1, scale: float = 100.0) -> float | None:
    """``after − before`` as the two numbers read when each is shown ``scale``-times with
    ``digits`` decimals: :math:`\\mathrm{round}(s\\,a, d) - \\mathrm{round}(s\\,b, d)`,
    rounded to ``d`` again (binary noise); None when either is unknown. ``scale=1`` for
    fractions shown as ``0.742``."""
    if not (is_known(before) and is_known(after)):
        return None
    a, b = round(scale * float(after), digits), round(scale * float(before), digits)
    return round(a - b, digits) + 0.0  # + 0.0: never "-0.0"


def points(delta, *, digits: int = 1) -> str | None:
    """A change of a share as ``"+1.2 pts"`` when no two numbers are shown beside it; None (no
    arrow, no colour) when it is unknown or rounds to zero: an unchanged number is not an
    improvement."""
    if not is_known(delta) or round(100 * float(delta), digits) == 0:
        return None
    return f"{100 * float(delta):+.{digits}f} pts"


def points_between(before, after, *, digits: int = 1) -> str | None:
    """The change from ``before`` to ``after`` (shares) as ``"+0.4 pts"``, equal to the
    difference of :func:`percent` of each; None when unknown or zero."""
    d = shown_change(before, after, digits=digits)
    return None if d is None or d == 0 else f"{d:+.{digits}f} pts"
