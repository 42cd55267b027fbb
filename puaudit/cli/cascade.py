"""``puaudit cascade FILE --judges COL1 COL2 ... --target-agreement T --risk R -o OUT``.

Judges cheapest first; stage k certifies judge k on the rows earlier stages did not trust, at
risk R/K, which decides who judge k+1 is asked about (:mod:`puaudit.audit.certify.cascade`); the
trusted rows are then certified together by one test at risk R (``--certify joint``, the default,
:mod:`puaudit.audit.certify.cascade`), or stage by stage (``--certify per-stage``); the rows no
stage trusts go to people. ``--budget S`` lets each later judge be asked about S of the rows:
the stage before it sends its least confident certified rows on too. The export keeps every
input row and column and adds ``puaudit_cascade_split``, ``puaudit_cascade_stage`` (the judge
trusted, or ``people``), ``puaudit_cascade_verdict`` and ``puaudit_cascade_routed_to`` (the
last judge each row was sent to: for a judge not asked yet, whom to ask). With ``--json``
stdout holds one JSON object alone (per stage and overall) and the summary goes to stderr.
"""

from __future__ import annotations

import argparse
import builtins
import functools
import sys
import time
from pathlib import Path

from puaudit.cli.output import exclusion_note, fmt
from puaudit.errors import PUAuditError

__all__ = ["add_parser", "run"]

#: audit options the cascade sets itself, per stage
_EXCLUDED = ("target_agreement", "risk", "m", "other_judges")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``cascade`` subcommand."""
    from puaudit.cli.options import add_audit_arguments, add_table_arguments

    p = sub.add_parser(
        "cascade", help="a cascade of judges, cheapest first: trust each where certified, "
                        "people for the rest",
        description="Stage k certifies judge k's verdicts on the rows the stages before it did "
                    "not trust (fixed-sequence test, exact binomial bounds, risk R/K on the P "
                    "items of that region), which decides who the next judge is asked about; "
                    "stage k reads only judges 1..k. The trusted rows of all stages are then "
                    "certified together at risk R (--certify joint, the default) or each "
                    "stage's own answer is kept (--certify per-stage). Rows no stage trusts go "
                    "to people. See docs/method.md and docs/judge.md.")
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True,
                   help="export (.csv, .parquet or .jsonl): every input row and column plus "
                        "puaudit_cascade_split, puaudit_cascade_stage, puaudit_cascade_verdict, "
                        "puaudit_cascade_routed_to")
    p.add_argument("--judges", nargs="+", required=True, metavar="COL",
                   help="judge verdict columns, cheapest first (a rule as rule:longer, "
                        "rule:shorter or rule:position-a); judges after the last column present "
                        "may be absent (not asked yet)")
    p.add_argument("--target-agreement", type=float, required=True, metavar="T",
                   help="trusted verdicts agree with people at least this often (e.g. 0.85)")
    p.add_argument("--risk", type=float, default=0.1, metavar="R",
                   help="probability that the trusted verdicts miss T (default 0.1); each of "
                        "the K stages routes at R/K")
    p.add_argument("--certify", choices=("joint", "per-stage"), default="joint",
                   help="joint (default): one test of every trusted row together at risk R; "
                        "per-stage: each stage's trusted rows meet T on their own (Trust or "
                        "Escalate's rule)")
    p.add_argument("--budget", type=float, default=None, metavar="S",
                   help="share of the rows each later judge may be asked about: a stage that "
                        "certified more than 1 - S of the rows sends its least confident "
                        "certified rows on too, and the later judge's verdict is trusted there "
                        "where it is confident (joint certification only; default: only the "
                        "rows a stage did not certify)")
    add_table_arguments(p)
    add_audit_arguments(p, exclude=_EXCLUDED)


def _print(summary: dict, file=None) -> None:
    print = functools.partial(builtins.print, file=file)  # noqa: A001
    f = fmt
    g = summary["guarantee"]
    how = ("the trusted rows certified together" if g["certification"] == "joint"
           else "each stage certified on its own")
    print(f"cascade of {len(summary['stages'])} judges: agreement >= {g['target']:g} with "
          f"probability >= {1 - g['risk']:g}, {how} (each stage routes at risk "
          f"{g['risk_per_stage']:.4g})")
    for i, st in enumerate(summary["stages"], 1):
        lo, hi = st["realised_ci"]
        print(f"  stage {i} {st['judge']}: asked {f(st['asked'])} of the rows, trusted "
              f"{st['n_trusted']} audited rows (coverage {f(st['coverage'])}); trusted "
              f"validation rows agree {f(st['realised'])} [{f(lo)}, {f(hi)}], "
              f"n={st['n_validation_trusted']}")
        if g["certification"] == "joint":
            last = i == len(summary["stages"])
            handed = (f", and {st['n_handed_on']} rows it certified too (budget)"
                      if st["n_handed_on"] else "")
            print(f"    its own certification at risk {st['risk']:.4g} trusted "
                  f"{f(st['coverage_alone'])}"
                  + ("" if last else f"; the rest went to stage {i + 1}{handed}"))
        if st["message"]:
            print(f"    {st['message']}")
    alone = (summary.get("union") or {}).get("alone")
    if alone:
        print(f"  {alone['judge']} alone (asked about every routed row), certified at risk "
              f"{alone['risk']:.4g} beside the union at {alone['risk']:.4g}: coverage "
              f"{f(alone['coverage'])}; {alone['n_folds_chosen']} of "
              f"{len(summary['union']['folds'])} certification folds take it")
    lo, hi = summary["realised_ci"]
    print(f"  people: {summary['n_people']} of {summary['n_audited']} audited rows")
    if summary.get("n_excluded"):
        print(f"  excluded {summary['n_excluded']} of {summary['n_rows']} rows"
              + exclusion_note(summary))
    print(f"overall coverage {f(summary['coverage'])}; trusted validation rows agree "
          f"{f(summary['realised'])} [{f(lo)}, {f(hi)}], n={summary['n_validation_trusted']}")


def run(args: argparse.Namespace) -> int:
    """Run ``puaudit cascade``; returns the exit status."""
    from puaudit.audit.certify.cascade import CASCADE_COLUMNS, run_cascade
    from puaudit.audit.config import check_risk, check_target
    from puaudit.cli.options import config_from_args
    from puaudit.cli.output import report_stream
    from puaudit.cli.table_input import embeddings, load_table
    from puaudit.data.jsonsafe import dumps
    from puaudit.data.writers import check_output_path, write_table

    target, risk = check_target(args.target_agreement), check_risk(args.risk)
    if args.judge_rule:
        raise PUAuditError(f"Name a rule as one of the judges instead of --judge-rule: --judges "
                           f"rule:{args.judge_rule} ...")
    cfg = config_from_args(args)
    check_output_path(args.output, inputs=[args.input, args.embeddings, args.human],
                      what="output (-o)")
    if args.col_judge is None:  # the table needs a judge role to load; the first judge column
        args.col_judge = next((j for j in args.judges if not j.startswith("rule:")), None)
    table = load_table(args)
    clash = [c for c in CASCADE_COLUMNS if c in table.frame.columns]
    if clash:
        raise PUAuditError(f"The input already has {', '.join(clash)} (an earlier cascade's "
                           "export): run the cascade on a table without them (puaudit judge "
                           "--only-escalated writes one).", column=clash[0])
    emb = embeddings(args, table)
    t0 = time.perf_counter()
    res = run_cascade(table, emb, args.judges, target=target, risk=risk, config=cfg,
                      certify=args.certify, budget=args.budget)
    print(f"cascade ran in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    write_table(res.to_frame(table), args.output)
    summary = res.summary()
    out = report_stream(args)  # stderr under --json: stdout holds the JSON line alone
    _print(summary, file=out)
    print(f"wrote {len(table)} rows to {Path(args.output)} (stage and verdict in "
          "puaudit_cascade_stage, puaudit_cascade_verdict; the last judge each row was sent to "
          "in puaudit_cascade_routed_to)", file=out)
    if args.json:
        print(dumps(summary))
    return 0
