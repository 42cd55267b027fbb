"""Reading a dashboard upload within the operator's limits.

``server.maxUploadSize`` caps the bytes sent, not what a ``.gz`` or Parquet file expands to:
:func:`read_upload` reads an upload as the command line reads a file, within
:func:`puaudit.data.limits.upload_limits`. A zipped dataset folder with several splits is read
at its default split; :func:`offered_splits` names the others for the Data page's picker.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from puaudit.data.folders import ANOTHER_SPLIT, SPLIT, SPLITS, SplitNotChosen
from puaudit.data.load import load_input
from puaudit.data.limits import ReadLimits, UploadLimits, upload_limits
from puaudit.errors import PUAuditError

__all__ = ["read_upload", "limits_text", "offered_splits", "read_note_caption"]


def limits_text(limits: UploadLimits) -> str:
    """One sentence naming the limits, for help texts."""
    return (f"up to {limits.max_mb:,} MB once decompressed, {limits.max_rows:,} rows and "
            f"{limits.max_columns:,} columns")


def read_upload(data: bytes, name: str, *, max_upload_mb: int | None = None,
                limits: UploadLimits | None = None, split: str | None = None,
                unpack_zip: Callable | None = None) -> pd.DataFrame:
    """Read uploaded bytes as ``puaudit audit`` reads the file, refusing what this server should
    not hold.

    Parameters
    ----------
    data : bytes
        The uploaded file.
    name : str
        Its name (format detection and messages).
    max_upload_mb : int, optional
        ``server.maxUploadSize``: the browser enforces it, this covers any client that does not.
    limits : UploadLimits, optional
        Default: :func:`puaudit.data.limits.upload_limits` (the operator's environment).
    split : str, optional
        The split of a zipped dataset folder to read (default: ``train``, else ``test``, else
        its first).
    unpack_zip : callable, optional
        As for :func:`puaudit.data.load.load_input` (:func:`components.split_picker.unpacked_zip`).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    PUAuditError
        Bad content, or a limit passed; the message says how to audit the file anyway.
    """
    limits = limits or upload_limits()
    # the command that reads what this upload was asked to read, split included
    chosen = f" --split {split}" if split is not None else ""
    cli = (f"Audit larger files with the command line, which has higher limits "
           f"(puaudit audit {name}{chosen} -o audited.csv), or ask the operator to raise "
           "PUAUDIT_MAX_UPLOAD_MB / PUAUDIT_MAX_UPLOAD_ROWS / PUAUDIT_MAX_UPLOAD_COLUMNS.")
    if max_upload_mb is not None and len(data) > max_upload_mb * 1024 * 1024:
        raise PUAuditError(
            f"{name} is {len(data) / 2**20:,.1f} MB, over this server's {max_upload_mb} MB upload "
            f"limit (server.maxUploadSize in .streamlit/config.toml). {cli}")
    try:
        return load_input(data, name=name, split=split, unpack_zip=unpack_zip, limits=ReadLimits(
            max_bytes=limits.max_bytes, max_rows=limits.max_rows, max_columns=limits.max_columns,
            limit_hint=f"This server accepts uploads {limits_text(limits)}. {cli}"))
    except SplitNotChosen as exc:
        if split is not None or not exc.splits:
            raise
        # no default split: read the first, and the picker offers the others (the command
        # line, which has no picker, keeps asking for --split NAME)
        return read_upload(data, name, max_upload_mb=max_upload_mb, limits=limits,
                           split=exc.splits[0], unpack_zip=unpack_zip)


def offered_splits(frame: pd.DataFrame) -> list[str]:
    """The splits a picker offers for ``frame``: every split of the dataset folder it was read
    from when there are several (the one read among them), else none."""
    splits = [str(s) for s in frame.attrs.get(SPLITS) or ()]
    return splits if len(splits) > 1 and frame.attrs.get(SPLIT) in splits else []


def read_note_caption(note: str, *, picker: bool) -> str:
    """A folder's read note as the Data page shows it: pointing to the Split picker when one is
    shown, else saying ``--split`` belongs to the command line."""
    if picker:
        return note.replace(ANOTHER_SPLIT, "another: the Split box")
    return note.replace("--split NAME", "the command line's --split NAME")
