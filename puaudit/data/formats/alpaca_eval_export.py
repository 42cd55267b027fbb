"""The audited table written back as AlpacaEval annotations (``puaudit audit annotations.json
-o audited.json --format alpaca-eval``), for AlpacaEval's own win rates and leaderboards.

Every input field is kept in its order, the reader's own columns are dropped, ``preference``
becomes the audited verdict (the judge's value kept where the audit left its side) and the
judge's original is ``puaudit_judge_preference``; docs/data_formats.md ("Writing AlpacaEval
annotations back").
"""

from __future__ import annotations

import os

import pandas as pd

import puaudit.data.formats.alpaca_eval as alpaca_eval
from puaudit.errors import PUAuditError

__all__ = ["to_annotations", "write_annotations", "check_annotations_input",
           "JUDGE_PREFERENCE"]

#: Where the judge's own preference is kept.
JUDGE_PREFERENCE = "puaudit_judge_preference"
_PREFERENCE = {"A": 1, "B": 2, "tie": 1.5}
# what the reader adds when attrs were lost (a table saved and read again): always these
_ALWAYS_ADDED = ("model_a", "model_b", "judge_winner", "p_A", "p_B")


def check_annotations_input(frame: pd.DataFrame, *, name: str) -> None:
    """Refuse, before the audit, an input that is not AlpacaEval annotations."""
    if "preference" not in frame.columns or not alpaca_eval.looks_like(frame.columns):
        raise PUAuditError(f"--format alpaca-eval writes AlpacaEval annotations back, but {name} "
                           "is not AlpacaEval annotations (it needs 'preference', 'output_1', "
                           "'output_2', 'generator_1', 'generator_2'). Leave out --format for a "
                           "table export (.csv, .parquet, .jsonl).")


def to_annotations(audited: pd.DataFrame) -> pd.DataFrame:
    """The annotations of an audited table (``AuditResult.to_frame`` of an AlpacaEval input).

    Parameters
    ----------
    audited : DataFrame
        The export: the reader's table (:func:`puaudit.data.formats.alpaca_eval.to_table`)
        plus the ``puaudit_*`` columns.

    Returns
    -------
    DataFrame
        One row per annotation: the input's fields, ``preference`` audited,
        ``puaudit_judge_preference`` and the ``puaudit_*`` columns.
    """
    if "puaudit_adjusted" not in audited.columns:
        raise PUAuditError("The table has no 'puaudit_adjusted' column: write AlpacaEval "
                           "annotations from an audited table (AuditResult.to_frame).")
    check_annotations_input(audited, name="the audited table")
    added = set(audited.attrs.get(alpaca_eval.ADDED, _ALWAYS_ADDED))
    renamed = audited.attrs.get(alpaca_eval.RENAMED, {"verdict_source": "annotator"})
    audit_cols = [c for c in audited.columns if str(c).startswith("puaudit_")]
    kept = [c for c in audited.columns if c not in added and c not in audit_cols]
    out = audited[kept].rename(columns={k: v for k, v in renamed.items() if k in kept})
    judge = audited["judge_winner"] if "judge_winner" in audited.columns else None
    preference = []
    for i, (orig, new) in enumerate(zip(audited["preference"].tolist(),
                                        audited["puaudit_adjusted"].tolist())):
        same = judge is not None and judge.iloc[i] == new
        preference.append(orig if same or new not in _PREFERENCE else _PREFERENCE[new])
    out["preference"] = pd.Series(preference, index=out.index, dtype=object)
    out[JUDGE_PREFERENCE] = audited["preference"]
    for c in audit_cols:
        out[c] = audited[c]
    out.attrs = {}
    return out


def _json_array(annotations: pd.DataFrame) -> bytes:
    """The annotations as AlpacaEval writes them: a JSON array of records, numbers to the last
    digit (:func:`puaudit.data.writers.table_to_bytes`)."""
    from puaudit.data.writers import table_to_bytes

    # JSON Lines escape every newline inside a value: one record per line, joined as an array
    lines = table_to_bytes(annotations, "jsonl").rstrip(b"\n").split(b"\n")
    return b"[\n" + b",\n".join(lines) + b"\n]\n"


def write_annotations(audited: pd.DataFrame, path: str | os.PathLike) -> tuple[int, int]:
    """Write the annotations (:func:`to_annotations`) to ``path`` atomically as AlpacaEval
    writes them: a JSON array of records, numbers to the last digit; returns (records,
    fields)."""
    from puaudit.data.writers import write_bytes_atomic

    annotations = to_annotations(audited)
    write_bytes_atomic(path, _json_array(annotations))
    return annotations.shape
