"""A dataset folder read as one table, the kind of folder told from what it holds.

:func:`read_folder` tries each entry of :data:`FOLDER_KINDS` in order; the first whose
``matches`` recognises the folder reads it. The kinds here: a Hugging Face ``DatasetDict``
(``dataset_dict.json``) and ``Dataset`` (``state.json``) written by ``save_to_disk``
(:mod:`puaudit.data.hf_disk`), and Parquet shards (:mod:`puaudit.data.parquet_shards`). A
folder that is none of them gets one message naming what each kind holds.

The table that comes back is what :func:`puaudit.data.io.read_table` returns for a file, so the
evaluation-tool formats (:mod:`puaudit.data.formats`) are detected on it as on a file; its
``attrs["read_note"]`` says what was read (which split, how many files), which the command
line prints; ``attrs["splits"]`` lists the folder's split names and ``attrs["split"]`` names
the one read, so that a caller (the dashboard's Split picker) can offer the others.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import puaudit.data.hf_disk as hf_disk
import puaudit.data.parquet_shards as parquet_shards
from puaudit.data.folder_tables import FolderRead
from puaudit.errors import PUAuditError

__all__ = ["FolderKind", "FOLDER_KINDS", "read_folder"]


@dataclass(frozen=True)
class FolderKind:
    """One kind of dataset folder.

    Parameters
    ----------
    name : str
        What it is, for messages ("a Hugging Face save_to_disk folder").
    holds : str
        The files that make it one, for the message on a folder of no known kind.
    matches : callable(Path) -> bool
        Whether a folder is of this kind; cheap (file names, not contents).
    read : callable(Path, FolderRead) -> DataFrame
        Reads it within the read's limits (:class:`FolderRead`, whose ``read_file`` reads a
        plain table file inside the folder with the same limits).
    """

    name: str
    holds: str
    matches: Callable[[Path], bool]
    read: Callable[[Path, FolderRead], pd.DataFrame]


#: The folder kinds, tried in order. Another tool's folder (e.g. an Argilla ``to_disk``
#: export) is one more entry, placed before the Parquet shards, which match any folder
#: holding a .parquet file.
FOLDER_KINDS: list[FolderKind] = [
    FolderKind("a Hugging Face DatasetDict (save_to_disk)",
               "dataset_dict.json and one folder per split", hf_disk.is_dataset_dict,
               hf_disk.read_dataset_dict),
    FolderKind("a Hugging Face Dataset (save_to_disk)",
               "state.json, dataset_info.json and data-0000K-of-0000N.arrow files",
               hf_disk.is_dataset, hf_disk.read_dataset),
    FolderKind("Parquet shards", "*.parquet files (e.g. data/train-00000-of-00003.parquet)",
               parquet_shards.has_parquet, parquet_shards.read_parquet_shards),
]


def read_folder(path: str | os.PathLike, *, split: str | None = None, name: str | None = None,
                **limits) -> pd.DataFrame:
    """Read a dataset folder as one table.

    Parameters
    ----------
    path : path
        The folder.
    split : str, optional
        The split to read (default: the only one, else ``train``, else ``test``).
    name : str, optional
        How messages name the folder (default the path).
    **limits
        ``max_bytes``, ``max_rows``, ``max_columns``, ``limit_hint``, ``size_hint``,
        ``read_file``: see :class:`FolderRead`; rows and bytes count over the whole folder.

    Returns
    -------
    pandas.DataFrame
        With ``attrs["read_note"]``: what was read; ``attrs["splits"]``: the split names the
        folder holds, each a value ``split`` accepts (empty for a folder without named
        splits); ``attrs["split"]``: the one read (None when it has none).

    Raises
    ------
    PUAuditError
        A folder of no known kind, a split it lacks, shards that disagree, damaged metadata,
        or a limit passed (before any data is decoded when the metadata say so).
    """
    root = Path(path)
    opts = FolderRead(name=name or str(path), split=split, **limits)
    try:
        for kind in FOLDER_KINDS:
            if kind.matches(root):
                return kind.read(root, opts)
    except PermissionError as exc:
        raise PUAuditError(f"{opts.name}: cannot read {exc.filename or 'a file'} "
                           f"({exc.strerror}). Check that the folder is readable.") from None
    try:
        held = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir())
    except OSError:
        held = []
    shown = ", ".join(held[:8]) + (f" and {len(held) - 8} more" if len(held) > 8 else "")
    kinds = "; ".join(f"{k.name}: {k.holds}" for k in FOLDER_KINDS)
    raise PUAuditError(f"{opts.name}: not a dataset folder puaudit reads "
                       f"({kinds}). It holds: {shown or 'nothing'}. Give the path of a table "
                       "file (CSV, TSV, Parquet, JSONL, JSON) instead.")
