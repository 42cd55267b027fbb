"""``puaudit judge``: ask any OpenAI-compatible endpoint for pairwise verdicts (both orders) and
single scores with log-probabilities, and write the TrustJudge input tables.

See ``docs/judge.md``. Exit status: 0 done, 1 some requests failed for good (nothing written
unless ``--allow-partial``), 2 bad input or an endpoint that refuses every request, 130
interrupted (Ctrl-C) and 143 terminated (SIGTERM): in both, the requests in flight finish,
everything finished is cached and nothing is written (rerun the same command to continue).
With ``--json`` stdout holds one JSON object alone; every other line goes to stderr.

The API key never reaches a file or the terminal: responses are cleaned of it on arrival (see
:func:`puaudit.trustjudge.completion.redact_secret`), and every table and message written here is
cleaned again, for keys that came another way (an older cache, the input itself).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from puaudit.cli.output import add_json_argument, report_stream
from puaudit.cli.table_input import add_max_rows_argument, read_frame
from puaudit.data.jsonsafe import dumps
from puaudit.errors import PUAuditError
from puaudit.trustjudge.judge_tables import WINNER_RULES

__all__ = ["add_parser", "run", "default_paths"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``judge`` subcommand to a ``puaudit`` argument parser."""
    from puaudit.trustjudge.prompts import PAIR_TEMPLATES, SCORE_TEMPLATES
    from puaudit.trustjudge.runner import DEFAULT_KEY_ENV

    p = subparsers.add_parser(
        "judge", help="collect pairwise verdicts (both orders) and scores with log-probabilities "
                      "from an OpenAI-compatible endpoint",
        description="Query an OpenAI-compatible chat-completions endpoint (vLLM, Ollama, "
                    "llama.cpp server, hosted APIs) for pairwise verdicts and/or single scores "
                    "with log-probabilities, and write the TrustJudge input tables. Every "
                    "response is cached as it arrives: an interrupted run continues where it "
                    "stopped when rerun. The API key is read from the environment only.")
    p.add_argument("input", metavar="INPUT",
                   help="answers (question_id, question, candidate, answer) or comparisons "
                        "(prompt, response_a, response_b, ...)")
    add_max_rows_argument(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="pairwise table (answers input), or the input table with the judge's "
                        "verdicts (comparisons input); the scores table with --scores-only")
    p.add_argument("--endpoint", required=True, metavar="URL",
                   help="base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, metavar="NAME", help="model name the endpoint serves")
    what = p.add_argument_group("what to ask")
    what.add_argument("--both-orders", action="store_true",
                      help="ask every pair twice, each answer shown first once")
    what.add_argument("--scores", action="store_true", help="also score every answer on its own")
    what.add_argument("--scores-only", action="store_true", help="single scores, no pairs")
    what.add_argument("--only-escalated", action="store_true",
                      help="INPUT is the export of a certified audit (puaudit audit "
                           "--target-agreement): judge only its escalated rows and write them "
                           "(without the puaudit_* columns) for a re-audit: a judge cascade")
    what.add_argument("--pair-template", default="trustjudge", metavar="NAME|FILE.json",
                      help=f"pairwise prompt: {', '.join(PAIR_TEMPLATES)} or a JSON file "
                           "(default trustjudge)")
    what.add_argument("--score-template", default="trustjudge-5", metavar="NAME|FILE.json",
                      help=f"scoring prompt: {', '.join(SCORE_TEMPLATES)} or a JSON file "
                           "(default trustjudge-5)")
    what.add_argument("--temperature", type=float, default=0.0)
    what.add_argument("--max-tokens", type=int, default=1024)
    what.add_argument("--top-logprobs", type=int, default=20,
                      help="alternatives per token (default 20, the OpenAI maximum)")
    what.add_argument("--seed", type=int, default=None, help="sent to the endpoint when given")
    run_g = p.add_argument_group("running")
    run_g.add_argument("--api-key-env", default=DEFAULT_KEY_ENV, metavar="VAR",
                       help=f"environment variable holding the API key (default {DEFAULT_KEY_ENV}); "
                            "the key is never logged or written")
    run_g.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    run_g.add_argument("--timeout", type=float, default=120.0, help="seconds per attempt")
    run_g.add_argument("--retries", type=int, default=6,
                       help="retries after 429, 5xx, timeouts, dropped connections (default 6)")
    run_g.add_argument("--backoff", type=float, default=1.0,
                       help="first retry wait in seconds, doubled each time (default 1)")
    run_g.add_argument("--max-backoff", type=float, default=60.0)
    run_g.add_argument("--cache", metavar="FILE", default=None,
                       help="response cache (default OUT's name + .judge-cache.jsonl)")
    run_g.add_argument("--max-response-mb", type=float, default=None, metavar="MB",
                       help="largest response accepted; a larger one fails its request unread "
                            "(default: what --max-tokens and --top-logprobs allow, 5.8 MB with "
                            "their defaults)")
    run_g.add_argument("--max-cache-mb", type=float, default=4096, metavar="MB",
                       help="the response cache may not grow past this; the run stops there "
                            "(default 4096; 0 for no limit)")
    run_g.add_argument("--no-progress", action="store_true", help="no progress bar")
    out_g = p.add_argument_group("output")
    out_g.add_argument("--scores-out", metavar="FILE", default=None,
                       help="scores table (default OUT's name + .scores + OUT's extension)")
    out_g.add_argument("--judge-name", default=None, help="judge column value (default --model)")
    out_g.add_argument("--winner-column", default="judge_winner",
                       help="comparisons input: column that receives the verdict")
    out_g.add_argument("--winner-rule", choices=WINNER_RULES, default="baseline",
                       help="comparisons input with --both-orders: both orders must agree, else "
                            "tie (baseline); summed probabilities (bidirectional); order 1 (first)")
    out_g.add_argument("--allow-partial", action="store_true",
                       help="write the tables even when some requests failed for good")
    add_json_argument(out_g)


def default_paths(output: str, *, scores_only: bool = False, scores_out: str | None = None,
                  cache: str | None = None) -> dict[str, Path]:
    """Where ``puaudit judge`` writes: pairs (or scores), scores, problems list and cache."""
    out = Path(output).expanduser()
    base = out.with_name(out.stem)
    return {"pairs": None if scores_only else out,
            "scores": out if scores_only else (Path(scores_out).expanduser() if scores_out
                                               else Path(f"{base}.scores{out.suffix}")),
            "problems": Path(f"{base}.problems.csv"),
            "cache": Path(cache).expanduser() if cache else Path(f"{base}.judge-cache.jsonl")}


def _check_comparison_columns(plan, args) -> None:
    frame = plan.frame
    lowered = {str(c).strip().lower(): c for c in frame.columns}
    ours = ["judge_model", "verdict_1", "p1_a", "ppl_1", "token_logprobs_1", "rationale_1"]
    if plan.both_orders:
        ours += ["verdict_2", "p2_a", "ppl_2", "token_logprobs_2", "rationale_2"]
    clash = [lowered[c] for c in ours if c in lowered]
    if clash:
        raise PUAuditError(f"The input already has judge columns ({', '.join(map(str, clash))}); "
                           "judge a table without them.")
    col = args.winner_column
    if col in frame.columns:
        values = frame[col]
        filled = values.notna() & (values.astype(str).str.strip() != "")
        if filled.any():
            raise PUAuditError(f"The input's column '{col}' already holds verdicts. Write this "
                               "judge's to another column with --winner-column NAME.")


def _redact_table(frame: pd.DataFrame, secret: str) -> pd.DataFrame:
    """``frame`` with ``secret`` replaced by ``***`` in its column names and text cells."""
    if not secret:
        return frame
    out = frame.rename(columns=lambda c: c.replace(secret, "***") if isinstance(c, str) else c)
    for col in out.columns:
        values = out[col]
        if values.dtype != object and not pd.api.types.is_string_dtype(values):
            continue
        hit = values.map(lambda v: isinstance(v, str) and secret in v)
        if hit.any():
            out[col] = values.where(~hit, values[hit].str.replace(secret, "***", regex=False))
    return out


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; returns the exit status."""
    secret = _secret(args)
    out, err = sys.stdout, sys.stderr
    if secret:  # whatever is printed below (paths, cells quoted in errors) is cleaned too
        sys.stdout, sys.stderr = _Redacting(out, secret), _Redacting(err, secret)
    try:
        return _run(args)
    except PUAuditError as exc:
        if secret and secret in str(exc):
            raise PUAuditError(str(exc).replace(secret, "***"), column=exc.column,
                               row=exc.row) from None
        raise
    finally:
        sys.stdout, sys.stderr = out, err


def _secret(args: argparse.Namespace) -> str:
    import os

    return os.environ.get(args.api_key_env) or ""


class _Redacting:
    """A text stream that writes ``secret`` as ``***``."""

    def __init__(self, stream, secret: str):
        self._stream = stream
        self._secret = secret

    def write(self, text: str) -> int:
        self._stream.write(str(text).replace(self._secret, "***"))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _run(args: argparse.Namespace) -> int:
    from puaudit.trustjudge.judge_tables import assemble_judge_tables
    from puaudit.trustjudge.runner import JudgeClient

    scores = args.scores or args.scores_only
    if args.scores_only and args.both_orders:
        raise PUAuditError("--both-orders asks pairs; it cannot go with --scores-only.")
    for flag, value, least in (("--max-cache-mb", args.max_cache_mb, 0.0),
                               ("--max-response-mb", args.max_response_mb, 0.001)):
        if value is not None and not (math.isfinite(value) and value >= least):
            raise PUAuditError(f"{flag} must be a number of megabytes ≥ {least:g} (got {value}).")
    paths = _checked_paths(args, scores=scores)
    frame, merge_back = _input_frame(args)
    client = JudgeClient(endpoint=args.endpoint, model=args.model, api_key_env=args.api_key_env,
                         timeout=args.timeout, max_retries=args.retries, backoff=args.backoff,
                         max_backoff=args.max_backoff, temperature=args.temperature,
                         max_tokens=args.max_tokens, top_logprobs=args.top_logprobs, seed=args.seed,
                         max_response_bytes=(int(args.max_response_mb * 1e6)
                                             if args.max_response_mb else None))
    plan = _plan(frame, args, client, scores=scores)
    collected = _collect(plan, args, client, paths)
    if isinstance(collected, int):  # interrupted: 130 (Ctrl-C) or 143 (SIGTERM)
        return collected
    stats, responses, echoed = collected
    if stats.n_failed and not args.allow_partial:
        first = next(iter(stats.failures.values()))
        print(f"error: {stats.n_failed} of {stats.n_total} requests failed for good (first: "
              f"{first}). The other responses are cached in {paths['cache']}: rerun the same "
              "command to retry the failed ones, or add --allow-partial to write the tables "
              "without them.", file=sys.stderr)
        return 1
    tables = assemble_judge_tables(plan, responses, judge_name=args.judge_name or args.model,
                      failures=stats.failures, notes=echoed, winner_column=args.winner_column,
                      winner_rule=args.winner_rule)
    secret = _secret(args)
    for name in ("pairs", "scores", "problems"):
        table = getattr(tables, name)
        if table is not None:
            setattr(tables, name, _redact_table(table, secret))
    if merge_back is not None and tables.pairs is not None:  # a cascade's export: whole table
        tables.pairs = merge_back(tables.pairs)
    written = _write_tables(tables, plan, paths, args)
    _print_next(written, plan, paths, args, cascade=merge_back is not None)
    if args.json:
        print(dumps({"kind": plan.kind, "model": args.model, "endpoint": client.base_url,
                     "n_pairs": len(plan.pair_tasks), "n_scores": len(plan.score_tasks),
                     "both_orders": args.both_orders, "written": written,
                     "cache": str(paths["cache"]), "n_problems": len(tables.problems),
                     "counts": tables.counts, "stats": stats.to_dict()}))
    return 0


def _checked_paths(args: argparse.Namespace, *, scores: bool) -> dict:
    """The output paths, each checked before anything is read or asked."""
    from puaudit.data.writers import check_output_path

    paths = default_paths(args.output, scores_only=args.scores_only, scores_out=args.scores_out,
                          cache=args.cache)
    outputs = []
    for what, path, table in (("output (-o)", paths["pairs"], True),
                              ("scores table", paths["scores"] if scores else None, True),
                              ("problems list", paths["problems"], True),
                              ("--cache", paths["cache"], False)):
        if path is not None:
            check_output_path(path, inputs=[args.input], outputs=outputs, what=what, table=table)
            outputs.append(path)
    return paths


def _input_frame(args: argparse.Namespace):
    """The input table (only the rows the audit escalated, with ``--only-escalated``), and for a
    cascade's export the function that puts the answers back into the whole table."""
    frame = read_frame(args)
    if args.only_escalated and "puaudit_cascade_stage" in frame.columns:
        from puaudit.audit.certify.escalation import cascade_escalated_rows, merge_asked_verdicts

        export = frame
        frame, positions = cascade_escalated_rows(export, judge=args.winner_column)
        print(f"{Path(args.input).name}: {len(frame)} of {len(export)} rows the cascade sends to "
              f"'{args.winner_column}' (its P rows of that region included); every row is "
              "written back", file=sys.stderr)
        return frame, lambda asked: merge_asked_verdicts(export, positions, asked,
                                                         winner_column=args.winner_column)
    if args.only_escalated:
        from puaudit.audit.certify.escalation import escalated_rows

        n_in = len(frame)
        frame = escalated_rows(frame)
        print(f"{Path(args.input).name}: {len(frame)} of {n_in} rows escalated by the audit",
              file=sys.stderr)
    return frame, None


def _plan(frame: pd.DataFrame, args: argparse.Namespace, client, *, scores: bool):
    """The requests to send, announced on stderr."""
    from puaudit.trustjudge.judge_plan import plan_judging
    from puaudit.trustjudge.prompts import get_template

    pair_t = None if args.scores_only else get_template(args.pair_template, kind="pair")
    score_t = get_template(args.score_template, kind="score") if scores else None
    plan = plan_judging(frame, key=client.key, pair_template=pair_t, score_template=score_t,
                        both_orders=args.both_orders, name=Path(args.input).name)
    if plan.kind == "comparisons" and pair_t is not None:
        _check_comparison_columns(plan, args)
    n_pairs, n_scores = len(plan.pair_tasks), len(plan.score_tasks)
    print(f"{Path(args.input).name}: {plan.kind} input; {n_pairs} pairs"
          + (" × 2 orders" if args.both_orders and n_pairs else "")
          + f", {n_scores} answers to score; {len(plan.requests)} distinct requests to "
          f"{client.base_url} (model {args.model}); "
          + (f"API key from ${args.api_key_env}" if client.has_key
             else f"no API key (${args.api_key_env} is not set)"), file=sys.stderr)
    return plan


def _collect(plan, args: argparse.Namespace, client, paths: dict):
    """Send the requests not cached yet; ``(stats, responses, notes)``, or the exit status when
    interrupted: 130 for Ctrl-C, 143 for SIGTERM (what was received stays cached)."""
    from puaudit.cli.signals import interrupt_status
    from puaudit.trustjudge.request_pool import run_requests
    from puaudit.trustjudge.response_cache import CachedResponses, ResponseCache

    with ResponseCache(paths["cache"], max_bytes=int(args.max_cache_mb * 1e6)) as cache:
        if cache.n_dropped:
            print(f"cache {paths['cache']}: dropped {cache.n_dropped} incomplete line(s) left by an "
                  "interrupted run", file=sys.stderr)
        try:
            stats = run_requests(plan.requests, client=client, cache=cache,
                                 concurrency=args.concurrency, meta=plan.meta,
                                 progress=not args.no_progress)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as Terminated (cli.signals)
            status, word = interrupt_status(exc)
            print(f"{word}: {sum(k in cache for k in plan.requests)} of {len(plan.requests)} "
                  f"responses are cached in {paths['cache']}; rerun the same command to continue.",
                  file=sys.stderr)
            return status
        except PUAuditError as exc:
            raise PUAuditError(f"{exc} The {sum(k in cache for k in plan.requests)} responses "
                               f"received so far are cached in {paths['cache']}.") from None
        # read from the file one at a time while the tables are built: memory does not grow
        # with the cache
        responses = CachedResponses(cache, plan.requests)
        echoed = {k: "the response held the API key (replaced by *** before anything was "
                     "written): the endpoint echoes credentials"
                  for k in plan.requests if cache.redacted(k)}
    print(f"requests: {stats.n_total} ({stats.n_cached} cached, {stats.n_new} new, "
          f"{stats.n_failed} failed, {stats.n_retries} retries); tokens this run: "
          f"{stats.prompt_tokens} prompt, {stats.completion_tokens} completion; "
          f"{stats.elapsed_s:.1f}s", file=sys.stderr)
    return stats, responses, echoed


def _write_tables(tables, plan, paths: dict, args: argparse.Namespace) -> dict:
    """Write the pairs, scores and problems tables; what was written where."""
    from puaudit.data.writers import write_table

    out = report_stream(args)  # stderr under --json: stdout holds the JSON line alone
    written = {}
    if tables.pairs is not None:
        write_table(tables.pairs, paths["pairs"])
        written["pairs"] = str(paths["pairs"])
        if plan.kind == "answers":
            print(f"wrote {len(tables.pairs)} pairs to {paths['pairs']}"
                  + (f" ({tables.counts['pairs'] - tables.counts['pairs_kept']} without a verdict "
                     "left out)" if tables.counts["pairs"] != tables.counts["pairs_kept"] else ""),
                  file=out)
        else:
            print(f"wrote {len(tables.pairs)} rows to {paths['pairs']} with the judge's verdict in "
                  f"'{args.winner_column}' ({tables.counts['pairs_kept']} filled)", file=out)
    if tables.scores is not None:
        write_table(tables.scores, paths["scores"])
        written["scores"] = str(paths["scores"])
        print(f"wrote {len(tables.scores)} scores to {paths['scores']}"
              + (f" ({tables.counts['scores'] - tables.counts['scores_kept']} without a score left "
                 "out)" if tables.counts["scores"] != tables.counts["scores_kept"] else ""),
              file=out)
    if len(tables.problems):
        write_table(tables.problems, paths["problems"])
        written["problems"] = str(paths["problems"])
        print(f"{len(tables.problems)} judgment(s) gave no verdict, score or probabilities: "
              f"listed in {paths['problems']}", file=out)
    elif paths["problems"].exists():
        paths["problems"].unlink()  # a list from an earlier run of this command
    return written


def _print_next(written: dict, plan, paths: dict, args: argparse.Namespace, *,
                cascade: bool = False) -> None:
    """The command that reads what was written."""
    out = report_stream(args)
    if "pairs" in written and plan.kind == "answers":
        print("next: " + f"puaudit trustjudge {paths['pairs']}"
              + (f" --scores {paths['scores']}" if "scores" in written else "")
              + (" --method bidirectional" if args.both_orders else ""), file=out)
    elif "pairs" in written and cascade:
        print("next: " + f"puaudit cascade {paths['pairs']} --judges EARLIER_JUDGES "
              f"{args.winner_column} --target-agreement T -o cascade.csv (the same options as "
              "the first run)", file=out)
    elif "pairs" in written:
        print("next: " + f"puaudit audit {paths['pairs']} -o audited.csv", file=out)
