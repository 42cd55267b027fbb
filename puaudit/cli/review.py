"""``puaudit review export|import``: review decisions in and out of the store.

``export -o FILE`` writes every decision (one line each, the audit settings as JSON); with
``--table INPUT`` it writes that table instead, every row and column, plus the
``puaudit_review_*`` columns (consensus, votes, disagreement, notes); with ``--table
AUDIT_EXPORT --to label-studio|argilla`` (or a ``puaudit cascade`` export: the rows it left for
people) it writes the rows that need a person as Label Studio tasks (and their labelling
config) or an Argilla ``to_disk`` folder (:mod:`.tools`).
``import FILE`` adds the decisions of an export (CSV, TSV, Parquet or JSONL), or the votes of a
Label Studio JSON export or Argilla records (a file or a ``to_disk`` folder); decisions already
stored (same ``uid``) are left out, so importing twice adds nothing.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import pandas as pd

from puaudit.cli.table_input import add_max_rows_argument, limits_from
from puaudit.errors import PUAuditError
from puaudit.review.labeling_tools import TOOLS

__all__ = ["add_parser", "run"]

REQUIRED = ("row_key", "verdict", "reviewer")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``review`` sub-command on an ``argparse`` subparsers object."""
    p = subparsers.add_parser("review", help="review decisions: export | import",
                              description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="review_command", required=True)
    for name, help_ in (("export", "write the stored decisions (or a table with review columns)"),
                        ("import", "add the decisions of an export to the store")):
        q = sub.add_parser(name, help=help_)
        if name == "export":
            q.add_argument("-o", "--output", required=True,
                           help="output file (.csv, .tsv, .parquet or .jsonl; with --to: the "
                                "tasks .json, or the folder for argilla)")
            q.add_argument("--table", metavar="INPUT", default=None,
                           help="write this comparison table with the puaudit_review_* columns "
                                "instead of the decisions")
            q.add_argument("--to", choices=TOOLS, default=None,
                           help="with --table AUDIT_EXPORT (or a cascade export): write the "
                                "rows that need a person for this annotation tool")
            q.add_argument("--reviewer", default=None, help="only this reviewer's decisions")
        else:
            q.add_argument("input", metavar="FILE",
                           help="an export of `puaudit review export`, a Label Studio JSON "
                                "export or Argilla records (file or to_disk folder)")
            add_max_rows_argument(q)  # a tool's export counts its votes, as the audit does
        g = q.add_mutually_exclusive_group()
        g.add_argument("--db", default=None, metavar="PATH",
                       help="SQLite file (default $PUAUDIT_REVIEW_DB or ~/.puaudit/review.sqlite)")
        g.add_argument("--url", default=None, metavar="URL",
                       help="any SQLAlchemy URL (default $PUAUDIT_REVIEW_URL)")
        q.add_argument("--allow-other-tables", action="store_true",
                       help="use an SQLite file that also holds another application's tables "
                            "(refused otherwise, to leave such a file untouched)")
    return p


def _store(args):
    from puaudit.review.store import ReviewStore

    url = args.url or (f"sqlite:///{Path(args.db).expanduser()}" if args.db else None)
    return ReviewStore(url, allow_other_tables=args.allow_other_tables or None)


def run(args: argparse.Namespace) -> int:
    """Run ``review export`` / ``review import``; 0 on success."""
    return _export(args) if args.review_command == "export" else _import(args)


def _to_tool(args) -> int:
    """``export --table AUDIT_EXPORT --to TOOL``: the rows that need a person, for the tool."""
    from puaudit.data.writers import check_output_path
    from puaudit.data.load import load_input
    from puaudit.review.labeling_tools import write_argilla, write_label_studio

    if not args.table:
        raise PUAuditError(f"--to {args.to} writes the rows of an audit export that need a "
                           "person: give the export with --table AUDIT_EXPORT.")
    name = Path(args.table).name
    if args.to == "argilla":
        n = write_argilla(load_input(args.table), args.output, name=name)
        print(f"wrote {n} records to {args.output} (load it with "
              "rg.Dataset.from_disk; export it back with to_disk, then `puaudit review import`)")
        return 0
    check_output_path(args.output, inputs=[args.table], what="output (-o)", table=False)
    n, config = write_label_studio(load_input(args.table), args.output, name=name)
    print(f"wrote {n} tasks to {args.output} and their labelling config to {config} (import "
          "both into a Label Studio project; export it as JSON, then `puaudit review import`)")
    return 0


def _export(args) -> int:
    from puaudit.data.writers import check_output_path, write_table
    from puaudit.data.load import load_input

    if getattr(args, "to", None):
        return _to_tool(args)
    check_output_path(args.output, inputs=[args.table], what="output (-o)")
    store = _store(args)
    if args.table:
        from puaudit.data.schema import load_comparisons
        from puaudit.review.feedback import review_columns
        from puaudit.review.keys import row_keys

        df = load_input(args.table)
        table = load_comparisons(df, name=Path(args.table).name)
        decisions = store.decisions(row_keys(table), reviewer=args.reviewer)
        out = df.copy()
        for name, values in review_columns(table, decisions).items():
            col = name
            while col in out.columns:
                col += "_new"
            out[col] = values.to_numpy()
        write_table(out, args.output)
        n = int((out["puaudit_review_n_votes"] > 0).sum()) if "puaudit_review_n_votes" in out else 0
        print(f"wrote {len(out)} rows ({n} with review votes) to {args.output}")
        return 0
    decisions = store.decisions(reviewer=args.reviewer)
    out = decisions.copy()
    out["created_at"] = out["created_at"].map(lambda t: t.isoformat() if pd.notna(t) else "")
    write_table(out, args.output)
    print(f"wrote {len(out)} decisions from {store.location} to {args.output}")
    return 0


def _import(args) -> int:
    from puaudit.data.io import read_table
    from puaudit.review.labeling_tools import tool_decisions, tool_table

    name = Path(args.input).name
    limits = limits_from(args).kwargs()  # a file, or an Argilla folder's records as their votes expand
    df = None if Path(args.input).is_dir() else read_table(args.input, **limits)
    missing = [c for c in REQUIRED if df is None or c not in df.columns]
    found = (tool_table(args.input, df, read=functools.partial(read_table, **limits))
             if missing else None)
    if found is not None:  # a Label Studio or Argilla export: its votes are the decisions
        records = tool_decisions(*found, name=name)
    elif missing:
        raise PUAuditError(f"{name}: column(s) {missing} missing; a decisions file needs "
                           f"{list(REQUIRED)} (write one with `puaudit review export`), or give "
                           "a Label Studio JSON export or Argilla records.", column=missing[0])
    else:
        records = df.astype(object).where(df.notna(), None).to_dict(orient="records")
    store = _store(args)
    added, counts = store.add_many(records, log=True)
    left = [f"{counts['n_stored']} already there"] if counts["n_stored"] else []
    if counts["n_repeated"]:
        left.append(f"{counts['n_repeated']} repeated in the file")
    print(f"imported {added} decisions into {store.location}"
          + (f" ({'; '.join(left)})" if left else ""))
    return 0

