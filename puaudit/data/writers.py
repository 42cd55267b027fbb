"""Writing tables (CSV, TSV, Parquet, JSONL) atomically, and checking a destination before any
work starts: it must not be an input, a folder or unwritable."""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit.data.jsonsafe import encode, to_jsonable
from puaudit.data.cells import INT64_MIN, is_int
from puaudit.data.limits import SUPPORTED_SUFFIXES
from puaudit.errors import PUAuditError

__all__ = ["write_bytes_atomic", "check_output_path", "write_table", "table_to_bytes"]


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_bytes_atomic(path: str | os.PathLike, data: bytes | Iterable[bytes]) -> Path:
    """Write ``data`` (bytes, or an iterable of them written piece by piece) to ``path``
    through a temporary file in the same folder, then rename it (atomic: readers see the old
    file or the complete new one). The new file keeps the permissions of the one it replaces;
    missing parent folders are created."""
    path = Path(path)
    if path.is_symlink():  # write the file the link points to, as a plain write would
        path = Path(os.path.realpath(path))
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name[:80]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in ([data] if isinstance(data, (bytes, bytearray, memoryview)) else data):
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: equal once resolved, or one inode (symlink, hardlink)."""
    try:
        if a.resolve() == b.resolve():
            return True
    except (OSError, RuntimeError):
        pass
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_output_path(path: str | os.PathLike, *, inputs: Sequence[str | os.PathLike | None] = (),
                      outputs: Sequence[str | os.PathLike | None] = (), what: str = "output",
                      table: bool = True) -> Path:
    """Check, before any work, that ``path`` can be written without destroying anything: not
    an input or another output (also through a link), a folder, a path under a file or in a
    missing folder, unwritable, or (``table=True``) a name that says no table format.

    Parameters
    ----------
    path : path
        The destination given by the user.
    inputs, outputs : sequences of paths
        Files the command reads, and its other destinations (``None`` entries are skipped).
    what : str
        How the message names the destination (``"output"``, ``"--manifest"``, ...).
    table : bool
        Whether the destination is a table written by :func:`write_table`.

    Returns
    -------
    pathlib.Path
    """
    out = Path(path).expanduser()
    for kind, others in (("input", inputs), ("output", outputs)):
        for other in others:
            if other is not None and _same_file(out, Path(other).expanduser()):
                raise PUAuditError(
                    f"The {what} {out} is the same file as the {kind} {other}: writing it would "
                    "destroy that file. Give the " + what + " another name.")
    if out.is_dir():
        raise PUAuditError(f"The {what} {out} is a folder; give a file name inside it, e.g. "
                           f"{out / ('audited.csv' if table else 'manifest.json')}.")
    if table and SUPPORTED_SUFFIXES.get(out.suffix.lower()) is None:
        raise PUAuditError(f"Cannot tell the {what} format from '{out.name}': use a .csv, .tsv, "
                           ".parquet or .jsonl extension.")
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise PUAuditError(f"Cannot write the {what} {out}: {ancestor} is a file, not a folder.")
    if ancestor != out.parent:  # a typo in a folder name should not silently make new folders
        raise PUAuditError(f"Cannot write the {what} {out}: the folder {out.parent} does not "
                           "exist. Create it first (mkdir -p) or choose an existing folder.")
    if out.exists() and not os.access(out, os.W_OK):
        raise PUAuditError(f"Cannot write the {what} {out}: the file is read-only. Choose "
                           "another name or make it writable.")
    try:  # the only reliable test (permissions, read-only mounts, quotas): create a file there
        with tempfile.TemporaryFile(dir=ancestor, prefix=".puaudit-write-test."):
            pass
    except OSError as exc:
        raise PUAuditError(f"Cannot write the {what} {out}: {ancestor} is not writable "
                           f"({exc.strerror or exc}). Choose a folder you can write to.") from None
    return out


def write_table(df: pd.DataFrame, path: str | os.PathLike, *, fmt: str | None = None) -> Path:
    """Write ``df`` as CSV, TSV, Parquet or JSONL (``fmt`` or the extension), atomically
    (:func:`write_bytes_atomic`)."""
    path = Path(path)
    fmt = fmt or SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise PUAuditError(f"Cannot tell the output format from '{path.name}': use a .csv, "
                           ".parquet or .jsonl extension.")
    if path.is_dir():
        raise PUAuditError(f"{path} is a folder; give a file name inside it.")
    return write_bytes_atomic(path, table_to_bytes(df, fmt))


def table_to_bytes(df: pd.DataFrame, fmt: str) -> bytes:
    """Serialise a table to bytes, losslessly for what each format holds (CSV: as text;
    JSONL: floats to the last digit, infinities as ``1e400``; Parquet: with their types).
    Formulas are written as they are (:func:`puaudit.data.safety.spreadsheet_safe` makes a copy
    meant for spreadsheets)."""
    if fmt in ("csv", "tsv"):
        sep = "\t" if fmt == "tsv" else ","
        # The csv writer quotes "\n" but not a lone "\r" when the line ends in "\n"; an unquoted
        # "\r" would split the row on reading, so such tables get every cell quoted.
        quoting = csv.QUOTE_ALL if _has_cr(df) else csv.QUOTE_MINIMAL
        return df.to_csv(index=False, sep=sep, lineterminator="\n",
                         quoting=quoting).encode("utf-8")
    if fmt == "parquet":
        return _to_parquet(df)
    if fmt == "jsonl":
        return _to_jsonl(df)
    raise PUAuditError(f"Unknown output format '{fmt}': use csv, parquet or jsonl.")


def _map_type(values: list):
    """The Arrow map type of a column of ``[(key, value), ...]`` lists (how pandas shows a
    Parquet map column), or None when the column is not one."""
    import pyarrow as pa

    keys, items, seen = [], [], False
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if not isinstance(v, (list, np.ndarray)):
            return None
        for pair in v:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                return None
            keys.append(pair[0])
            items.append(pair[1])
        seen = True
    if not seen:
        return None
    try:
        return pa.map_(pa.array(keys).type, pa.array(items).type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _to_parquet(df: pd.DataFrame) -> bytes:
    import pyarrow as pa

    # what a read noted in attrs (limits, the split read) is no data: keep it out of the file
    df = df.copy(deep=False)
    df.attrs = {}
    buf = io.BytesIO()
    try:
        df.to_parquet(buf, index=False)
        return buf.getvalue()
    except Exception as exc:  # pyarrow: ArrowInvalid / ArrowTypeError / NotImplemented
        first = exc
    # Find the column pyarrow refuses, and either give it its type or say what is wrong with it.
    fields = []
    for name, col in df.items():
        try:
            fields.append(pa.Schema.from_pandas(df[[name]], preserve_index=False).field(0))
            continue
        except Exception:  # noqa: BLE001 - any refusal: look closer below
            pass
        values = col.tolist()
        mtype = _map_type(values)
        if mtype is not None:  # a Parquet map column, read back as lists of (key, value)
            fields.append(pa.field(str(name), mtype))
            continue
        big = next((i for i, v in enumerate(values) if is_int(v) and not
                    (INT64_MIN <= v <= 2**64 - 1)), None)
        if big is not None:
            raise PUAuditError(
                f"Cannot write Parquet: column '{name}', row {big + 1} holds the integer "
                f"{str(values[big])[:40]}, beyond the 64-bit range Parquet can store. Export as "
                "JSONL or CSV instead (both keep it exactly).", column=str(name), row=big + 1)
        raise PUAuditError(
            f"Cannot write Parquet: column '{name}' mixes types (e.g. numbers and text) "
            f"({type(first).__name__}: {str(first)[:160]}). Export as JSONL or CSV instead.",
            column=str(name))
    try:
        schema = pa.schema(fields)
        table = pa.Table.from_pandas(df, schema=schema, preserve_index=False)
        buf = io.BytesIO()
        import pyarrow.parquet as pq

        pq.write_table(table, buf)
    except Exception as exc:
        raise PUAuditError(f"Cannot write Parquet ({type(exc).__name__}: {str(exc)[:200]}). "
                           "Export as JSONL or CSV instead.") from None
    return buf.getvalue()


def _has_cr(df: pd.DataFrame) -> bool:
    if any("\r" in str(c) for c in df.columns):
        return True
    for _, col in df.items():
        if pd.api.types.is_string_dtype(col.dtype) and col.dtype != object:
            if col.str.contains("\r", regex=False, na=False).any():
                return True
        elif col.dtype == object and any(isinstance(v, str) and "\r" in v for v in col.tolist()):
            return True
    return False


def _json_column(col: pd.Series) -> list:
    values = col.tolist()
    if pd.api.types.is_string_dtype(col.dtype) and col.dtype != object:
        return [v if isinstance(v, str) else None for v in values]
    if pd.api.types.is_integer_dtype(col.dtype) and not col.hasnans:
        return values  # already Python ints
    if pd.api.types.is_float_dtype(col.dtype) and col.dtype.kind == "f":
        return [None if v != v else v for v in values]
    return [to_jsonable(v, infinity="keep") for v in values]


def _to_jsonl(df: pd.DataFrame) -> bytes:
    """One JSON object per row, floats to the last digit (pandas' to_json keeps 10), ±inf as
    ±1e400 (:mod:`puaudit.data.jsonsafe`), nesting of any depth."""
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise PUAuditError("Cannot write JSONL: column names repeat; rename them first.")
    cols = [_json_column(col) for _, col in df.items()]
    lines = [encode(dict(zip(names, row))) for row in zip(*cols)]
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
