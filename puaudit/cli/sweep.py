"""``puaudit sweep INPUT --param m|p_ratio --values ...``: Cons_adj over a grid of one
parameter; with ``--json`` stdout holds the grid's results as one JSON object alone."""

from __future__ import annotations

import argparse

from puaudit.cli.options import add_audit_arguments, add_table_arguments, config_from_args
from puaudit.cli.output import print_flushed, report_stream
from puaudit.cli.table_input import embeddings, load_labelled
from puaudit.data.jsonsafe import dumps

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` subcommand."""
    p = sub.add_parser("sweep", help="Cons_adj over a grid of m or p_ratio")
    p.add_argument("input")
    add_table_arguments(p)
    add_audit_arguments(p, exclude=("random_state",))
    p.add_argument("--param", required=True, choices=["m", "p_ratio"])
    p.add_argument("--values", required=True, nargs="+", type=float)
    p.add_argument("--seeds", type=int, default=5)


def run(args) -> int:
    """Audit each value of ``--param`` over ``--seeds`` splits; print the table."""
    from puaudit.audit.evaluate import sweep

    table = load_labelled(args)
    emb = embeddings(args, table)
    df = sweep(table, emb, param=args.param, values=args.values, seeds=args.seeds,
               config=config_from_args(args))
    print_flushed(df.to_string(index=False, float_format=lambda v: f"{v:.4f}"), file=report_stream(args))
    if args.json:
        print_flushed(dumps({"param": args.param, "scorer": args.cfg_scorer, "rule": args.cfg_rule,
                     "results": df.to_dict(orient="records")}))
    return 0
