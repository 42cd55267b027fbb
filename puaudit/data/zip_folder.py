"""A zipped dataset folder (a browser cannot upload a folder): checked, unpacked into a
temporary folder, read with :func:`puaudit.data.folders.read_folder`, and removed.

:class:`UnpackedZip` keeps the unpacked folder for as long as it lives, so that a caller that
reads several splits of one archive (the dashboard's Split picker) unpacks it once;
:func:`read_zip_folder` unpacks, reads one split and removes the folder.

What the archive says is checked before anything is written: at most :data:`MAX_MEMBERS`
files, their stated sizes together within the read's decoded-size limit, names that stay
inside the folder (no ``..``, no absolute path), no links, no encryption. Unpacking counts
the bytes actually written and stops at the limit too, so an archive that lies about its
sizes costs no more than an honest one. An Excel workbook (also a zip) gets the message it
always got.
"""

from __future__ import annotations

import io
import stat
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pandas as pd

from puaudit.data.read_limits import _mb
from puaudit.errors import PUAuditError

__all__ = ["read_zip_folder", "UnpackedZip", "MAX_MEMBERS"]

#: Files an archive may hold (a dataset folder holds a handful to a few hundred).
MAX_MEMBERS = 10_000


def _members(zf: zipfile.ZipFile, name: str, max_bytes: int | None) -> list[zipfile.ZipInfo]:
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise PUAuditError(f"{name}: holds {len(infos):,} files, more than the {MAX_MEMBERS:,} a "
                           "dataset folder needs. Zip one dataset folder only.")
    total = 0
    for info in infos:
        parts = PurePosixPath(info.filename.replace("\\", "/")).parts
        if (info.filename.startswith(("/", "\\")) or ".." in parts or "\x00" in info.filename
                or (parts and ":" in parts[0])):
            raise PUAuditError(f"{name}: holds {info.filename[:120]!r}, a name outside the "
                               "folder; zip the dataset folder itself.")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise PUAuditError(f"{name}: holds a link ({info.filename[:120]}); zip the dataset "
                               "folder with its files, not links.")
        if info.flag_bits & 0x1:
            raise PUAuditError(f"{name}: {info.filename[:120]} is encrypted; zip the folder "
                               "without a password.")
        total += info.file_size
    if max_bytes is not None and total > max_bytes:
        raise PUAuditError(f"{name}: unpacks to {_mb(total)}, over the {_mb(max_bytes)} limit "
                           "here; refused before unpacking. Audit the folder with the command "
                           "line (puaudit audit FOLDER), which has higher limits.")
    return [i for i in infos if not i.is_dir()]


def _unpack(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], root: Path, name: str,
            max_bytes: int | None) -> None:
    written = 0
    for info in infos:
        target = root.joinpath(*PurePosixPath(info.filename.replace("\\", "/")).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if max_bytes is not None and written > max_bytes:
                    raise PUAuditError(f"{name}: unpacks to more than {_mb(max_bytes)}, the "
                                       "limit here (more than its headers say).")
                dst.write(chunk)


def _folder_root(root: Path) -> Path:
    """The dataset folder inside the unpacked tree: the one top folder when the archive holds
    only that (``zip -r ds.zip ds``), else the tree itself."""
    entries = [p for p in root.iterdir() if p.name != "__MACOSX"]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def _opened(data: bytes, name: str) -> zipfile.ZipFile:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PUAuditError(f"{name}: a damaged zip archive ({exc}). Zip the folder again.") from None
    if "[Content_Types].xml" in zf.namelist():
        zf.close()
        raise PUAuditError(f"{name}: is a zip archive (an Excel .xlsx workbook is one). Save "
                           "the sheet as CSV (UTF-8), or unzip the file, and upload that.")
    return zf


def _unpack_checked(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], root: Path, name: str,
                    max_bytes: int | None) -> None:
    try:
        _unpack(zf, infos, root, name, max_bytes)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
        raise PUAuditError(f"{name}: cannot be unpacked ({type(exc).__name__}: "
                           f"{str(exc)[:120]}). Zip the folder again.") from None


class UnpackedZip:
    """A zipped dataset folder, checked and unpacked once into a temporary folder that any of
    its splits can then be read from.

    The folder is removed by :meth:`close` (or on leaving a ``with`` block), else when the
    object is garbage-collected: a cache may drop it while a reader still holds it, and the
    folder must outlive that read.

    Parameters
    ----------
    data, name, max_bytes
        As for :func:`read_zip_folder`: ``max_bytes`` limits the unpacking and every read.

    Attributes
    ----------
    root : pathlib.Path
        The dataset folder (the archive's one top folder when it holds only that).
    label : str
        How messages name the folder: ``name``, or ``name:top-folder``.

    Raises
    ------
    PUAuditError
        An Excel workbook, an archive over the limit or with unsafe names, or one that cannot
        be unpacked.
    """

    def __init__(self, data: bytes, name: str, *, max_bytes: int | None = None):
        self.max_bytes = max_bytes
        with _opened(data, name) as zf:
            infos = _members(zf, name, max_bytes)
            self._tmp = tempfile.TemporaryDirectory(prefix="puaudit-zip-")
            try:
                _unpack_checked(zf, infos, Path(self._tmp.name), name, max_bytes)
            except BaseException:
                self._tmp.cleanup()
                raise
        self.root = _folder_root(Path(self._tmp.name))
        inner = self.root.relative_to(self._tmp.name).as_posix()
        self.label = name if inner == "." else f"{name}:{inner}"

    def read(self, *, split: str | None = None, **limits) -> pd.DataFrame:
        """One split of the folder (:func:`puaudit.data.folders.read_folder`, within
        ``max_bytes`` and ``limits``: ``max_rows``, ``max_columns``, the hints, ``read_file``)."""
        from puaudit.data.folders import read_folder

        return read_folder(self.root, split=split, max_bytes=self.max_bytes, name=self.label,
                           **limits)

    def close(self) -> None:
        """Remove the unpacked folder."""
        self._tmp.cleanup()

    def __enter__(self) -> UnpackedZip:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_zip_folder(data: bytes, name: str, *, split: str | None = None,
                    max_bytes: int | None = None, unpack: Callable[..., UnpackedZip] | None = None,
                    **limits) -> pd.DataFrame:
    """Read the dataset folder zipped in ``data``.

    Parameters
    ----------
    data : bytes
        The archive.
    name : str
        Its name, for messages.
    split : str, optional
        As for :func:`puaudit.data.folders.read_folder`.
    max_bytes : int or None
        Largest unpacked size, and the folder's decoded-size limit.
    unpack : callable(data, name, max_bytes) -> UnpackedZip, optional
        Where the unpacked archive comes from (default: a new :class:`UnpackedZip`, removed
        after this read); a caller that reads several splits of one archive passes a cache of
        them, so that the archive is unpacked once.
    **limits
        The other limits of :func:`puaudit.data.folders.read_folder`.

    Raises
    ------
    PUAuditError
        An Excel workbook, an archive over a limit or with unsafe names, or a folder of no
        known kind.
    """
    if unpack is not None:
        return unpack(data, name, max_bytes).read(split=split, **limits)
    with UnpackedZip(data, name, max_bytes=max_bytes) as folder:
        return folder.read(split=split, **limits)
