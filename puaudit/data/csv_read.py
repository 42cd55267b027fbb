"""CSV read with the csv module, as a stream: every cell the string written, nothing inferred,
and cells packed into Arrow string columns every few thousand rows."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Sequence
from typing import IO

import pandas as pd

from puaudit.data.decoding import _text_stream
from puaudit.data.read_limits import (_DEFAULT_HINT, MAX_COLUMNS, _check_columns, _check_header,
                                      _check_rows)
from puaudit.errors import PUAuditError


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


def _csv_reader(data: bytes, name: str, *, sep: str | None, max_columns: int, hint: str):
    """A strict ``csv.reader`` over the decoded stream (separator sniffed when ``sep`` is None),
    after a header line without quotes is checked for its number of columns."""
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
    return csv.reader(itertools.chain([first], _lines(stream)), delimiter=sep, strict=True)


def _csv_header(reader, name: str, *, max_columns: int, hint: str) -> tuple[list[str], list[str]]:
    """The header (BOM removed, every name present and distinct) and the first data row."""
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
