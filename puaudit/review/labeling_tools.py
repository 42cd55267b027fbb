"""Rows for people, out to Label Studio or Argilla and back as review decisions.

:func:`write_label_studio` and :func:`write_argilla` write the rows of an audit (or cascade)
export that need a person, every column and the content key ``puaudit_row_key``
(:mod:`puaudit.review.keys`) travelling with them; :func:`tool_decisions` turns the tool's
export (through :mod:`puaudit.data.formats`) into review decisions (docs/review.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit.data.jsonsafe import to_jsonable
from puaudit.errors import PUAuditError

__all__ = ["TOOLS", "KEY_FIELD", "needs_people", "label_studio_config", "write_label_studio",
           "write_argilla", "tool_table", "tool_decisions"]

TOOLS = ("label-studio", "argilla")
#: The data / metadata field that carries a row's content key to the tool and back.
KEY_FIELD = "puaudit_row_key"
QUESTION = "puaudit_verdict"
_LABELS = {"A": "A is better", "B": "B is better", "tie": "Tie"}
_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def needs_people(frame: pd.DataFrame, *, name: str = "table", human=None) -> np.ndarray:
    """Rows of an audit export that need a person: unlabelled rows in the ``uncertain`` group,
    or escalated (``puaudit_trusted`` false) when the audit certified; in a cascade export
    (``puaudit cascade``), the rows it left for people (``puaudit_cascade_stage`` =
    ``people``) without a human verdict (``human``: the table's verdicts, read from ``frame``
    when not given). A cascade export needs no audit columns; a table with both takes both."""
    from puaudit.review.queue import STAGE_COLUMN, left_for_people

    cascade = STAGE_COLUMN in frame.columns
    audited = all(c in frame.columns for c in ("puaudit_group", "puaudit_split"))
    if not audited and not cascade:
        col = next(c for c in ("puaudit_group", "puaudit_split") if c not in frame.columns)
        raise PUAuditError(f"{name}: no '{col}' column, so it does not say which rows need a "
                           "person. Pass an audit export (puaudit audit FILE -o EXPORT) or a "
                           "cascade export (puaudit cascade FILE ... -o EXPORT).", column=col)
    todo = np.zeros(len(frame), dtype=bool)
    if audited:
        group = frame["puaudit_group"].astype(str).str.strip().str.lower()
        rows = group.eq("uncertain")
        if "puaudit_trusted" in frame.columns:
            rows |= frame["puaudit_trusted"].astype(str).str.strip().str.lower().isin(
                ["false", "0", "0.0"])
        todo |= (rows & frame["puaudit_split"].astype(str).eq("unlabelled")).to_numpy()
    if cascade:
        if human is None:
            from puaudit.data.schema import load_comparisons

            human = load_comparisons(frame, name=name).human
        todo |= left_for_people(frame[STAGE_COLUMN].to_numpy(), human)
    return todo


def _rows(frame: pd.DataFrame, *, name: str) -> tuple[pd.DataFrame, dict]:
    """The rows that need a person, once per content key, with ``puaudit_row_key``, and the
    field holding each text (the table's own column, or ``puaudit_<role>`` when that column
    is no plain name or holds chat messages)."""
    from puaudit.data.schema import load_comparisons
    from puaudit.review.keys import row_keys

    table = load_comparisons(frame, name=name)
    keep = needs_people(frame, name=name, human=table.human)
    if not keep.any():
        raise PUAuditError(f"{name}: no row needs a person (no unlabelled row is uncertain or "
                           "escalated, and no cascade left one for people); nothing to send "
                           "for review.")
    out = frame.astype(object).where(frame.notna(), None)
    out[KEY_FIELD] = row_keys(table)
    shown = {}
    for role in ("prompt", "response_a", "response_b"):
        col = table.columns[role]
        plain = bool(_NAME_OK.fullmatch(str(col))) and all(
            isinstance(v, str) for v in frame[col].tolist())
        shown[role] = col if plain else f"puaudit_{role}"
        if not plain:
            out[shown[role]] = getattr(table, role)
    out = out[keep].drop_duplicates(KEY_FIELD).reset_index(drop=True)
    return out, shown


def label_studio_config(shown: dict) -> str:
    """A labelling config for the exported tasks: the prompt, the two responses side by side, a
    Pairwise choice (left = A) and a Tie box (the Pairwise tag has no tie)."""
    return (
        "<View>\n"
        '  <Header value="Which response answers the prompt better?"/>\n'
        f'  <Text name="prompt" value="${shown["prompt"]}"/>\n'
        f'  <Pairwise name="{QUESTION}" toName="response_a,response_b"/>\n'
        f'  <Text name="response_a" value="${shown["response_a"]}"/>\n'
        f'  <Text name="response_b" value="${shown["response_b"]}"/>\n'
        '  <Choices name="puaudit_tie" toName="prompt" choice="single">\n'
        '    <Choice value="Tie"/>\n'
        "  </Choices>\n"
        "</View>\n")


def _dump(obj) -> bytes:
    return json.dumps(to_jsonable(obj), ensure_ascii=False, indent=1, default=str).encode()


def write_label_studio(frame: pd.DataFrame, output: str | os.PathLike, *, name: str = "table"
                       ) -> tuple[int, Path]:
    """Write Label Studio tasks of the rows that need a person to ``output`` and the labelling
    config to ``<output stem>.label_config.xml``; returns (tasks, config path)."""
    from puaudit.data.writers import write_bytes_atomic

    rows, shown = _rows(frame, name=name)
    tasks = [{"data": rec} for rec in rows.to_dict(orient="records")]
    output = Path(output)
    config = output.with_name(output.stem + ".label_config.xml")
    write_bytes_atomic(output, _dump(tasks))
    write_bytes_atomic(config, label_studio_config(shown).encode())
    return len(tasks), config


def _argilla_settings() -> dict:
    text = {"type": "text", "use_markdown": False}
    return {
        "guidelines": "Read the prompt and both responses; choose the better response, or Tie.",
        "questions": [{"name": QUESTION, "title": "Which response answers the prompt better?",
                       "description": None, "required": True,
                       "settings": {"type": "label_selection", "visible_options": None,
                                    "options": [{"value": k, "text": v}
                                                for k, v in _LABELS.items()]}}],
        "fields": [{"name": f, "title": f.replace("_", " ").capitalize(), "required": True,
                    "settings": text} for f in ("prompt", "response_a", "response_b")],
        "vectors": [], "metadata": [], "allow_extra_metadata": True}


def _check_folder(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise PUAuditError(f"{folder} exists and is not an empty folder; Argilla's from_disk "
                           "reads a folder of its own. Give a new folder name with -o.")
    if not folder.parent.is_dir():
        raise PUAuditError(f"{folder.parent} does not exist; create it or choose another -o.")


def write_argilla(frame: pd.DataFrame, folder: str | os.PathLike, *, name: str = "table") -> int:
    """Write the rows that need a person as an Argilla ``to_disk`` folder (``settings.json``,
    ``dataset.json``, ``records.json``; load it with ``rg.Dataset.from_disk``); returns the
    number of records. Each record's ``id`` is the row's content key."""
    from puaudit.data.writers import write_bytes_atomic

    folder = Path(folder)
    _check_folder(folder)
    rows, shown = _rows(frame, name=name)
    records = []
    for rec in rows.to_dict(orient="records"):
        fields = {role: str(rec[col] or "") for role, col in shown.items()}
        meta = {k: (v if v is None or isinstance(v, (str, int, float, bool))
                    else json.dumps(to_jsonable(v), default=str))
                for k, v in rec.items() if k not in fields}
        records.append({"id": rec[KEY_FIELD], "fields": fields, "metadata": meta,
                        "suggestions": {}, "responses": {}, "vectors": {}, "_server_id": None})
    folder.mkdir(exist_ok=True)
    dataset = {"name": f"puaudit-review-{Path(name).stem}"[:100], "allow_extra_metadata": True,
               "guidelines": _argilla_settings()["guidelines"]}
    write_bytes_atomic(folder / "settings.json", _dump(_argilla_settings()))
    write_bytes_atomic(folder / "dataset.json", _dump(dataset))
    write_bytes_atomic(folder / "records.json", _dump(records))
    return len(records)


def tool_table(path: str | os.PathLike, frame: pd.DataFrame | None = None, *, read=None
               ) -> tuple[str, pd.DataFrame] | None:
    """``(tool, comparison table)`` of a Label Studio or Argilla export at ``path`` (``frame``:
    the file as already read); None when it is neither.

    ``read`` reads a file into a frame (default :func:`puaudit.data.io.read_table`, unbounded):
    give it the run's limits (``functools.partial(read_table, max_rows=...)``) and they bound an
    Argilla folder's ``records.json`` too, its rows counted as its votes expand, as the same
    limits bound a Label Studio file read into ``frame``."""
    import puaudit.data.formats.argilla as argilla
    import puaudit.data.formats.labelstudio as labelstudio
    from puaudit.data.formats.detect import detect
    from puaudit.data.io import read_table

    read = read_table if read is None else read
    if argilla.disk_folder(path):
        return "Argilla", argilla.read_disk_folder(path, read=read)
    if Path(path).is_dir():
        return None
    frame = read(path) if frame is None else frame
    fmt = detect(frame)
    if fmt not in (labelstudio, argilla):
        return None
    tool = "Label Studio" if fmt is labelstudio else "Argilla"
    return tool, fmt.to_table(frame, name=Path(path).name, path=path)


def _keys(table: pd.DataFrame, *, name: str) -> list:
    if KEY_FIELD in table.columns:
        return table[KEY_FIELD].tolist()
    from puaudit.data.schema import load_comparisons
    from puaudit.review.keys import row_keys

    try:  # a project made elsewhere: the key from the row's content, as the Review page does
        return list(row_keys(load_comparisons(table, name=name)))
    except PUAuditError as exc:
        raise PUAuditError(f"{name}: its tasks carry no '{KEY_FIELD}' and their rows cannot be "
                           f"keyed by content ({exc}). Send rows for review with `puaudit review "
                           "export --table AUDIT_EXPORT --to ...`.") from None


def _source(tool: str, row: dict) -> tuple[str, str | None]:
    """(note naming where the vote was cast, its time) of one vote row."""
    if tool == "Label Studio":
        return (f"Label Studio task {row.get('ls_task_id')}, annotation "
                f"{row.get('ls_annotation_id')}",
                row.get("ls_annotation_updated_at") or row.get("ls_annotation_created_at"))
    return f"Argilla record {row.get('id')}", None


def tool_decisions(tool: str, table: pd.DataFrame, *, name: str) -> list[dict]:
    """Review decisions of the votes in a tool's comparison table (:func:`tool_table`): one per
    vote, on the row of its ``puaudit_row_key``, by its annotator. The ``uid`` is a hash of the
    vote, so importing one export twice adds nothing and a changed vote is a new decision."""
    keys = _keys(table, name=name)
    rows = table.astype(object).where(table.notna(), None).to_dict(orient="records")
    out = []
    for i, (row, key) in enumerate(zip(rows, keys), start=1):
        verdict = row.get("human_winner")
        if not verdict:
            continue
        if not key:
            raise PUAuditError(f"{name}: vote row {i} has no '{KEY_FIELD}'; its task was not "
                               "sent by `puaudit review export --to`.", row=i, column=KEY_FIELD)
        note, when = _source(tool, row)
        uid = hashlib.sha256("\x1f".join(map(str, (tool, note, row.get("annotator"), verdict,
                                                    when))).encode()).hexdigest()[:32]
        out.append({"uid": uid, "row_key": str(key), "verdict": verdict,
                    "reviewer": row.get("annotator"), "note": note, "created_at": when,
                    "dataset": name,
                    "judge_verdict": row.get("judge_winner"),
                    "p_judge_right": row.get("puaudit_p_judge_right"),
                    "audit_group": row.get("puaudit_group")})
    return out
