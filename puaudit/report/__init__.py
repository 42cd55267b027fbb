"""The audit report: one shareable card of an audit (``puaudit report``, the Export page).

:func:`~puaudit.report.parts.assemble_report` computes what a report shows, :func:`~puaudit.report.card.
build_card` its numbers (JSON), :func:`~puaudit.report.card.gate` the CI check on them, and
:func:`~puaudit.report.html.render_report` the self-contained HTML page, drawn with
:mod:`puaudit.report.figures`: the figure and table builders the dashboard's pages use too.
"""

from puaudit.report.card import agreement, build_card, gate
from puaudit.report.parts import ReportParts, assemble_report, judge_tendencies

__all__ = ["ReportParts", "assemble_report", "build_card", "gate", "agreement", "judge_tendencies"]
