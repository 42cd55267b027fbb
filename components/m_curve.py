"""The Audit page's m slider: its range, step and grid. The curve beside it is
:func:`puaudit.report.figures.m_curve.m_curve_figure`, which the report draws too."""

from __future__ import annotations

# the m values live with the curve's numbers, which the audit report reads too
from puaudit.audit.m_curve import M_RANGE, m_grid

__all__ = ["M_RANGE", "M_STEP", "m_grid"]

#: the Audit page's m slider's step (its range is :data:`M_RANGE`)
M_STEP = 0.01
