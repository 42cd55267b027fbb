"""Argilla 2.x records: ``Dataset.to_disk`` folders, ``records.to_json`` files and flat records
(``records.to_list(flatten=True)``, the Hugging Face Hub layout of ``to_hub``).

Nested records are flattened the way Argilla does it; the vote is the first question whose
answers name a side (a LabelQuestion naming A, B or a tie, or a RankingQuestion over the two
responses), one row per submitted response (:mod:`.tool_votes`), and the suggestion on that
question is the judge's verdict. docs/data_formats.md ("Argilla records") gives the layouts
and every column the table gets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from puaudit.data.cells import is_missing
from puaudit.data.formats.records import Location, missing_field_error
from puaudit.data.formats.tool_votes import (ANNOTATOR, HUMAN, add_response_copies,
                                             check_expanded_rows, judge_probabilities,
                                             rows_frame, set_aside, vote_word)
from puaudit.data.jsonsafe import json_cell
from puaudit.data.schema import guess_columns
from puaudit.errors import PUAuditError

__all__ = ["NAME", "FIELDS", "CARRIES_TEXTS", "looks_like", "flatten", "to_table",
           "disk_folder", "read_disk_folder"]

NAME = "Argilla records"
FIELDS = ("fields",)
CARRIES_TEXTS = True
_TAILS = (".responses", ".responses.users", ".responses.status", ".suggestion",
          ".suggestion.score", ".suggestion.agent")
#: Files of a ``Dataset.to_disk`` folder.
RECORDS_FILE, SETTINGS_FILE, DATASET_FILE = "records.json", "settings.json", "dataset.json"


def looks_like(columns) -> bool:
    cols = set(map(str, columns))
    return ("fields" in cols and bool({"responses", "suggestions"} & cols)) or any(
        c.endswith((".responses", ".responses.users", ".suggestion")) for c in cols)


def _listed(value) -> list:
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, str) and value.startswith("["):  # a list written as JSON text (CSV)
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return [] if is_missing(value) else value if isinstance(value, list) else [value]


def _flat_record(rec: dict, *, name: str, where: str) -> dict:
    fields = rec.get("fields")
    if not isinstance(fields, dict):
        if is_missing(fields):
            raise missing_field_error(name=name, fmt=NAME, field="fields", where=where)
        raise PUAuditError(f"{name}: {where}: 'fields' must be an object of the record's texts.",
                           column="fields")
    out = {k: v for k, v in rec.items() if k not in ("fields", "metadata", "vectors",
                                                      "responses", "suggestions")}
    for part in ("fields", "metadata", "vectors"):
        for k, v in (rec.get(part) or {}).items():
            out[k if k not in out else f"{part}.{k}"] = v
    for q, answers in (rec.get("responses") or {}).items():
        for j, a in enumerate(_listed(answers), start=1):
            for key in ("value", "user_id"):
                if not isinstance(a, dict) or key not in a:
                    raise missing_field_error(
                        name=name, fmt=NAME, field=key, where=f"{where}, response {j} to '{q}'",
                        fix="Each response holds 'value' and 'user_id' (as Argilla exports "
                            "them); export the records again or drop this response.")
            out.setdefault(f"{q}.responses", []).append(a["value"])
            out.setdefault(f"{q}.responses.users", []).append(str(a["user_id"]))
            out.setdefault(f"{q}.responses.status", []).append(a.get("status"))
    for q, s in (rec.get("suggestions") or {}).items():
        s = s if isinstance(s, dict) else {"value": s}
        out[f"{q}.suggestion"] = s.get("value")
        out[f"{q}.suggestion.score"] = s.get("score")
        out[f"{q}.suggestion.agent"] = s.get("agent")
    return out


def flatten(frame: pd.DataFrame, *, name: str, path) -> list[dict]:
    """Records as Argilla's ``to_list(flatten=True)`` writes them (flat records stay as read)."""
    records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    if "fields" not in frame.columns:
        return records
    return [_flat_record(r, name=name, where=Location(path, i + 1))
            for i, r in enumerate(records)]


class _Question:
    """The vote's question: its name, kind (``label`` / ``ranking``) and option → side."""

    def __init__(self, name: str, kind: str, options: list):
        self.name, self.kind, self.options = name, kind, [str(o) for o in options]
        self.side: dict[str, str] = {}
        for o in self.options:
            try:
                v = vote_word(o)
            except KeyError:
                continue
            if v is not None:
                self.side[o] = v
        if kind == "ranking" and len(self.options) == 2 and len(set(self.side.values())) < 2:
            # options that name no side: the first shown is A (Argilla keeps the given order)
            self.side = dict(zip(self.options, ("A", "B")))

    def verdict(self, value) -> str | None:
        """A / B / tie of an answer; ``KeyError`` when it names no side."""
        if self.kind == "label":
            v = value[0] if isinstance(value, list) and len(value) == 1 else value
            return self.side[str(v)] if str(v) in self.side else vote_word(v)
        ranked = _listed(value)
        if not ranked:
            return None
        if all(isinstance(r, dict) for r in ranked):  # [{"value": ..., "rank": ...}, ...]
            ranks = {self.side[str(r["value"])]: r.get("rank") for r in ranked}
            if ranks.get("A") == ranks.get("B"):
                return "tie"
            return min(("A", "B"), key=lambda s: float(ranks.get(s) or 1e9))
        return self.side[str(ranked[0])]


def _questions(records: list[dict], settings: dict | None) -> list[_Question]:
    kinds = {}
    for q in (settings or {}).get("questions") or []:
        st = q.get("settings") or {}
        kind = {"label_selection": "label", "ranking": "ranking"}.get(st.get("type"))
        if kind:
            kinds[q.get("name")] = (kind, [o.get("value") for o in st.get("options") or []])
    names = dict.fromkeys(k.rsplit(".", 2)[0] if ".responses." in k or ".suggestion." in k
                          else k.rsplit(".", 1)[0]
                          for r in records for k in r if k.endswith(_TAILS))
    out = []
    for q in list(kinds) + [n for n in names if n not in kinds]:
        if q in kinds:
            out.append(_Question(q, *kinds[q]))
            continue
        seen = [v for r in records for v in _listed(r.get(f"{q}.responses"))]
        seen += [r.get(f"{q}.suggestion") for r in records
                 if not is_missing(r.get(f"{q}.suggestion"))]
        kind = "ranking" if any(isinstance(v, list) for v in seen) else "label"
        opts = sorted({str(x.get("value") if isinstance(x, dict) else x) for v in seen
                       for x in (v if isinstance(v, list) else [v])})
        out.append(_Question(q, kind, opts))
    return out


def _pick(questions: list[_Question], records: list[dict], *, name: str) -> _Question | None:
    """The first question every answer of which names a side; None when nobody answered."""
    answered = []
    for q in questions:
        values = [v for r in records for v in _listed(r.get(f"{q.name}.responses"))]
        values += [r[f"{q.name}.suggestion"] for r in records
                   if not is_missing(r.get(f"{q.name}.suggestion"))]
        if not values:
            continue
        answered.append(q.name)
        try:
            [q.verdict(v) for v in values]
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        return q
    if answered:
        raise PUAuditError(f"{name}: no question's answers name a side: {answered} were answered "
                           "with other words. The vote needs a LabelQuestion with labels such as "
                           "A / B / tie (or response1 / response2) or a RankingQuestion over the "
                           "two responses.")
    return None


#: Column of a record's first vote row holding the responses no vote row carries.
OTHER_RESPONSES = "argilla_other_responses"
_RESPONSE_TAILS = (".responses.users", ".responses.status", ".responses")


def _responses_by_question(rec: dict) -> tuple[dict, dict[str, list[list]]]:
    """``rec`` without its ``q.responses*`` columns, and per question ``q`` its
    ``[values, users, status]`` lists (a missing list is empty)."""
    rest, by_q = {}, {}
    for k, v in rec.items():
        tail = next((t for t in _RESPONSE_TAILS if k.endswith(t)), None)
        if tail is None:
            rest[k] = v
            continue
        lists = by_q.setdefault(k[:-len(tail)], [[], [], []])
        lists[(".responses", ".responses.users", ".responses.status").index(tail)] = _listed(v)
    return rest, by_q


def _vote_count(rec: dict, q: _Question) -> int:
    """Rows ``rec`` becomes: its submitted responses to ``q``, at least one."""
    status = _listed(rec.get(f"{q.name}.responses.status"))
    n = len(_listed(rec.get(f"{q.name}.responses")))
    return max(1, sum(s in (None, "submitted") for s in status) if status else n)


def _record_rows(rec: dict, q: _Question | None, *, name: str, where) -> list[dict]:
    """One row per submitted response to ``q`` (see the module docstring).

    A vote row carries its own response only: for every question, the ``q.responses`` /
    ``.users`` / ``.status`` of the person who voted (their answer to that question), so that
    the table grows with the votes, not with their square. Responses no row carries (drafts,
    discarded ones, people who answered another question only) go once, on the record's first
    row, in ``argilla_other_responses`` (question -> list of ``{value, user_id, status}``). A
    record without votes is one row holding the lists as they were.
    """
    taken = ("argilla_response_status", "argilla_judge", OTHER_RESPONSES)
    if q is None:
        return [{**set_aside(rec, prefix="record.", taken=taken), HUMAN: "", ANNOTATOR: ""}]
    rest, by_q = _responses_by_question(rec)
    values, users, status = by_q.get(q.name, [[], [], []])
    status = status or [None] * len(values)
    if values and len(users) != len(values):
        raise missing_field_error(
            name=name, fmt=NAME, field=f"{q.name}.responses.users", where=where,
            fix=f"Flat records give one user id per response in '{q.name}.responses.users'; "
                "export them again with records.to_list(flatten=True) or to_hub.")
    sugg = rec.get(f"{q.name}.suggestion")
    judge = "" if is_missing(sugg) else q.verdict(sugg)
    votes = []
    for j, (v, u, s) in enumerate(zip(values, users, status)):
        if s not in (None, "submitted"):  # a draft or a discarded response is no vote
            continue
        try:
            votes.append((j, q.verdict(v)))
        except (KeyError, TypeError, ValueError):
            raise PUAuditError(f"{name}: {where}: the answer {str(v)[:60]!r} to '{q.name}' names "
                               "neither response.", column=f"{q.name}.responses") from None
    if not votes:
        base = set_aside(rec, prefix="record.", taken=taken)
        return [{**base, "argilla_judge": judge, HUMAN: "", ANNOTATOR: ""}]
    base = set_aside(rest, prefix="record.", taken=taken)
    base["argilla_judge"] = judge
    # each other question's responses by user, so that a vote row finds its person's answer
    free: dict[str, dict[str, list[int]]] = {}
    for qn, (vals, us, _) in by_q.items():
        if qn != q.name and len(us) == len(vals):
            for k in range(len(vals) - 1, -1, -1):  # popped from the end: first answer first
                free.setdefault(qn, {}).setdefault(str(us[k]), []).append(k)
    used: dict[str, set[int]] = {qn: set() for qn in by_q}
    rows = []
    for j, verdict in votes:
        row = dict(base)
        for qn, (vals, us, st) in by_q.items():
            k = j if qn == q.name else (free.get(qn, {}).get(str(users[j])) or [None]).pop()
            if k is None:
                continue
            used[qn].add(k)
            row[f"{qn}.responses"] = json_cell(vals[k])
            row[f"{qn}.responses.users"] = str(us[k]) if k < len(us) else None
            row[f"{qn}.responses.status"] = st[k] if k < len(st) else None
        row.update({HUMAN: verdict, ANNOTATOR: str(users[j]), "argilla_response_status": status[j]})
        rows.append(row)
    other = {}
    for qn, (vals, us, st) in by_q.items():
        left = [{"value": vals[k], "user_id": us[k] if k < len(us) else None,
                 "status": st[k] if k < len(st) else None}
                for k in range(len(vals)) if k not in used[qn]]
        if left:
            other[qn] = left
    if other:
        rows[0][OTHER_RESPONSES] = json_cell(other)
    return rows


def to_table(frame: pd.DataFrame, *, name: str, path, human=None, answers=None, read=None,
             settings: dict | None = None) -> pd.DataFrame:
    """The comparison table of Argilla records (see the module docstring); ``settings`` is a
    ``to_disk`` folder's ``settings.json``, which names the questions' kinds and options."""
    if human is not None or answers is not None:
        raise PUAuditError(f"{name}: Argilla records carry their own texts and votes; leave out "
                           "--human and --answers.")
    records = flatten(frame, name=name, path=path)
    q = _pick(_questions(records, settings), records, name=name)
    if q is not None:
        check_expanded_rows(frame, (_vote_count(r, q) for r in records), name=name,
                            what="record")
    rows = []
    for i, rec in enumerate(records):
        rows.extend(_record_rows(rec, q, name=name, where=Location(path, i + 1)))
    out = rows_frame(rows)
    if q is not None and "judge" not in guess_columns(out.drop(columns=["argilla_judge"])) \
            and (out["argilla_judge"] != "").any():
        out["judge_winner"] = out["argilla_judge"]
        agent = out.get(f"{q.name}.suggestion.agent")
        if agent is not None and "verdict_source" not in out.columns:
            out["verdict_source"] = agent
        probs = judge_probabilities(out["judge_winner"].tolist(),
                                    out.get(f"{q.name}.suggestion.score",
                                            pd.Series([None] * len(out))).tolist())
        if probs is not None and "p_A" not in out.columns:
            out["p_A"], out["p_B"] = probs
    out = out.drop(columns=["argilla_judge"], errors="ignore")
    hint = tuple(q.options) if q is not None and q.kind == "ranking" and len(q.options) == 2 \
        else None
    return add_response_copies(out, hint)


def disk_folder(path) -> bool:
    """Whether ``path`` is a folder ``Dataset.to_disk`` wrote (``records.json`` beside
    ``settings.json`` or ``dataset.json``)."""
    p = Path(path)
    return p.is_dir() and (p / RECORDS_FILE).is_file() and (
        (p / SETTINGS_FILE).is_file() or (p / DATASET_FILE).is_file())


def read_disk_folder(path: str | os.PathLike, *, read, human=None, answers=None
                     ) -> pd.DataFrame:
    """The comparison table of a ``to_disk`` folder: its records, read with ``read``, and the
    questions of its ``settings.json``."""
    p = Path(path)
    settings = None
    if (p / SETTINGS_FILE).is_file():
        try:
            settings = json.loads((p / SETTINGS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PUAuditError(f"{p.name}/{SETTINGS_FILE}: not readable JSON ({exc}); export the "
                               "dataset again with Dataset.to_disk.") from None
    records = p / RECORDS_FILE
    return to_table(read(records), name=f"{p.name}/{RECORDS_FILE}", path=records, human=human,
                    answers=answers, settings=settings if isinstance(settings, dict) else None)
