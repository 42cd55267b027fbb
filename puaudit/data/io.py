"""Reading and writing tables: CSV, Parquet and JSONL, from paths, bytes or uploaded files.

CSV cells are read as text, exactly as written (no NaN guessing, no number parsing), so an export
written back as CSV reproduces every input value. Parquet and JSONL keep their own types; integer
columns with missing values stay integers (pandas ``Int64``, or exact Python ints beyond 64 bits).

Memory is bounded by what the caller allows: ``max_bytes`` caps the decoded size
(:class:`DecodedBudget`: a gzip's decompressed bytes are counted before any is kept, Parquet
values from the file's footer before any page is read and again batch by batch, JSON values as
they are parsed, so a small "bomb" stops early and cheaply), ``max_rows`` and ``max_columns`` are
checked while parsing, before any large table is built. Text is decoded and parsed as a stream
and cells are packed into Arrow string columns every few thousand rows, so a file of short rows
costs a few times its size, not tens of times.

Writing goes to a temporary file in the destination folder that is then renamed over the
destination (:func:`write_bytes_atomic`): a crash never leaves a half-written file, and
:func:`check_output_path` refuses a destination that is an input, a folder or unwritable before
any work starts.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Union

import numpy as np
import pandas as pd

from puaudit.data.csv_read import _CHUNK_ROWS, _lines, _pack_strings, _read_csv, _string_column
from puaudit.data.decoding import _text_stream
from puaudit.data.read_limits import (_DEFAULT_HINT, _INT64_MAX, _INT64_MIN, MAX_COLUMNS,
                                      MAX_UNCOMPRESSED_BYTES, SUPPORTED_SUFFIXES, _check_columns,
                                      _check_rows, DecodedBudget, _is_int, _mb, _too_big,
                                      open_regular)
from puaudit.data.read_limits import ROW_LIMIT
from puaudit.data.parquet_read import _read_parquet
from puaudit.errors import PUAuditError

# The readers, writers and limits live in modules named for what they hold; every name
# importable from here before stays importable from here.
__all__ = ["read_table", "detect_format"]

Source = Union[str, os.PathLike, bytes, IO[bytes]]


def _gunzipped_size(data: bytes, budget: "DecodedBudget") -> int:
    """Bytes gzip ``data`` expands to (every member), counted without keeping them; stops and
    refuses as soon as the count passes ``budget``, so a bomb costs about 1 MiB of memory (not
    the limit) and a few seconds of CPU per GB.

    Input goes in 64 KiB at a time, so that a file of many tiny members costs no more than one
    of a single member (zlib copies the unread input at the end of each). Damaged content stops
    the count; the decompression that follows reports it.
    """
    view, pos, total = memoryview(data), 0, 0
    dec, pending = zlib.decompressobj(31), b""
    what = (f"expands to more than {budget.limit_text} when decompressed (the limit here; the "
            f"file itself is {_mb(len(data))}, refused before anything was kept)")
    try:
        while True:
            if not pending:
                if pos >= len(data):
                    return total
                pending = view[pos:pos + (1 << 16)]
                pos += len(pending)
            out = dec.decompress(pending, 1 << 20)
            total += len(out)
            budget.check(total, what)
            if dec.eof:  # next member, right after this one's trailer
                pos -= len(dec.unused_data)
                dec, pending = zlib.decompressobj(31), b""
            else:
                pending = dec.unconsumed_tail
    except zlib.error:
        return total


def _gunzip(data: bytes, name: str, *, budget: "DecodedBudget") -> bytes:
    """Decompress gzip ``data``, refused before anything is kept if it expands past ``budget``
    (:func:`_gunzipped_size`); the decompressed bytes are then counted as spent."""
    try:
        if budget.limit is not None:
            _gunzipped_size(data, budget)
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            while chunk := gz.read(1 << 20):
                out.write(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise PUAuditError(f"{name}: looks gzip-compressed but could not be decompressed ({exc}). "
                           "Upload the uncompressed file.") from None
    budget.spend(out.tell(), lambda: f"expands to more than {budget.limit_text} when "
                 "decompressed (the limit here)")
    return out.getvalue()  # CPython hands over the buffer without copying it


def _read_bytes(source: Source, *, max_bytes: int | None = MAX_UNCOMPRESSED_BYTES,
                hint: str = _DEFAULT_HINT) -> tuple[bytes, str]:
    """Return the raw bytes of ``source`` and a display name for messages.

    A plain (uncompressed) file larger than ``max_bytes`` is refused from its size alone, before
    it is read.
    """
    if isinstance(source, (bytes, bytearray)):
        return bytes(source), "<bytes>"
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise PUAuditError(f"File not found: {path}. Check the path and try again.")
        if path.is_dir():
            raise PUAuditError(f"{path} is a folder; give the path of a CSV, Parquet or JSONL file.")
        try:
            with open_regular(path, str(path)) as fh:
                magic = fh.read(2)
                size = os.fstat(fh.fileno()).st_size
                if magic != b"\x1f\x8b" and max_bytes is not None and size > max_bytes:
                    raise _too_big(str(path), f"is {_mb(size)}, over the {_mb(max_bytes)} limit "
                                   "here", hint)
                fh.seek(0)
                return fh.read(), str(path)
        except OSError as exc:
            raise PUAuditError(f"Cannot read {path}: {exc.strerror or exc}. Check that the file "
                               "is readable.") from None
    # file-like (e.g. a Streamlit UploadedFile)
    name = getattr(source, "name", "<upload>")
    if hasattr(source, "getvalue"):
        data = source.getvalue()
    else:
        data = source.read()
    if isinstance(data, str):
        data = data.encode("utf-8")
    return bytes(data), str(name)


def detect_format(name: str, data: bytes) -> str:
    """Guess the table format from the content first, then from the file name.

    Returns one of ``"csv"``, ``"tsv"``, ``"parquet"``, ``"jsonl"``.
    """
    if data[:4] == b"PAR1":
        return "parquet"
    suffix = Path(name).suffix.lower()
    fmt = SUPPORTED_SUFFIXES.get(suffix)
    head = data[:2048].lstrip(b"\xef\xbb\xbf\xff\xfe\x00 \t\r\n")
    if fmt is None or fmt in ("csv", "jsonl"):
        if head[:1] in (b"{", b"["):
            return "jsonl"
        if fmt == "jsonl":
            return "jsonl"
    if fmt is None:
        return "csv"
    return fmt


def read_table(source: Source, *, fmt: str | None = None, name: str | None = None,
               max_bytes: int | None = MAX_UNCOMPRESSED_BYTES, max_rows: int | None = None,
               max_columns: int = MAX_COLUMNS, limit_hint: str = _DEFAULT_HINT,
               size_hint: str | None = None, split: str | None = None,
               unpack_zip: Callable | None = None) -> pd.DataFrame:
    """Read a CSV, TSV, Parquet or JSONL table, or a dataset folder.

    Parameters
    ----------
    source : path, bytes or binary file-like
        Where the table is. Gzip-compressed content is recognised whatever the name says. A
        folder (a Hugging Face ``save_to_disk`` folder, Parquet shards), or a zip archive of
        one, is read as one table (:func:`puaudit.data.folders.read_folder`), the limits
        counting over all its files; ``attrs["read_note"]`` then says what was read,
        ``attrs["splits"]`` the folder's split names and ``attrs["split"]`` the one read.
    fmt : {"csv", "tsv", "parquet", "jsonl"}, optional
        Force a format instead of detecting it.
    name : str, optional
        Name used in messages (defaults to the path or upload name).
    max_bytes : int or None
        Largest decoded size accepted (:class:`DecodedBudget`; None: no limit): a plain file's
        size, a gzip's decompressed size (counted before anything is kept), Parquet values as
        Arrow holds them (refused from the footer before any page is read when the footer says
        so, else at the first batch past it), JSONL values once parsed.
    max_rows : int, optional
        Largest number of data rows accepted, checked while parsing.
    max_columns : int
        Largest number of columns accepted, checked on the header before any row is read.
    limit_hint : str
        What the user can do when a limit is passed (appended to that message).
    size_hint : str, optional
        What the user can do when ``max_bytes`` is passed (default ``limit_hint``).
    split : str, optional
        The split of a dataset folder to read (default: the only one, else ``train``, else
        ``test``); ignored for a table file.
    unpack_zip : callable(data, name, max_bytes) -> puaudit.data.zip_folder.UnpackedZip, optional
        Where a zipped folder comes unpacked from (default: unpacked for this read alone, see
        :func:`puaudit.data.zip_folder.read_zip_folder`); the dashboard passes a cache keyed by
        the upload, so that reading another split of it does not unpack it again.

    Returns
    -------
    pandas.DataFrame
        CSV cells are strings exactly as in the file (empty cells are ``""``).

    Raises
    ------
    PUAuditError
        Empty file, header only, undecodable bytes, duplicate columns, malformed content, or a
        limit passed.

    Notes
    -----
    With ``max_rows``, ``attrs["row_limit"]`` holds ``{"max_rows", "hint"}``, so that a reader
    that expands records into rows (a Label Studio task into one row per vote) counts its rows
    against the limit the file was read with.
    """
    df = _read_table(source, fmt=fmt, name=name, max_bytes=max_bytes, max_rows=max_rows,
                     max_columns=max_columns, limit_hint=limit_hint, size_hint=size_hint,
                     split=split, unpack_zip=unpack_zip)
    # a tool's export expands one record into many rows (one per vote): the same limit counts
    # those rows (puaudit.data.formats.tool_votes.check_expanded_rows); none given, none kept
    # (not even one a Parquet file's pandas metadata brought back)
    df.attrs.pop(ROW_LIMIT, None)
    if max_rows is not None:
        df.attrs[ROW_LIMIT] = {"max_rows": max_rows, "hint": limit_hint}
    return df


def _read_table(source: Source, *, fmt, name, max_bytes, max_rows, max_columns, limit_hint,
                size_hint, split, unpack_zip) -> pd.DataFrame:
    size_hint = size_hint or limit_hint
    folder_limits = {"max_bytes": max_bytes, "max_rows": max_rows, "max_columns": max_columns,
                     "limit_hint": limit_hint, "size_hint": size_hint, "split": split}
    if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
        from puaudit.data.folders import read_folder

        return read_folder(source, name=name, read_file=read_table, **folder_limits)
    data, default_name = _read_bytes(source, max_bytes=max_bytes, hint=size_hint)
    name = name or default_name
    budget = DecodedBudget(max_bytes, name, size_hint)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name, budget=budget)
    else:
        budget.check(len(data), f"is {_mb(len(data))}, over the {budget.limit_text} limit here")
    # the text and its cells are the bytes just counted; Parquet and JSON values count anew
    budget = DecodedBudget(max_bytes, name, size_hint)
    if data[:4] == b"PK\x03\x04":  # a zipped dataset folder, or an Excel workbook (refused)
        from puaudit.data.zip_folder import read_zip_folder

        return read_zip_folder(data, name, read_file=read_table, unpack=unpack_zip,
                               **folder_limits)
    if not data.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise PUAuditError(f"{name}: the file is empty. Upload a table with a header row and at "
                           "least one comparison per row.")
    return _parse(data, name, fmt, budget=budget,
                  limits={"max_rows": max_rows, "max_columns": max_columns, "hint": limit_hint})


def _parse(data: bytes, name: str, fmt: str | None, *, budget: DecodedBudget,
           limits: dict) -> pd.DataFrame:
    """The table in the (decompressed) ``data``, in ``fmt`` or the format detected."""
    explicit = fmt is not None
    if explicit and fmt not in ("csv", "tsv", "parquet", "jsonl"):
        raise PUAuditError(f"Unknown table format '{fmt}': use csv, tsv, parquet or jsonl.")
    fmt = fmt or detect_format(name, data)
    if fmt == "parquet":
        df = _read_parquet(data, name, budget=budget, **limits)
    elif fmt == "jsonl":
        df = _read_jsonl(data, name, budget=budget, **limits)
    else:
        # an explicit fmt="csv" means commas; a detected one may be a semicolon or tab export
        sep = "\t" if fmt == "tsv" else ("," if explicit else None)
        df = _read_csv(data, name, sep=sep, **limits)
    if len(df.columns) == 0:
        raise PUAuditError(f"{name}: no columns found. The first line must be a header row.")
    if len(df) == 0:
        raise PUAuditError(f"{name}: has a header but no data rows. Add at least one comparison "
                           "per row below the header.")
    return df


def _json_values_column(values: list) -> pd.Series | np.ndarray | pd.api.extensions.ExtensionArray:
    """A column from parsed JSON values, as pandas would infer it, except that integers stay
    integers: with missing values they become ``Int64`` (not float64, which rounds beyond 2**53),
    and beyond the 64-bit range they stay exact Python ints (object)."""
    nonnull = [v for v in values if v is not None]
    if nonnull and all(_is_int(v) for v in nonnull):
        if all(_INT64_MIN <= v <= _INT64_MAX for v in nonnull):
            if len(nonnull) < len(values):
                return pd.array(values, dtype="Int64")
            return np.array(values, dtype=np.int64)
        return np.array(values, dtype=object)
    return pd.Series(values)


#: Most that :func:`_json_nbytes` counts per byte of JSON text: every value takes at least one
#: character and counts 8 (a string of n characters takes n + 2 and counts n + 8), so a text of
#: b bytes counts at most 8 b.
_JSON_COST_PER_BYTE = 8


def _json_nbytes(value) -> int:
    """Decoded size of a parsed JSON value as :class:`DecodedBudget` counts it: a string its
    length plus 8, any other value 8, a list or object 8 plus its items (keys counted as
    strings); walked with an explicit stack, so any nesting depth is measured."""
    if isinstance(value, str):
        return len(value) + 8
    if not isinstance(value, (list, dict)):
        return 8
    total, stack = 0, [value]
    while stack:
        x = stack.pop()
        total += 8
        items = x.values() if isinstance(x, dict) else x
        if isinstance(x, dict):
            total += sum(len(k) + 8 for k in x)
        for v in items:
            if isinstance(v, str):
                total += len(v) + 8
            elif isinstance(v, (list, dict)):
                stack.append(v)
            else:
                total += 8
    return total


_SURROGATE = re.compile("[\ud800-\udfff]")


class _JsonColumns:
    """Builds a table column by column from JSON records, packing string chunks into Arrow."""

    def __init__(self, name: str, *, max_rows: int | None, max_columns: int, hint: str,
                 budget: DecodedBudget | None = None):
        self.name, self.max_rows, self.max_columns, self.hint = name, max_rows, max_columns, hint
        self.budget = budget or DecodedBudget(None, name, hint)
        self.chunks: dict[str, list] = {}   # column -> finished chunks (Arrow arrays or lists)
        self.current: dict[str, list] = {}  # column -> values of the open chunk
        self.n = 0   # records added
        self.n0 = 0  # records in finished chunks

    def add(self, rec: dict, row: int) -> None:
        if self.budget.limit is not None:
            self.budget.spend(_json_nbytes(rec), lambda: f"holds more than "
                              f"{self.budget.limit_text} of values once parsed (the limit here; "
                              f"passed at record {row:,})")
        for key in rec:
            if key not in self.current:
                if len(self.current) >= self.max_columns:  # stop before storing any more
                    _check_columns(len(self.current) + 1, self.name, self.max_columns, self.hint,
                                   exact=False)
                # a column first seen now was missing from every earlier record
                self.chunks[key] = [[None] * self.n0] if self.n0 else []
                self.current[key] = [None] * (self.n - self.n0)
        for key, vals in self.current.items():
            vals.append(rec.get(key))
        self.n += 1
        if self.n - self.n0 >= _CHUNK_ROWS:
            _check_rows(self.n, self.name, self.max_rows, self.hint)
            self._close_chunk()

    def _close_chunk(self) -> None:
        for key, vals in self.current.items():
            if any(isinstance(v, str) for v in vals) and all(v is None or isinstance(v, str)
                                                             for v in vals):
                try:
                    self.chunks[key].append(_pack_strings(vals))
                except UnicodeEncodeError:  # "\ud800" in the JSON: no table column holds it
                    i = next(i for i, v in enumerate(vals) if isinstance(v, str)
                             and not v.isascii() and _SURROGATE.search(v))
                    raise PUAuditError(
                        f"{self.name}: record {self.n0 + i + 1:,}, field '{key}': the text holds "
                        "a lone surrogate (a broken \\ud800-\\udfff escape), which is not "
                        "valid Unicode. Fix the file's encoding or the program that wrote it.",
                        column=str(key), row=self.n0 + i + 1) from None
            else:
                self.chunks[key].append(vals)
            self.current[key] = []
        self.n0 = self.n

    def frame(self) -> pd.DataFrame:
        _check_rows(self.n, self.name, self.max_rows, self.hint)
        self._close_chunk()
        import pyarrow as pa

        out = {}
        for key, chunks in self.chunks.items():
            arrow = [c for c in chunks if isinstance(c, pa.Array)]
            lists = [c for c in chunks if not isinstance(c, pa.Array)]
            if arrow and all(v is None for c in lists for v in c):
                # text with some missing values: stays a str column, as pandas would infer
                out[key] = _string_column([c if isinstance(c, pa.Array) else
                                           pa.nulls(len(c), pa.large_string()) for c in chunks])
            else:
                values = [v for c in chunks
                          for v in (c.to_pylist() if isinstance(c, pa.Array) else c)]
                out[key] = _json_values_column(values)
        try:
            df = pd.DataFrame(out, columns=list(out))
        except (ValueError, TypeError, OverflowError) as exc:
            raise PUAuditError(f"{self.name}: the records cannot form a table ({exc}).") from None
        df.columns = [str(c) for c in df.columns]
        return df


def _read_jsonl(data: bytes, name: str, *, max_rows: int | None = None,
                max_columns: int = MAX_COLUMNS, hint: str = _DEFAULT_HINT,
                budget: DecodedBudget | None = None) -> pd.DataFrame:
    # split on "\n" only: str.splitlines() also breaks at U+2028, U+0085, form feeds...,
    # which JSON strings may hold unescaped
    head = _text_stream(data, name, newline="\n").read(4096).lstrip()
    stream = _text_stream(data, name, newline="\n")
    if budget is not None and budget.limit is not None \
            and budget.used + _JSON_COST_PER_BYTE * len(data) <= budget.limit:
        # the values cannot pass the limit: nothing to count (walking them costs a third of
        # the read of a large file)
        budget = None
    cols = _JsonColumns(name, max_rows=max_rows, max_columns=max_columns, hint=hint,
                        budget=budget)
    if head.startswith("["):
        try:
            obj = json.loads(stream.read())
        except json.JSONDecodeError as exc:
            raise PUAuditError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno}).") from None
        except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit number, deep nesting
            raise PUAuditError(f"{name}: JSON that cannot be read safely ({type(exc).__name__}: "
                               f"{str(exc)[:120]}).") from None
        if not isinstance(obj, list):
            raise PUAuditError(f"{name}: expected a list of objects.")
        _check_rows(len(obj), name, max_rows, hint)
        for i, rec in enumerate(obj):
            if not isinstance(rec, dict):
                raise PUAuditError(f"{name}: item {i + 1} is not an object; each item must be one "
                                   "comparison with named fields.", row=i + 1)
            cols.add(rec, i + 1)
        del obj
    else:
        for lineno, line in enumerate(_lines(stream), start=1):
            line = line.removesuffix("\n").removesuffix("\r")
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PUAuditError(f"{name}: line {lineno} is not valid JSON ({exc.msg}). Each line "
                                   "must be one JSON object.", row=lineno) from None
            except (ValueError, RecursionError) as exc:
                raise PUAuditError(f"{name}: line {lineno} cannot be read safely "
                                   f"({type(exc).__name__}: {str(exc)[:120]}).", row=lineno) from None
            if not isinstance(rec, dict):
                raise PUAuditError(f"{name}: line {lineno} is not a JSON object.", row=lineno)
            cols.add(rec, lineno)
    if cols.n == 0:
        raise PUAuditError(f"{name}: no records found.")
    return cols.frame()
