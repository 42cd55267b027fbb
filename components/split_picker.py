"""The Data page's Split picker: an uploaded dataset folder with several splits is read at its
default split, and the picker reads the same uploaded bytes again at the split chosen.

The read runs in the selectbox's ``on_change`` callback, before the page runs, so that the
page's heading, table and mapping already show the new split in the same run, and so that a
split that fails is read once, not on every rerun while it stays selected.
"""

from __future__ import annotations

import streamlit as st

from components import state
from components.uploads import read_upload
from puaudit.data.folder_tables import READ_NOTE, SPLIT
from puaudit.errors import PUAuditError

__all__ = ["picker_key", "read_split"]


def picker_key(file_id: str) -> str:
    """The picker's widget key: one per upload, so that a new upload starts at its own default
    split instead of the choice made for the previous file."""
    return f"data_split_{file_id}"


def read_split(upload, key: str, *, max_upload_mb: int) -> None:
    """The picker's callback: read ``upload`` again at the split now chosen under ``key``.

    On success the split becomes every page's data (:func:`components.state.set_source`), the
    visitor's column mapping kept when the split has its columns. On failure the reader's
    message goes to ``upload_error`` (the Data page shows it, without a traceback), the
    previous table stays, and the picker returns to the split still shown.

    Parameters
    ----------
    upload : streamlit.runtime.uploaded_file_manager.UploadedFile
        The upload the table was read from.
    key : str
        The picker's widget key (:func:`picker_key`).
    max_upload_mb : int
        ``server.maxUploadSize``, as for the first read (:func:`components.uploads.read_upload`).
    """
    ss = st.session_state
    data = upload.getvalue()
    try:
        frame = read_upload(data, upload.name, max_upload_mb=max_upload_mb, split=ss[key])
    except PUAuditError as exc:
        ss["upload_error"] = str(exc)
        # the picker names the table on screen, not the split that could not be read
        ss[key] = ss["raw_frame"].attrs.get(SPLIT)
        return
    ss.pop("upload_error", None)
    ss["read_note"] = (upload.name, frame.attrs.get(READ_NOTE))
    state.set_source(frame, upload.name, state.sha256_bytes(data), columns=ss.get("columns"))
