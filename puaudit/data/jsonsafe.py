"""One JSON helper: every number the tool prints or writes as JSON goes through here.

JSON has no NaN or infinity; the tool's convention is ``null`` for NaN (a value that is not
available) and, by default, for ±infinity too. Writers whose readers must get an infinity back
(the JSONL export, token log-probabilities) ask for ``infinity="keep"``: ``inf`` is written as
``1e400`` (``-inf`` as ``-1e400``), a valid JSON number that every IEEE reader, ours included,
reads back as infinity. numpy scalars become Python numbers, ``pd.NA`` / ``pd.NaT`` become
``null``, timestamps their ISO text, bytes their UTF-8 text, tuples / sets / arrays lists, and
dict keys strings. Nesting of any depth is handled without recursion.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Callable

import numpy as np

__all__ = ["to_jsonable", "dumps", "encode", "json_cell"]

_CONTAINERS = (dict, list, tuple, set, frozenset, np.ndarray)
_INFINITY = ("null", "keep")


def _scalar(v: Any, keep_inf: bool) -> Any:
    """A JSON-ready scalar for ``v``, or ``v`` itself when it is a container (walked by the
    caller's explicit stack, so that nesting depth never meets Python's recursion limit)."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return None
        return v if keep_inf or math.isfinite(v) else None
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="backslashreplace")
    # pandas values can only exist once pandas is imported; not importing it here keeps the
    # CLI's start (which prints JSON) free of pandas' import time
    pd = sys.modules.get("pandas")
    if pd is not None:
        if v is pd.NA or v is pd.NaT:
            return None
        if isinstance(v, pd.Timestamp):
            return v.isoformat()
    return v


def to_jsonable(x: Any, *, infinity: str = "null") -> Any:
    """``x`` with NaN as None, ±inf as None (``infinity="null"``) or kept (``"keep"``), and
    numpy / pandas values as plain Python values, at any nesting depth.

    Parameters
    ----------
    x : object
        A scalar, or dicts, lists, tuples, sets and arrays of them.
    infinity : {"null", "keep"}, default "null"
        What ±infinity becomes; "keep" leaves it a float for :func:`dumps` to write as ±1e400.
    """
    if infinity not in _INFINITY:
        raise ValueError(f"infinity must be 'null' or 'keep', got {infinity!r}")
    keep = infinity == "keep"
    x = _scalar(x, keep)
    if not isinstance(x, _CONTAINERS):
        return x
    root: list = [None]
    stack = [(root, 0, x)]
    while stack:
        holder, key, x = stack.pop()
        if isinstance(x, dict):
            new: Any = {}
            holder[key] = new
            for k, item in x.items():
                item = _scalar(item, keep)
                new[str(k)] = item
                if isinstance(item, _CONTAINERS):
                    stack.append((new, str(k), item))
        else:
            items = x.tolist() if isinstance(x, np.ndarray) else x
            new = [_scalar(item, keep) for item in items]
            holder[key] = new
            for i, item in enumerate(new):
                if isinstance(item, _CONTAINERS):
                    stack.append((new, i, item))
    return root[0]


# A JSON string, or an infinity written by Python's encoder (allow_nan=True) outside strings.
_JSON_INF = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity)')


def dumps(obj: Any, *, indent: int | None = None, infinity: str = "null",
          separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """JSON text of ``obj`` after :func:`to_jsonable` (one line unless ``indent``); anything
    else that JSON cannot hold is written as its ``str``.

    ``indent``, ``separators`` and ``sort_keys`` as for :func:`json.dumps` (nesting deeper
    than Python's encoder allows is written on one line); ``infinity`` as for
    :func:`to_jsonable` (``"keep"``: written ``±1e400``).
    """
    return encode(to_jsonable(obj, infinity=infinity), indent=indent, separators=separators,
                  sort_keys=sort_keys)


def json_cell(value: Any) -> Any:
    """A table cell that holds a list, tuple, dict or array as its JSON text from :func:`dumps`
    (so that every export format can hold it, and a NaN inside is ``null``); any other value
    as it is (a numpy scalar as the Python number)."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple, dict)):
        return dumps(value)
    return value


def encode(value: Any, *, indent: int | None = None,
           separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """JSON text of a value :func:`to_jsonable` already made (a writer that prepared its
    values column by column need not walk them twice); a ±infinity left in it is written as
    ±1e400. Options as for :func:`dumps`."""
    options = dict(ensure_ascii=False, default=str, indent=indent, separators=separators,
                   sort_keys=sort_keys)
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:  # an infinity kept somewhere: let Python write it, then make it JSON
        text = json.dumps(value, allow_nan=True, **options)
    except RecursionError:
        text = _encode_iterative(value, json.JSONEncoder(ensure_ascii=False, allow_nan=True,
                                                         default=str).encode)
    if "Infinity" in text:
        text = _JSON_INF.sub(lambda m: m.group(0) if m.group(1) is None else
                             ("-1e400" if m.group(1)[0] == "-" else "1e400"), text)
    return text


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _encode_iterative(obj: Any, scalar: Callable[[Any], str]) -> str:
    """JSON text of ``obj`` without recursion (for nesting deeper than the C encoder allows)."""
    parts: list[str] = []
    stack: list = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, _Raw):
            parts.append(x.text)
        elif isinstance(x, dict):
            parts.append("{")
            pending: list = []
            for i, (k, v) in enumerate(x.items()):
                pending.append(_Raw((", " if i else "") + scalar(str(k)) + ": "))
                pending.append(v)
            pending.append(_Raw("}"))
            stack.extend(reversed(pending))
        elif isinstance(x, list):
            parts.append("[")
            pending = []
            for i, v in enumerate(x):
                if i:
                    pending.append(_Raw(", "))
                pending.append(v)
            pending.append(_Raw("]"))
            stack.extend(reversed(pending))
        else:
            parts.append(scalar(x))
    return "".join(parts)
