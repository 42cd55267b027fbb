"""The table a command reads: its ``INPUT`` through :func:`puaudit.data.load.load_input`, with
the run's limits, ``--split``, ``--human`` and ``--answers``.

A Parquet table of our own audited to a Parquet export is streamed instead (only the audit's
columns are read, :func:`streams`); every other input, whatever tool wrote it, is read once by
:func:`read_frame`, as the dashboard's upload is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from puaudit.cli.input_limits import limits_from
from puaudit.data.load import load_input
from puaudit.errors import PUAuditError
from puaudit.progress import stderr_progress

__all__ = ["read_frame", "load_table", "load_labelled", "streams", "check_split"]


def read_frame(args, path=None) -> pd.DataFrame:
    """:func:`~puaudit.data.load.load_input` of ``INPUT`` (or ``path``, read alone: no
    ``--human`` / ``--answers``) with the run's limits and ``--split``; what a dataset folder's
    read chose (which split, how many files) goes to stderr."""
    joins = {} if path is not None else {"human": getattr(args, "human", None),
                                         "answers": getattr(args, "answers", None)}
    df = load_input(args.input if path is None else path, split=getattr(args, "split", None),
                    limits=limits_from(args), **joins)
    if df.attrs.get("read_note"):
        print(df.attrs["read_note"], file=sys.stderr)
    return df


def streams(args) -> bool:
    """Parquet in and Parquet out: read only the audit's columns, stream the export.

    Only for a comparison table of our own: a tool's file (Argilla records on the Hub are
    Parquet) or one joined with ``--human`` / ``--answers`` becomes other rows, so it goes
    through the format readers and the export is written from the converted table."""
    from puaudit.data.parquet import is_parquet_path

    if not (is_parquet_path(args.input) and Path(args.input).is_file()
            and getattr(args, "export_format", "table") == "table"
            and is_parquet_path(getattr(args, "output", None) or "")):
        return False
    if getattr(args, "human", None) or getattr(args, "answers", None):
        return False
    import pyarrow.parquet as pq

    from puaudit.data.formats import detect

    try:
        names = pq.read_schema(args.input).names
    except Exception:  # unreadable: the reader that follows says why, with its own message
        return False
    return detect(pd.DataFrame(columns=names)) is None


def check_split(args) -> None:
    """``--split`` names a split of a dataset folder (or a zip of one), not of a table file."""
    import zipfile

    path = Path(args.input)
    if args.split is not None and path.is_file() and not zipfile.is_zipfile(path):
        raise PUAuditError(f"--split picks a split of a dataset folder; {path.name} is a table "
                           "file. Leave out --split, or give the dataset's folder as INPUT.")


def load_table(args):
    """The :class:`~puaudit.data.schema.ComparisonTable` of ``INPUT`` and the ``--*-col`` /
    ``--judge-rule`` options."""
    from puaudit.data.schema import apply_judge_rule, load_comparisons

    check_split(args)
    cols = {k[4:]: v for k, v in vars(args).items() if k.startswith("col_") and v}
    if streams(args):
        from puaudit.data.parquet import read_comparisons_parquet

        table = read_comparisons_parquet(args.input, columns=cols, **limits_from(args).kwargs(),
                                         progress=stderr_progress("read", min_total=500_000))
    else:
        table = load_comparisons(read_frame(args), columns=cols, name=Path(args.input).name)
    if getattr(args, "judge_rule", None):
        table = apply_judge_rule(table, args.judge_rule)
    return table


def load_labelled(args):
    """:func:`load_table`, refusing a table with too few human verdicts (none, in a judge file
    such as AlpacaEval annotations) now, in a second, not after the embedding pass."""
    from puaudit.audit.splits import check_labels

    table = load_table(args)
    check_labels(table)
    return table
