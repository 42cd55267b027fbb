"""Spreadsheet-formula cells: find them, and make a copy that a spreadsheet shows as text.

A cell whose text starts with ``=``, ``+``, ``-`` or ``@`` (also after a leading tab or carriage
return) is run as a formula when a CSV is opened in a spreadsheet ("CSV injection", OWASP).
The export stays byte-faithful (docs/safety.md): :func:`formula_cells` lets the caller warn,
and :func:`spreadsheet_safe` makes a separate copy for spreadsheets, each such cell prefixed
with ``'``.
"""

from __future__ import annotations

import re

import pandas as pd

__all__ = ["FORMULA_PREFIXES", "is_formula", "formula_cells", "spreadsheet_safe"]

#: first characters a spreadsheet treats as the start of a formula
FORMULA_PREFIXES = ("=", "+", "-", "@")

_TRIGGER = re.compile(r"[\t\r]*[=+\-@]")
# A plain signed number ("-3", "+0.5", "-1e-3") is data a spreadsheet reads as a number, not a
# formula; flagging every negative number would bury the real warnings.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?%?")


def is_formula(value) -> bool:
    """True if a spreadsheet would run ``value`` as a formula.

    A string counts when, after any leading tabs / carriage returns, it starts with one of
    :data:`FORMULA_PREFIXES` and is not a plain signed number such as ``-3`` or ``+0.5``.
    Non-strings (numbers, missing values) never count.
    """
    if not isinstance(value, str) or not _TRIGGER.match(value):
        return False
    return _NUMBER.fullmatch(value.strip()) is None


def formula_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Every cell of ``df`` that a spreadsheet would run as a formula.

    Parameters
    ----------
    df : DataFrame

    Returns
    -------
    DataFrame with columns ``row`` (1-based data row, header excluded, as in error messages),
    ``column`` (the column name) and ``value`` (the cell text), in row-major order; empty when
    the table is safe. Column names that look like formulas are reported with ``row`` 0.
    """
    found: list[tuple[int, str, str]] = []
    for col in df.columns:
        if is_formula(str(col)):
            found.append((0, str(col), str(col)))
    for j, (name, col) in enumerate(df.items()):
        if not (col.dtype == object or pd.api.types.is_string_dtype(col.dtype)):
            continue
        for i, v in enumerate(col.tolist()):
            if is_formula(v):
                found.append((i + 1, name, v))
    order = {c: k for k, c in enumerate(df.columns)}
    found.sort(key=lambda t: (t[0], order.get(t[1], -1)))
    return pd.DataFrame(found, columns=["row", "column", "value"]).astype(
        {"row": "int64", "column": object, "value": object})


def spreadsheet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` where every formula cell (and column name) is prefixed with ``'``.

    Use it only for a download meant to be opened in a spreadsheet: the prefix changes the values,
    so the copy is no longer byte-faithful to the input. Other cells, the row order and the
    column order are unchanged; ``df`` itself is not modified.

    .. math:: v' = \\texttt{'}\\,v \\quad\\text{if } \\mathrm{is\\_formula}(v), \\qquad v' = v
              \\text{ otherwise}
    """
    out = df.copy()
    for name in out.columns:
        col = out[name]
        if not (col.dtype == object or pd.api.types.is_string_dtype(col.dtype)):
            continue
        values = col.tolist()
        if any(is_formula(v) for v in values):
            out[name] = pd.Series([("'" + v) if is_formula(v) else v for v in values],
                                  index=col.index, dtype=col.dtype)
    out.columns = [("'" + str(c)) if is_formula(str(c)) else c for c in out.columns]
    return out
