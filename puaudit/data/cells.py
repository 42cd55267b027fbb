"""What a single table cell holds: whether it is missing, and its text as an identifier.

Every reader asks the same two questions of a cell (a format reader of its records, TrustJudge
of its judge tables, the annotator audit of its model names, review of the texts it keys), so
they are answered here once: a blank cell, ``None``, ``pd.NA`` and NaN are all "missing", and
``3.0`` (an id column that pandas read as float because one value was missing) is the id ``3``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["is_missing", "id_text", "is_int", "INT64_MIN", "INT64_MAX"]

#: The range of a 64-bit signed integer (Parquet's INT64, pandas' int64).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _is_nan(value: Any) -> bool:
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def is_missing(value: Any) -> bool:
    """Missing in the table: ``None``, ``pd.NA``, NaN, or text that is blank."""
    if value is None or value is pd.NA or _is_nan(value):
        return True
    return isinstance(value, str) and not value.strip()


def id_text(value: Any, *, strip: bool = True) -> str:
    """The text of a cell used as an identifier or key: ``""`` for ``None``, ``pd.NA`` and NaN,
    a whole float without its ``.0`` (``3.0`` → ``"3"``), else ``str(value)``.

    ``strip=False`` keeps the surrounding white space (review's content keys hash texts exactly
    as they were shown).
    """
    if value is None or value is pd.NA or _is_nan(value):
        return ""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    text = str(value)
    return text.strip() if strip else text


def is_int(value: Any) -> bool:
    """Whether ``value`` is a Python int (a bool, a subclass of int, is not one here)."""
    return type(value) is int
