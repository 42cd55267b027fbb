"""AlpacaEval annotations (``annotations.json`` written beside a leaderboard run, or
``annotate_pairs`` output).

A JSON array of records with ``instruction``, ``output_1``, ``output_2``, ``generator_1``,
``generator_2`` and ``preference`` (1 or 2, a float in [1, 2] for a weighted annotator, 1.5
or 0 a draw, empty a failed annotation). The table keeps every field and adds ``model_a`` /
``model_b``, ``judge_winner`` (by :math:`p_B = \\text{preference} - 1`), ``p_A`` / ``p_B``
when any preference is soft and ``category``; docs/data_formats.md ("AlpacaEval annotations").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from puaudit.data.cells import is_missing
from puaudit.data.formats.records import locate, require_fields
from puaudit.errors import PUAuditError

__all__ = ["NAME", "FIELDS", "CARRIES_TEXTS", "looks_like", "to_table"]

NAME = "AlpacaEval annotations"
FIELDS = ("instruction", "output_1", "output_2", "generator_1", "generator_2")
CARRIES_TEXTS = True
#: Keys of ``DataFrame.attrs``: the columns the table adds, and those it renamed (new -> old).
ADDED, RENAMED = "alpaca_eval_added", "alpaca_eval_renamed"


def looks_like(columns) -> bool:
    cols = set(columns)
    return "preference" in cols and bool({"output_1", "output_2", "generator_1",
                                          "generator_2"} & cols)


def _p_b(value, *, name: str, where: str) -> float:
    """P(output_2 better) of a preference, NaN for none."""
    if is_missing(value):
        return math.nan
    try:
        # true / false are no preference (float(True) would read as 1, output_1 better)
        pref = math.nan if isinstance(value, (bool, np.bool_)) else float(value)
    except (TypeError, ValueError):
        pref = math.nan
    if pref == 0:
        return 0.5
    if not 1.0 <= pref <= 2.0:  # NaN fails too
        shown = ("true" if value else "false") if isinstance(value, (bool, np.bool_)) \
            else repr(str(value)[:40])
        raise PUAuditError(f"{name}: {where}: 'preference' is {shown}; AlpacaEval "
                           "writes 1 (output_1 better), 2 (output_2 better), a number between "
                           "(weighted annotators) or 0 (a draw).", column="preference")
    return pref - 1.0


def to_table(frame: pd.DataFrame, *, name: str, path, human, answers, read) -> pd.DataFrame:
    """The comparison table of AlpacaEval annotations (see the module docstring)."""
    if human is not None or answers is not None:
        raise PUAuditError(f"{name}: AlpacaEval annotations carry their own texts and verdicts; "
                           "leave out --human and --answers.")
    require_fields(frame, FIELDS, name=name, fmt=NAME, path=path)
    # an empty preference is a failed annotation (no verdict), not a malformed record
    p_b = np.array([_p_b(v, name=name, where=locate(path, i + 1))
                    for i, v in enumerate(frame["preference"].tolist())])
    verdict = np.where(np.isnan(p_b), "", np.where(p_b < 0.5, "A",
                                                   np.where(p_b > 0.5, "B", "tie")))
    out = frame.copy()
    if "annotator" in out.columns:
        out = out.rename(columns={"annotator": "verdict_source"})
    for pos, (col, source) in enumerate((("model_a", "generator_1"), ("model_b", "generator_2"))):
        if col not in out.columns:  # present when a table made here is read again
            out.insert(pos, col, frame[source].astype(str))
    out["judge_winner"] = verdict
    soft = ~np.isnan(p_b) & (p_b != 0.0) & (p_b != 1.0) & (p_b != 0.5)
    if soft.any():
        out["p_A"], out["p_B"] = 1.0 - p_b, p_b
    if "dataset" in out.columns and "category" not in out.columns:
        out["category"] = out["dataset"]
    # what the file did not hold, so that the export (.alpaca_eval_export) writes it back as it was
    out.attrs[ADDED] = [c for c in out.columns if c not in frame.columns and c != "verdict_source"]
    out.attrs[RENAMED] = {"verdict_source": "annotator"} if "annotator" in frame.columns else {}
    return out
