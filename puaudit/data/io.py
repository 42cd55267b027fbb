"""Reading tables (CSV, TSV, Parquet, JSONL; gzipped or not; dataset folders) from paths,
bytes or uploads: one entry, :func:`read_table`.

CSV cells are read as text, exactly as written, so an export written back as CSV reproduces
every value; Parquet and JSONL keep their types (integers with gaps stay integers). Memory is
bounded by the caller's limits (:class:`~puaudit.data.limits.DecodedBudget`; rows and columns
checked while parsing; docs/hostile_inputs.md): text is parsed as a stream and packed into
Arrow string columns every few thousand rows.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import itertools
import json
import os
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Union

import numpy as np
import pandas as pd

from puaudit.data.cells import INT64_MAX, INT64_MIN, is_int
from puaudit.data.limits import (DEFAULT_HINT, MAX_COLUMNS, MAX_UNCOMPRESSED_BYTES, ROW_LIMIT,
                                 SUPPORTED_SUFFIXES, DecodedBudget, check_columns, check_header,
                                 check_rows, open_regular, size_text, too_big)
from puaudit.data.folders import read_folder, read_zip_folder
from puaudit.data.parquet import read_parquet
from puaudit.errors import PUAuditError

__all__ = ["read_table", "detect_format", "decode_text"]


Source = Union[str, os.PathLike, bytes, IO[bytes]]


def _gunzipped_size(data: bytes, budget: "DecodedBudget") -> int:
    """Bytes gzip ``data`` expands to (every member), counted without keeping them and refused
    as soon as the count passes ``budget`` (a bomb costs about 1 MiB of memory). Input goes in
    64 KiB at a time (zlib copies the unread input at the end of each member); damaged content
    stops the count, and the decompression that follows reports it."""
    view, pos, total = memoryview(data), 0, 0
    dec, pending = zlib.decompressobj(31), b""
    what = (f"expands to more than {budget.limit_text} when decompressed (the limit here; the "
            f"file itself is {size_text(len(data))}, refused before anything was kept)")
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
                hint: str = DEFAULT_HINT) -> tuple[bytes, str]:
    """The raw bytes of ``source`` and its name for messages; a plain file over ``max_bytes``
    is refused from its size, before it is read."""
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
                    raise too_big(str(path), f"is {size_text(size)}, over the "
                                  f"{size_text(max_bytes)} limit here", hint)
                fh.seek(0)
                return fh.read(), str(path)
        except OSError as exc:
            raise PUAuditError(f"Cannot read {path}: {exc.strerror or exc}. Check that the file "
                               "is readable.") from None
    # file-like (e.g. a Streamlit UploadedFile)
    name = getattr(source, "name", "<upload>")
    data = source.getvalue() if hasattr(source, "getvalue") else source.read()
    if isinstance(data, str):
        data = data.encode("utf-8")
    return bytes(data), str(name)


def detect_format(name: str, data: bytes) -> str:
    """The table format (``"csv"``, ``"tsv"``, ``"parquet"``, ``"jsonl"``), from the content
    first, then from the file name."""
    if data[:4] == b"PAR1":
        return "parquet"
    fmt = SUPPORTED_SUFFIXES.get(Path(name).suffix.lower())
    head = data[:2048].lstrip(b"\xef\xbb\xbf\xff\xfe\x00 \t\r\n")
    if fmt in (None, "csv") and head[:1] in (b"{", b"["):
        return "jsonl"
    return fmt or "csv"


def read_table(source: Source, *, fmt: str | None = None, name: str | None = None,
               max_bytes: int | None = MAX_UNCOMPRESSED_BYTES, max_rows: int | None = None,
               max_columns: int = MAX_COLUMNS, limit_hint: str = DEFAULT_HINT,
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
        size, a gzip's decompressed size, Parquet values as Arrow holds them, JSONL values once
        parsed, each counted before it is kept (docs/hostile_inputs.md).
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
    unpack_zip : callable(data, name, max_bytes) -> puaudit.data.folders.UnpackedZip, optional
        Where a zipped folder comes unpacked from (default: unpacked for this read alone, see
        :func:`puaudit.data.folders.read_zip_folder`); the dashboard passes a cache keyed by
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
    that expands records into rows (one per vote) counts them against the same limit.
    """
    df = _read_table(source, fmt=fmt, name=name, max_bytes=max_bytes, max_rows=max_rows,
                     max_columns=max_columns, limit_hint=limit_hint, size_hint=size_hint,
                     split=split, unpack_zip=unpack_zip)
    # none given, none kept (not even one a Parquet file's pandas metadata brought back)
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
        return read_folder(source, name=name, **folder_limits)
    data, default_name = _read_bytes(source, max_bytes=max_bytes, hint=size_hint)
    name = name or default_name
    budget = DecodedBudget(max_bytes, name, size_hint)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name, budget=budget)
    else:
        budget.check(len(data), f"is {size_text(len(data))}, over the {budget.limit_text} "
                     "limit here")
    # the text and its cells are the bytes just counted; Parquet and JSON values count anew
    budget = DecodedBudget(max_bytes, name, size_hint)
    if data[:4] == b"PK\x03\x04":  # a zipped dataset folder, or an Excel workbook (refused)
        return read_zip_folder(data, name, unpack=unpack_zip, **folder_limits)
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
        df = read_parquet(data, name, budget=budget, **limits)
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
    """A column of parsed JSON values as pandas would infer it, except that integers stay
    integers: ``Int64`` with missing values, exact Python ints beyond 64 bits."""
    nonnull = [v for v in values if v is not None]
    if nonnull and all(is_int(v) for v in nonnull):
        if all(INT64_MIN <= v <= INT64_MAX for v in nonnull):
            if len(nonnull) < len(values):
                return pd.array(values, dtype="Int64")
            return np.array(values, dtype=np.int64)
        return np.array(values, dtype=object)
    return pd.Series(values)


#: Most that :func:`_json_nbytes` counts per byte of JSON text (a value of one character
#: counts 8).
_JSON_COST_PER_BYTE = 8


def _json_nbytes(value) -> int:
    """Decoded size of a parsed JSON value: a string its length plus 8, any other value 8, a
    list or object 8 plus its items (keys as strings); walked with a stack (any depth)."""
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
                    check_columns(len(self.current) + 1, self.name, self.max_columns, self.hint,
                                  exact=False)
                # a column first seen now was missing from every earlier record
                self.chunks[key] = [[None] * self.n0] if self.n0 else []
                self.current[key] = [None] * (self.n - self.n0)
        for key, vals in self.current.items():
            vals.append(rec.get(key))
        self.n += 1
        if self.n - self.n0 >= _CHUNK_ROWS:
            check_rows(self.n, self.name, self.max_rows, self.hint)
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
        check_rows(self.n, self.name, self.max_rows, self.hint)
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
                max_columns: int = MAX_COLUMNS, hint: str = DEFAULT_HINT,
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
        check_rows(len(obj), name, max_rows, hint)
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


# --- text: bytes to a decoded stream -------------------------------------------------------

def _decodes(data: bytes, encoding: str, start: int = 0) -> bool:
    """Whether ``data[start:]`` is valid ``encoding``, checked in 4 MiB steps (no full copy)."""
    dec = codecs.getincrementaldecoder(encoding)()
    view = memoryview(data)
    step = 1 << 22
    try:
        for pos in range(start, len(data), step):
            dec.decode(view[pos:pos + step])
        dec.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _text_encoding(data: bytes, name: str) -> tuple[str, int]:
    """The encoding of text file bytes and how many leading bytes (a BOM) to skip.

    UTF-8 (with or without BOM), UTF-16 (BOM or NUL pattern), otherwise Windows-1252 / Latin-1.
    Binary content raises :class:`PUAuditError`. Only validates; never builds the whole text.
    """
    start = 0
    if data.startswith(b"\xef\xbb\xbf"):
        start = 3
        if _decodes(data, "utf-8", 3):
            return "utf-8", 3
        # a UTF-8 mark over Windows-1252 text: decode the rest like any other file
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        if _decodes(data, "utf-16"):
            return "utf-16", 0
        raise PUAuditError(f"{name}: starts with a UTF-16 mark but is not valid UTF-16. "
                           "Re-save it as UTF-8.")
    sample = data[start:start + 4096]
    if sample and sample.count(b"\x00") > len(sample) // 4:
        # UTF-16 without a BOM: every other byte of ASCII text is NUL
        even_nuls = sample[0::2].count(b"\x00")
        odd_nuls = sample[1::2].count(b"\x00")
        enc = "utf-16-le" if odd_nuls > even_nuls else "utf-16-be"
        if _decodes(data, enc, start):
            return enc, start
        raise PUAuditError(f"{name}: this looks like a binary file, not text. "
                           "Upload a CSV, Parquet or JSONL file.")
    if not _mostly_text(data[start:start + 65536]):
        raise PUAuditError(f"{name}: this looks like a binary file, not text (many control "
                           "bytes). Upload a CSV, Parquet or JSONL file.")
    if _decodes(data, "utf-8", start):
        return "utf-8", start
    if _decodes(data, "cp1252", start):
        return "cp1252", start
    return "latin-1", start


def decode_text(data: bytes, *, name: str = "<bytes>") -> str:
    """Decode file bytes to text, in the encoding :func:`_text_encoding` finds."""
    enc, start = _text_encoding(data, name)
    return codecs.decode(memoryview(data)[start:], enc)


def _text_stream(data: bytes, name: str, *, newline: str | None) -> io.TextIOWrapper:
    """A text stream over ``data`` (decoded lazily, 8 KiB at a time)."""
    enc, start = _text_encoding(data, name)
    raw = io.BytesIO(data)  # shares ``data``'s buffer until written to
    raw.seek(start)
    return io.TextIOWrapper(raw, encoding=enc, newline=newline)


def _mostly_text(data: bytes) -> bool:
    sample = data[:65536]
    if not sample:
        return True
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 13))
    return control / len(sample) < 0.01


# --- CSV ----------------------------------------------------------------------------------

# Python's csv module refuses cells over 128 KiB by default; a long answer or transcript is
# legitimate data, so the limit is raised to the largest value every platform accepts.
_CSV_FIELD_LIMIT = 2**31 - 1
# Rows parsed into Python lists before they are packed into Arrow columns: Python strings cost
# ~50 bytes each, Arrow strings their length plus 8, so packing often keeps short rows cheap.
_CHUNK_ROWS = 8192
# Text sampled to choose the CSV separator (and the number of lines looked at).
_SNIFF_CHARS = 1 << 20
_SNIFF_LINES = 50


def _lines(stream: IO[str]) -> Iterable[str]:
    """Lines of a text stream one at a time, each with its ending."""
    return iter(stream.readline, "")


def _sniff_separator(text: str) -> str:
    """The separator (comma, tab or semicolon) that splits the first lines consistently.

    A candidate is consistent when the header has more than one cell and each of the first
    :data:`_SNIFF_LINES` records as many (trailing empty cells allowed); the one giving the most
    columns wins, the comma on ties. When none is, the most frequent separator in the header
    line outside quotes wins.
    """
    whole = len(text) < _SNIFF_CHARS
    best, best_width = None, 1
    for sep in (",", "\t", ";"):
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
        records: list[list[str]] = []
        cut = not whole
        try:
            for rec in reader:
                if rec:
                    records.append(rec)
                if len(records) > _SNIFF_LINES:
                    break
        except csv.Error:  # e.g. the sample ends inside a quoted cell: judge what was read
            cut = True
        if cut and len(records) <= _SNIFF_LINES:
            records = records[:-1]  # the sample may end inside the last record
        if len(records) < 2:
            continue
        width = len(records[0])
        # as the reader does, extra cells are fine when empty (a trailing separator)
        fits = all(len(r) == width or (len(r) > width and not any(r[width:]))
                   for r in records[1:])
        if fits and width > best_width:
            best, best_width = sep, width
    if best is not None:
        return best
    counts = {",": 0, "\t": 0, ";": 0}
    quoted = False
    for ch in text[:65536]:
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            if ch in "\r\n":
                break
            if ch in counts:
                counts[ch] += 1
    top = max(counts, key=counts.get)
    return top if counts[top] > counts[","] else ","


def _pack_strings(values: Sequence):
    import pyarrow as pa

    return pa.array(values, type=pa.large_string())


def _string_column(chunks: list) -> pd.Series:
    """A pandas ``str`` column over Arrow chunks, without copying them."""
    import pyarrow as pa

    if not chunks:
        return pd.Series(pd.array([], dtype="str"))
    return pa.chunked_array(chunks, type=pa.large_string()).to_pandas()


def _read_csv(data: bytes, name: str, *, sep: str | None, max_rows: int | None = None,
              max_columns: int = MAX_COLUMNS, hint: str = DEFAULT_HINT) -> pd.DataFrame:
    """Parse CSV bytes with the csv module: every cell is the string written, nothing inferred
    (pandas' parser makes the first column the index when rows have one cell more than the
    header). Every :data:`_CHUNK_ROWS` rows are packed into Arrow string arrays."""
    reader = _csv_reader(data, name, sep=sep, max_columns=max_columns, hint=hint)
    rows: list[list[str]] = []
    packed: list[list] = []
    n_rows = 0

    def pack() -> None:
        columns = list(zip(*rows))
        for store, col in zip(packed, columns):
            store.append(_pack_strings(col))
        rows.clear()

    try:
        header, first_row = _csv_header(reader, name, max_columns=max_columns, hint=hint)
        width = len(header)
        packed = [[] for _ in range(width)]
        for rec in itertools.chain([first_row], reader):
            if not rec:  # a blank line
                continue
            if len(rec) != width:
                _fit_width(rec, width, name, row=n_rows + 1, line=reader.line_num)
            rows.append(rec)
            n_rows += 1
            if len(rows) >= _CHUNK_ROWS:
                check_rows(n_rows, name, max_rows, hint)
                pack()
    except csv.Error as exc:
        raise PUAuditError(
            f"{name}: malformed CSV at line {reader.line_num}, row {n_rows + 1} ({exc}). Check the "
            "quoting there: a cell containing the separator, a quote or a newline must be enclosed "
            "in double quotes, with any quote inside it doubled (\"\").", row=n_rows + 1) from None
    except UnicodeDecodeError as exc:  # validated up front; kept for a stream that changes
        raise PUAuditError(f"{name}: undecodable bytes ({exc}). Re-save the file as "
                           "UTF-8.") from None
    check_rows(n_rows, name, max_rows, hint)
    if rows:
        pack()
    return pd.DataFrame({h: _string_column(store) for h, store in zip(header, packed)},
                        columns=header)


def _csv_reader(data: bytes, name: str, *, sep: str | None, max_columns: int, hint: str):
    """A strict ``csv.reader`` over the decoded stream (separator sniffed when ``sep`` is None),
    after a header line without quotes is checked for its number of columns."""
    if sep is None:
        sep = _sniff_separator(_text_stream(data, name, newline="").read(_SNIFF_CHARS))
    stream = _text_stream(data, name, newline="")
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    # a header line without quotes has (separators + 1) columns: refused from that count before
    # the csv module builds a string for each name; strict: an unbalanced quote raises
    first = stream.readline()
    if '"' not in first:
        check_columns(first.count(sep) + 1, name, max_columns, hint)
    return csv.reader(itertools.chain([first], _lines(stream)), delimiter=sep, strict=True)


def _csv_header(reader, name: str, *, max_columns: int, hint: str) -> tuple[list[str], list[str]]:
    """The header (BOM removed, every name present and distinct) and the first data row."""
    header = next(reader, None)
    if header is None:
        raise PUAuditError(f"{name}: the file is empty.")
    # checked before the names are looked at: a single line may hold millions of them
    check_columns(len(header), name, max_columns, hint)
    first_row = next((rec for rec in reader if rec), None)  # skipping blank lines
    if first_row is None:
        # before anything else is built from a header that may hold many names
        raise PUAuditError(f"{name}: has a header but no data rows. Add at least one "
                           "comparison per row below the header.")
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    blank = [i + 1 for i, h in enumerate(header) if h.strip() == ""]
    if blank:
        shown = blank if len(blank) <= 10 else blank[:10] + ["..."]
        raise PUAuditError(
            f"{name}: header cell(s) at column position {shown} are empty. Give every column "
            "a name (an unnamed first column is usually a saved row index: re-save without it).")
    check_header(header, name)
    return header, first_row


def _fit_width(rec: list[str], width: int, name: str, *, row: int, line: int) -> None:
    """Pad a short row with empty cells; drop the empty extra cells of a long one, or refuse it."""
    if len(rec) < width:
        rec.extend([""] * (width - len(rec)))
    elif len(rec) > width:
        if any(c != "" for c in rec[width:]):
            raise PUAuditError(
                f"{name}: row {row} (line {line}) has {len(rec)} cells "
                f"but the header names {width} columns. Put double quotes around any cell "
                "that contains the separator, or add a header name for the extra column.",
                row=row)
        del rec[width:]
