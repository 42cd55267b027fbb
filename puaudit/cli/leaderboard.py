"""``puaudit models INPUT``: the model leaderboard four ways (judge, audited, human, PPI).

Prints one line per model (ranks, win rates with 95% intervals, Bradley–Terry strengths) and the
models whose judge win rate lies outside the prediction-powered interval. With ``--json`` those
lines go to stderr and stdout holds one JSON object alone: ``models`` (one object per model, the
first ``--top`` of the leaderboard, with ``model``, ``n``, ``n_human`` and, for each source s in
judge, audited, human, ppi: ``bt_s``, ``bt_s_lo``, ``bt_s_hi``, ``winrate_s``, ``winrate_s_lo``,
``winrate_s_hi``, ``rank_s``), ``n_models`` (all of them), ``params``, ``diagnostics`` and
``notes``; ``-o`` writes every model. The audited verdicts come from ``puaudit_adjusted``: INPUT
may be a ``puaudit audit`` export, or name the export with ``--audit-export``. Bad input prints
the message on stderr and returns 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from puaudit.cli.options import add_column_arguments
from puaudit.cli.output import add_json_argument, report_stream
from puaudit.cli.table_input import add_input_arguments, read_frame
from puaudit.errors import PUAuditError
from puaudit.rankings.leaderboard_limits import BOOTSTRAP_WORK, TOP_MODELS

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``models`` sub-command on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "models", help="model win rates and Bradley-Terry rankings: judge, audited, human, PPI",
        description=__doc__.splitlines()[0])
    add_input_arguments(p)
    p.add_argument("--audit-export", metavar="FILE", default=None,
                   help="a `puaudit audit` export of INPUT (same rows): its puaudit_adjusted "
                        "column gives the audited verdicts")
    p.add_argument("--ties", choices=["half", "exclude"], default="half",
                   help="a tie is half a win for each side (default) or not a comparison")
    p.add_argument("--length-control", action="store_true",
                   help="also report the length-controlled win rate (AlpacaEval-style)")
    p.add_argument("--resamples", type=int, default=1000, metavar="N",
                   help="bootstrap draws per interval (default 1000)")
    p.add_argument("--alpha", type=float, default=0.05, help="1 - coverage (default 0.05)")
    p.add_argument("--top", type=int, default=TOP_MODELS, metavar="N",
                   help=f"print and put in --json the first N models of the leaderboard "
                        f"(default {TOP_MODELS}; 0 = all); -o writes all")
    p.add_argument("--max-work", type=int, default=BOOTSTRAP_WORK, metavar="N",
                   help="cap on bootstrap draws x models per Bradley-Terry interval (default "
                        f"{BOOTSTRAP_WORK:,}); fewer draws, or no strength intervals, beyond it")
    p.add_argument("--seed", type=int, default=0)
    add_column_arguments(p, ("model_a", "model_b", "judge", "human", "question_id"))
    p.add_argument("-o", "--output", metavar="OUT.csv", default=None,
                   help="write the per-model table (.csv, .parquet or .jsonl)")
    add_json_argument(p)
    return p


def _audited(df, export_path, n_rows, args):
    """Audited verdicts from the export's ``puaudit_adjusted`` column (None when absent)."""
    from puaudit.data.schema import normalize_verdicts

    source = df
    if export_path:
        source = read_frame(args, export_path)
        if len(source) != n_rows:
            raise PUAuditError(f"{Path(export_path).name} has {len(source)} rows but INPUT has "
                               f"{n_rows}; pass the export written by `puaudit audit` for this "
                               "INPUT.")
        if "puaudit_adjusted" not in source.columns:
            raise PUAuditError(f"{Path(export_path).name} has no puaudit_adjusted column; pass "
                               "a file written by `puaudit audit`.")
    if "puaudit_adjusted" not in source.columns:
        return None
    return normalize_verdicts(source["puaudit_adjusted"].tolist(), column="puaudit_adjusted",
                              allow_missing=True)


def _f(x, nd=3) -> str:
    return "  n/a" if x is None or x != x else f"{x:.{nd}f}"


def _summary(res, top: int | None = None) -> str:
    f = res.frame if top is None else res.frame.head(top)
    avail = res.available()
    short = {"judge": "judge", "audited": "audited", "human": "human", "ppi": "ppi"}
    head = f"{'model':<24} {'n':>6} {'human':>6}  " + "  ".join(
        f"{'rank ' + short[s]:>12}" for s in avail)
    lines = [f"{res.diagnostics['n_models']} models, {res.diagnostics['n_rows_used']} comparisons "
             f"({res.diagnostics['n_rows_dropped']} rows without two distinct models left out); "
             f"{res.diagnostics.get('n_units_labelled', 0)} items with human votes, "
             f"{res.diagnostics.get('n_units_unlabelled', 0)} with the judge only.", "", head]
    for _, r in f.iterrows():
        ranks = "  ".join(f"{('' if r[f'rank_{s}'] != r[f'rank_{s}'] else int(r[f'rank_{s}'])):>12}"
                          for s in avail)
        lines.append(f"{str(r['model'])[:24]:<24} {int(r['n']):>6} {int(r['n_human']):>6}  {ranks}")

    def intervals(title: str, key: str, nd: int = 3) -> list[str]:
        """``title``, then per model each source's ``key`` and its interval."""
        return ["", title] + [f"  {str(r['model'])[:24]:<24} " + "; ".join(
            f"{s} {_f(r[f'{key}_{s}'], nd)} [{_f(r[f'{key}_{s}_lo'], nd)}, "
            f"{_f(r[f'{key}_{s}_hi'], nd)}]" for s in avail) for _, r in f.iterrows()]

    lines += intervals("Win rate against the field [95% interval]:", "winrate")
    lines += intervals("Bradley-Terry strength (log-odds, mean 0) [95% interval]:", "bt", 2)
    if "lc_winrate_judge" in f.columns:
        lines += intervals("Length-controlled win rate [95% interval]:", "lc_winrate")
        g = {s: res.diagnostics.get(f"gamma_{s}") for s in ("judge", "audited", "human")}
        lines.append("  length coefficient: " + ", ".join(f"{s} {_f(v, 2)}" for s, v in g.items()
                                                         if v is not None))
    if "ppi" in avail:
        dis = res.disagreements()
        dis = dis[dis["model"].isin(set(f["model"]))]
        lines.append("")
        if len(dis):
            lines.append("Judge vs people (the judge's win rate outside the prediction-powered "
                         "interval):")
            for _, r in dis.iterrows():
                lines.append(f"  {str(r['model'])[:24]:<24} judge {_f(r['judge'])} vs "
                             f"{_f(r['estimate'])} [{_f(r['lo'])}, {_f(r['hi'])}] "
                             f"({r['direction']})")
        else:
            lines.append("Judge vs people: every judge win rate"
                         + (" shown" if len(f) < len(res.frame) else "")
                         + " lies inside the prediction-powered interval.")
    lam = {k[7:]: v for k, v in res.diagnostics.items() if k.startswith("lambda_")}
    if lam:
        lines.append("PPI++ weights: " + ", ".join(f"{k} {_f(v, 2)}" for k, v in lam.items()))
    lines += [f"note: {n}" for n in res.notes + ([res.top_note(top)] if top else [])
              if n]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; 0 on success (bad input raises :class:`PUAuditError`)."""
    from puaudit.data.jsonsafe import dumps
    from puaudit.data.writers import check_output_path, write_table
    from puaudit.data.schema import apply_judge_rule, load_comparisons
    from puaudit.rankings.estimate import table_rankings

    if args.output:  # before any work: never overwrite an input, fail early on a bad path
        check_output_path(args.output, inputs=[args.input, args.audit_export],
                          what="output (-o)")
    # every format `puaudit audit` reads (AlpacaEval annotations, Label Studio, ...)
    df = read_frame(args)
    cols = {k[4:]: v for k, v in vars(args).items() if k.startswith("col_") and v}
    table = load_comparisons(df, columns=cols, name=Path(args.input).name)
    if args.judge_rule:
        table = apply_judge_rule(table, args.judge_rule)
    audited = _audited(df, args.audit_export, len(df), args)
    if args.top < 0:
        raise PUAuditError(f"--top must be 0 (all models) or more, got {args.top}.")
    res = table_rankings(table, audited=audited, ties=args.ties,
                         length_control=args.length_control, n_resamples=args.resamples,
                         alpha=args.alpha, max_work=args.max_work, random_state=args.seed)
    if args.output:
        write_table(res.frame, args.output)
    top = args.top or None
    report = report_stream(args)  # stderr under --json: stdout holds the JSON line alone
    print(_summary(res, top), file=report)
    if args.output:
        print(f"wrote {len(res.frame)} models to {args.output}", file=report)
    if args.json:
        out = res.to_dict(top=top)
        out["input"] = Path(args.input).name
        out["judge"] = table.judge_column
        print(dumps(out))
    return 0

