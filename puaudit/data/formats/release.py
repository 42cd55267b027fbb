"""A benchmark release in one folder, or a zip of one: a judgment file, the questions and the
model answers it names (``question.jsonl``, ``model_answer/``), and optionally the people's
votes (``human.jsonl``), read as ``puaudit audit JUDGMENTS --human human.jsonl --answers
FOLDER`` reads them. An upload carries one file, so the dashboard reads an MT-Bench, FastChat or
arena-hard-auto release this way; the command line takes the folder or the zip as INPUT too.
"""

from __future__ import annotations

import zipfile
from io import BytesIO
from pathlib import Path, PurePosixPath

from puaudit.errors import PUAuditError

__all__ = ["HUMAN_FILE", "QUESTIONS", "ANSWERS", "is_release", "zip_names", "zip_is_release",
           "release_files"]

HUMAN_FILE, QUESTIONS, ANSWERS = "human.jsonl", "question.jsonl", "model_answer"
#: where a release keeps its judge's verdicts: beside the questions (the MT-Bench
#: human-judgments release's ``gpt4_pair.jsonl``), under ``model_judgment/`` (FastChat) or
#: ``model_judgment/<judge>/`` (arena-hard-auto: one file a model)
_JUDGMENT_GLOBS = ("*.jsonl", "model_judgment/*.jsonl", "model_judgment/*/*.jsonl")


def is_release(root: Path) -> bool:
    """Whether folder ``root`` holds the questions and model answers of a benchmark."""
    root = Path(root)
    return (root / QUESTIONS).is_file() and (root / ANSWERS).is_dir()


def zip_names(data: bytes) -> list[tuple[str, ...]] | None:
    """The files of zip archive ``data`` as path parts inside the folder it holds (its one top
    folder stripped, as :mod:`puaudit.data.folders` unpacks it); None for no readable zip."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as zf:
            files = [PurePosixPath(n).parts for n in zf.namelist()
                     if not n.endswith("/") and not n.startswith("__MACOSX")]
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    strip = int(len({p[0] for p in files}) == 1 and all(len(p) > 1 for p in files))
    return [p[strip:] for p in files]


def zip_is_release(data: bytes) -> bool:
    """Whether the zip archive ``data`` holds a release folder (read from its names alone)."""
    rel = zip_names(data) or []
    return (QUESTIONS,) in rel and any(len(p) > 1 and p[0] == ANSWERS for p in rel)


def release_files(root: Path, *, name: str) -> tuple[Path, Path | None]:
    """The judgment file and the people's votes (None when absent) of release folder ``root``.

    Raises
    ------
    PUAuditError
        No judge's file, or several (the audit reads one judge's verdicts): the message names
        them and the command that reads one.
    """
    root = Path(root)
    human = root / HUMAN_FILE
    found = sorted(p for g in _JUDGMENT_GLOBS for p in root.glob(g)
                   if p.is_file() and p.name not in (QUESTIONS, HUMAN_FILE))
    shown = ", ".join(p.relative_to(root).as_posix() for p in found[:6])
    if len(found) != 1:
        what = (f"no judge's file (e.g. gpt4_pair.jsonl, or model_judgment/gpt-4_pair.jsonl) "
                f"beside {QUESTIONS}" if not found else
                f"{len(found)} judges' files ({shown}{', ...' if len(found) > 6 else ''})")
        raise PUAuditError(f"{name}: a benchmark release with {what}. Keep one judge's "
                           "verdicts in the folder, or name the file: puaudit audit "
                           "JUDGMENTS --answers FOLDER [--human human.jsonl].")
    return found[0], (human if human.is_file() else None)
