"""Which evaluation tool wrote a file, told from its fields (:func:`puaudit.data.load.load_input`
converts it).

Each reader module names its format (``NAME``), its fields (``FIELDS``) and how to recognise a
file of it even when a field is missing (``looks_like``, so that a file that is almost the
format gets a message naming the missing field and its line instead of a puzzling one about
table columns). A file that carries its own texts (prompt and two responses) and is no tool's
format is a comparison table and is returned as read.
"""

from __future__ import annotations

import pandas as pd

import puaudit.data.formats.alpaca_eval as alpaca_eval
import puaudit.data.formats.arena_hard as arena_hard
import puaudit.data.formats.argilla as argilla
import puaudit.data.formats.fastchat_pair as fastchat_pair
import puaudit.data.formats.labelstudio as labelstudio
import puaudit.data.formats.mtbench as mtbench
from puaudit.data.schema import guess_columns

__all__ = ["FORMATS", "detect"]

#: Reader modules, most specific first.
FORMATS = (labelstudio, argilla, alpaca_eval, arena_hard, fastchat_pair, mtbench)


def _has_texts(frame: pd.DataFrame) -> bool:
    roles = guess_columns(frame)
    return "response_a" in roles and "response_b" in roles


def detect(frame: pd.DataFrame):
    """The reader module for ``frame``, or None for a comparison table.

    A tool's fields beside texts of the file's own (``response_a``, ``conversation_a``, ...)
    make a comparison table, except for a format whose records carry their texts
    (``CARRIES_TEXTS``).
    """
    cols = [str(c) for c in frame.columns]
    own = None
    for fmt in FORMATS:
        if fmt.looks_like(cols):
            if getattr(fmt, "CARRIES_TEXTS", False):
                return fmt
            if own is None:
                own = _has_texts(frame)
            if not own:
                return fmt
    return None
