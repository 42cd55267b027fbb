"""``puaudit audit INPUT -o OUT``: check, load, embed, audit, write, spread, report.

Bad input prints one clear message on stderr and exits with status 2 (never a traceback); with
``--json`` stdout holds the audit's summary as one JSON object alone.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

from puaudit.cli.options import add_audit_arguments, add_table_arguments, config_from_args
from puaudit.cli.output import exclusion_note, fmt, print_flushed, report_stream
from puaudit.cli.table_input import embeddings, load_labelled, preload_scorers, streams
from puaudit.data.jsonsafe import dumps
from puaudit.errors import PUAuditError
from puaudit.percents import is_known, shown_change
from puaudit.progress import stderr_progress

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``audit`` subcommand."""
    p = sub.add_parser("audit", help="audit a table and write the relabelled export")
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True, help="output file (.csv, .parquet or .jsonl; .json with --format alpaca-eval)")
    add_table_arguments(p)
    add_audit_arguments(p)
    p.add_argument("--manifest", default=None, help="also write a JSON run manifest here")
    p.add_argument("--format", dest="export_format", default="table",
                   choices=["table", "alpaca-eval"],
                   help="table (default): every input column plus puaudit_*, as the -o "
                        "extension says; alpaca-eval: AlpacaEval annotations JSON (-o "
                        "audited.json) with preference set to the audited verdict, the judge's "
                        "kept as puaudit_judge_preference")
    p.add_argument("--spread-seeds", type=int, default=None, metavar="N",
                   help="also audit N seeded splits (the first is this audit) and report the "
                        "change's mean and range (JSON: delta_over_seeds); 1: off (default 5 "
                        "below 100,000 rows, else 1)")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="run on Ray (pip install -e .[ray]): distinct texts embedded by Ray Data, "
                        "scoring and cross-fitting folds as Ray tasks; same result as without. "
                        "ADDRESS: a cluster (HOST:6379); none: the cluster started on this machine "
                        "(ray start --head) or a new local one. See docs/ray.md")


def _check_audit_args(args):
    """Every option and output path of ``puaudit audit``, checked before any work.

    A bad ``--m`` is refused in a second, not after the embedding pass, and an output that is
    an input (or a folder, or in a folder that does not exist, or unwritable) is refused now,
    not after a long audit. Returns the audit's configuration.
    """
    from puaudit.data.writers import check_output_path

    cfg = config_from_args(args)
    if args.spread_seeds is not None and args.spread_seeds < 1:
        raise PUAuditError(f"--spread-seeds must be at least 1 (1: no spread), got {args.spread_seeds}.")
    inputs = [args.input, args.embeddings, args.human]
    check_output_path(args.output, inputs=inputs, what="output (-o)",
                      table=args.export_format == "table")
    if args.manifest:
        check_output_path(args.manifest, inputs=inputs, outputs=[args.output],
                          what="manifest (--manifest)", table=False)
    if args.ray:  # a missing Ray or an unreachable cluster is reported before any work
        from puaudit.scale import connect

        connect(args.ray)
    return cfg


def _run_audit(args, cfg, table, emb):
    """Fit the audit, printing its time and each stage's time and peak memory on stderr."""
    from puaudit.audit.estimator import PUAudit

    est = PUAudit(cfg, backend="ray" if args.ray else "local")
    t0 = time.perf_counter()
    print(f"auditing {len(table):,} rows (scorer {cfg.scorer}, rule {cfg.rule}, "
          f"{cfg.calibration} calibration with cross-fitting)...", file=sys.stderr, flush=True)
    est.fit(table, emb)
    print(f"audited in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    for st in est.result_.diagnostics.get("stages", []):
        peak = "" if st["peak_rss_mb"] is None else f", peak memory {st['peak_rss_mb']:,.0f} MB"
        print(f"  {st['stage']}: {st['seconds']:.1f}s{peak}", file=sys.stderr)
    return est.result_


def _write_export(args, res, table) -> tuple[int, int]:
    """Write the relabelled export (streamed when Parquet in and out); its (rows, columns)."""
    if streams(args):
        from puaudit.data.parquet import write_export_parquet

        import pyarrow.parquet as pq

        write_export_parquet(res, args.input, args.output,
                             progress=stderr_progress("wrote", min_total=500_000))
        return (res.input.n_rows, len(pq.read_schema(args.output).names))
    from puaudit.data.writers import write_table

    out = res.to_frame(table)
    if args.export_format == "alpaca-eval":
        from puaudit.data.formats.alpaca_eval_export import write_annotations

        return write_annotations(out, args.output)
    write_table(out, args.output)
    return out.shape


def _spread_over_seeds(args, table, emb, cfg, summary) -> dict | None:
    """The change's mean and range over ``--spread-seeds`` seeded splits (None when off)."""
    from puaudit.audit.evaluate import default_spread_seeds, delta_over_seeds

    n_spread = args.spread_seeds or default_spread_seeds(len(table))
    if n_spread <= 1:
        return None
    print(f"auditing {n_spread - 1} more seeded splits for the spread (--spread-seeds 1: "
          "off)...", file=sys.stderr, flush=True)
    spread = delta_over_seeds(
        table, emb, cfg, n_seeds=n_spread, first_delta=summary["delta"],
        progress=lambda d, t: print(f"  split {d + 1} of {t + 1} audited", file=sys.stderr,
                                    flush=True))
    return {k: spread[k] for k in ("mean", "min", "max", "n")}


def _print_audit(args, cfg, res, summary, shape) -> None:
    """The audit's report: counts, m, the scorer used, evidence, consistency and certification.

    On stdout, or on stderr with ``--json`` (stdout then holds the JSON line alone)."""
    from puaudit.audit.evaluate import spread_sentence

    print = functools.partial(print_flushed, file=report_stream(args))  # noqa: A001
    print(f"rows {summary['n_rows']}: P {summary['n_p']} (P' {summary['n_p_prime']}), validation "
          f"{summary['n_validation']}, unlabelled {summary['n_unlabelled']}, excluded {summary['n_excluded']}"
          + exclusion_note(summary))
    if summary.get("evidence_only"):
        from puaudit.audit.scorers.evidence import EVIDENCE_ONLY

        print(EVIDENCE_ONLY)
    print(f"m = {fmt(res.m)} (estimate from P: {fmt(res.m_estimate)}); scorer {cfg.scorer}"
          + (f" -> {res.params['scorer_used']}" if cfg.scorer == "auto" else "")
          + f", rule {cfg.rule}")
    if cfg.scorer == "auto" and "auto" in res.diagnostics:
        print(f"auto chose {res.diagnostics['auto']['chosen']}: {res.diagnostics['auto']['reason']}")
    ev = summary.get("evidence") or {}
    for message in ev.get("messages", []):
        print(f"warning: {message}", file=sys.stderr)
    if ev.get("signals"):
        top = ", ".join(f"{c['feature']} {c['coef']:+.2f}" for c in ev.get("coef", [])[:4])
        print(f"verdict evidence: {', '.join(ev['signals'])}"
              + (f" (largest weights: {top})" if top else ""))
    # the change as the two numbers beside it read (0.742 -> 0.746: 0.004, not 0.003)
    change = shown_change(summary["cons_orig"], summary["cons_adj"], digits=3, scale=1.0)
    print(f"Cons_orig {fmt(summary['cons_orig'])}  Cons_adj {fmt(summary['cons_adj'])}  change "
          f"{'n/a' if change is None else f'{change:+.3f}'}  (validation rows: "
          f"{summary['n_validation']})")
    if summary.get("verdict"):
        print(summary["verdict"])
    spread_line = spread_sentence(summary["delta_over_seeds"])
    if spread_line:
        print(spread_line)
    print(f"groups: {summary['groups']}; wrote {shape[0]} rows x {shape[1]} columns to {args.output}")
    cert = summary.get("certification")
    if cert is not None:  # --target-agreement: what is trusted, or why nothing is
        if cert["message"]:
            print_flushed(f"warning: {cert['message']}", file=sys.stderr)
        else:
            print(_certify_line(cert))


def _certify_line(cert: dict) -> str:
    """The certify line: what is trusted, the certified bound, the agreement the trusted
    validation rows realise, and where the escalated rows go."""
    # plotly-free callers pay for the figures module only when a certification is printed
    from puaudit.report.figures.certify import certificate_phrase
    lo, hi = cert.get("realised_ci") or (None, None)
    realised = ("no trusted validation rows to check it" if not is_known(cert.get("realised")) else
                f"realised agreement on {cert['n_validation_trusted']} trusted validation items "
                f"{fmt(cert['realised'])} (95% interval {fmt(lo)}-{fmt(hi)})")
    n_open = cert.get("n_escalated_unlabelled", cert["n_escalated"])
    return (f"certified: {cert['n_trusted']} of {cert['n_trusted'] + cert['n_escalated']} "
            f"audited rows trusted (coverage {fmt(cert['coverage'])}: the certified share "
            f"{fmt(cert['certified_share'])} of the annotated items, P and validation, "
            f"{certificate_phrase(cert)}; agreement lower bound "
            f"{fmt(cert['certified_lower'])} >= {cert['target']:g} at risk {cert['risk']:g}; "
            "each validation row by a threshold certified without it); "
            f"{realised}; the other {cert['n_escalated']} are escalated ({n_open} without a "
            "human verdict, for people)")


def run(args) -> int:
    """``puaudit audit``: check, load, embed, audit, write, spread, report (in that order)."""
    from puaudit.audit.evaluate import verdict_with_spread
    from puaudit.audit.manifest import run_manifest
    from puaudit.data.writers import write_bytes_atomic

    cfg = _check_audit_args(args)
    table = load_labelled(args)
    if args.export_format == "alpaca-eval":  # refused before the embedding pass, not after
        from puaudit.data.formats.alpaca_eval_export import check_annotations_input

        check_annotations_input(table.frame, name=Path(args.input).name)
    if cfg.texts:  # --no-texts: no encoder and no transport scorer (POT would import torch)
        preload_scorers()
    emb = embeddings(args, table) if cfg.texts else None
    res = _run_audit(args, cfg, table, emb)
    shape = _write_export(args, res, table)
    summary = res.summary()
    summary["delta_over_seeds"] = _spread_over_seeds(args, table, emb, cfg, summary)
    # "Reversals help" must not sit above "within the noise of one split"
    summary["verdict"] = verdict_with_spread(summary["verdict"], summary["delta_over_seeds"])
    if summary["delta"] is not None and summary["delta"] < 0:
        print(f"warning: on {summary['n_validation']} validation rows the relabelled verdicts agree "
              f"with people less than the judge's ({summary['cons_adj']:.3f} vs "
              f"{summary['cons_orig']:.3f}); keep the judge's column or use --rule guarded.",
              file=sys.stderr)
    if args.manifest:
        text = dumps(run_manifest(
            res, input_name=args.input, human=args.human, answers=args.answers,
            split=args.split, export_format=None if args.export_format == "table"
            else args.export_format), indent=2)
        write_bytes_atomic(args.manifest, text.encode("utf-8"))
    _print_audit(args, cfg, res, summary, shape)
    if args.json:
        print(dumps(summary))
    return 0
