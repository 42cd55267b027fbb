"""Reading and writing tables: CSV, Parquet and JSONL, from paths, bytes or uploaded files.

CSV cells are read as text, exactly as written (no NaN guessing, no number parsing), so an export
written back as CSV reproduces every input value. Parquet and JSONL keep their own types.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path
from typing import IO, Union

import pandas as pd

from puaudit.errors import PUAuditError

__all__ = ["read_table", "write_table", "decode_text", "detect_format", "SUPPORTED_SUFFIXES"]

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
        return data[3:].decode("utf-8", errors="strict")
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
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise PUAuditError(f"{name}: looks gzip-compressed but could not be decompressed ({exc}). "
                               "Upload the uncompressed file.") from None
    if not data.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise PUAuditError(f"{name}: the file is empty. Upload a table with a header row and at "
                           "least one comparison per row.")
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
        sep = "\t" if fmt == "tsv" else None
        df = _read_csv(text, name, sep=sep)
    if len(df.columns) == 0:
        raise PUAuditError(f"{name}: no columns found. The first line must be a header row.")
    if len(df) == 0:
        raise PUAuditError(f"{name}: has a header but no data rows. Add at least one comparison "
                           "per row below the header.")
    return df


def _read_csv(text: str, name: str, *, sep: str | None) -> pd.DataFrame:
    if sep is None:
        first = text.split("\n", 1)[0]
        counts = {s: first.count(s) for s in (",", "\t", ";")}
        sep = max(counts, key=counts.get) if max(counts.values()) > 0 else ","
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    try:
        header = next(reader)
    except StopIteration:
        raise PUAuditError(f"{name}: the file is empty.") from None
    except csv.Error as exc:
        raise PUAuditError(f"{name}: the header line is not valid CSV ({exc}).") from None
    header = [h.strip() for h in header]
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    if any(h == "" for h in header):
        pos = [i + 1 for i, h in enumerate(header) if h == ""]
        raise PUAuditError(f"{name}: header cell(s) at column position {pos} are empty. "
                           "Give every column a name.")
    _check_header(header, name)
    try:
        df = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False,
                         na_filter=False, engine="python" if len(sep) != 1 else "c",
                         skip_blank_lines=True)
    except pd.errors.ParserError as exc:
        raise PUAuditError(f"{name}: malformed CSV ({exc}). Check quoting around that line: a cell "
                           "containing the separator or a newline must be in double quotes.") from None
    except csv.Error as exc:
        raise PUAuditError(f"{name}: malformed CSV ({exc}).") from None
    df.columns = header if len(header) == len(df.columns) else [str(c).strip() for c in df.columns]
    return df


def _read_jsonl(text: str, name: str) -> pd.DataFrame:
    import json

    stripped = text.lstrip()
    records: list[dict] = []
    if stripped.startswith("["):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise PUAuditError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno}).") from None
        if not isinstance(obj, list):
            raise PUAuditError(f"{name}: expected a list of objects.")
        records = obj
        bad = next((i for i, r in enumerate(records) if not isinstance(r, dict)), None)
        if bad is not None:
            raise PUAuditError(f"{name}: item {bad + 1} is not an object; each item must be one "
                               "comparison with named fields.", row=bad + 1)
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PUAuditError(f"{name}: line {lineno} is not valid JSON ({exc.msg}). Each line "
                                   "must be one JSON object.", row=lineno) from None
            if not isinstance(rec, dict):
                raise PUAuditError(f"{name}: line {lineno} is not a JSON object.", row=lineno)
            records.append(rec)
    if not records:
        raise PUAuditError(f"{name}: no records found.")
    df = pd.DataFrame.from_records(records)
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
    """Serialise a table to bytes (used by the CLI and by dashboard downloads)."""
    if fmt in ("csv", "tsv"):
        return df.to_csv(index=False, sep="\t" if fmt == "tsv" else ",",
                         lineterminator="\n").encode("utf-8")
    if fmt == "parquet":
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        return buf.getvalue()
    if fmt == "jsonl":
        return df.to_json(orient="records", lines=True, force_ascii=False).encode("utf-8")
    raise PUAuditError(f"Unknown output format '{fmt}': use csv, parquet or jsonl.")
