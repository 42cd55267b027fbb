"""Command line: ``puaudit audit | evaluate | sweep | demo | trustjudge | judge | annotators |
models | review``.

Bad input prints one clear message on stderr and exits with status 2 (never a traceback).
With ``--json`` every command prints one JSON object alone on stdout and its human-readable
report, tables and progress on stderr (:func:`report_stream`), so ``| jq`` reads it.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from pathlib import Path


from puaudit.audit.config import config_from_args
from puaudit.cli.input_limits import add_max_rows_argument, add_split_argument, read_input
from puaudit.errors import PUAuditError
from puaudit.data.jsonsafe import dumps
from puaudit.progress import stderr_progress
from puaudit.percents import is_known, shown_change

__all__ = ["main", "build_parser", "report_stream"]


def _add_table_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("columns (auto-detected when omitted)")
    for role, flag in (("prompt", "--prompt-col"), ("response_a", "--response-a-col"),
                       ("response_b", "--response-b-col"), ("judge", "--judge-col"),
                       ("human", "--human-col"), ("question_type", "--type-col"),
                       ("question_id", "--id-col"), ("annotator", "--annotator-col")):
        g.add_argument(flag, dest=f"col_{role}", metavar="COL", default=None,
                       help=f"column holding the {role.replace('_', ' ')}")
    p.add_argument("--judge-rule", choices=["longer", "shorter", "position-a"], default=None,
                   help="replace the judge's verdicts by a deterministic rule (a reproducible weak judge)")
    p.add_argument("--human", default=None, metavar="FILE",
                   help="human votes to join to a judgment file (MT-Bench human judgments); "
                        "see docs/data_formats.md")
    p.add_argument("--answers", default=None, metavar="DIR",
                   help="benchmark folder with question.jsonl and model_answer/: the texts a "
                        "judgment file (MT-Bench, FastChat, arena-hard-auto) names")
    add_max_rows_argument(p)
    add_split_argument(p)


def _add_audit_args(p: argparse.ArgumentParser, *, exclude: tuple[str, ...] = ()) -> None:
    from puaudit.audit.config import add_config_arguments

    add_config_arguments(p, exclude=exclude)
    p.add_argument("--encoder", default=None, metavar="NAME|PATH",
                   help="default all-MiniLM-L6-v2 (offline); or a local Hugging Face model folder")
    p.add_argument("--encoder-mode", default=None, choices=["auto", "fast", "full"],
                   help="fast: bfloat16 (about 2x faster on CPUs with native bfloat16); full: float32; "
                        "auto (default, or $PUAUDIT_ENCODER_MODE): fast for the default encoder where "
                        "the CPU has native bfloat16, else full. See docs/encoders.md")
    p.add_argument("--embeddings", default=None, metavar="NPZ",
                   help="precomputed embeddings, skipping the encoder: .npz with arrays e_a and e_b "
                        "(one row each per table row) or vectors, idx_a, idx_b (one vector per "
                        "distinct text, two row indices)")
    p.add_argument("--cache-dir", default=None, help="embedding cache folder (default ~/.cache/puaudit)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--json", action="store_true",
                   help="print one JSON object alone on stdout (the report goes to stderr)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="puaudit", description=(
        "Audit LLM-as-a-judge pairwise verdicts against scarce human labels."))
    parser.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("audit", help="audit a table and write the relabelled export")
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True, help="output file (.csv, .parquet or .jsonl; .json with --format alpaca-eval)")
    _add_table_args(p)
    _add_audit_args(p)
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

    p = sub.add_parser("evaluate", help="repeated seeded audits: mean (sd) of consistency")
    p.add_argument("input")
    _add_table_args(p)
    _add_audit_args(p, exclude=("scorer", "rule", "random_state"))
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--scorers", default=None,
                   help="comma-separated scorers or 'all' (default: the audit's default, auto)")
    p.add_argument("--rules", default=None,
                   help="comma-separated rules (guarded, paper) or 'all' (default guarded)")

    p = sub.add_parser("sweep", help="Cons_adj over a grid of m or p_ratio")
    p.add_argument("input")
    _add_table_args(p)
    _add_audit_args(p, exclude=("random_state",))
    p.add_argument("--param", required=True, choices=["m", "p_ratio"])
    p.add_argument("--values", required=True, nargs="+", type=float)
    p.add_argument("--seeds", type=int, default=5)

    p = sub.add_parser("demo", help="write a generated demo dataset")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--rows", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)

    for mod in _PLUGINS.values():
        try:
            module = __import__(mod, fromlist=["add_parser"])
        except ImportError:  # a plugin module missing from a partial install
            continue
        module.add_parser(sub)
    return parser


def _streams(args) -> bool:
    """Parquet in and Parquet out: read only the audit's columns, stream the export.

    Only for a comparison table of our own: a tool's file (Argilla records on the Hub are
    Parquet) or one joined with ``--human`` / ``--answers`` becomes other rows, so it goes
    through the format readers and the export is written from the converted table."""
    from puaudit.data.parquet_stream import is_parquet_path

    if not (is_parquet_path(args.input) and Path(args.input).is_file()
            and getattr(args, "export_format", "table") == "table"
            and is_parquet_path(getattr(args, "output", None) or "")):
        return False
    if getattr(args, "human", None) or getattr(args, "answers", None):
        return False
    import pandas as pd
    import pyarrow.parquet as pq

    from puaudit.data.formats import detect

    try:
        names = pq.read_schema(args.input).names
    except Exception:  # unreadable: the reader that follows says why, with its own message
        return False
    return detect(pd.DataFrame(columns=names)) is None


def _load(args):
    from puaudit.data.schema import apply_judge_rule, load_comparisons

    _check_split(args)
    cols = {k[4:]: v for k, v in vars(args).items() if k.startswith("col_") and v}
    if _streams(args):
        from puaudit.cli.input_limits import limits_from
        from puaudit.data.parquet_stream import read_comparisons_parquet

        table = read_comparisons_parquet(args.input, columns=cols, **limits_from(args),
                                         progress=stderr_progress("read", min_total=500_000))
    else:
        from puaudit.data.formats import read_comparison_input

        df = read_comparison_input(args.input, human=args.human, answers=args.answers,
                                   read=lambda path: read_input(path, args))
        table = load_comparisons(df, columns=cols, name=Path(args.input).name)
    if getattr(args, "judge_rule", None):
        table = apply_judge_rule(table, args.judge_rule)
    return table


def _load_labelled(args):
    """:func:`_load`, refusing a table with too few human verdicts (none, in a judge file such
    as AlpacaEval annotations) now, in a second, not after the embedding pass."""
    from puaudit.audit.splits import check_labels

    table = _load(args)
    check_labels(table)
    return table


def _embeddings(args, table):
    from puaudit.embed.pairs import PairEmbeddings, embed_table

    if args.embeddings:
        from puaudit.data.embeddings_npz import read_embeddings_npz

        # member headers are checked (shape, dtype, size) before anything is loaded
        arrays = read_embeddings_npz(args.embeddings, n_rows=len(table))
        return PairEmbeddings(**arrays, encoder=f"file:{Path(args.embeddings).name}")
    from puaudit.embed.encoders import get_encoder

    kwargs = {"device": args.device, "mode": getattr(args, "encoder_mode", None)}
    if args.no_cache:
        kwargs["cache_dir"] = None
    elif args.cache_dir:
        kwargs["cache_dir"] = args.cache_dir
    encoder = get_encoder(args.encoder, **kwargs)
    from puaudit.embed.ready_time import estimate_ready

    print(estimate_ready(table, encoder).text() + " (--no-texts: the first numbers alone)",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    if getattr(args, "ray", None):
        from puaudit.scale.ray_embed import embed_table_ray

        emb = embed_table_ray(table, encoder, show_progress=True)
    else:
        emb = embed_table(table, encoder, show_progress=True)
    print(f"embedded {len(table)} rows with {emb.encoder} in {time.perf_counter() - t0:.1f}s",
          file=sys.stderr)
    return emb


def _preload_scorers() -> None:
    """Import the scorers' libraries (POT, scikit-learn: about a second) in a background thread
    while the texts are embedded, which waits in native code most of the time."""
    import threading

    def load():
        try:
            import ot  # noqa: F401
            import sklearn.isotonic  # noqa: F401
            import sklearn.linear_model  # noqa: F401
            import sklearn.neighbors  # noqa: F401
        except Exception:  # noqa: BLE001 - the audit imports them again and reports any error
            pass

    threading.Thread(target=load, name="puaudit-preload", daemon=True).start()


def _fmt(x, nd=3):
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


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


def _check_split(args) -> None:
    """``--split`` names a split of a dataset folder (or a zip of one), not of a table file."""
    import zipfile

    path = Path(args.input)
    if args.split is not None and path.is_file() and not zipfile.is_zipfile(path):
        raise PUAuditError(f"--split picks a split of a dataset folder; {path.name} is a table "
                           "file. Leave out --split, or give the dataset's folder as INPUT.")


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
    if _streams(args):
        from puaudit.data.parquet_stream import write_export_parquet

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


def _exclusion_note(summary: dict) -> str:
    """`` (judge tie 843, identical responses 2: rows 7, 19)``: each reason of exclusion, its
    count, and the rows of the listed reasons (at most 10 shown; all in the JSON and the
    export's puaudit_reason)."""
    counts = summary.get("excluded_reasons") or {}
    if not counts:
        return ""
    parts = []
    for r, n in counts.items():
        rows = (summary.get("excluded_rows") or {}).get(r)
        shown = ""
        if rows:
            more = f", ... ({len(rows) - 10} more)" if len(rows) > 10 else ""
            shown = f": row{'s' if len(rows) > 1 else ''} " + ", ".join(map(str, rows[:10])) + more
        parts.append(f"{r} {n}{shown}")
    return " (" + "; ".join(parts) + ")"


def _print_audit(args, cfg, res, summary, shape) -> None:
    """The audit's report: counts, m, the scorer used, evidence, consistency and certification.

    On stdout, or on stderr with ``--json`` (stdout then holds the JSON line alone)."""
    from puaudit.audit.evaluate import spread_sentence

    print = functools.partial(_print, file=report_stream(args))  # noqa: A001
    print(f"rows {summary['n_rows']}: P {summary['n_p']} (P' {summary['n_p_prime']}), validation "
          f"{summary['n_validation']}, unlabelled {summary['n_unlabelled']}, excluded {summary['n_excluded']}"
          + _exclusion_note(summary))
    if summary.get("evidence_only"):
        from puaudit.audit.evidence_only import EVIDENCE_ONLY

        print(EVIDENCE_ONLY)
    print(f"m = {_fmt(res.m)} (estimate from P: {_fmt(res.m_estimate)}); scorer {cfg.scorer}"
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
    print(f"Cons_orig {_fmt(summary['cons_orig'])}  Cons_adj {_fmt(summary['cons_adj'])}  change "
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
            _print(f"warning: {cert['message']}", file=sys.stderr)
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
                f"{_fmt(cert['realised'])} (95% interval {_fmt(lo)}-{_fmt(hi)})")
    n_open = cert.get("n_escalated_unlabelled", cert["n_escalated"])
    return (f"certified: {cert['n_trusted']} of {cert['n_trusted'] + cert['n_escalated']} "
            f"audited rows trusted (coverage {_fmt(cert['coverage'])}: the certified share "
            f"{_fmt(cert['certified_share'])} of the annotated items, P and validation, "
            f"{certificate_phrase(cert)}; agreement lower bound "
            f"{_fmt(cert['certified_lower'])} >= {cert['target']:g} at risk {cert['risk']:g}; "
            "each validation row by a threshold certified without it); "
            f"{realised}; the other {cert['n_escalated']} are escalated ({n_open} without a "
            "human verdict, for people)")


def report_stream(args):
    """Where a command's human-readable report goes: stdout, or stderr under ``--json``, so that
    stdout holds the JSON line alone (``puaudit X --json | jq`` reads it).

    Looked up at each call: ``puaudit judge`` swaps ``sys.stdout`` for a stream that redacts the
    API key while it runs."""
    return sys.stderr if getattr(args, "json", False) else sys.stdout


def _print(*parts, file=None) -> None:
    """``print``, flushed (the report and the progress lines share stderr under ``--json``)."""
    print(*parts, file=file, flush=True)


def cmd_audit(args) -> int:
    """``puaudit audit``: check, load, embed, audit, write, spread, report (in that order)."""
    from puaudit.audit.evaluate import verdict_with_spread
    from puaudit.audit.manifest import run_manifest
    from puaudit.data.writers import write_bytes_atomic

    cfg = _check_audit_args(args)
    table = _load_labelled(args)
    if args.export_format == "alpaca-eval":  # refused before the embedding pass, not after
        from puaudit.data.formats.alpaca_eval_export import check_annotations_input

        check_annotations_input(table.frame, name=Path(args.input).name)
    if cfg.texts:  # --no-texts: no encoder and no transport scorer (POT would import torch)
        _preload_scorers()
    emb = _embeddings(args, table) if cfg.texts else None
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


def _split_list(s: str | None, allowed) -> list[str] | None:
    if s is None:
        return None
    if s == "all":
        return list(allowed)
    return [x.strip() for x in s.split(",") if x.strip()]


def cmd_evaluate(args) -> int:
    from puaudit.audit.config import SCORER_CHOICES
    from puaudit.audit.evaluate import evaluate
    from puaudit.audit.config import RULES

    table = _load_labelled(args)
    cfg = config_from_args(args)
    emb = _embeddings(args, table) if cfg.texts else None  # --no-texts: no encoder at all
    scorers = _split_list(args.scorers, SCORER_CHOICES)
    rules = _split_list(args.rules, RULES)
    t0 = time.perf_counter()
    res = evaluate(table, emb, seeds=args.seeds, scorers=scorers, rules=rules, config=cfg)
    lb = res["leaderboard"]
    judge = table.judge_column
    # with --json the table goes to stderr: stdout holds the JSON line alone, as for audit
    print = functools.partial(_print, file=report_stream(args))  # noqa: A001
    print(f"{args.seeds} seeds, p_ratio {cfg.p_ratio}, judge '{judge}', "
          f"{time.perf_counter() - t0:.1f}s"
          + ("" if cfg.texts else "; evidence only (--no-texts)"))
    print(f"{'scorer':<9} {'rule':<8} {'Cons_orig':>15} {'Cons_adj':>15} {'change':>16} {'reversed':>9} {'precision':>9}")
    for e in lb:
        print(f"{e['scorer']:<9} {e['rule']:<8} {_fmt(e['cons_orig_mean'])} ({_fmt(e['cons_orig_sd'])})"
              f"   {_fmt(e['cons_adj_mean'])} ({_fmt(e['cons_adj_sd'])})  {_fmt(e['delta_mean'], 4)} "
              f"({_fmt(e['delta_sd'], 4)}) {_fmt(e['reversed_share'])} {_fmt(e['reversal_precision'])}")
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
        _print(dumps(out))
    return 0


def cmd_sweep(args) -> int:
    from puaudit.audit.evaluate import sweep

    table = _load_labelled(args)
    emb = _embeddings(args, table)
    df = sweep(table, emb, param=args.param, values=args.values, seeds=args.seeds,
               config=config_from_args(args))
    _print(df.to_string(index=False, float_format=lambda v: f"{v:.4f}"), file=report_stream(args))
    if args.json:
        _print(dumps({"param": args.param, "scorer": args.cfg_scorer, "rule": args.cfg_rule,
                     "results": df.to_dict(orient="records")}))
    return 0


def cmd_demo(args) -> int:
    from puaudit.data.demo import generate_demo
    from puaudit.data.writers import check_output_path, write_table

    if args.rows < 20:
        raise PUAuditError("--rows must be at least 20 for a useful demo.")
    check_output_path(args.output, what="output (-o)")
    df = generate_demo(n_rows=args.rows, random_state=args.seed)
    write_table(df, args.output)
    print(f"wrote {len(df)} generated comparisons to {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"audit": cmd_audit, "evaluate": cmd_evaluate, "sweep": cmd_sweep, "demo": cmd_demo}
    from puaudit.cli.termination import interrupt_status, sigterm_as_interrupt

    try:
        with sigterm_as_interrupt():  # SIGTERM cleans up as Ctrl-C does (no .tmp left behind)
            if args.command in handlers:
                return handlers[args.command](args)
            return _dispatch_plugin(args)
    except PUAuditError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        status, word = interrupt_status(exc)
        print(word, file=sys.stderr)
        return status
    except MemoryError:
        # the advice names only options that exist (see puaudit.audit.config)
        print("error: out of memory. Try a smaller file (e.g. one question type at a time), "
              "--scorer centroid (the lightest scorer; the default auto fits several), "
              "--device cpu (if a GPU ran out), or precomputed embeddings "
              "(--embeddings FILE.npz).", file=sys.stderr)
        return 2
    except Exception as exc:  # an unexpected bug: say so plainly, trace only on request
        if args.debug:
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc}. This is a bug in puaudit; rerun "
              "with --debug for the traceback and report it.", file=sys.stderr)
        return 1


_PLUGINS = {"trustjudge": "puaudit.trustjudge.cli", "annotators": "puaudit.annotators.cli",
            "models": "puaudit.rankings.cli", "judge": "puaudit.trustjudge.judge_cli",
            "review": "puaudit.review.cli", "report": "puaudit.report.cli",
            "cascade": "puaudit.cli.cascade"}


def _dispatch_plugin(args) -> int:
    mod = _PLUGINS.get(args.command)
    if mod is None:
        raise PUAuditError(f"Unknown command {args.command}.")
    module = __import__(mod, fromlist=["run"])
    return module.run(args)


if __name__ == "__main__":
    sys.exit(main())
