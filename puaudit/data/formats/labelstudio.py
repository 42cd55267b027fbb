"""Label Studio's JSON export of a pairwise project (Export → JSON).

A JSON array of tasks, each with ``data`` (its fields), ``annotations`` (one per person) and
the project's own keys. A ``<Pairwise>`` result (``value.selected``: ``left`` / ``right``) or a
``<Choices>`` answer naming A, B or a tie is a vote (a Choices tie beside a Pairwise selection
makes it a tie); a cancelled or empty annotation is none. One row per vote (:mod:`.tool_votes`);
the judge is the task's own verdict field, else the first prediction (its ``score`` the
judge's confidence). docs/data_formats.md ("Label Studio JSON export") lists every column.
"""

from __future__ import annotations

import pandas as pd

from puaudit.data.cells import is_missing
from puaudit.data.formats.records import Location, missing_field_error
from puaudit.data.formats.tool_votes import (ANNOTATOR, HUMAN, add_response_copies,
                                             check_expanded_rows, judge_probabilities,
                                             rows_frame, set_aside, vote_word)
from puaudit.data.jsonsafe import json_cell
from puaudit.data.schema import guess_columns
from puaudit.errors import PUAuditError

__all__ = ["NAME", "FIELDS", "CARRIES_TEXTS", "looks_like", "result_verdict", "to_table"]

NAME = "Label Studio JSON export"
FIELDS = ("data", "annotations")
CARRIES_TEXTS = True
#: Keys Label Studio writes on a task of its JSON export (or a task file it imports).
TASK_KEYS = frozenset({
    "id", "data", "annotations", "predictions", "meta", "created_at", "updated_at", "inner_id",
    "total_annotations", "cancelled_annotations", "total_predictions", "comment_count",
    "unresolved_comment_count", "last_comment_updated_at", "project", "updated_by",
    "file_upload", "comment_authors", "drafts", "is_labeled", "overlap", "annotators"})
_SIDE = {"left": "A", "right": "B"}


def looks_like(columns) -> bool:
    cols = set(columns)
    return "data" in cols and ("annotations" in cols or "predictions" in cols
                               or cols <= TASK_KEYS)


def _fail(name: str, where: str, text: str, field: str) -> PUAuditError:
    return PUAuditError(f"{name}: {where}: {text}", column=field)


def _choice_words(item: dict) -> list:
    value = item.get("value") if isinstance(item.get("value"), dict) else {}
    choices = value.get("choices")
    return choices if isinstance(choices, list) else [choices]


def result_verdict(result, *, name: str, where: str) -> tuple[str | None, str | None]:
    """``(verdict, to_name)`` of one annotation's (or prediction's) ``result`` list.

    The Pairwise selection gives A (left) or B (right); a Choices tie overrides it; a Choices
    answer naming a side counts when there is no Pairwise result. ``(None, None)`` for an empty
    result. Raises :class:`PUAuditError` for a Pairwise result without ``value.selected`` or
    with another word, and for Choices answers that name no side when nothing else does.
    """
    if not isinstance(result, list):
        raise _fail(name, where, "'result' must be a list of results (as Label Studio exports "
                    "it).", "result")
    pair, choice, odd, to_name = None, None, [], None
    for k, item in enumerate(result, start=1):
        if not isinstance(item, dict):
            continue
        kind = str(item.get("type", "")).lower()
        if kind == "pairwise":
            value = item.get("value")
            selected = value.get("selected") if isinstance(value, dict) else None
            if is_missing(selected):
                raise missing_field_error(
                    name=name, fmt=NAME, field="value.selected", where=f"{where}, result {k}",
                    fix="A Pairwise result holds value.selected ('left' or 'right'); submit "
                        "the vote again in Label Studio or drop this annotation.")
            pair = _SIDE.get(str(selected).strip().lower())
            if pair is None:
                raise _fail(name, f"{where}, result {k}", f"'value.selected' is "
                            f"{str(selected)[:40]!r}; Label Studio writes 'left' or 'right'.",
                            "value.selected")
            to_name = item.get("to_name")
        elif kind == "choices":
            for word in _choice_words(item):
                try:
                    v = vote_word(word)
                except KeyError:
                    odd.append(word)
                    continue
                if v is not None and (choice is None or v == "tie"):
                    choice = v
    if choice == "tie" or (pair is None and choice is not None):
        return choice, to_name
    if pair is None and odd:
        raise _fail(name, where, f"the Choices answer {str(odd[0])[:40]!r} names neither "
                    "response; use A / B / tie (or left / right, answer1 / answer2).", "result")
    return pair, to_name


def _annotator(value) -> str:
    # newer exports may give the user as an object instead of the id
    if isinstance(value, dict):
        value = value.get("email") or value.get("id") or ""
    return "" if is_missing(value) else str(value)


def _annotations(task: dict, i: int, *, name: str, path) -> list:
    value = task.get("annotations")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if value is None:
        if task.get("id") is None:  # a task file for import: no votes yet
            return []
        raise missing_field_error(
            name=name, fmt=NAME, field="annotations",
            where=Location(path, i + 1, f" (task id {task.get('id')})"),
            fix="Label Studio's JSON export gives every task its 'annotations' (an empty list "
                "when nobody voted); export the project again as JSON, not JSON-MIN or CSV.")
    if not isinstance(value, list) or not all(isinstance(a, dict) for a in value):
        raise _fail(name, Location(path, i + 1), "'annotations' must be a list of annotation "
                    "objects.", "annotations")
    return value


def _judge(task: dict, *, name: str, where: Location) -> tuple[str, object]:
    """The first prediction's verdict and score (``""`` and None without one)."""
    preds = task.get("predictions")
    if hasattr(preds, "tolist"):
        preds = preds.tolist()
    for p in preds if isinstance(preds, list) else []:
        if isinstance(p, dict) and isinstance(p.get("result"), list):
            v, _ = result_verdict(p["result"], name=name, where=where.then(", prediction"))
            if v is not None:
                return v, p.get("score")
    return "", None


def _votes(task: dict, i: int, *, name: str, path) -> list[tuple[dict, str, object]]:
    """``(annotation, verdict, to_name)`` of each of the task's votes (a cancelled annotation,
    or one whose result names no side, is none)."""
    where = Location(path, i + 1, f" (task id {task.get('id')})")
    out = []
    for k, ann in enumerate(_annotations(task, i, name=name, path=path), start=1):
        at = where.then(f", annotation {k}")
        if "result" not in ann:
            raise missing_field_error(name=name, fmt=NAME, field="result", where=at)
        verdict, to_name = result_verdict(ann["result"], name=name, where=at)
        if not ann.get("was_cancelled") and verdict is not None:
            out.append((ann, verdict, to_name))
    return out


def _task_rows(task: dict, i: int, *, name: str, path) -> tuple[list[dict], tuple | None]:
    where = Location(path, i + 1, f" (task id {task.get('id')})")
    data = task.get("data")
    if not isinstance(data, dict):
        if data is None:
            raise missing_field_error(name=name, fmt=NAME, field="data", where=where)
        raise _fail(name, where, "'data' must be an object holding the task's fields.", "data")
    base = set_aside(data, prefix="data.")
    base.update({f"ls_task_{k}": json_cell(v) for k, v in task.items()
                 if k not in ("data", "annotations") and not is_missing(v)})
    judge, score = _judge(task, name=name, where=where)
    base["ls_judge"], base["ls_judge_score"] = judge, score
    rows, hint = [], None
    votes = _votes(task, i, name=name, path=path)
    voted = {id(ann) for ann, _, _ in votes}
    skipped = [ann for ann in _annotations(task, i, name=name, path=path) if id(ann) not in voted]
    for ann, verdict, to_name in votes:
        if isinstance(to_name, str) and to_name.count(",") == 1:
            hint = tuple(s.strip() for s in to_name.split(","))
        row = dict(base)
        row.update({f"ls_annotation_{key}": json_cell(v) for key, v in ann.items()})
        row[HUMAN], row[ANNOTATOR] = verdict, _annotator(ann.get("completed_by"))
        rows.append(row)
    rows = rows or [{**base, HUMAN: "", ANNOTATOR: ""}]
    if skipped:  # once, on the task's first row: on every row it would grow with votes x skips
        rows[0]["ls_task_not_voted"] = json_cell(skipped)
    return rows, hint


def to_table(frame: pd.DataFrame, *, name: str, path, human=None, answers=None, read=None
             ) -> pd.DataFrame:
    """The comparison table of a Label Studio export (see the module docstring)."""
    if human is not None or answers is not None:
        raise PUAuditError(f"{name}: a Label Studio export carries its own texts and votes; "
                           "leave out --human and --answers.")
    rows, hint = [], None
    records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    # rows are counted, task by task, before any is built: one task of a million votes would
    # otherwise become a million rows (gigabytes) before a limit could be checked
    check_expanded_rows(frame, (max(1, len(_votes(t, i, name=name, path=path)))
                                for i, t in enumerate(records)), name=name, what="task")
    for i, task in enumerate(records):
        task_rows, h = _task_rows(task, i, name=name, path=path)
        rows.extend(task_rows)
        hint = hint or h
    out = rows_frame(rows)
    own_judge = "judge" in guess_columns(out.drop(columns=["ls_judge"]))
    if not own_judge and (out["ls_judge"] != "").any():
        # the task carries no judge verdict of its own: the model's prediction is the judge's
        out["judge_winner"] = out["ls_judge"]
        probs = judge_probabilities(out["ls_judge"].tolist(), out["ls_judge_score"].tolist())
        if probs is not None:
            out["p_A"], out["p_B"] = probs
    out = out.drop(columns=["ls_judge", "ls_judge_score"])
    return add_response_copies(out, hint)
