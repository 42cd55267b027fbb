"""``puaudit review export|import``: review decisions in and out of the store.

``export -o FILE`` writes every decision (one line each, the audit settings as JSON); with
``--table INPUT`` it writes that table instead, every row and column, plus the
``puaudit_review_*`` columns (consensus, votes, disagreement, notes). ``import FILE`` adds the
decisions of an export (CSV, TSV, Parquet or JSONL); decisions already stored (same ``uid``) are
left out, so importing twice adds nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from puaudit.errors import PUAuditError

__all__ = ["add_parser", "run", "main"]

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
                           help="output file (.csv, .tsv, .parquet or .jsonl)")
            q.add_argument("--table", metavar="INPUT", default=None,
                           help="write this comparison table with the puaudit_review_* columns "
                                "instead of the decisions")
            q.add_argument("--reviewer", default=None, help="only this reviewer's decisions")
        else:
            q.add_argument("input", metavar="FILE", help="an export of `puaudit review export`")
        g = q.add_mutually_exclusive_group()
        g.add_argument("--db", default=None, metavar="PATH",
                       help="SQLite file (default $PUAUDIT_REVIEW_DB or ~/.puaudit/review.sqlite)")
        g.add_argument("--url", default=None, metavar="URL",
                       help="any SQLAlchemy URL (default $PUAUDIT_REVIEW_URL)")
    p.set_defaults(func=run)
    return p


def _store(args):
    from puaudit.review.store import ReviewStore

    url = args.url or (f"sqlite:///{Path(args.db).expanduser()}" if args.db else None)
    return ReviewStore(url)


def run(args: argparse.Namespace) -> int:
    """Run ``review export`` / ``review import``; 0 on success, 2 on bad input."""
    try:
        if args.review_command == "export":
            return _export(args)
        return _import(args)
    except PUAuditError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _export(args) -> int:
    from puaudit.data.io import check_output_path, read_table, write_table

    check_output_path(args.output, inputs=[args.table], what="output (-o)")
    store = _store(args)
    if args.table:
        from puaudit.data.schema import load_comparisons
        from puaudit.review.feedback import review_columns
        from puaudit.review.keys import row_keys

        df = read_table(args.table)
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

    df = read_table(args.input)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise PUAuditError(f"{Path(args.input).name}: column(s) {missing} missing; a decisions "
                           f"file needs {list(REQUIRED)} (write one with `puaudit review export`).",
                           column=missing[0])
    records = df.astype(object).where(df.notna(), None).to_dict(orient="records")
    store = _store(args)
    added = store.add_many(records)
    print(f"imported {added} decisions into {store.location} "
          f"({len(records) - added} already there)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m puaudit.review.cli export|import ...`` (the errors and exit codes of ``puaudit``)."""
    from puaudit.cli import main as puaudit_main

    return puaudit_main(["review", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
