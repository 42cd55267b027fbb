"""How many rows a command-line run reads: a default that keeps one run within a few GB.

The audit holds about 1.1 KB per row beyond the input table (bench/scaling.py: 1.7 GB for
1,000,000 rows, 3.8 GB for 3,000,000), and a file of tiny rows costs far more in memory than
on disk. The default limit (``DEFAULT_MAX_ROWS``) keeps a run of any file under about 3 GB;
``--max-rows N`` or ``$PUAUDIT_MAX_ROWS`` raise it (``0``: no limit) on a machine with the
memory. The reader stops at the first row over the limit, so a refused file costs little.
"""

from __future__ import annotations

import argparse
import os

from puaudit.errors import PUAuditError

__all__ = ["DEFAULT_MAX_ROWS", "BYTES_PER_ROW", "add_max_rows_argument", "add_input_arguments", "max_rows_from",
           "limits_from", "read_input"]

DEFAULT_MAX_ROWS = 1_000_000
BYTES_PER_ROW = 1_100  # measured audit memory per row beyond the table (bench/scaling.py)
ENV = "PUAUDIT_MAX_ROWS"


def _parse(value: str, where: str) -> int:
    try:
        n = int(str(value).replace("_", "").replace(",", ""))
    except ValueError:
        raise PUAuditError(f"{where} must be a whole number of rows (0 = no limit); got "
                           f"{value!r}.") from None
    if n < 0:
        raise PUAuditError(f"{where} must be 0 (no limit) or a positive number of rows; got {n}.")
    return n


def add_max_rows_argument(p: argparse.ArgumentParser) -> None:
    """Add ``--max-rows N`` (default ``$PUAUDIT_MAX_ROWS`` or :data:`DEFAULT_MAX_ROWS`)."""
    p.add_argument("--max-rows", default=None, metavar="N",
                   help=f"read at most N data rows (default {DEFAULT_MAX_ROWS:,} or ${ENV}, "
                        f"which keeps a run under about 3 GB; 0 = no limit: the audit needs "
                        f"about {BYTES_PER_ROW / 1000:.1f} KB per row)")


def add_input_arguments(p: argparse.ArgumentParser, *,
                        help: str = "CSV / TSV / Parquet / JSONL comparison table") -> None:
    """The ``INPUT`` table of a command and its row limit (:func:`add_max_rows_argument`)."""
    p.add_argument("input", metavar="INPUT", help=help)
    add_max_rows_argument(p)


def max_rows_from(args) -> int | None:
    """The row limit of a run: ``--max-rows``, else ``$PUAUDIT_MAX_ROWS``, else the default;
    ``None`` for no limit."""
    flag = getattr(args, "max_rows", None)
    if flag is not None:
        n = _parse(flag, "--max-rows")
    elif os.environ.get(ENV, "").strip():
        n = _parse(os.environ[ENV].strip(), f"${ENV}")
    else:
        n = DEFAULT_MAX_ROWS
    return None if n == 0 else n


def limits_from(args) -> dict:
    """``max_rows`` (and the message that says how to raise it) for a reader."""
    limit = max_rows_from(args)
    if limit is None:
        return {"max_rows": None}
    gb = limit * BYTES_PER_ROW / 1e9
    return {"max_rows": limit, "limit_hint": (
        f"Rows: the audit needs about {BYTES_PER_ROW / 1000:.1f} KB of memory per row "
        f"({gb:.1f} GB at {limit:,} rows, before the table itself). On a machine with the "
        f"memory, pass --max-rows N (0 = no limit) or set ${ENV}; or split the file (e.g. one "
        f"question type at a time).")}


def read_input(path, args):
    """:func:`puaudit.data.io.read_table` of ``path`` with the run's row limit."""
    from puaudit.data.io import read_table

    return read_table(path, **limits_from(args))
