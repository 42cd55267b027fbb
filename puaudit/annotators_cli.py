"""``puaudit annotators INPUT``: audit every annotator of a comparison table, the judge included.

Prints a human summary; with ``--json`` the last line of stdout is one JSON object with
``annotators`` (one object per annotator, the fields of :class:`AnnotatorReport.annotators` and
``flags``) and ``overall`` (``krippendorff_alpha``, ``n_items_multi``, ...). Bad input prints the
message on stderr and returns 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from puaudit.annotators import annotator_report
from puaudit.errors import PUAuditError
from puaudit.io import check_output_path, read_table, write_table
from puaudit.schema import load_comparisons

__all__ = ["add_parser", "run", "main", "COMMANDS"]

COMMANDS = ("annotators",)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``annotators`` sub-command on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "annotators", help="per-annotator reliability and biases (the LLM judge included)",
        description=__doc__.splitlines()[0])
    p.add_argument("input", metavar="INPUT", help="CSV / TSV / Parquet / JSONL comparison table")
    p.add_argument("--annotator-col", metavar="C", help="column holding the annotator ids")
    p.add_argument("--judge-col", metavar="C", help="column holding the LLM judge's verdicts")
    p.add_argument("--human-col", metavar="C", help="column holding the human votes")
    p.add_argument("--min-votes", metavar="N", type=int, default=30,
                   help="strict votes needed to be flagged and to set the norm (default 30)")
    p.add_argument("--judge-in-alpha", action="store_true",
                   help="count the judge as one more coder in Krippendorff's alpha")
    p.add_argument("--no-judge", action="store_true", help="leave the judge out of the table")
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    p.add_argument("-o", "--output", metavar="report.csv", help="write the annotator table")
    # puaudit.cli dispatches on ``args.run``; ``func`` serves the stand-alone entry point.
    p.set_defaults(func=run, run=run)
    return p


def _summary(report) -> str:
    df = report.annotators
    ov = report.overall
    people = df[~df["is_judge"]]
    coders = "people + judge" if ov["alpha_includes_judge"] else "people only"
    lines = [f"{ov['n_annotators']} annotators, {ov['n_votes']} votes over {ov['n_items']} items "
             f"({ov['n_items_multi']} with 2+ votes).",
             f"Krippendorff's alpha (nominal, {coders}, {ov['n_items_alpha']} items): "
             f"{_f(ov['krippendorff_alpha'])}"]
    judge = df[df["is_judge"]]
    if len(judge):
        j = judge.iloc[0]
        lines.append(f"{j['annotator']}: agreement with people {_f(j['agree_peers'])} over "
                     f"{j['n_peer_pairs']} pairs; people agree with each other at median "
                     f"{_f(ov['median_agree_peers'])}.")
    elig = people[people["flag_eligible"]].sort_values("agree_judge", ascending=False)
    if len(elig):
        lines.append(f"Agreement with the judge (people with >= {report.params['min_votes_flag']} "
                     "strict votes):")
        show = elig if len(elig) <= 10 else elig.iloc[list(range(5)) + list(range(-5, 0))]
        for _, r in show.iterrows():
            lines.append(f"  {r['annotator']:<20} {_f(r['agree_judge'])} "
                         f"[{_f(r['agree_judge_lo'])}, {_f(r['agree_judge_hi'])}]  "
                         f"n={r['n_agree_judge']}")
    flagged = df[[bool(f) for f in df["flags"]]]
    lines.append(f"Flagged: {len(flagged)}")
    for _, r in flagged.iterrows():
        for reason in r["flags"]:
            lines.append(f"  {r['annotator']}: {reason}")
    return "\n".join(lines)


def _audit_link(table, df):
    """Per-annotator disagreement with the audit, when INPUT is a ``puaudit audit`` export."""
    if not {"puaudit_score", "puaudit_adjusted"} <= set(df.columns):
        return None
    import numpy as np
    import pandas as pd

    from puaudit.annotators import annotator_score_disagreement

    score = pd.to_numeric(df["puaudit_score"], errors="coerce").to_numpy(dtype=float, copy=True)
    if "puaudit_split" in df.columns:  # P rows carry the human verdict itself: not audited
        score[~df["puaudit_split"].isin(["validation", "unlabelled"]).to_numpy()] = np.nan
    adjusted = np.array([v if v in ("A", "B") else None for v in df["puaudit_adjusted"]], dtype=object)
    link = annotator_score_disagreement(table, score, adjusted)
    keep = [c for c in link.columns if c != "annotator"]
    return link.rename(columns={c: c if c.startswith("audit") else f"audit_{c}" for c in keep})


def _f(x) -> str:
    return "n/a" if x is None or x != x else f"{x:.3f}"


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; 0 on success, 2 on bad input (message on stderr)."""
    try:
        if args.output:  # before any work: never overwrite the input, fail early on a bad path
            check_output_path(args.output, inputs=[args.input], what="output (-o)")
        df = read_table(args.input)
        columns = {}
        if args.annotator_col:
            columns["annotator"] = args.annotator_col
        if args.human_col:
            columns["human"] = args.human_col
        table = load_comparisons(df, columns=columns, judge_column=args.judge_col)
        report = annotator_report(table, include_judge=not args.no_judge,
                                  judge_in_alpha=args.judge_in_alpha,
                                  min_votes_flag=args.min_votes)
        audit_link = _audit_link(table, df)
        if audit_link is not None:
            report.annotators = report.annotators.merge(audit_link, on="annotator", how="left")
        if args.output:
            write_table(report.to_frame(), args.output)
    except PUAuditError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(_summary(report))
    if "audit_disagree" in report.annotators.columns:
        print("Audit link (INPUT is an audit export): share of each person's scored votes that "
              "the audit's adjusted verdict contradicts is in the 'audit_disagree' field.")
    if args.output:
        print(f"Annotator report written to {args.output}")
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m puaudit.annotators_cli INPUT ...``."""
    parser = argparse.ArgumentParser(prog="puaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["annotators", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
