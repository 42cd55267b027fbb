"""What one table read accepts: the file suffixes, the size limits, the checks on a header's
columns and the rows, :class:`ReadLimits` (what a caller allows one read),
:class:`DecodedBudget` (the decoded bytes a read may spend) and :func:`upload_limits`, the
operator's limits on one dashboard upload (``PUAUDIT_MAX_UPLOAD_MB``, ``_ROWS``, ``_COLUMNS``:
what the server holds once decompressed, which ``server.maxUploadSize`` does not cap).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from puaudit.errors import PUAuditError

__all__ = ["SUPPORTED_SUFFIXES", "MAX_UNCOMPRESSED_BYTES", "MAX_COLUMNS", "MAX_EMBEDDING_DIM",
           "DEFAULT_HINT", "DecodedBudget", "ReadLimits", "not_regular", "open_regular",
           "ROW_LIMIT", "size_text", "too_big", "check_header", "check_columns", "check_rows",
           "UploadLimits", "DEFAULT_UPLOAD_LIMITS", "upload_limits", "unreadable"]

_log = logging.getLogger(__name__)


SUPPORTED_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".txt": "csv", ".parquet": "parquet",
                      ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


#: A file may expand to at most this many bytes (a small "zip bomb" must not exhaust memory).
MAX_UNCOMPRESSED_BYTES = 4 * 1024**3
#: Columns a table may have. 20,000 columns load in a few seconds; a single 50 MB header line of
#: millions of names would otherwise build a DataFrame of millions of columns (minutes, GBs).
MAX_COLUMNS = 30_000
#: Largest embedding width accepted from an ``.npz`` file (the biggest encoders use 8,192).
MAX_EMBEDDING_DIM = 65_536

DEFAULT_HINT = "Split the table into smaller files."
#: Key of ``DataFrame.attrs`` holding the row limit a table was read with (``{"max_rows",
#: "hint"}``), for readers that expand one record into several rows.
ROW_LIMIT = "row_limit"


@dataclasses.dataclass(frozen=True)
class ReadLimits:
    """What one read may hold (``max_bytes`` decoded, ``max_rows`` also counted as a tool's
    records expand into one row per vote, ``max_columns``; None: no limit), and what the
    message says when it holds more (``limit_hint``; ``size_hint`` for ``max_bytes``)."""

    max_bytes: int | None = MAX_UNCOMPRESSED_BYTES
    max_rows: int | None = None
    max_columns: int = MAX_COLUMNS
    limit_hint: str = DEFAULT_HINT
    size_hint: str | None = None

    def kwargs(self) -> dict:
        """The limits as :func:`puaudit.data.io.read_table`'s keyword arguments."""
        return dataclasses.asdict(self)


def not_regular(mode: int, name: str) -> PUAuditError | None:
    """The message for a path whose ``st_mode`` is no regular file (a FIFO, a device, a
    socket): reading one waits for a writer forever or never ends; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
    return PUAuditError(f"{name}: is {kind}, not a regular file; only regular files are read "
                        "(a pipe may never end). Save the data to a file and give its path.")


def open_regular(path, name: str):
    """``path`` opened for binary reading, refused (:func:`not_regular`) unless it is a regular
    file. Opened without blocking, so that a FIFO nobody writes to is refused at once instead of
    waiting for a writer."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        err = not_regular(os.fstat(fd).st_mode, name)
    except OSError:
        os.close(fd)
        raise
    if err is not None:
        os.close(fd)
        raise err
    return os.fdopen(fd, "rb")


@contextmanager
def unreadable(name: str, what: str, fix: str) -> Iterator[None]:
    """One message for a damaged file, whichever of its many exception types pyarrow raises."""
    try:
        yield
    except PUAuditError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for damaged files
        raise PUAuditError(f"{name}: not a readable {what} ({type(exc).__name__}: "
                           f"{str(exc)[:160]}). {fix}") from None


def size_text(n: int) -> str:
    """``n`` bytes as messages say it: ``"12 MB"``, or ``"512 bytes"`` below 1 MB."""
    return f"{n / 2**20:,.0f} MB" if n >= 2**20 else f"{n:,} bytes"


def too_big(name: str, what: str, hint: str) -> PUAuditError:
    """The message for a limit passed: ``"{name}: {what}. {hint}"``."""
    return PUAuditError(f"{name}: {what}. {hint}".rstrip())


def check_header(header: list[str], name: str) -> None:
    """Refuse a header that names one column twice."""
    seen: dict[str, int] = {}
    for i, col in enumerate(header, start=1):
        if col in seen:
            raise PUAuditError(
                f"{name}: column '{col}' appears twice (columns {seen[col]} and {i}). "
                "Rename or delete one of them and upload again.", column=col)
        seen[col] = i


def check_columns(n: int, name: str, max_columns: int, hint: str, *, exact: bool = True) -> None:
    """Refuse ``n`` columns over ``max_columns`` (``exact=False``: ``n`` is a lower bound)."""
    if n > max_columns:
        count = f"{n:,}" if exact else f"more than {max_columns:,}"
        raise too_big(name, f"has {count} columns, over the limit of {max_columns:,} here (a "
                      "comparison table needs a handful). Keep only the columns you need", hint)


def check_rows(n: int, name: str, max_rows: int | None, hint: str) -> None:
    """Refuse ``n`` data rows over ``max_rows`` (None: no limit)."""
    if max_rows is not None and n > max_rows:
        raise too_big(name, f"has more than {max_rows:,} data rows, the limit here", hint)


class DecodedBudget:
    """The bytes one read may decode (``limit``; None: no limit), shared by every reader so
    that one limit gives one message naming the file (``name``) and how to raise it (``hint``).

    Readers call :meth:`check` on a size known before reading (file metadata) and :meth:`spend`
    on what they decoded (docs/hostile_inputs.md, "Decoded size").
    """

    def __init__(self, limit: int | None, name: str, hint: str):
        self.limit, self.name, self.hint = limit, name, hint
        self.used = 0

    @property
    def limit_text(self) -> str:
        return size_text(self.limit or 0)

    def refuse(self, what: str) -> PUAuditError:
        """The message for ``what`` (which names the limit, :attr:`limit_text`), then the hint."""
        return too_big(self.name, what, self.hint)

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


@dataclasses.dataclass(frozen=True)
class UploadLimits:
    """What one dashboard upload may hold once decompressed (see :func:`upload_limits`)."""

    max_mb: int
    max_rows: int
    max_columns: int

    @property
    def max_bytes(self) -> int:
        return self.max_mb * 1024 * 1024


# one upload cannot take the server past ~3 GB (bench/hostile_memory.py, docs/safety.md)
DEFAULT_UPLOAD_LIMITS = UploadLimits(max_mb=200, max_rows=20_000, max_columns=30_000)


def _positive_int(var: str, default: int) -> int:
    raw = os.environ.get(var, "").strip().replace("_", "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        _log.warning("%s=%r is not a positive whole number; using %d", var, raw, default)
        return default
    return value


def upload_limits() -> UploadLimits:
    """The operator's limits on one dashboard upload: ``PUAUDIT_MAX_UPLOAD_MB`` (decoded size,
    default 200), ``PUAUDIT_MAX_UPLOAD_ROWS`` (20,000) and ``PUAUDIT_MAX_UPLOAD_COLUMNS``
    (30,000), read on each call; a value that is no positive integer is ignored (logged)."""
    d = DEFAULT_UPLOAD_LIMITS
    return UploadLimits(max_mb=_positive_int("PUAUDIT_MAX_UPLOAD_MB", d.max_mb),
                        max_rows=_positive_int("PUAUDIT_MAX_UPLOAD_ROWS", d.max_rows),
                        max_columns=_positive_int("PUAUDIT_MAX_UPLOAD_COLUMNS", d.max_columns))
