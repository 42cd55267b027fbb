"""The Data page's Split picker: an uploaded dataset folder with several splits is read at its
default split, and the picker reads the same upload at the split chosen.

Both read from one unpacked copy of the archive (:func:`unpacked_zip`, a ``st.cache_resource``
keyed by the sha256 of the uploaded bytes, like the content-keyed caches of
:mod:`components.state`): a zip is unpacked once per upload, whichever splits are chosen.

The read runs in the selectbox's ``on_change`` callback, before the page runs, so that the
page's heading, table and mapping already show the new split in the same run, and so that a
split that fails is read once, not on every rerun while it stays selected.
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
    """The zipped dataset folder ``data`` unpacked once per upload, for every split read from it
    (the ``unpack_zip`` of :func:`components.uploads.read_upload`).

    Shared by sessions that upload the same bytes under the same name (the folder is only
    read). An entry dropped from the cache removes its folder once no read holds it
    (:class:`puaudit.data.folders.UnpackedZip`), so at most four unpacked uploads stay on
    disk; a split chosen after that unpacks the upload again.

    Parameters
    ----------
    data : bytes
        The uploaded archive.
    name : str
        The upload's name (messages name the folder after it).
    max_bytes : int or None
        The upload's decoded-size limit (the unpacking stops there).

    Returns
    -------
    puaudit.data.folders.UnpackedZip
    """
    return _unpacked_zip(state.sha256_bytes(data), name, max_bytes, data)


def picker_key(file_id: str) -> str:
    """The picker's widget key: one per upload, so that a new upload starts at its own default
    split instead of the choice made for the previous file."""
    return f"data_split_{file_id}"


def read_split(upload, key: str, *, max_upload_mb: int) -> None:
    """The picker's callback: read ``upload`` at the split now chosen under ``key``.

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
