"""How much a command-line run reads: defaults that keep one run within a few GB.

The audit holds about 1.1 KB per row beyond the input table (bench/scaling.py: 1.7 GB for
1,000,000 rows, 3.8 GB for 3,000,000), and a file of tiny rows costs far more in memory than
on disk. The default row limit (``DEFAULT_MAX_ROWS``) keeps a run of any file under about 3 GB;
``--max-rows N`` or ``$PUAUDIT_MAX_ROWS`` raise it (``0``: no limit) on a machine with the
memory. The reader stops at the first row over the limit, so a refused file costs little.

A few rows can also hold gigabytes: a 34 KB Parquet file of 64 rows whose list column holds
20 million zeros a row decodes to 10 GB, a 5 MB gzip to 5 GB. ``DEFAULT_MAX_DECODED_MB`` caps
what the input decodes to (:class:`puaudit.data.limits.DecodedBudget`; 2 GB, about 2 KB a row at
the row limit, which a table of prompts and two responses rarely passes); ``--max-decoded-mb N``
or ``$PUAUDIT_MAX_DECODED_MB`` raise it (``0``: no limit). A Parquet file is refused from its
footer and a gzip from a count of its decompressed bytes, before anything is kept.
"""

from __future__ import annotations

import argparse
import os

from puaudit.data.limits import ReadLimits
from puaudit.errors import PUAuditError

__all__ = ["DEFAULT_MAX_ROWS", "DEFAULT_MAX_DECODED_MB", "BYTES_PER_ROW", "add_max_rows_argument",
           "add_input_arguments", "max_rows_from", "max_decoded_bytes_from", "limits_from",
           "add_split_argument"]

DEFAULT_MAX_ROWS = 1_000_000
DEFAULT_MAX_DECODED_MB = 2048
BYTES_PER_ROW = 1_100  # measured audit memory per row beyond the table (bench/scaling.py)
ENV = "PUAUDIT_MAX_ROWS"
ENV_DECODED = "PUAUDIT_MAX_DECODED_MB"


def _parse(value: str, where: str, unit: str = "rows") -> int:
    try:
        n = int(str(value).replace("_", "").replace(",", ""))
    except ValueError:
        raise PUAuditError(f"{where} must be a whole number of {unit} (0 = no limit); got "
                           f"{value!r}.") from None
    if n < 0:
        raise PUAuditError(f"{where} must be 0 (no limit) or a positive number of {unit}; "
                           f"got {n}.")
    return n


def add_max_rows_argument(p: argparse.ArgumentParser) -> None:
    """Add the input limits: ``--max-rows N`` (default ``$PUAUDIT_MAX_ROWS`` or
    :data:`DEFAULT_MAX_ROWS`) and ``--max-decoded-mb N`` (default ``$PUAUDIT_MAX_DECODED_MB``
    or :data:`DEFAULT_MAX_DECODED_MB`)."""
    p.add_argument("--max-rows", default=None, metavar="N",
                   help=f"read at most N data rows (default {DEFAULT_MAX_ROWS:,} or ${ENV}, "
                        f"which keeps a run under about 3 GB; 0 = no limit: the audit needs "
                        f"about {BYTES_PER_ROW / 1000:.1f} KB per row)")
    p.add_argument("--max-decoded-mb", default=None, metavar="N",
                   help=f"refuse an input that decompresses or decodes to more than N MB "
                        f"(default {DEFAULT_MAX_DECODED_MB:,} or ${ENV_DECODED}; 0 = no limit): "
                        "gzip, Parquet pages and JSON values, checked before they are kept")


def add_input_arguments(p: argparse.ArgumentParser, *,
                        help: str = "CSV / TSV / Parquet / JSONL comparison table") -> None:
    """The ``INPUT`` table of a command and its row limit (:func:`add_max_rows_argument`)."""
    p.add_argument("input", metavar="INPUT", help=help)
    add_max_rows_argument(p)
    add_split_argument(p)


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


def max_decoded_bytes_from(args) -> int | None:
    """The decoded-size limit of a run in bytes: ``--max-decoded-mb``, else
    ``$PUAUDIT_MAX_DECODED_MB``, else the default; ``None`` for no limit."""
    flag = getattr(args, "max_decoded_mb", None)
    if flag is not None:
        n = _parse(flag, "--max-decoded-mb", "MB")
    elif os.environ.get(ENV_DECODED, "").strip():
        n = _parse(os.environ[ENV_DECODED].strip(), f"${ENV_DECODED}", "MB")
    else:
        n = DEFAULT_MAX_DECODED_MB
    return None if n == 0 else n * 2**20


def limits_from(args) -> ReadLimits:
    """The run's limits (``max_rows``, ``max_bytes``) and the messages that say how to raise
    them, for :func:`puaudit.data.load.load_input` (``.kwargs()`` for
    :func:`puaudit.data.parquet.read_comparisons_parquet`)."""
    out = {"max_rows": max_rows_from(args), "max_bytes": max_decoded_bytes_from(args),
           "size_hint": (f"On a machine with the memory (a run takes a few times the decoded "
                         f"size), pass --max-decoded-mb N (0 = no limit) or set ${ENV_DECODED}; "
                         f"the default is {DEFAULT_MAX_DECODED_MB:,} MB.")}
    limit = out["max_rows"]
    if limit is not None:
        gb = limit * BYTES_PER_ROW / 1e9
        out["limit_hint"] = (
            f"Rows: the audit needs about {BYTES_PER_ROW / 1000:.1f} KB of memory per row "
            f"({gb:.1f} GB at {limit:,} rows, before the table itself). On a machine with the "
            f"memory, pass --max-rows N (0 = no limit) or set ${ENV}; or split the file (e.g. "
            f"one question type at a time).")
    return ReadLimits(**out)


def add_split_argument(p: argparse.ArgumentParser) -> None:
    """``--split NAME``: the split of a dataset folder to read (see docs/data_formats.md)."""
    p.add_argument("--split", default=None, metavar="NAME",
                   help="the split to read when INPUT is a dataset folder (Hugging Face "
                        "save_to_disk, Parquet shards) or a zip of one; default: its only "
                        "split, else train, else test")
