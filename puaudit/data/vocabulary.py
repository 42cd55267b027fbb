"""One input vocabulary: the verdict words and the column-name matcher every reader uses.

The audit's comparisons (:mod:`puaudit.data.schema`), TrustJudge's pairwise and score tables
(:mod:`puaudit.trustjudge.io`) and the annotator audit all read verdicts with
:func:`parse_verdict` and find columns with :func:`match_columns`, so a word means the same
thing everywhere.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

__all__ = ["VERDICT_WORDS", "MISSING_WORDS", "parse_verdict", "normalise_column_name",
           "match_columns"]

#: Accepted spellings (case-insensitive, trimmed) of each verdict. "A" is the first-shown
#: response (``response_a`` / candidate i), "B" the second.
VERDICT_WORDS: dict[str, frozenset[str]] = {
    "A": frozenset({"a", "model_a", "1", "response_a", "response a", "answer_a", "assistant_a",
                    "assistant a", "assistant 1", "output_a", "[[a]]", "left", "first", "i",
                    "a>b", "a > b"}),
    "B": frozenset({"b", "model_b", "2", "response_b", "response b", "answer_b", "assistant_b",
                    "assistant b", "assistant 2", "output_b", "[[b]]", "right", "second", "j",
                    "b>a", "b > a"}),
    "tie": frozenset({"tie", "tie (inconsistent)", "tie (bothbad)", "tie(bothbad)",
                      "tie (both bad)", "tie_bothbad", "bothbad", "both_bad", "both bad", "both",
                      "draw", "equal", "same", "=", "a=b", "a = b", "[[c]]", "c", "0", "3",
                      "neither", "both good", "both_good"}),
}
#: Cells that mean "no verdict".
MISSING_WORDS = frozenset({"", "nan", "none", "null", "na", "n/a", "<na>", "missing", "?"})
_LOOKUP = {w: canon for canon, words in VERDICT_WORDS.items() for w in words}


def parse_verdict(value: Any, *, model_a: str | None = None, model_b: str | None = None
                  ) -> str | None:
    """``"A"``, ``"B"``, ``"tie"``, or ``None`` for an empty cell; ``KeyError`` when unknown.

    Integers and integral floats read as their digits (``1.0`` is ``"1"``); any word starting
    with ``tie`` is a tie; the row's own model names (``model_a`` / ``model_b``, when they
    differ) name the winner too.
    """
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        raise KeyError(value)
    if isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer()):
        value = str(int(value))
    s = str(value).strip()
    low = s.lower()
    if low in MISSING_WORDS:
        return None
    canon = _LOOKUP.get(low)
    if canon is not None:
        return canon
    if low.startswith("tie"):
        return "tie"
    if model_a and s == model_a and model_a != model_b:
        return "A"
    if model_b and s == model_b and model_a != model_b:
        return "B"
    raise KeyError(value)


def normalise_column_name(name: Any) -> str:
    """Lower case, trimmed, spaces and hyphens as underscores (how aliases are compared)."""
    return str(name).strip().lower().replace(" ", "_").replace("-", "_")


def match_columns(columns: Iterable[Any], aliases: Mapping[str, tuple[str, ...]],
                  explicit: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """Role -> column: explicit choices first, then each role's first alias present.

    A role set explicitly to ``None`` / ``""`` stays unmapped; a column serves one role at most
    (roles are filled in the order of ``aliases``).
    """
    explicit = dict(explicit or {})
    by_norm: dict[str, Any] = {}
    for c in columns:
        by_norm.setdefault(normalise_column_name(c), c)
    mapping = {r: c for r, c in explicit.items() if c}
    used = set(mapping.values())
    for role, names in aliases.items():
        if role in explicit:
            continue
        for alias in names:
            col = by_norm.get(normalise_column_name(alias))
            if col is not None and col not in used:
                mapping[role] = col
                used.add(col)
                break
    return mapping
