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

import codecs
import csv
import gzip
import io
import itertools
import json
import math
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Union

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError

__all__ = ["read_table", "write_table", "table_to_bytes", "decode_text", "detect_format",
           "check_output_path", "write_bytes_atomic", "read_embeddings_npz", "DecodedBudget",
           "parquet_decoded_sizes", "parquet_check_budget", "parquet_text_leaves",
           "parquet_batches", "decoded_nbytes",
           "SUPPORTED_SUFFIXES", "MAX_UNCOMPRESSED_BYTES", "MAX_COLUMNS", "MAX_EMBEDDING_DIM"]

Source = Union[str, os.PathLike, bytes, IO[bytes]]

SUPPORTED_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}


#: A file may expand to at most this many bytes (a small "zip bomb" must not exhaust memory).
MAX_UNCOMPRESSED_BYTES = 4 * 1024**3
#: Columns a table may have. 20,000 columns load in a few seconds; a single 50 MB header line of
#: millions of names would otherwise build a DataFrame of millions of columns (minutes, GBs).
MAX_COLUMNS = 30_000
#: Largest embedding width accepted from an ``.npz`` file (the biggest encoders use 8,192).
MAX_EMBEDDING_DIM = 65_536

_DEFAULT_HINT = "Split the table into smaller files."
# Python's csv module refuses cells over 128 KiB by default; a long answer or transcript is
# legitimate data, so the limit is raised to the largest value every platform accepts.
_CSV_FIELD_LIMIT = 2**31 - 1
# Rows parsed into Python lists before they are packed into Arrow columns: Python strings cost
# ~50 bytes each, Arrow strings their length plus 8, so packing often keeps short rows cheap.
_CHUNK_ROWS = 8192
# Text sampled to choose the CSV separator (and the number of lines looked at).
_SNIFF_CHARS = 1 << 20
_SNIFF_LINES = 50


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB" if n >= 2**20 else f"{n:,} bytes"


def _too_big(name: str, what: str, hint: str) -> PUAuditError:
    return PUAuditError(f"{name}: {what}. {hint}".rstrip())


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
            with open(path, "rb") as fh:
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
    """Decode file bytes to text: UTF-8 (with or without BOM), UTF-16 (BOM or NUL pattern),
    otherwise Windows-1252 / Latin-1. Binary content raises :class:`PUAuditError`.
    """
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


def _check_header(header: list[str], name: str) -> None:
    seen: dict[str, int] = {}
    for i, col in enumerate(header, start=1):
        if col in seen:
            raise PUAuditError(
                f"{name}: column '{col}' appears twice (columns {seen[col]} and {i}). "
                "Rename or delete one of them and upload again.", column=col)
        seen[col] = i


def _check_columns(n: int, name: str, max_columns: int, hint: str, *, exact: bool = True) -> None:
    if n > max_columns:
        count = f"{n:,}" if exact else f"more than {max_columns:,}"
        raise _too_big(name, f"has {count} columns, over the limit of {max_columns:,} here (a "
                       "comparison table needs a handful). Keep only the columns you need", hint)


def _check_rows(n: int, name: str, max_rows: int | None, hint: str) -> None:
    if max_rows is not None and n > max_rows:
        raise _too_big(name, f"has more than {max_rows:,} data rows, the limit here", hint)


class DecodedBudget:
    """The bytes one read may decode, shared by every reader so that one limit gives one message.

    What counts is what the data take once decompressed and decoded: the bytes a gzip expands
    to, a Parquet file's values as Arrow holds them (dictionaries and run-lengths expanded, which
    a file's page sizes do not show), a JSON record's values (strings their length plus 8, every
    other value 8). Readers call :meth:`check` on a size known before reading (file metadata)
    and :meth:`spend` on what they decoded, so a file is refused before its data are read when
    its metadata already say it is too big, and at the first batch past the limit otherwise.

    Parameters
    ----------
    limit : int or None
        Bytes allowed; None for no limit.
    name : str
        The file, as messages name it.
    hint : str
        How to raise the limit (the end of the message).
    """

    def __init__(self, limit: int | None, name: str, hint: str):
        self.limit, self.name, self.hint = limit, name, hint
        self.used = 0

    @property
    def limit_text(self) -> str:
        return _mb(self.limit or 0)

    def refuse(self, what: str) -> PUAuditError:
        """The message for ``what`` (which names the limit, :attr:`limit_text`), then the hint."""
        return _too_big(self.name, what, self.hint)

    def check(self, n: int, what: str) -> None:
        """Refuse now if ``n`` more bytes would pass the limit (``what`` says whose they are)."""
        if self.limit is not None and self.used + n > self.limit:
            raise self.refuse(what)

    def spend(self, n: int, what: str | Callable[[], str]) -> None:
        """Count ``n`` decoded bytes, refusing once the total passes the limit (``what``, or
        what it returns when it is a function, says where)."""
        self.used += n
        if self.limit is not None and self.used > self.limit:
            raise self.refuse(what() if callable(what) else what)


# Bytes Arrow takes per stored value, by Parquet physical type (BYTE_ARRAY: its offset only).
_PARQUET_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 8, "FLOAT": 4, "DOUBLE": 8,
                  "BYTE_ARRAY": 4}


def parquet_decoded_sizes(meta, columns: Iterable[str] | None = None) -> list[dict[str, int]]:
    """Decoded size of each top-level column in each row group, from the footer alone.

    A column chunk decodes to at least ``num_values * w`` bytes, ``w`` the Arrow width of its
    physical type (8 for INT64 and DOUBLE, 16 for decimals, the declared length for fixed-size
    binary), however few bytes its run-length or dictionary-encoded pages take; its
    ``total_uncompressed_size`` (data and dictionary pages) bounds what plain pages decode to.
    The estimate of a chunk is the larger of the two; only dictionary-encoded text can decode
    to more (see :func:`decoded_nbytes`, which measures it while it is still a dictionary).

    Parameters
    ----------
    meta : pyarrow.parquet.FileMetaData
    columns : iterable of str, optional
        Top-level columns to count (default all).

    Returns
    -------
    list of dict
        One ``{column: bytes}`` per row group.
    """
    wanted = None if columns is None else set(columns)
    widths = []
    for c in range(meta.num_columns):
        col = meta.schema.column(c)
        if "Decimal" in str(col.logical_type):
            width = 16
        elif col.physical_type == "FIXED_LEN_BYTE_ARRAY":
            width = max(int(col.length or 0), 1)
        else:
            width = _PARQUET_WIDTH.get(col.physical_type, 8)
        widths.append(width)
    out = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        sizes: dict[str, int] = {}
        for c in range(rg.num_columns):
            chunk = rg.column(c)
            top = chunk.path_in_schema.split(".")[0]
            if wanted is None or top in wanted:
                est = max(chunk.total_uncompressed_size, chunk.num_values * widths[c])
                sizes[top] = sizes.get(top, 0) + est
        out.append(sizes)
    return out


def parquet_check_budget(meta, budget: DecodedBudget, *, file_bytes: int,
                         columns: Iterable[str] | None = None) -> list[int]:
    """Refuse, before any page is read, a Parquet file whose footer says it decodes past
    ``budget``; returns the estimated decoded bytes of each row group
    (:func:`parquet_decoded_sizes`)."""
    per_group = parquet_decoded_sizes(meta, columns)
    total = sum(sum(g.values()) for g in per_group)
    if budget.limit is not None and budget.used + total > budget.limit:
        by_column: dict[str, int] = {}
        for g in per_group:
            for col, n in g.items():
                by_column[col] = by_column.get(col, 0) + n
        col, n = max(by_column.items(), key=lambda kv: kv[1])
        raise budget.refuse(f"holds more than {budget.limit_text} of data once decoded (the "
                            f"limit here): its {meta.num_rows:,} rows decode to about "
                            f"{_mb(total)} from {_mb(file_bytes)} on disk, column '{col}' alone "
                            f"{_mb(n)}; refused before reading")
    return [sum(g.values()) for g in per_group]


def parquet_text_leaves(meta, columns: Iterable[str] | None = None) -> list[str]:
    """Paths of the text (BYTE_ARRAY) leaf columns, nested ones included: read as dictionaries
    (``read_dictionary``), a value repeated a million times is measured before it is expanded."""
    wanted = None if columns is None else set(columns)
    out = []
    for c in range(meta.num_columns):
        col = meta.schema.column(c)
        if col.physical_type == "BYTE_ARRAY" and (wanted is None
                                                  or col.path.split(".")[0] in wanted):
            out.append(col.path)
    return out


def _has_dictionary(t) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return True
    return any(_has_dictionary(t.field(i).type) for i in range(t.num_fields))


def decoded_nbytes(array) -> int:
    """Bytes ``array`` takes once every dictionary in it is expanded, computed without expanding.

    A dictionary-encoded text of ``n`` values takes :math:`\\sum_i |d_{k_i}| + 8n` (the lengths
    of the values its indices point at, plus one offset each); other arrays their ``nbytes``.
    Lists, maps and structs add their own buffers to their children's decoded size.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    t = array.type
    if not _has_dictionary(t):
        return array.nbytes
    if pa.types.is_dictionary(t):
        values = array.dictionary
        if len(array) == 0 or len(values) == 0:
            return array.nbytes
        vt = values.type
        if (pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_binary(vt)
                or pa.types.is_large_binary(vt)):
            lengths = pc.binary_length(values)
        else:  # a dictionary of fixed-width values: each index becomes one value
            lengths = pa.array(np.full(len(values), values.nbytes // len(values), np.int64))
        taken = pc.sum(pc.take(lengths, array.indices)).as_py() or 0
        return int(taken) + 8 * len(array)
    if isinstance(array, pa.StructArray):
        children = [array.field(i) for i in range(t.num_fields)]
    else:  # list, large list, fixed-size list, map: one child, the values
        children = [array.values]
    return (array.nbytes - sum(ch.nbytes for ch in children)
            + sum(decoded_nbytes(ch) for ch in children))


def parquet_batches(pf, budget: DecodedBudget, group_bytes: Sequence[int], *,
                    columns: list[str] | None = None, batch_bytes: int = 32 * 2**20,
                    batch_rows: int = 65_536, use_pandas_metadata: bool = False):
    """Record batches of ``pf``, row group by row group, each counted against ``budget``.

    Batches hold about ``batch_bytes`` by the footer's estimate (``group_bytes``, one per row
    group), at most ``batch_rows`` rows and at least one; pyarrow decodes a batch's pages only,
    so a refused file costs one batch, whatever its row groups hold.
    """
    meta = pf.metadata
    for g in range(meta.num_row_groups):
        rows = meta.row_group(g).num_rows
        if rows == 0:
            continue
        per_row = max(group_bytes[g] / rows, 1.0)
        size = int(max(1, min(rows, batch_rows, batch_bytes // per_row)))
        for batch in pf.iter_batches(batch_size=size, row_groups=[g], columns=columns,
                                     use_threads=False, use_pandas_metadata=use_pandas_metadata):
            budget.spend(sum(decoded_nbytes(col) for col in batch.columns),
                         lambda: f"holds more than {budget.limit_text} of data once decoded "
                         f"(the limit here; passed in row group {g + 1} of "
                         f"{meta.num_row_groups})")
            yield batch


def read_table(source: Source, *, fmt: str | None = None, name: str | None = None,
               max_bytes: int | None = MAX_UNCOMPRESSED_BYTES, max_rows: int | None = None,
               max_columns: int = MAX_COLUMNS, limit_hint: str = _DEFAULT_HINT,
               size_hint: str | None = None) -> pd.DataFrame:
    """Read a CSV, TSV, Parquet or JSONL table.

    Parameters
    ----------
    source : path, bytes or binary file-like
        Where the table is. Gzip-compressed content is recognised whatever the name says.
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

    Returns
    -------
    pandas.DataFrame
        CSV cells are strings exactly as in the file (empty cells are ``""``).

    Raises
    ------
    PUAuditError
        Empty file, header only, undecodable bytes, duplicate columns, malformed content, or a
        limit passed.
    """
    size_hint = size_hint or limit_hint
    data, default_name = _read_bytes(source, max_bytes=max_bytes, hint=size_hint)
    name = name or default_name
    budget = DecodedBudget(max_bytes, name, size_hint)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name, budget=budget)
    else:
        budget.check(len(data), f"is {_mb(len(data))}, over the {budget.limit_text} limit here")
    # the text and its cells are the bytes just counted; Parquet and JSON values count anew
    budget = DecodedBudget(max_bytes, name, size_hint)
    if data[:4] == b"PK\x03\x04":
        raise PUAuditError(f"{name}: is a zip archive (an Excel .xlsx workbook is one). Save the "
                           "sheet as CSV (UTF-8), or unzip the file, and upload that.")
    if not data.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise PUAuditError(f"{name}: the file is empty. Upload a table with a header row and at "
                           "least one comparison per row.")
    explicit = fmt is not None
    if explicit and fmt not in ("csv", "tsv", "parquet", "jsonl"):
        raise PUAuditError(f"Unknown table format '{fmt}': use csv, tsv, parquet or jsonl.")
    fmt = fmt or detect_format(name, data)
    limits = {"max_rows": max_rows, "max_columns": max_columns, "hint": limit_hint}
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


def _lines(stream: IO[str]) -> Iterable[str]:
    """Lines of a text stream one at a time, each with its ending (a stream opened with
    ``newline=""`` splits on ``\\r``, ``\\n`` and ``\\r\\n`` as :class:`io.StringIO` does)."""
    return iter(stream.readline, "")


def _sniff_separator(text: str) -> str:
    """The separator (comma, tab or semicolon) that splits the first lines consistently.

    Each candidate parses up to :data:`_SNIFF_LINES` records of ``text`` (a sample; the last,
    possibly cut, record is ignored). A candidate is consistent when the header has more than one
    cell and every record has as many cells as the header (trailing empty cells allowed, as the
    reader allows them). Among consistent candidates the one giving the most columns wins, the
    comma on ties; when none is consistent (a single line, ragged rows) the most frequent
    separator in the header line outside quotes wins, as a comma CSV whose *header* merely
    mentions semicolons must still be read with commas when its rows say so.
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
              max_columns: int = MAX_COLUMNS, hint: str = _DEFAULT_HINT) -> pd.DataFrame:
    """Parse CSV bytes with the csv module: every cell is the string written, nothing inferred.

    pandas' parser is not used because it silently turns the first column into the index when
    the data rows have one cell more than the header, and fills short rows with NaN. The text is
    decoded and parsed as a stream, and every :data:`_CHUNK_ROWS` rows are packed into Arrow
    string arrays, so memory stays a small multiple of the file size.
    """
    if sep is None:
        sep = _sniff_separator(_text_stream(data, name, newline="").read(_SNIFF_CHARS))
    stream = _text_stream(data, name, newline="")
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    # strict: an unbalanced quote raises instead of swallowing the rest of the file into one cell
    # A header line with no quotes has exactly (separators + 1) columns: a line of millions of
    # names is refused from that count, before the csv module builds a string for each.
    first = stream.readline()
    if '"' not in first:
        _check_columns(first.count(sep) + 1, name, max_columns, hint)
    reader = csv.reader(itertools.chain([first], _lines(stream)), delimiter=sep, strict=True)
    rows: list[list[str]] = []
    packed: list[list] = []
    n_rows = 0

    def pack() -> None:
        columns = list(zip(*rows))
        for store, col in zip(packed, columns):
            store.append(_pack_strings(col))
        rows.clear()

    try:
        header = next(reader, None)
        if header is None:
            raise PUAuditError(f"{name}: the file is empty.")
        # checked before the names are looked at: a single line may hold millions of them
        _check_columns(len(header), name, max_columns, hint)
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
        _check_header(header, name)
        width = len(header)
        packed = [[] for _ in range(width)]
        for rec in itertools.chain([first_row], reader):
            if not rec:  # a blank line
                continue
            if len(rec) < width:
                rec.extend([""] * (width - len(rec)))
            elif len(rec) > width:
                if any(c != "" for c in rec[width:]):
                    raise PUAuditError(
                        f"{name}: row {n_rows + 1} (line {reader.line_num}) has {len(rec)} cells "
                        f"but the header names {width} columns. Put double quotes around any cell "
                        "that contains the separator, or add a header name for the extra column.",
                        row=n_rows + 1)
                del rec[width:]
            rows.append(rec)
            n_rows += 1
            if len(rows) >= _CHUNK_ROWS:
                _check_rows(n_rows, name, max_rows, hint)
                pack()
    except csv.Error as exc:
        raise PUAuditError(
            f"{name}: malformed CSV at line {reader.line_num}, row {n_rows + 1} ({exc}). Check the "
            "quoting there: a cell containing the separator, a quote or a newline must be enclosed "
            "in double quotes, with any quote inside it doubled (\"\").", row=n_rows + 1) from None
    except UnicodeDecodeError as exc:  # validated up front; kept for a stream that changes
        raise PUAuditError(f"{name}: undecodable bytes ({exc}). Re-save the file as UTF-8.") from None
    _check_rows(n_rows, name, max_rows, hint)
    if rows:
        pack()
    df = pd.DataFrame({h: _string_column(store) for h, store in zip(header, packed)},
                      columns=header)
    return df


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _is_int(v) -> bool:
    return type(v) is int  # bool is a subclass of int, and is not one here


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
                self.chunks[key].append(_pack_strings(vals))
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


_NULLABLE_INTS = {"int8": "Int8", "int16": "Int16", "int32": "Int32", "int64": "Int64",
                  "uint8": "UInt8", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64"}


def _read_parquet(data: bytes, name: str, *, budget: DecodedBudget,
                  max_rows: int | None = None, max_columns: int = MAX_COLUMNS,
                  hint: str = _DEFAULT_HINT) -> pd.DataFrame:
    """Read Parquet row group by row group within ``budget`` (see :class:`DecodedBudget`).

    The footer's sizes (:func:`parquet_check_budget`) refuse a file before any page is read;
    text columns, nested ones included, are read as dictionaries, so that a value repeated
    millions of times (a few bytes on disk) is measured before it is expanded.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        first = pq.ParquetFile(io.BytesIO(data))
        meta = first.metadata
        _check_columns(meta.num_columns, name, max_columns, hint)
        _check_rows(meta.num_rows, name, max_rows, hint)
        schema = first.schema_arrow
        _check_header(schema.names, name)
        group_bytes = parquet_check_budget(meta, budget, file_bytes=len(data))
        pf = pq.ParquetFile(io.BytesIO(data), read_dictionary=parquet_text_leaves(meta))
        batches = list(parquet_batches(pf, budget, group_bytes, use_pandas_metadata=True))
        table = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else None
        del batches
        if table is None:
            table = pf.schema_arrow.empty_table()
        # back to the stored types (dictionaries were only for measuring)
        table = table.cast(schema)
        df = table.to_pandas()
    except PUAuditError:
        raise
    except Exception as exc:  # pyarrow raises many types for corrupt files
        raise PUAuditError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {exc}). "
                           "Re-export it, or upload CSV / JSONL.") from None
    return arrow_frame_fixups(df, table, name)


def arrow_frame_fixups(df: pd.DataFrame, table, name: str) -> pd.DataFrame:
    """``table.to_pandas()`` (``df``) as :func:`read_table` returns it: integer columns with
    missing values as nullable integers (not floats, which round beyond 2**53), names as text."""
    import pyarrow as pa

    for col in list(df.columns):
        i = table.schema.get_field_index(str(col))
        if (i >= 0 and pa.types.is_integer(table.schema.field(i).type)
                and table.column(i).null_count):
            mapped = _NULLABLE_INTS[str(table.schema.field(i).type)]
            df[col] = pd.array(table.column(i).to_pandas(
                types_mapper=lambda t, m=mapped: pd.api.types.pandas_dtype(m)).array)
    _check_header([str(c) for c in df.columns], name)
    df.columns = [str(c) for c in df.columns]
    return df


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
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename it.

    The rename (:func:`os.replace`) is atomic: readers see the old file or the complete new one,
    never a half-written file, even if the process is killed mid-write. The new file gets the
    permissions of the file it replaces (or the usual ones for a new file). Missing parent
    folders are created.

    Parameters
    ----------
    path : path
        Destination.
    data : bytes or iterable of bytes
        The content (an iterable is written piece by piece).
    """
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
    """Check, before any work, that ``path`` can be written without destroying anything.

    Refused with a :class:`PUAuditError` (CLI: exit 2): a path that names an input or another
    output of the same command (also through a symlink or a hardlink), an existing folder, a
    path under an existing file, a path in a folder that does not exist (nothing is created), a folder that cannot be written to, a read-only file, and, for
    tables (``table=True``), a name whose extension names no table format.

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
    """Write ``df`` as CSV, TSV, Parquet or JSONL, chosen by ``fmt`` or the file extension.

    The file is written atomically (:func:`write_bytes_atomic`): a crash leaves the old file or
    the new one, never a partial file.
    """
    path = Path(path)
    fmt = fmt or SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise PUAuditError(f"Cannot tell the output format from '{path.name}': use a .csv, "
                           ".parquet or .jsonl extension.")
    if path.is_dir():
        raise PUAuditError(f"{path} is a folder; give a file name inside it.")
    return write_bytes_atomic(path, table_to_bytes(df, fmt))


def table_to_bytes(df: pd.DataFrame, fmt: str) -> bytes:
    """Serialise a table to bytes (used by the CLI and by dashboard downloads).

    Lossless for what each format can hold: :func:`read_table` of the result gives back every
    row, every column name and every value (CSV: as text; JSONL: floats to the last digit,
    infinities as ``1e400`` which JSON readers read back as infinity; Parquet: with their
    types). Cells are written as they are, formulas included; see
    :func:`puaudit.data.safety.spreadsheet_safe` for a copy meant for spreadsheets.
    """
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
        big = next((i for i, v in enumerate(values) if _is_int(v) and not
                    (_INT64_MIN <= v <= 2**64 - 1)), None)
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


def _json_scalar(v):
    """A JSON-ready scalar for ``v``, or ``v`` itself when it is a container (handled by the
    caller's explicit stack, so that nesting depth never meets Python's recursion limit)."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, (np.floating,)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (pd.Timestamp,)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="backslashreplace")
    return v


def _json_value(v):
    """``v`` with every nested value made JSON-ready, iteratively (any nesting depth)."""
    v = _json_scalar(v)
    if not isinstance(v, (list, tuple, dict, np.ndarray)):
        return v
    root: list = [None]
    stack = [(root, 0, v)]
    while stack:
        holder, key, x = stack.pop()
        if isinstance(x, dict):
            new = {}
            holder[key] = new
            for k, item in x.items():
                item = _json_scalar(item)
                new[str(k)] = item
                if isinstance(item, (list, tuple, dict, np.ndarray)):
                    stack.append((new, str(k), item))
        else:
            items = x.tolist() if isinstance(x, np.ndarray) else x
            new = [_json_scalar(item) for item in items]
            holder[key] = new
            for i, item in enumerate(new):
                if isinstance(item, (list, tuple, dict, np.ndarray)):
                    stack.append((new, i, item))
    return root[0]


def _json_column(col: pd.Series) -> list:
    values = col.tolist()
    if pd.api.types.is_string_dtype(col.dtype) and col.dtype != object:
        return [v if isinstance(v, str) else None for v in values]
    if pd.api.types.is_integer_dtype(col.dtype) and not col.hasnans:
        return values  # already Python ints
    if pd.api.types.is_float_dtype(col.dtype) and col.dtype.kind == "f":
        return [None if v != v else v for v in values]
    return [_json_value(v) for v in values]


# A JSON string, or an infinity written by Python's encoder (allow_nan=True) outside strings.
_JSON_INF = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity)')


def _encode_iterative(obj, scalar) -> str:
    """JSON text of ``obj`` without recursion (for nesting deeper than the C encoder allows)."""
    parts: list[str] = []
    stack: list = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, _Raw):
            parts.append(x.text)
        elif isinstance(x, dict):
            parts.append("{")
            pending: list = []
            for i, (k, v) in enumerate(x.items()):
                pending.append(_Raw((", " if i else "") + scalar(str(k)) + ": "))
                pending.append(v)
            pending.append(_Raw("}"))
            stack.extend(reversed(pending))
        elif isinstance(x, list):
            parts.append("[")
            pending = []
            for i, v in enumerate(x):
                if i:
                    pending.append(_Raw(", "))
                pending.append(v)
            pending.append(_Raw("]"))
            stack.extend(reversed(pending))
        else:
            parts.append(scalar(x))
    return "".join(parts)


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _to_jsonl(df: pd.DataFrame) -> bytes:
    """One JSON object per row; Python's float repr keeps every digit (pandas' to_json keeps 10).

    JSON has no infinity: ``inf`` is written as ``1e400`` (and ``-inf`` as ``-1e400``), a valid
    JSON number that every IEEE reader, ours included, reads back as infinity. Nesting of any
    depth is written (the reader accepts up to Python's JSON limit).
    """
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise PUAuditError("Cannot write JSONL: column names repeat; rename them first.")
    cols = [_json_column(col) for _, col in df.items()]
    strict = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str).encode
    loose = json.JSONEncoder(ensure_ascii=False, allow_nan=True, default=str).encode

    def encode(obj) -> str:
        try:
            return strict(obj)
        except ValueError:  # an infinity somewhere: let Python write it, then make it JSON
            text = loose(obj)
        except RecursionError:
            text = _encode_iterative(obj, loose)
        if "Infinity" in text:
            text = _JSON_INF.sub(lambda m: m.group(0) if m.group(1) is None else
                                 ("-1e400" if m.group(1)[0] == "-" else "1e400"), text)
        return text

    lines = [encode(dict(zip(names, row))) for row in zip(*cols)]
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")


def _npz_headers(path: Path, keys: tuple[str, ...], fix: str) -> dict:
    """Shape and dtype of each named member of an ``.npz`` archive, read from the member headers
    only (a few bytes each), so nothing is decompressed before it is checked."""
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"\x93NUMPY":
        raise PUAuditError(f"{path} is a single .npy array, not an .npz archive; {fix}.")
    if magic[:4] != b"PK\x03\x04":
        raise PUAuditError(f"{path} is not an .npz archive; {fix}.")
    out = {}
    try:
        with zipfile.ZipFile(path) as zf:
            names = {n.removesuffix(".npy") for n in zf.namelist()}
            for key in keys:
                if key not in names:
                    raise PUAuditError(f"{path} has no array '{key}' (it holds "
                                       f"{sorted(names)[:10]}); {fix}.")
                info = zf.getinfo(key + ".npy")
                with zf.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                    elif version == (2, 0):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                    else:
                        raise PUAuditError(f"{path}: array '{key}' uses .npy format version "
                                           f"{version}; {fix}.")
                if dtype.hasobject or dtype.kind not in "fiu":
                    pickled = (" (objects would need pickle to load, which is never done)"
                               if dtype.hasobject else "")
                    raise PUAuditError(f"Could not read embeddings from {path}: array '{key}' "
                                       f"holds {dtype} values, not numbers{pickled}; {fix}.")
                declared = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if info.file_size < declared:
                    raise PUAuditError(f"{path}: array '{key}' is truncated ({info.file_size:,} "
                                       f"bytes for a declared {declared:,}); {fix}.")
                out[key] = (tuple(shape), dtype, declared)
    except PUAuditError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise PUAuditError(f"Could not read embeddings from {path} ({type(exc).__name__}: "
                           f"{str(exc)[:200]}); {fix}.") from None
    return out


def _npz_layout(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            return "indexed" if "vectors.npy" in zf.namelist() else "rows"
    except (OSError, zipfile.BadZipFile):
        return "rows"  # _npz_headers says what is wrong


def read_embeddings_npz(path: str | os.PathLike, *, n_rows: int, max_dim: int = MAX_EMBEDDING_DIM,
                        max_bytes: int = MAX_UNCOMPRESSED_BYTES) -> dict:
    """Load precomputed embeddings from an ``.npz`` file, safely, in either of two layouts.

    * **per row**: ``np.savez(path, e_a=..., e_b=...)``, two ``(n_rows, dim)`` arrays;
    * **per distinct text** (what the encoder computes; far smaller for large tables):
      ``np.savez(path, vectors=..., idx_a=..., idx_b=...)`` with ``vectors`` ``(n_texts, dim)``
      and ``idx_a`` / ``idx_b`` ``(n_rows,)`` integer indices into it.

    The archive's member headers are read first (shape and dtype, a few bytes), so a small file
    that would expand to gigabytes, a wrong shape, a pickled object array or a plain ``.npy``
    file renamed ``.npz`` is refused with a message before any array is loaded.

    Parameters
    ----------
    path : path
    n_rows : int
        Rows of the table the embeddings belong to.
    max_dim : int
        Largest embedding width accepted.
    max_bytes : int
        Largest total size of the arrays once loaded (as declared by their headers).

    Returns
    -------
    dict with ``vectors`` (float32, (k, dim)), ``idx_a`` and ``idx_b`` (int, (n_rows,)); for
    the per-row layout ``vectors`` stacks ``e_a`` over ``e_b``.
    """
    path = Path(path)
    fix = ("it must be an .npz archive made by np.savez(path, e_a=..., e_b=...) with two float "
           f"arrays of shape ({n_rows}, dim), one row per table row, or by np.savez(path, "
           f"vectors=..., idx_a=..., idx_b=...) with one vector per distinct text and two integer "
           f"arrays of length {n_rows}")
    if not path.is_file():
        raise PUAuditError(f"Embeddings file {path} not found (or not a file); {fix}.")
    indexed = _npz_layout(path) == "indexed"
    keys = ("vectors", "idx_a", "idx_b") if indexed else ("e_a", "e_b")
    heads = _npz_headers(path, keys, fix)
    total = sum(h[2] for h in heads.values())
    if total > max_bytes:
        raise PUAuditError(f"{path}: the arrays would take {_mb(total)} once loaded (the file is "
                           f"{_mb(path.stat().st_size)}), over the {_mb(max_bytes)} limit; {fix}.")
    vec_keys = ("vectors",) if indexed else ("e_a", "e_b")
    for key in vec_keys:
        shape = heads[key][0]
        if (len(shape) != 2 or not (1 <= shape[1] <= max_dim)
                or (not indexed and shape[0] != n_rows)):
            raise PUAuditError(f"{path}: array '{key}' has shape {shape} but the table has "
                               f"{n_rows} rows (at most {max_dim} dimensions are accepted); "
                               f"{fix}.")
    if indexed:
        for key in ("idx_a", "idx_b"):
            shape, dtype, _ = heads[key]
            if shape != (n_rows,) or dtype.kind not in "iu":
                raise PUAuditError(f"{path}: array '{key}' must hold {n_rows} integers (one per "
                                   f"table row); it has shape {shape} and type {dtype}; {fix}.")
    elif heads["e_a"][0] != heads["e_b"][0]:
        raise PUAuditError(f"{path}: e_a has shape {heads['e_a'][0]} but e_b "
                           f"{heads['e_b'][0]}; {fix}.")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.asarray(z[k]) for k in keys}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise PUAuditError(f"Could not read embeddings from {path} ({type(exc).__name__}: "
                           f"{str(exc)[:200]}); {fix}.") from None
    if indexed:
        vectors = arrays["vectors"].astype(np.float32, copy=False)
        idx_a, idx_b = arrays["idx_a"], arrays["idx_b"]
        for key, idx in (("idx_a", idx_a), ("idx_b", idx_b)):
            bad = (idx < 0) | (idx >= len(vectors))
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise PUAuditError(f"{path}: '{key}' of table row {row + 1} is {int(idx[row])}, "
                                   f"outside the {len(vectors)} vectors; {fix}.", row=row + 1)
    else:
        n = n_rows
        vectors = np.concatenate([arrays["e_a"], arrays["e_b"]]).astype(np.float32, copy=False)
        idx_a, idx_b = np.arange(n), np.arange(n, 2 * n)
    bad_vec = ~np.isfinite(vectors).all(axis=1)
    if bad_vec.any():
        rows_a = np.flatnonzero(bad_vec[idx_a])
        rows_b = np.flatnonzero(bad_vec[idx_b])
        key, rows = ("e_a" if not indexed else "vectors", rows_a) if len(rows_a) else (
            "e_b" if not indexed else "vectors", rows_b)
        if len(rows):
            row = int(rows[0])
            raise PUAuditError(f"{path}: array '{key}' row {row + 1} (table row {row + 1}) holds "
                               f"NaN or infinite values ({len(np.union1d(rows_a, rows_b))} such "
                               "rows). Re-compute the embeddings of those rows.", row=row + 1)
    if not vectors.any():
        raise PUAuditError(f"{path}: every embedding is zero, so no two responses can be told "
                           "apart. Re-compute the embeddings (an encoder that failed silently "
                           "often writes zeros).")
    identical = all(np.array_equal(vectors[idx_a[i:i + 65536]], vectors[idx_b[i:i + 65536]])
                    for i in range(0, len(idx_a), 65536))
    if identical:
        raise PUAuditError(f"{path}: e_a and e_b are identical on every row, so the audit cannot "
                           "tell the two responses apart. Check that e_b holds the embeddings of "
                           "response B.")
    return {"vectors": vectors, "idx_a": idx_a, "idx_b": idx_b}
