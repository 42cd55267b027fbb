"""A table's summary numbers and its rows per question type, as the Data page and the report
show them (pure functions of :meth:`~puaudit.data.schema.ComparisonTable.summary`)."""

from __future__ import annotations

import pandas as pd

__all__ = ["summary_metrics", "question_type_frame"]


def summary_metrics(summary: dict) -> list[tuple[str, str]]:
    """(label, value) pairs for the summary metrics of :meth:`ComparisonTable.summary`."""
    agree = summary.get("judge_human_agreement")
    return [
        ("Rows", f"{summary['n_rows']:,}"),
        ("Question types", str(summary["n_question_types"])),
        (f"Annotated ({summary['annotated_share']:.0%})", f"{summary['n_annotated']:,}"),
        ("Judge ties", f"{summary['n_judge_ties']:,}"),
        ("Human ties", f"{summary['n_human_ties']:,}"),
        # short: six metrics share a row, and a longer label was cut to "Judge–human agree…"
        ("Agreement", "n/a" if agree is None else f"{agree:.1%}"),
    ]


def question_type_frame(summary: dict) -> pd.DataFrame:
    """Rows per question type, largest first."""
    items = sorted(summary["question_types"].items(), key=lambda kv: (-kv[1], kv[0]))
    return pd.DataFrame(items, columns=["question_type", "rows"])
