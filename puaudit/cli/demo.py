"""``puaudit demo -o FILE``: write a generated demo dataset (a biased judge, selective human
labels; :mod:`puaudit.data.demo`)."""

from __future__ import annotations

import argparse

from puaudit.errors import PUAuditError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    p = sub.add_parser("demo", help="write a generated demo dataset")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--rows", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)


def run(args) -> int:
    """Write ``--rows`` generated comparisons to ``-o``."""
    from puaudit.data.demo import generate_demo
    from puaudit.data.writers import check_output_path, write_table

    if args.rows < 20:
        raise PUAuditError("--rows must be at least 20 for a useful demo.")
    check_output_path(args.output, what="output (-o)")
    df = generate_demo(n_rows=args.rows, random_state=args.seed)
    write_table(df, args.output)
    print(f"wrote {len(df)} generated comparisons to {args.output}")
    return 0
