"""A damped estimate of the embedding time left, for the progress text (no Streamlit here).

The rate so far jumps with every batch (longest texts first, a shared CPU): :class:`TimeLeft`
counts the shown estimate down with the clock and moves it towards the raw one only gradually.
"""

from __future__ import annotations

import math

__all__ = ["TimeLeft", "time_left_text"]


class TimeLeft:
    r"""Exponentially damped time left.

    At each update, after :math:`\Delta t` seconds, the estimate counted down by the clock,
    :math:`e = s_{\text{prev}} - \Delta t`, moves a share :math:`1 - \exp(-\Delta t / \tau)`
    of the way to the raw estimate :math:`r`:

    .. math:: s = e + (1 - e^{-\Delta t/\tau})\,(r - e).

    At a steady rate :math:`r = e` and the estimate is the raw one; a jump of the rate moves it
    by about a third within :math:`\tau/2.5` seconds, not at once.

    Parameters
    ----------
    tau : float, default 30
        Time constant in seconds.
    """

    def __init__(self, tau: float = 30.0):
        self.tau = tau

    def update(self, embedded: int, left: int, seconds: float) -> float | None:
        """The estimate in seconds after ``embedded`` texts took ``seconds`` with ``left`` to
        go; None before the first batch (no rate yet)."""
        if embedded <= 0 or seconds <= 0:
            return None
        raw = left * seconds / embedded
        if getattr(self, "shown_", None) is None:
            self.shown_, self.at_ = raw, seconds
            return raw
        dt = max(seconds - self.at_, 0.0)
        expected = max(self.shown_ - dt, 0.0)
        self.shown_ = expected + (1.0 - math.exp(-dt / self.tau)) * (raw - expected)
        self.at_ = seconds
        return self.shown_


def time_left_text(embedded: int, left: int, seconds: float, *, damp=None) -> str:
    """``", about 1 min 20 s left"`` after ``embedded`` texts took ``seconds`` (the rate so far,
    ``left * seconds / embedded``, rounded up to 5 s); ``", estimating time left"`` before the
    first batch is done; ``""`` when nothing is left. ``damp`` (:class:`TimeLeft`) damps the
    estimate across calls."""
    if left <= 0:
        return ""
    if embedded <= 0 or seconds <= 0:
        return ", estimating time left"
    raw = left * seconds / embedded if damp is None else damp.update(embedded, left, seconds)
    eta = int(-(-raw // 5) * 5)
    return f", about {eta // 60} min {eta % 60} s left" if eta >= 60 else f", about {eta} s left"
