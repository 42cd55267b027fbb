"""Data page builders: summary numbers, column-mapping defaults and judge-column candidates."""

from __future__ import annotations

import pandas as pd

from puaudit.errors import PUAuditError
from puaudit.data.schema import ROLES, guess_columns, normalize_verdicts

__all__ = ["ROLE_LABELS", "mapping_defaults", "judge_candidates", "summary_metrics",
           "question_type_frame"]

ROLE_LABELS = {
    "prompt": "Prompt", "response_a": "Response A", "response_b": "Response B",
    "judge": "Judge verdict", "human": "Human verdict", "question_type": "Question type",
    "question_id": "Question id", "turn": "Turn", "model_a": "Model A", "model_b": "Model B",
    "annotator": "Annotator",
}


def mapping_defaults(df: pd.DataFrame) -> dict[str, str | None]:
    """Role -> detected column (``None`` where nothing was found), for every role.

    Unlike :func:`puaudit.data.schema.detect_columns` this never raises: a page shows the mapping
    widgets even when a required column is missing, so the user can pick it.
    """
    found = guess_columns(df)
    return {role: found.get(role) for role in ROLES}


def _is_verdict_column(df: pd.DataFrame, col: str, model_a: str | None, model_b: str | None) -> bool:
    values = df[col]
    try:
        labels = normalize_verdicts(values.tolist(), column=col,
                                    model_a=df[model_a].tolist() if model_a else None,
                                    model_b=df[model_b].tolist() if model_b else None)
    except (PUAuditError, TypeError):
        return False
    return any(v in ("A", "B") for v in labels)


def judge_candidates(df: pd.DataFrame, mapping: dict[str, str | None]) -> list[str]:
    """Columns that hold verdicts and look like a judge's (name contains judge / llm / gpt /
    verdict), the mapped judge column first. The human column and hidden truths are left out.
    """
    judge = mapping.get("judge")
    human = mapping.get("human")
    out = [judge] if judge in df.columns else []
    for col in df.columns:
        name = str(col).lower()
        if col in out or col == human or "true" in name or "gold" in name:
            continue
        if not any(k in name for k in ("judge", "llm", "gpt", "verdict", "winner")):
            continue
        if "human" in name:
            continue
        if _is_verdict_column(df, col, mapping.get("model_a"), mapping.get("model_b")):
            out.append(col)
    return out


def summary_metrics(summary: dict) -> list[tuple[str, str]]:
    """(label, value) pairs for the summary metrics of :meth:`ComparisonTable.summary`."""
    agree = summary.get("judge_human_agreement")
    return [
        ("Rows", f"{summary['n_rows']:,}"),
        ("Question types", str(summary["n_question_types"])),
        (f"Annotated ({summary['annotated_share']:.0%})", f"{summary['n_annotated']:,}"),
        ("Judge ties", f"{summary['n_judge_ties']:,}"),
        ("Human ties", f"{summary['n_human_ties']:,}"),
        ("Judge–human agreement", "n/a" if agree is None else f"{agree:.1%}"),
    ]


def question_type_frame(summary: dict) -> pd.DataFrame:
    """Rows per question type, largest first."""
    items = sorted(summary["question_types"].items(), key=lambda kv: (-kv[1], kv[0]))
    return pd.DataFrame(items, columns=["question_type", "rows"])
