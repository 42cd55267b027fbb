"""Which evaluation tool wrote a file, told from its fields, and the comparison table it makes.

Each reader module names its format (``NAME``), its fields (``FIELDS``) and how to recognise a
file of it even when a field is missing (``looks_like``, so that a file that is almost the
format gets a message naming the missing field and its line instead of a puzzling one about
table columns). A file that carries its own texts (prompt and two responses) and is no tool's
format is a comparison table and is returned as read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

import puaudit.data.formats.alpaca_eval as alpaca_eval
import puaudit.data.formats.arena_hard as arena_hard
import puaudit.data.formats.argilla as argilla
import puaudit.data.formats.fastchat_pair as fastchat_pair
import puaudit.data.formats.labelstudio as labelstudio
import puaudit.data.formats.mtbench as mtbench
from puaudit.data.schema import guess_columns
from puaudit.errors import PUAuditError

__all__ = ["FORMATS", "detect", "read_comparison_input"]

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


def read_comparison_input(path: str | os.PathLike, *, human: str | os.PathLike | None = None,
                          answers: str | os.PathLike | None = None,
                          read: Callable[[str | os.PathLike], pd.DataFrame] | None = None
                          ) -> pd.DataFrame:
    """Read ``path`` as a comparison table, converting a known tool's file.

    Parameters
    ----------
    path : path
        A comparison table (CSV, Parquet, JSONL) or an evaluation tool's output (see
        :data:`FORMATS`).
    human : path, optional
        Human votes to join (the MT-Bench human-judgments file): one row per vote.
    answers : path, optional
        The benchmark folder with the questions and model answers a judgment file names.
    read : callable, optional
        Table reader applying the run's limits (default :func:`puaudit.data.io.read_table`).

    Returns
    -------
    DataFrame
        Columns that :func:`puaudit.data.schema.load_comparisons` detects, plus every original
        field of the file.
    """
    if read is None:
        from puaudit.data.io import read_table as read
    # A tool's export folder: Argilla's Dataset.to_disk (records.json beside settings.json).
    if argilla.disk_folder(path):
        return argilla.read_disk_folder(path, read=read, human=human, answers=answers)
    frame = read(path)
    name = Path(path).name
    fmt = detect(frame)
    if fmt is None:
        if human is not None or answers is not None:
            flag = "--human" if human is not None else "--answers"
            raise PUAuditError(
                f"{flag} joins votes or texts to a judgment file that names questions and models "
                f"(MT-Bench, FastChat, arena-hard-auto); {name} is none of those (its columns: "
                f"{[str(c) for c in frame.columns][:12]}). Leave {flag} out for a comparison "
                "table, or give the judgment file as INPUT.")
        return frame
    return fmt.to_table(frame, name=name, path=path, human=human, answers=answers, read=read)
