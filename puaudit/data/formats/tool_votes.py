"""What the annotation tools' readers share: the vote words, the columns a vote adds, and the
rows of one vote each.

Label Studio and Argilla both hold a task (a record) with its fields and the votes of several
people. Their readers make the table PUAudit keeps for several votes per comparison (as the
MT-Bench release does): one row per person's vote, with ``human_winner`` (A / B / tie) and
``annotator`` (who voted); a task nobody voted on is one row without a human verdict. Rows of
one task share their texts, so the audit treats them as one item.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from puaudit.data.jsonsafe import json_cell
from puaudit.data.limits import ROW_LIMIT
from puaudit.data.schema import COLUMN_ALIASES, guess_columns
from puaudit.data.vocabulary import normalise_column_name, parse_verdict
from puaudit.errors import PUAuditError

__all__ = ["HUMAN", "ANNOTATOR", "vote_word", "set_aside", "judge_probabilities",
           "add_response_copies", "rows_frame", "PAIR_NAMES", "check_expanded_rows"]

HUMAN = "human_winner"
ANNOTATOR = "annotator"

# Names tools give the two answers beside the ones the schema knows (Label Studio's templates
# use text1/text2, the labelling guides answer1/answer2, Argilla's response1/response2).
_EXTRA_WORDS = {
    "A": ("response1", "response_1", "answer1", "answer_1", "text1", "text_1", "output1",
          "completion1", "a is better", "left is better", "response a is better"),
    "B": ("response2", "response_2", "answer2", "answer_2", "text2", "text_2", "output2",
          "completion2", "b is better", "right is better", "response b is better"),
}
_EXTRA = {w: canon for canon, words in _EXTRA_WORDS.items() for w in words}

#: Pairs of field names that hold the two answers, tried in order when the schema finds none.
PAIR_NAMES = tuple(zip(_EXTRA_WORDS["A"][:8], _EXTRA_WORDS["B"][:8]))

# Field names that would be read as the human verdict or the annotator id in place of the
# columns a reader adds: such a field of the task is kept under a prefix.
_ROLE_NAMES = frozenset(normalise_column_name(a) for role in ("human", "annotator")
                        for a in COLUMN_ALIASES[role]) - frozenset(
    normalise_column_name(a) for a in COLUMN_ALIASES["judge"])


def check_expanded_rows(frame: pd.DataFrame, counts, *, name: str, what: str) -> None:
    """Refuse, before any row is built, a file whose records expand past the row limit it was
    read with (``frame.attrs["row_limit"]``, see :func:`puaudit.data.io.read_table`).

    ``counts`` yields the rows each record becomes, in file order; they are summed as they come
    and the count stops at the first record past the limit. ``what`` names a record (``task``,
    ``record``). Without a limit nothing is counted.
    """
    limit = frame.attrs.get(ROW_LIMIT) or {}
    max_rows = limit.get("max_rows")
    if max_rows is None:
        return
    total, biggest, at = 0, 0, 0
    for i, n in enumerate(counts, start=1):
        total += n
        if n > biggest:
            biggest, at = n, i
        if total > max_rows:
            raise PUAuditError(
                f"{name}: expands to more than {max_rows:,} rows (one per vote), the limit here; "
                f"refused at {what} {i:,}, before any row is built ({what} {at:,} alone holds "
                f"{biggest:,} votes). {limit.get('hint') or ''}".rstrip())


def vote_word(value) -> str | None:
    """``"A"``, ``"B"``, ``"tie"`` of a tool's answer, None when empty; ``KeyError`` when the
    answer names no side (the words of :func:`puaudit.data.vocabulary.parse_verdict`, plus
    ``response1`` / ``answer2`` / ``text1`` ... and "A is better")."""
    if isinstance(value, str):
        word = _EXTRA.get(" ".join(value.strip().lower().split()))
        if word is not None:
            return word
    return parse_verdict(value)


def set_aside(fields: dict, *, prefix: str, taken=()) -> dict:
    """``fields`` with each name the reader adds (``taken``) or that would be read as the
    human verdict or the annotator id moved to ``prefix + name``: the tool's votes are the
    human verdicts, and the task's own value still reaches the export."""
    taken = set(taken) | {HUMAN, ANNOTATOR}
    out = {}
    for k, v in fields.items():
        k = str(k)
        if k in taken or normalise_column_name(k) in _ROLE_NAMES:
            k = prefix + k
        out[k] = json_cell(v)
    return out


def judge_probabilities(verdicts: list, scores: list) -> tuple[np.ndarray, np.ndarray] | None:
    """``(p_A, p_B)`` from a judge's verdicts and its confidence in them (a tool's suggestion
    or prediction score in [0, 1]); None when no strict verdict has such a score."""
    p_b = np.full(len(verdicts), math.nan)
    for i, (v, s) in enumerate(zip(verdicts, scores)):
        try:
            s = float(s)
        except (TypeError, ValueError):
            continue
        if v in ("A", "B") and 0.0 <= s <= 1.0:
            p_b[i] = s if v == "B" else 1.0 - s
    if np.isnan(p_b).all():
        return None
    return 1.0 - p_b, p_b


def add_response_copies(frame: pd.DataFrame, hint: tuple[str, str] | None = None
                        ) -> pd.DataFrame:
    """Add ``response_a`` / ``response_b`` (copies of the task's two answer fields) when the
    schema finds no responses under the task's own names (``answer1``, ``response1``, ...).

    ``hint`` names the two fields in the order the tool showed them (Label Studio's
    ``to_name``, Argilla's ranking options), else the first pair of :data:`PAIR_NAMES` present.
    """
    roles = guess_columns(frame)
    if "response_a" in roles and "response_b" in roles:
        return frame
    pairs = ([hint] if hint else []) + list(PAIR_NAMES)
    for a, b in pairs:
        if a in frame.columns and b in frame.columns and a != b:
            out = frame.copy()
            out["response_a"], out["response_b"] = frame[a], frame[b]
            return out
    return frame


def rows_frame(rows: list[dict]) -> pd.DataFrame:
    """The table of ``rows`` (a key missing from a row is an empty cell); whole numbers stay
    whole where some rows lack them (``Int64``, not float: an id 11 stays 11)."""
    out = pd.DataFrame(rows, dtype=object)
    for c in out.columns:
        vals = [v for v in out[c].tolist() if v is not None and not (isinstance(v, float)
                                                                     and math.isnan(v))]
        if vals and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                        for v in vals):
            out[c] = pd.array([None if v is None or (isinstance(v, float) and math.isnan(v))
                               else int(v) for v in out[c].tolist()], dtype="Int64")
        else:
            out[c] = out[c].infer_objects()
    return out
