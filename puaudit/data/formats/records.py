"""Where a record sits in its file, and the message for a field it lacks.

Readers see a table (one row per record, as :func:`puaudit.data.io.read_table` builds it); a
message must name the line of the file, which differs from the row when the file has blank
lines, and a JSON array has records, not lines.
"""

from __future__ import annotations

import io
import os

import pandas as pd

from puaudit.data.cells import is_missing
from puaudit.errors import PUAuditError

__all__ = ["locate", "Location", "require_fields", "missing_field_error"]


def locate(path: str | os.PathLike | bytes | None, row: int) -> str:
    """``"line N"`` (JSON Lines: blank lines counted) or ``"record N"`` for 1-based ``row`` of
    the file at ``path``, or of uploaded bytes."""
    if path is None:
        return f"record {row}"
    try:
        with (io.BytesIO(path) if isinstance(path, (bytes, bytearray))
              else open(path, "rb")) as fh:
            head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
            if head[:1] != b"{":  # a JSON array, gzip or anything else: records, not lines
                return f"record {row}"
            fh.seek(0)
            seen = 0
            for lineno, line in enumerate(fh, start=1):
                if line.strip():
                    seen += 1
                    if seen == row:
                        return f"line {lineno}"
    except OSError:
        pass
    return f"record {row}"


class Location:
    """``locate(path, row)`` followed by ``detail``, worked out only when a message shows it:
    finding a line reads the file from its start, which for every record of a large file would
    take time growing with the square of its length."""

    def __init__(self, path: str | os.PathLike | None, row: int, detail: str = ""):
        self.path, self.row, self.detail = path, row, detail

    def then(self, detail: str) -> "Location":
        """The same place, more precisely (``", annotation 3"``)."""
        return Location(self.path, self.row, self.detail + detail)

    def __str__(self) -> str:
        return locate(self.path, self.row) + self.detail

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def missing_field_error(*, name: str, fmt: str, field: str, where: str, fix: str = ""
                        ) -> PUAuditError:
    """The one message for a record of format ``fmt`` without ``field``."""
    return PUAuditError(f"{name}: looks like {fmt}, but {where} has no '{field}' field. "
                        + (fix or f"Every record of {fmt} needs '{field}'; fill it in or drop "
                                  "the record."), column=field)


def require_fields(frame: pd.DataFrame, fields: tuple[str, ...], *, name: str, fmt: str,
                   path: str | os.PathLike | None) -> None:
    """Refuse ``frame`` at the first record lacking one of ``fields`` (file order, then field
    order), naming the field and the record's line."""
    for field in fields:
        if field not in frame.columns:
            raise missing_field_error(name=name, fmt=fmt, field=field, where=locate(path, 1))
    for i, values in enumerate(zip(*(frame[f].tolist() for f in fields)), start=1):
        for field, v in zip(fields, values):
            if is_missing(v):
                raise missing_field_error(name=name, fmt=fmt, field=field, where=locate(path, i))
