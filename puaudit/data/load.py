"""The one way a comparison table comes in (every command and the dashboard's Data page): a
path, or uploaded bytes with their file name. A comparison table of our own
(:func:`puaudit.data.io.read_table`) comes back as read; a file an evaluation tool wrote (told
from its fields by :func:`puaudit.data.formats.detect`) comes back converted; the caller's
:class:`~puaudit.data.limits.ReadLimits` bound every file read and the rows records expand to.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from puaudit.data.folders import READ_NOTE, SPLIT, SPLITS
from puaudit.data.limits import ReadLimits
from puaudit.errors import PUAuditError

__all__ = ["load_input"]

#: what a converted table keeps of the file's ``attrs``: the folder's splits and the read note
_KEPT = (READ_NOTE, SPLIT, SPLITS)


def load_input(source: str | os.PathLike | bytes, *, name: str | None = None,
               human: str | os.PathLike | None = None, answers: str | os.PathLike | None = None,
               split: str | None = None, limits: ReadLimits | None = None,
               unpack_zip: Callable | None = None) -> pd.DataFrame:
    """Read ``source`` as a comparison table, converting a known tool's file.

    Parameters
    ----------
    source : path or bytes
        A comparison table, a dataset folder (or a zip of one), an evaluation tool's output
        (see :data:`puaudit.data.formats.FORMATS`) or a benchmark release folder (or a zip of
        one: :mod:`puaudit.data.formats.release`); bytes are an upload, read as a file.
    name : str, optional
        The file's name, for format detection and messages; needed with bytes (an upload's
        name), else the path's name.
    human : path, optional
        Human votes to join (the MT-Bench human-judgments file): one row per vote.
    answers : path, optional
        The benchmark folder with the questions and model answers a judgment file names.
    split : str, optional
        The split of a dataset folder to read (default: the only one, else ``train``, else
        ``test``).
    limits : ReadLimits, optional
        What each read may hold (default :class:`ReadLimits`: 4 GB decoded, no row limit); the
        row limit also counts the rows a Label Studio task or Argilla record expands to.
    unpack_zip : callable, optional
        Where a zipped folder comes unpacked from (:func:`puaudit.data.io.read_table`).

    Returns
    -------
    DataFrame
        Columns that :func:`puaudit.data.schema.load_comparisons` detects, plus every original
        field of the file; ``attrs`` name a dataset folder's split (``"split"``, ``"splits"``)
        and what was read (``"read_note"``).

    """
    from puaudit.data.formats import argilla, detect
    from puaudit.data.io import read_table

    if isinstance(source, (bytes, bytearray)):
        if not name:
            raise PUAuditError("load_input: uploaded bytes need their file name (name=...), "
                               "which says their format and names them in messages.")
        label = name
    else:
        label = name or Path(source).name
    limits = limits or ReadLimits()
    read = functools.partial(read_table, **limits.kwargs())  # --human, --answers: the same limits
    # a tool's export folder: Argilla's Dataset.to_disk (records.json beside settings.json)
    if not isinstance(source, (bytes, bytearray)) and argilla.disk_folder(source):
        return argilla.read_disk_folder(source, read=read, human=human, answers=answers)
    if human is None and answers is None:
        table = _read_tool_folder(source, label, limits=limits, unpack_zip=unpack_zip,
                              read_with_limits=read)
        if table is not None:
            return table
    frame = read(source, name=name, split=split, unpack_zip=unpack_zip)
    fmt = detect(frame)
    if fmt is None:
        if human is not None or answers is not None:
            flag = "--human" if human is not None else "--answers"
            raise PUAuditError(
                f"{flag} joins votes or texts to a judgment file that names questions and models "
                f"(MT-Bench, FastChat, arena-hard-auto); {label} is none of those (its columns: "
                f"{[str(c) for c in frame.columns][:12]}). Leave {flag} out for a comparison "
                "table, or give the judgment file as INPUT.")
        return frame
    table = fmt.to_table(frame, name=label, path=source, human=human, answers=answers, read=read)
    table.attrs.update({k: frame.attrs[k] for k in _KEPT if k in frame.attrs})
    return table


def _read_tool_folder(source, label: str, *, limits: ReadLimits, unpack_zip: Callable | None,
                  read_with_limits: Callable) -> pd.DataFrame | None:
    """A benchmark release (a folder, or a zip of one, as a path or uploaded bytes) read through
    its one judgment file, its votes and its answers, or a zipped Argilla ``to_disk`` folder;
    None for anything else."""
    from puaudit.data.folders import UnpackedZip
    from puaudit.data.formats import argilla, release

    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        path = Path(source)
        if path.is_dir():
            return _release_folder(path, label, limits) if release.is_release(path) else None
        data = _small_zip(path, limits.max_bytes)
    if data is None or data[:4] != b"PK\x03\x04":
        return None
    names = release.zip_names(data) or []
    is_argilla = (argilla.RECORDS_FILE,) in names and bool(
        {(argilla.SETTINGS_FILE,), (argilla.DATASET_FILE,)} & set(names))
    if not is_argilla and not release.zip_is_release(data):
        return None

    def read(root: Path) -> pd.DataFrame:
        if is_argilla:
            return argilla.read_disk_folder(root, read=read_with_limits)
        return _release_folder(root, label, limits)

    if unpack_zip is not None:  # the dashboard's cache of unpacked uploads
        return read(unpack_zip(data, label, limits.max_bytes).root)
    with UnpackedZip(data, label, max_bytes=limits.max_bytes) as folder:
        return read(folder.root)


def _small_zip(path: Path, max_bytes: int | None) -> bytes | None:
    """The bytes of a zip archive at ``path`` within ``max_bytes``; None for anything else
    (which the table reader then reads, or refuses in its own words)."""
    try:
        if not path.is_file() or (max_bytes is not None and path.stat().st_size > max_bytes):
            return None
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                return None
        return path.read_bytes()
    except OSError:
        return None


def _release_folder(root: Path, label: str, limits: ReadLimits) -> pd.DataFrame:
    from puaudit.data.formats.release import release_files

    judgments, votes = release_files(root, name=label)
    return load_input(judgments, name=judgments.name, human=votes, answers=root, limits=limits)
