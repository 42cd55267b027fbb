r"""Each judge's own verdict probabilities: which columns belong to which judge, and the one rule
that merges the two answer orders.

A judge's verdicts live in one column ``J``; its probabilities beside it, named after it:
``J_p_A``, ``J_p_B``, ``J_p_tie`` (one order), ``J_p1_A`` ... ``J_p2_tie`` (both orders; order 2
showed the answers swapped, so its ``A`` is the table's B); the unprefixed ``p_A`` ... belong to
the **default judge** only (:func:`default_judge_column`), so that one judge's probabilities are
never read for another. docs/data_formats.md ("Each judge's probabilities") gives the spellings.

Each order gives a distribution over the table's (A, B, tie); the judge's is their mean over
the orders present on the row (TrustJudge's bidirectional aggregation of one pair):

.. math:: \bar p = \tfrac{1}{|O|} \sum_{o \in O} p^{(o)}, \qquad
          \text{confidence}_i = \bar p_i(v_i).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd

__all__ = ["default_judge_column", "probability_columns", "owner_of_probability_columns",
           "judge_confidence",
           "read_probabilities", "JudgeProbabilities", "judge_probabilities"]

_SUFFIX_RE = (re.compile(r"^p(?:rob(?:ability)?)?_?(?P<order>[12])?_?(?P<letter>a|b|tie)$", re.I),
              re.compile(r"^p(?:rob(?:ability)?)?_?(?P<letter>a|b|tie)_?(?P<order>[12])$", re.I))
_LETTERS = ("a", "b", "tie")


def _parse(name: str) -> tuple[int, str] | None:
    for rx in _SUFFIX_RE:
        m = rx.match(name.strip())
        if m:
            return int(m.group("order") or 1), m.group("letter").lower()
    return None


def default_judge_column(columns: Iterable) -> str | None:
    """The column a table's judge is detected from when none is named (the first judge alias
    present), whose probabilities may be unprefixed."""
    from puaudit.data.schema import COLUMN_ALIASES

    names = [str(c) for c in columns]
    return next((a for a in COLUMN_ALIASES["judge"] if a in names), None)


def _collect(columns: Iterable, prefix: str | None) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    for c in columns:
        name = str(c)
        if prefix is not None:
            if not name.lower().startswith(prefix.lower() + "_"):
                continue
            name = name[len(prefix) + 1:]
        hit = _parse(name)
        if hit:
            found.setdefault(hit[0], {}).setdefault(hit[1], c)
    return {o: d for o, d in found.items() if "a" in d and "b" in d}


def probability_columns(columns: Iterable, judge_column: str, *,
                        default_judge: str | None = "auto") -> tuple[dict, str]:
    """Which columns hold ``judge_column``'s probabilities.

    Parameters
    ----------
    columns : iterable of column names
    judge_column : str
        The judge's verdict column.
    default_judge : str, None or "auto"
        The judge the unprefixed columns describe; ``"auto"``: :func:`default_judge_column` of
        ``columns``. Pass the original table's when ``columns`` is a part of it.

    Returns
    -------
    (columns, note) : ``{order: {"a": col, "b": col, ["tie": col]}}`` (order 1 as shown, 2
        swapped; empty when the judge has none) and a line saying why unprefixed
        probabilities were not read for this judge ("" otherwise).
    """
    columns = list(columns)
    own = _collect(columns, judge_column)
    if own:
        return own, ""
    plain = _collect(columns, None)
    if not plain:
        return {}, ""
    default = default_judge_column(columns) if default_judge == "auto" else default_judge
    if default is not None and str(default) == str(judge_column):
        return plain, ""
    names = ", ".join(str(plain[o][k]) for o in sorted(plain) for k in _LETTERS if k in plain[o])
    return {}, (f"The probability columns {names} describe the default judge "
                f"'{default}', not '{judge_column}': they are not read for it. Name "
                f"'{judge_column}''s own probabilities {judge_column}_p_A, {judge_column}_p_B "
                f"(and {judge_column}_p_tie; {judge_column}_p1_A ... for two orders).")


def owner_of_probability_columns(columns: Iterable, judges: Iterable, *,
                                 default_judge: str | None) -> dict:
    """Column -> judge for the unprefixed probability columns (they belong to
    ``default_judge`` when it is one of ``judges``); prefixed ones are owned by their prefix
    (:func:`puaudit.audit.certify.cascade.judge_columns_of`)."""
    judges = {str(j) for j in judges}
    if default_judge is None or str(default_judge) not in judges:
        return {}
    return {c: str(default_judge) for c in columns if _parse(str(c))}


def _numeric(frame: pd.DataFrame, col, *, lo: float, hi: float) -> np.ndarray | str:
    """The column as floats (NaN where empty), or a message naming the first bad row."""
    raw = frame[col]
    empty = raw.isna() | raw.astype(str).str.strip().eq("")
    vals = pd.to_numeric(raw.where(~empty), errors="coerce").to_numpy(dtype=np.float64)
    bad = (~empty.to_numpy()) & ~np.isfinite(vals)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        return (f"Column '{col}' row {r + 1}: {str(raw.iloc[r])[:40]!r} is not a number "
                f"({int(bad.sum())} such rows)")
    ok = ~np.isnan(vals)
    out = ok & ((vals < lo) | (vals > hi))
    if out.any():
        r = int(np.flatnonzero(out)[0])
        return (f"Column '{col}' row {r + 1}: {vals[r]:g} is outside [{lo}, {hi}] "
                f"({int(out.sum())} such rows)")
    return vals


def read_probabilities(frame: pd.DataFrame, cols: dict) -> tuple[dict, list[str]]:
    """Each order's (n, 3) distribution over the *table's* (A, B, tie) (order 2 mapped back;
    tie 0 where the judge gives none, NaN rows where it gives nothing), and one message per
    order left out because a column is malformed."""
    out, messages = {}, []
    for order, letters in sorted(cols.items()):
        names = [letters[k] for k in _LETTERS if k in letters]
        read = [_numeric(frame, c, lo=0.0, hi=1.0) for c in names]
        bad = [m for m in read if isinstance(m, str)]
        if bad:
            messages.append(f"{bad[0]}: the judge probabilities of order {order} are left out "
                            "(probabilities must be numbers in [0, 1]).")
            continue
        pa, pb = read[0], read[1]
        pt = read[2] if len(read) > 2 else np.where(np.isnan(pa), np.nan, 0.0)
        out[order] = np.column_stack([pa, pb, pt] if order == 1 else [pb, pa, pt])
    return out, messages


class JudgeProbabilities:
    """One judge's probabilities on a table: ``by_order`` (order -> (n, 3) distribution over
    the table's A, B, tie), the ``columns`` read and ``messages`` on those left out."""

    def __init__(self, by_order: dict, columns: list, messages: list):
        self.by_order, self.columns, self.messages = by_order, columns, messages

    def __bool__(self) -> bool:
        return bool(self.by_order)

    def mean(self) -> np.ndarray:
        """(n, 3) the two-order rule: the mean distribution over the orders present."""
        if not self.by_order:
            raise ValueError("no probabilities")
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # rows with no probability at all
            return np.nanmean(np.stack(list(self.by_order.values())), axis=0)

    def of_verdicts(self, verdicts) -> np.ndarray:
        """(n,) the mean probability of the verdict given (A, B or tie); NaN where the row has
        no verdict or no probability."""
        v = np.asarray(verdicts, dtype=object)
        col = np.where(v == "A", 0, np.where(v == "B", 1, np.where(v == "tie", 2, -1)))
        if not self.by_order:
            return np.full(len(v), np.nan)
        p = self.mean()
        got = p[np.arange(len(v)), np.clip(col, 0, 2)]
        return np.where(col >= 0, got, np.nan)


def judge_probabilities(frame: pd.DataFrame, judge_column: str, *,
                        default_judge: str | None = "auto") -> JudgeProbabilities:
    """``judge_column``'s own probabilities in ``frame`` (the module's convention)."""
    cols, note = probability_columns(frame.columns, judge_column, default_judge=default_judge)
    by_order, messages = read_probabilities(frame, cols)
    used = [str(c) for o in cols.values() for c in o.values()]
    return JudgeProbabilities(by_order, used, ([note] if note else []) + messages)


def judge_confidence(table) -> np.ndarray | None:
    """(n,) the table's judge's probability of each verdict it gave (the two-order rule), NaN
    where a row has none; None when the judge gives no probabilities or is a rule (a rule's
    verdicts are not described by the file's judge columns)."""
    judge_col = str(table.columns.get("judge", "") or table.judge_column)
    if str(table.judge_column).startswith("rule:") or not judge_col:
        return None
    probs = judge_probabilities(table.frame, judge_col,
                                default_judge=table.extra.get("default_judge", "auto"))
    if not probs:
        return None
    conf = probs.of_verdicts(table.judge)
    return conf if np.isfinite(conf).any() else None
