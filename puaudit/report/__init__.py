"""The audit report: one shareable card of an audit (``puaudit report``, the Export page).

:func:`~puaudit.report.parts.assemble` computes what a report shows, :func:`~puaudit.report.card.
build_card` its numbers (JSON), :func:`~puaudit.report.card.gate` the CI check on them. The HTML
page is drawn by ``components.report_html`` with the dashboard's own figure builders.
"""

from puaudit.report.card import agreement, build_card, gate
from puaudit.report.parts import ReportParts, assemble, judge_tendencies

__all__ = ["ReportParts", "assemble", "build_card", "gate", "agreement", "judge_tendencies"]
