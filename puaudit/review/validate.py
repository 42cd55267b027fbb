"""Every field of a review decision checked in one place, before anything is saved.

A decision comes from a click on the Review page, a decisions file (``puaudit review import``)
or an annotation tool's export, so any field may hold anything a file can: a list, an object, a
number, a lone surrogate, a megabyte of text. Each field is checked for its type, its range and
its length; the first bad field is refused with one message naming the decision, the field and
what it must be (:class:`~puaudit.errors.PUAuditError` with ``column`` and ``row``). Nothing is
cut short silently: a note longer than :data:`MAX_NOTE` characters is refused with the limit.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import uuid
from datetime import datetime, timedelta, timezone

import pandas as pd

from puaudit.data.jsonsafe import to_jsonable
from puaudit.errors import PUAuditError
from puaudit.review import VERDICTS

__all__ = ["clean_decisions", "MAX_REVIEWER", "MAX_NOTE", "MAX_DATASET", "MAX_SETTINGS",
           "EARLIEST"]

MAX_REVIEWER = 200
MAX_NOTE = 10_000
MAX_DATASET = 500
#: the audit settings as JSON (an ``AuditConfig.to_dict()`` is about 1,000 characters)
MAX_SETTINGS = 100_000
#: no review decision is older than this (a number such as 9999 read as a time is 1970)
EARLIEST = datetime(2000, 1, 1, tzinfo=timezone.utc)
_UID = re.compile(r"[A-Za-z0-9_.:-]{1,32}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT


def _refuse(where: str, field: str, row: int | None, what: str) -> PUAuditError:
    return PUAuditError(f"{where}{field} {what}", column=field, row=row)


def _text(v, field: str, where: str, row: int | None, *, limit: int, ids: bool = False,
          required: bool = False, hint: str = "") -> str:
    """A text field: a string or a number read as text (``ids``: 7.0 is 7), valid Unicode, at
    most ``limit`` characters (outer whitespace stripped, except in a note)."""
    if _missing(v):
        v = ""
    if isinstance(v, bool) or not isinstance(v, (str, numbers.Integral, float)):
        raise _refuse(where, field, row, f"must be text, not {type(v).__name__} "
                      f"({_short(v)}).{hint}")
    if isinstance(v, float):  # a column read from CSV as numbers: 7.0 is id 7, 1.5 is "1.5"
        if not math.isfinite(v):
            raise _refuse(where, field, row, f"must be text, not {v!r}.{hint}")
        v = int(v) if ids and v.is_integer() else v
    text = str(v) if field == "note" else str(v).strip()
    if _SURROGATE.search(text):
        raise _refuse(where, field, row, "is not valid text: it holds a lone surrogate "
                      f"(a broken \\ud800-\\udfff escape) at character "
                      f"{_SURROGATE.search(text).start() + 1}. Fix the file's encoding.")
    if required and not text:
        raise _refuse(where, field, row, f"is required.{hint}")
    if len(text) > limit:
        raise _refuse(where, field, row, f"is {len(text):,} characters long; the limit is "
                      f"{limit:,}. Shorten it.{hint}")
    return text


def _short(v) -> str:
    """A short, safe picture of a value for a message (a huge list is not printed)."""
    if isinstance(v, (list, tuple, dict, set)):
        return f"{type(v).__name__} of {len(v):,} item(s)"
    s = repr(v[:41] if isinstance(v, str) else v)
    return s if len(s) <= 40 else s[:39] + "…"


def _verdict(v, where: str, row: int | None) -> str:
    text = _text(v, "verdict", where, row, limit=40, required=True,
                 hint=f" Use one of {list(VERDICTS)}.")
    norm = {x.lower(): x for x in VERDICTS}.get(text.lower())
    if norm is None:
        raise _refuse(where, "verdict", row, f"{text!r} is not a review verdict: use one of "
                      f"{list(VERDICTS)}.")
    return norm


def _created_at(v, where: str, row: int | None, now: datetime) -> datetime:
    if _missing(v):
        return now
    if isinstance(v, bool) or isinstance(v, numbers.Number):
        raise _refuse(where, "created_at", row, f"is a number ({_short(v)}), not a date and "
                      "time: write it in ISO 8601, e.g. 2026-01-31T12:00:00Z.")
    if not isinstance(v, (str, datetime)):
        raise _refuse(where, "created_at", row, f"must be a date and time, not "
                      f"{type(v).__name__} ({_short(v)}).")
    if isinstance(v, str):
        _text(v, "created_at", where, row, limit=64)
    try:
        t = pd.Timestamp(v)
    except (ValueError, TypeError, OverflowError):
        t = pd.NaT
    if t is pd.NaT or pd.isna(t):
        raise _refuse(where, "created_at", row, f"{_short(v)} is not a date and time (ISO "
                      "8601, e.g. 2026-01-31T12:00:00Z).")
    t = (t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")).to_pydatetime()
    if not EARLIEST <= t <= now + timedelta(days=1):
        raise _refuse(where, "created_at", row, f"{t.isoformat()} is outside the possible "
                      f"range ({EARLIEST.date()} to today).")
    return t


def _probability(v, where: str, row: int | None) -> float | None:
    if _missing(v):
        return None
    if isinstance(v, str):
        try:
            v = float(v.strip()) if v.strip() else None
        except ValueError:
            raise _refuse(where, "p_judge_right", row, f"{_short(v)} is not a number; it "
                          "must be a probability between 0 and 1, or empty.") from None
        if v is None:
            return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise _refuse(where, "p_judge_right", row, f"must be a number between 0 and 1, not "
                      f"{type(v).__name__} ({_short(v)}).")
    p = float(v)
    if math.isnan(p):
        return None
    if not 0.0 <= p <= 1.0:
        raise _refuse(where, "p_judge_right", row, f"{p!r} is not a probability between 0 "
                      "and 1.")
    return p


def _settings(v, where: str, row: int | None) -> str:
    if _missing(v) or v == "":
        return "{}"
    if isinstance(v, str):
        _text(v, "settings", where, row, limit=MAX_SETTINGS)
        try:
            obj = json.loads(v)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise _refuse(where, "settings", row, "must be a JSON object (the audit settings "
                          "as `puaudit review export` writes them).")
        return v
    if not isinstance(v, dict):
        raise _refuse(where, "settings", row, f"must be an object of audit settings, not "
                      f"{type(v).__name__}.")
    try:
        text = json.dumps(to_jsonable(v), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _refuse(where, "settings", row, f"cannot be written as JSON ({exc}).") from None
    return _text(text, "settings", where, row, limit=MAX_SETTINGS)


def _optional(v, field: str, where: str, row: int | None, limit: int) -> str | None:
    text = _text(v, field, where, row, limit=limit, ids=True)
    return text or None


def clean_decisions(records: list[dict], *, now: datetime | None = None) -> list[dict]:
    """Check and normalise decisions for the store (one dict per decision, with every column
    of the table); the first bad field raises :class:`PUAuditError` naming the decision (when
    there are several) and the field."""
    now = now or datetime.now(timezone.utc)
    out = []
    many = len(records) > 1
    for i, r in enumerate(records):
        row = i + 1
        where = f"decision {row}: " if many else ""
        if not isinstance(r, dict):
            raise PUAuditError(f"{where}a decision must be an object with row_key, verdict and "
                               f"reviewer, not {type(r).__name__}.", row=row)
        uid = _text(r.get("uid"), "uid", where, row, limit=32, ids=True)
        if uid and not _UID.fullmatch(uid):
            raise _refuse(where, "uid", row, f"{uid!r} is not a decision id (letters, digits, "
                          "_ . : - only).")
        jv = _optional(r.get("judge_verdict"), "judge_verdict", where, row, 8)
        out.append({
            "uid": uid or uuid.uuid4().hex,
            "row_key": _text(r.get("row_key"), "row_key", where, row, limit=64, ids=True,
                             required=True, hint=" It is the row's content key "
                             "(puaudit.review.keys)."),
            "verdict": _verdict(r.get("verdict"), where, row),
            "reviewer": _text(r.get("reviewer"), "reviewer", where, row, limit=MAX_REVIEWER,
                              ids=True, required=True, hint=" Who made this decision?"),
            "reviewer_name": _optional(r.get("reviewer_name"), "reviewer_name", where, row,
                                       MAX_REVIEWER),
            "note": _text(r.get("note"), "note", where, row, limit=MAX_NOTE),
            "created_at": _created_at(r.get("created_at"), where, row, now),
            "dataset": _text(r.get("dataset"), "dataset", where, row, limit=MAX_DATASET,
                             ids=True),
            "judge_verdict": jv,
            "p_judge_right": _probability(r.get("p_judge_right"), where, row),
            "audit_group": _optional(r.get("audit_group"), "audit_group", where, row, 32),
            "settings": _settings(r.get("settings"), where, row),
        })
    return out
