"""Data page glue: column-mapping defaults and warnings, judge-column candidates, the rows the
audit leaves out (the summary numbers are :mod:`puaudit.report.figures.data_summary`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError
from puaudit.data.schema import ROLES, guess_columns, normalize_verdicts

__all__ = ["ROLE_LABELS", "mapping_defaults", "judge_candidates", "mapping_warnings",
           "excluded_rows", "excluded_text"]

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


def mapping_warnings(mapping: dict[str, str | None]) -> list[str]:
    """What the audit cannot do with this column mapping, pointing at the mapping control.

    A missing judge column stops the audit; a missing human column leaves nothing to verify or
    measure (every row would count as unlabelled).
    """
    out = []
    if not mapping.get("judge"):
        out.append("No judge verdict column was detected. Open **Column mapping** below and "
                   "choose the column holding the LLM judge's verdicts (A, B or tie) as "
                   "*Judge verdict*.")
    if not mapping.get("human"):
        out.append("No human verdict column was detected, so no row counts as annotated and "
                   "the audit has nothing to learn from or measure against. Open **Column "
                   "mapping** below and choose the column holding people's verdicts (A, B or "
                   "tie; empty where nobody looked) as *Human verdict*.")
    return out


def excluded_rows(table, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows the audit leaves out, as uploaded, with the reason first
    (``excluded_because``: no judge verdict, judge tie, human tie, identical responses).

    Identical responses are the same text (stripped), exactly the rows the audit leaves out
    for that reason (:func:`puaudit.audit.splits.identical_responses`): different texts that
    the encoder maps to the same vector are audited.
    """
    from puaudit.audit.splits import SPLIT_EXCLUDED, identical_responses, split_rows

    identical = identical_responses(table)
    split, reason = split_rows(table.judge, table.human, table.question_type, table.item_id,
                               p_ratio=0.5, random_state=0, identical=identical)
    rows = np.flatnonzero(split == SPLIT_EXCLUDED)
    out = frame.iloc[rows].copy()
    out.insert(0, "excluded_because", reason[rows])
    out.insert(0, "row", rows + 1)
    return out.reset_index(drop=True)


def excluded_text(excluded: pd.DataFrame, n_rows: int) -> str | None:
    """"N of M rows are left out of the audit: k because …" (None when none are)."""
    if excluded.empty:
        return None
    counts = excluded["excluded_because"].value_counts()
    why = ", ".join(f"{n:,} {reason}" for reason, n in counts.items())
    return (f"{len(excluded):,} of {n_rows:,} rows are left out of the audit ({why}): a tie or a "
            "missing verdict cannot be reversed, and identical responses cannot be told apart.")
