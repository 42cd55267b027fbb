"""``puaudit trustjudge``: Conflict Ratio and NTR_k of a pairwise table from the command line.

The judge runner that produces such tables is ``puaudit judge`` (:mod:`puaudit.cli.judge`).
"""

from __future__ import annotations

import argparse
import sys

from puaudit.cli.output import add_json_argument
from puaudit.data.jsonsafe import dumps
from puaudit.errors import PUAuditError
from puaudit.percents import percent
from puaudit.data.writers import check_output_path, write_table
from puaudit.trustjudge.relations import METHODS
from puaudit.trustjudge.report import TrustJudgeReport, analyse
from puaudit.trustjudge.scores import SCORE_METHODS
from puaudit.trustjudge.transitivity import KIND_LABELS

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``trustjudge`` subcommand to a ``puaudit`` argument parser."""
    p = subparsers.add_parser(
        "trustjudge", help="Conflict Ratio and non-transitivity (NTR_k) of pairwise verdicts.",
        description="Score-comparison conflicts and non-transitive pairwise judgments "
                    "(TrustJudge). With --json stdout holds one JSON object alone (the "
                    "summary goes to stderr).")
    p.add_argument("pairwise", metavar="PAIRWISE", help="pairwise-verdict table (CSV/Parquet/JSONL)")
    p.add_argument("--scores", metavar="SCORES", help="single-score table; without it CR is null")
    p.add_argument("--method", choices=METHODS, default="baseline", help="pair relation")
    p.add_argument("--delta", type=float, default=0.0, help="tie tolerance δ (default 0)")
    p.add_argument("--k", type=int, nargs="+", default=[3, 4, 5], help="subset sizes for NTR_k")
    p.add_argument("--score-method", choices=SCORE_METHODS, default=None,
                   help="score rule (default: baseline with --method baseline, else distribution)")
    p.add_argument("--gamma", type=float, default=1.0,
                   help="γ of the confidence weights exp(−γ·PPL) of --method weighted (default 1)")
    p.add_argument("--rescale", type=float, nargs=2, metavar=("LOW", "HIGH"), default=None,
                   help="distribution scores: map the fine scale linearly onto LOW..HIGH "
                        "(e.g. 1 5 for scores asked on 1-100); --tol is then in those units")
    p.add_argument("--score-scale", type=float, nargs=2, metavar=("A", "B"), default=None,
                   help="ends of the fine scale for --rescale (default: the smallest and largest "
                        "score token of the scores table)")
    p.add_argument("--tol", type=float, default=0.0, help="score tolerance of the Conflict Ratio")
    p.add_argument("--seed", type=int, default=0, help="seed of the Monte-Carlo NTR estimate")
    add_json_argument(p, report="summary")
    p.add_argument("--violations-out", metavar="FILE", help="write the violating triples here")


def _pct(x: float | None) -> str:
    return percent(x, digits=2)


def summary_lines(report: TrustJudgeReport) -> list[str]:
    """Human-readable summary of a report."""
    ks = report.k
    head = f"TrustJudge: method={report.method}, delta={report.delta:g}, "
    if report.log.get("gamma") is not None:
        head += f"gamma={report.log['gamma']:g}, "
    if report.score_method:
        rescale = report.log.get("rescale_to")
        head += f"score={report.score_method}" + (
            f" rescaled to {rescale[0]:g}-{rescale[1]:g}" if rescale else "") + ", "
    if report.log.get("ppl_from_logprobs"):
        head += "perplexity from token log-probabilities, "
    counts = report.log.get("counts", {})
    lines = [head + f"{report.log.get('n_units', 0)} judge×question units, "
             f"{sum(counts.values())} pairs ({', '.join(f'{r} {n}' for r, n in counts.items())})"]
    ntr = ", ".join(f"NTR_{k} {_pct(report.ntr[k])}" + ("" if report.ntr_exact[k] or report.ntr_ci[k] is None
                    else f" [{_pct(report.ntr_ci[k][0])}, {_pct(report.ntr_ci[k][1])}]") for k in ks)
    lines.append(f"Overall: CR {_pct(report.cr)}; {ntr}")
    lines.append("Violating triples: " + ", ".join(f"{KIND_LABELS[k]} {n}" for k, n in report.triples.items()))
    for title, block in (("judge", report.per_judge), ("type", report.per_type)):
        for name, d in block.items():
            lines.append(f"  {title} {name}: CR {_pct(d['cr'])}; "
                         + ", ".join(f"NTR_{k} {_pct(d['ntr'][k])}" for k in ks))
    return lines


def _pair(values) -> tuple[float, float] | None:
    return None if values is None else (float(values[0]), float(values[1]))


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; returns the exit status (2 on bad input)."""
    try:
        if args.violations_out:  # before any work: never overwrite an input
            check_output_path(args.violations_out, inputs=[args.pairwise, args.scores],
                              what="--violations-out file")
        report = analyse(args.pairwise, args.scores, method=args.method, delta=args.delta,
                         k=tuple(args.k), random_state=getattr(args, "seed", 0),
                         score_method=getattr(args, "score_method", None),
                         tol=getattr(args, "tol", 0.0), gamma=getattr(args, "gamma", 1.0),
                         rescale_to=_pair(getattr(args, "rescale", None)),
                         score_scale=_pair(getattr(args, "score_scale", None)))
        if args.violations_out:
            write_table(report.violations, args.violations_out)
    except PUAuditError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from puaudit.cli.output import report_stream

    out = report_stream(args)  # stderr under --json: stdout holds the JSON line alone
    for line in summary_lines(report):
        print(line, file=out)
    if args.violations_out:
        print(f"Wrote {len(report.violations)} violating triples to {args.violations_out}",
              file=out)
    if args.json:
        print(dumps(report.to_dict()))
    return 0
