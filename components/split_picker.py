"""The Data page's Split picker: an uploaded dataset folder with several splits is read at its
default split, and the picker reads the same upload, unpacked once (:func:`unpacked_zip`), at the
split chosen. The read runs in the selectbox's ``on_change`` callback, before the page runs, so
the page already shows the new split, and a split that fails is read once, not on every rerun.
"""

from __future__ import annotations

import streamlit as st

from components import state
from components.uploads import read_upload
from puaudit.data.folders import READ_NOTE, SPLIT
from puaudit.data.folders import UnpackedZip
from puaudit.errors import PUAuditError

__all__ = ["picker_key", "read_split", "unpacked_zip"]


@st.cache_resource(show_spinner=False, max_entries=4)
def _unpacked_zip(sha256: str, name: str, max_bytes: int | None, _data: bytes) -> UnpackedZip:
    return UnpackedZip(_data, name, max_bytes=max_bytes)


def unpacked_zip(data: bytes, name: str, max_bytes: int | None) -> UnpackedZip:
    """The zipped dataset folder ``data`` (up to ``max_bytes`` decoded) unpacked once per upload
    for every split read from it (the ``unpack_zip`` of :func:`components.uploads.read_upload`),
    shared by sessions; at most four stay on disk."""
    return _unpacked_zip(state.sha256_bytes(data), name, max_bytes, data)


def picker_key(file_id: str) -> str:
    """The picker's widget key: one per upload, so that a new upload starts at its own default
    split instead of the choice made for the previous file."""
    return f"data_split_{file_id}"


def read_split(upload, key: str, *, max_upload_mb: int) -> None:
    """The picker's callback: read ``upload`` at the split now chosen under ``key``; on success
    it becomes every page's data (the column mapping kept when it fits), on failure the
    message goes to ``upload_error`` and the picker returns to the split still shown.
    """
    ss = st.session_state
    data = upload.getvalue()
    try:
        frame = read_upload(data, upload.name, max_upload_mb=max_upload_mb, split=ss[key],
                            unpack_zip=unpacked_zip)
    except PUAuditError as exc:
        ss["upload_error"] = str(exc)
        # the picker names the table on screen, not the split that could not be read
        ss[key] = ss["raw_frame"].attrs.get(SPLIT)
        return
    ss.pop("upload_error", None)
    ss["read_note"] = (upload.name, frame.attrs.get(READ_NOTE))
    state.set_source(frame, upload.name, state.sha256_bytes(data), columns=ss.get("columns"))
