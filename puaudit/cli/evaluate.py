"""``puaudit evaluate INPUT``: repeated seeded audits, the mean (sd) of consistency per scorer
and rule; with ``--json`` stdout holds the leaderboard as one JSON object alone."""

from __future__ import annotations

import argparse
import functools
import time

from puaudit.cli.options import add_audit_arguments, add_table_arguments, config_from_args
from puaudit.cli.output import fmt, print_flushed, report_stream
from puaudit.cli.table_input import embeddings, load_labelled
from puaudit.data.jsonsafe import dumps

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` subcommand."""
    p = sub.add_parser("evaluate", help="repeated seeded audits: mean (sd) of consistency")
    p.add_argument("input")
    add_table_arguments(p)
    add_audit_arguments(p, exclude=("scorer", "rule", "random_state"))
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--scorers", default=None,
                   help="comma-separated scorers or 'all' (default: the audit's default, auto)")
    p.add_argument("--rules", default=None,
                   help="comma-separated rules (guarded, paper) or 'all' (default guarded)")


def _split_list(s: str | None, allowed) -> list[str] | None:
    if s is None:
        return None
    if s == "all":
        return list(allowed)
    return [x.strip() for x in s.split(",") if x.strip()]


def run(args) -> int:
    """Audit ``--seeds`` seeded splits with each scorer and rule; print the leaderboard."""
    from puaudit.audit.config import SCORER_CHOICES
    from puaudit.audit.evaluate import evaluate
    from puaudit.audit.config import RULES

    table = load_labelled(args)
    cfg = config_from_args(args)
    emb = embeddings(args, table) if cfg.texts else None  # --no-texts: no encoder at all
    scorers = _split_list(args.scorers, SCORER_CHOICES)
    rules = _split_list(args.rules, RULES)
    t0 = time.perf_counter()
    res = evaluate(table, emb, seeds=args.seeds, scorers=scorers, rules=rules, config=cfg)
    lb = res["leaderboard"]
    judge = table.judge_column
    # with --json the table goes to stderr: stdout holds the JSON line alone, as for audit
    print = functools.partial(print_flushed, file=report_stream(args))  # noqa: A001
    print(f"{args.seeds} seeds, p_ratio {cfg.p_ratio}, judge '{judge}', "
          f"{time.perf_counter() - t0:.1f}s"
          + ("" if cfg.texts else "; evidence only (--no-texts)"))
    print(f"{'scorer':<9} {'rule':<8} {'Cons_orig':>15} {'Cons_adj':>15} {'change':>16} {'reversed':>9} {'precision':>9}")
    for e in lb:
        print(f"{e['scorer']:<9} {e['rule']:<8} {fmt(e['cons_orig_mean'])} ({fmt(e['cons_orig_sd'])})"
              f"   {fmt(e['cons_adj_mean'])} ({fmt(e['cons_adj_sd'])})  {fmt(e['delta_mean'], 4)} "
              f"({fmt(e['delta_sd'], 4)}) {fmt(e['reversed_share'])} {fmt(e['reversal_precision'])}")
    if args.json:
        first = lb[0]
        out = {"n_rows": len(table), "judge": judge, "seeds": args.seeds, "p_ratio": cfg.p_ratio,
               "m": cfg.m if cfg.m is not None else first["m_mean"],
               "scorer": first["scorer"], "rule": first["rule"], "chosen": first.get("chosen"),
               "encoder": None if emb is None else emb.encoder,
               "n_validation": first["n_validation_mean"],
               **{k: first[k] for k in ("cons_orig_mean", "cons_orig_sd", "cons_adj_mean",
                                        "cons_adj_sd", "delta_mean", "delta_sd")},
               "cons_orig": first["cons_orig_mean"], "cons_adj": first["cons_adj_mean"],
               "per_type": first["per_type"], "leaderboard": lb}
        print_flushed(dumps(out))
    return 0
