"""File bytes to text: UTF-8 (with or without BOM), UTF-16, else Windows-1252 / Latin-1; binary
content is refused. Text is decoded lazily, as a stream, for the readers."""

from __future__ import annotations

import codecs
import io

from puaudit.errors import PUAuditError

__all__ = ["decode_text"]


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
