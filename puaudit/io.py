"""Reading and writing tables: CSV, Parquet and JSONL, from paths, bytes or uploaded files.

CSV cells are read as text, exactly as written (no NaN guessing, no number parsing), so an export
written back as CSV reproduces every input value. Parquet and JSONL keep their own types.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import zlib
from pathlib import Path
from typing import IO, Union

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError

__all__ = ["read_table", "write_table", "table_to_bytes", "decode_text", "detect_format",
           "SUPPORTED_SUFFIXES", "MAX_UNCOMPRESSED_BYTES"]

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


#: A gzip file may expand to at most this many bytes (a small "zip bomb" must not exhaust memory).
MAX_UNCOMPRESSED_BYTES = 4 * 1024**3

# Python's csv module refuses cells over 128 KiB by default; a long answer or transcript is
# legitimate data, so the limit is raised to the largest value every platform accepts.
_CSV_FIELD_LIMIT = 2**31 - 1


def _gunzip(data: bytes, name: str) -> bytes:
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            while chunk := gz.read(1 << 20):
                out.write(chunk)
                if out.tell() > MAX_UNCOMPRESSED_BYTES:
                    raise PUAuditError(
                        f"{name}: expands to more than {MAX_UNCOMPRESSED_BYTES // 1024**3} GiB "
                        "when decompressed. Split the table into smaller files.")
    except (OSError, EOFError, zlib.error) as exc:
        raise PUAuditError(f"{name}: looks gzip-compressed but could not be decompressed ({exc}). "
                           "Upload the uncompressed file.") from None
    return out.getvalue()


def _read_bytes(source: Source) -> tuple[bytes, str]:
    """Return the raw bytes of ``source`` and a display name for messages."""
    if isinstance(source, (bytes, bytearray)):
        return bytes(source), "<bytes>"
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise PUAuditError(f"File not found: {path}. Check the path and try again.")
        if path.is_dir():
            raise PUAuditError(f"{path} is a folder; give the path of a CSV, Parquet or JSONL file.")
        return path.read_bytes(), str(path)
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


def decode_text(data: bytes, *, name: str = "<bytes>") -> str:
    """Decode file bytes to text: UTF-8 (with or without BOM), UTF-16 (BOM or NUL pattern),
    otherwise Windows-1252 / Latin-1. Binary content raises :class:`PUAuditError`.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass  # a UTF-8 mark over Windows-1252 text: decode the rest like any other file
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise PUAuditError(f"{name}: starts with a UTF-16 mark but is not valid UTF-16 ({exc}). "
                               "Re-save it as UTF-8.") from None
    sample = data[:4096]
    if sample and sample.count(b"\x00") > len(sample) // 4:
        # UTF-16 without a BOM: every other byte of ASCII text is NUL
        even_nuls = sample[0::2].count(b"\x00")
        odd_nuls = sample[1::2].count(b"\x00")
        enc = "utf-16-le" if odd_nuls > even_nuls else "utf-16-be"
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            pass
        raise PUAuditError(f"{name}: this looks like a binary file, not text. "
                           "Upload a CSV, Parquet or JSONL file.")
    if not _mostly_text(data):
        raise PUAuditError(f"{name}: this looks like a binary file, not text (many control "
                           "bytes). Upload a CSV, Parquet or JSONL file.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text = data.decode("cp1252", errors="replace") if _mostly_text(data) else None
    if text is None:
        raise PUAuditError(f"{name}: the bytes are not text in any encoding we recognise "
                           "(UTF-8, UTF-16, Latin-1). Re-save the file as UTF-8 CSV, or "
                           "upload Parquet / JSONL.")
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


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


def read_table(source: Source, *, fmt: str | None = None, name: str | None = None) -> pd.DataFrame:
    """Read a CSV, TSV, Parquet or JSONL table.

    Parameters
    ----------
    source : path, bytes or binary file-like
        Where the table is. Gzip-compressed content is recognised whatever the name says.
    fmt : {"csv", "tsv", "parquet", "jsonl"}, optional
        Force a format instead of detecting it.
    name : str, optional
        Name used in messages (defaults to the path or upload name).

    Returns
    -------
    pandas.DataFrame
        CSV cells are strings exactly as in the file (empty cells are ``""``).

    Raises
    ------
    PUAuditError
        Empty file, header only, undecodable bytes, duplicate columns, malformed content.
    """
    data, default_name = _read_bytes(source)
    name = name or default_name
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name)
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
    if fmt == "parquet":
        try:
            df = pd.read_parquet(io.BytesIO(data))
        except Exception as exc:  # pyarrow raises many types for corrupt files
            raise PUAuditError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {exc}). "
                               "Re-export it, or upload CSV / JSONL.") from None
        _check_header([str(c) for c in df.columns], name)
        df.columns = [str(c) for c in df.columns]
    elif fmt == "jsonl":
        text = decode_text(data, name=name)
        df = _read_jsonl(text, name)
    else:
        text = decode_text(data, name=name)
        # an explicit fmt="csv" means commas; a detected one may be a semicolon or tab export
        sep = "\t" if fmt == "tsv" else ("," if explicit else None)
        df = _read_csv(text, name, sep=sep)
    if len(df.columns) == 0:
        raise PUAuditError(f"{name}: no columns found. The first line must be a header row.")
    if len(df) == 0:
        raise PUAuditError(f"{name}: has a header but no data rows. Add at least one comparison "
                           "per row below the header.")
    return df


def _sniff_separator(text: str) -> str:
    """The most frequent of , TAB ; in the header line, counting only outside double quotes."""
    counts = {",": 0, "\t": 0, ";": 0}
    quoted = False
    for ch in text[:65536]:
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            if ch == "\n":
                break
            if ch in counts:
                counts[ch] += 1
    best = max(counts, key=counts.get)
    return best if counts[best] > counts[","] else ","


def _read_csv(text: str, name: str, *, sep: str | None) -> pd.DataFrame:
    """Parse CSV text with the csv module: every cell is the string written, nothing inferred.

    pandas' parser is not used because it silently turns the first column into the index when
    the data rows have one cell more than the header, and fills short rows with NaN.
    """
    if sep is None:
        sep = _sniff_separator(text)
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    # strict: an unbalanced quote raises instead of swallowing the rest of the file into one cell
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, strict=True)
    rows: list[list[str]] = []
    try:
        header = next(reader, None)
        if header is None:
            raise PUAuditError(f"{name}: the file is empty.")
        if header and header[0].startswith("\ufeff"):
            header[0] = header[0][1:]
        blank = [i + 1 for i, h in enumerate(header) if h.strip() == ""]
        if blank:
            raise PUAuditError(
                f"{name}: header cell(s) at column position {blank} are empty. Give every column a "
                "name (an unnamed first column is usually a saved row index: re-save without it).")
        _check_header(header, name)
        width = len(header)
        for rec in reader:
            if not rec:  # a blank line
                continue
            if len(rec) < width:
                rec.extend([""] * (width - len(rec)))
            elif len(rec) > width:
                if any(c != "" for c in rec[width:]):
                    raise PUAuditError(
                        f"{name}: row {len(rows) + 1} (line {reader.line_num}) has {len(rec)} cells "
                        f"but the header names {width} columns. Put double quotes around any cell "
                        "that contains the separator, or add a header name for the extra column.",
                        row=len(rows) + 1)
                del rec[width:]
            rows.append(rec)
    except csv.Error as exc:
        raise PUAuditError(
            f"{name}: malformed CSV at line {reader.line_num}, row {len(rows) + 1} ({exc}). Check the "
            "quoting there: a cell containing the separator, a quote or a newline must be enclosed "
            "in double quotes, with any quote inside it doubled (\"\").", row=len(rows) + 1) from None
    columns = list(zip(*rows)) if rows else [()] * width
    return pd.DataFrame({h: pd.array(list(col), dtype="str") for h, col in zip(header, columns)},
                        columns=header)


def _read_jsonl(text: str, name: str) -> pd.DataFrame:
    stripped = text.lstrip()
    records: list[dict] = []
    if stripped.startswith("["):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise PUAuditError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno}).") from None
        except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit number, deep nesting
            raise PUAuditError(f"{name}: JSON that cannot be read safely ({type(exc).__name__}: "
                               f"{str(exc)[:120]}).") from None
        if not isinstance(obj, list):
            raise PUAuditError(f"{name}: expected a list of objects.")
        records = obj
        bad = next((i for i, r in enumerate(records) if not isinstance(r, dict)), None)
        if bad is not None:
            raise PUAuditError(f"{name}: item {bad + 1} is not an object; each item must be one "
                               "comparison with named fields.", row=bad + 1)
    else:
        # split on "\n" only: str.splitlines() also breaks at U+2028, U+0085, form feeds...,
        # which JSON strings may hold unescaped
        for lineno, line in enumerate(text.split("\n"), start=1):
            line = line.removesuffix("\r")
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
            records.append(rec)
    if not records:
        raise PUAuditError(f"{name}: no records found.")
    try:
        df = pd.DataFrame.from_records(records)
    except (ValueError, TypeError, OverflowError) as exc:
        raise PUAuditError(f"{name}: the records cannot form a table ({exc}).") from None
    df.columns = [str(c) for c in df.columns]
    return df


def write_table(df: pd.DataFrame, path: str | os.PathLike, *, fmt: str | None = None) -> Path:
    """Write ``df`` as CSV, TSV, Parquet or JSONL, chosen by ``fmt`` or the file extension."""
    path = Path(path)
    fmt = fmt or SUPPORTED_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise PUAuditError(f"Cannot tell the output format from '{path.name}': use a .csv, "
                           ".parquet or .jsonl extension.")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(table_to_bytes(df, fmt))
    return path


def table_to_bytes(df: pd.DataFrame, fmt: str) -> bytes:
    """Serialise a table to bytes (used by the CLI and by dashboard downloads).

    Lossless for what each format can hold: :func:`read_table` of the result gives back every
    row, every column name and every value (CSV: as text; JSONL: floats to the last digit;
    Parquet: with their types). Cells are written as they are, formulas included; see
    :func:`puaudit.safety.spreadsheet_safe` for a copy meant for spreadsheets.
    """
    if fmt in ("csv", "tsv"):
        sep = "\t" if fmt == "tsv" else ","
        # The csv writer quotes "\n" but not a lone "\r" when the line ends in "\n"; an unquoted
        # "\r" would split the row on reading, so such tables get every cell quoted.
        quoting = csv.QUOTE_ALL if _has_cr(df) else csv.QUOTE_MINIMAL
        return df.to_csv(index=False, sep=sep, lineterminator="\n",
                         quoting=quoting).encode("utf-8")
    if fmt == "parquet":
        buf = io.BytesIO()
        try:
            df.to_parquet(buf, index=False)
        except Exception as exc:  # pyarrow: ArrowInvalid / ArrowTypeError / NotImplemented
            raise PUAuditError(f"Cannot write Parquet ({type(exc).__name__}: {str(exc)[:200]}); a "
                               "column probably mixes types (numbers and text). Export as JSONL "
                               "or CSV instead.") from None
        return buf.getvalue()
    if fmt == "jsonl":
        return _to_jsonl(df)
    raise PUAuditError(f"Unknown output format '{fmt}': use csv, parquet or jsonl.")


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


def _json_value(v):
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, (np.floating,)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.ndarray):
        return [_json_value(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (pd.Timestamp,)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="backslashreplace")
    return v


def _json_column(col: pd.Series) -> list:
    values = col.tolist()
    if pd.api.types.is_string_dtype(col.dtype) and col.dtype != object:
        return [v if isinstance(v, str) else None for v in values]
    if pd.api.types.is_integer_dtype(col.dtype) and not col.hasnans:
        return values  # already Python ints
    if pd.api.types.is_float_dtype(col.dtype) and col.dtype.kind == "f":
        return [None if v != v else v for v in values]
    return [_json_value(v) for v in values]


def _to_jsonl(df: pd.DataFrame) -> bytes:
    """One JSON object per row; Python's float repr keeps every digit (pandas' to_json keeps 10)."""
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise PUAuditError("Cannot write JSONL: column names repeat; rename them first.")
    cols = [_json_column(col) for _, col in df.items()]
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str).encode
    lines = [encode(dict(zip(names, row))) for row in zip(*cols)]
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
