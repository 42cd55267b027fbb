"""``puaudit report INPUT -o audit.html``: the audit as one shareable file.

Audits INPUT as ``puaudit audit`` does (same input and audit options, same numbers) and writes
the audit card: a self-contained HTML page that opens offline (plotly's JavaScript inlined, no
link leaves the file), or with ``--format json`` the card's numbers. ``--fail-under-agreement X``
makes the exit status a gate for CI pipelines: 1 when the lower end of the judge's 95% agreement
interval on validation rows is below X (or cannot be measured), 0 otherwise; one line says why
(the last line of stdout). With ``--json`` stdout holds the card as one JSON object alone and
every line above goes to stderr.
A table without human labels is reported without the audit (what needs no labels is still
there). Bad input prints one message on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from puaudit.errors import PUAuditError

__all__ = ["add_parser", "run"]

FORMATS = ("html", "json")
# options that say where the report goes or how it is gated, not what it shows
_NOT_IN_COMMAND = {"output", "json", "debug", "command", "fail_under_agreement", "func", "run"}
_PARSER: list[argparse.ArgumentParser] = []


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``report`` sub-command on an ``argparse`` subparsers object."""
    from puaudit.cli.options import add_audit_arguments, add_table_arguments

    p = subparsers.add_parser("report", help="audit a table and write a shareable audit card "
                                             "(self-contained HTML, or JSON); a CI gate",
                              description=__doc__.splitlines()[0])
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True, help="the report file (.html or .json)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="html (default; json when the output ends in .json)")
    p.add_argument("--fail-under-agreement", type=float, default=None, metavar="X",
                   help="exit 1 when the judge's agreement with people (lower end of its 95%% "
                        "interval on validation rows) is below X, or cannot be measured")
    p.add_argument("--spread-seeds", type=int, default=None, metavar="N",
                   help="seeded splits of the change over seeds, as for puaudit audit "
                        "(default 5 below 100,000 rows; 1: off)")
    add_table_arguments(p)
    add_audit_arguments(p)
    _PARSER[:] = [p]
    return p


def _format(args) -> str:
    if args.format:
        return args.format
    return "json" if Path(args.output).suffix.lower() == ".json" else "html"


def _check(args):
    """Every option checked before any work; returns the :class:`AuditConfig`."""
    from puaudit.cli.options import config_from_args
    from puaudit.data.writers import check_output_path

    cfg = config_from_args(args)
    if args.spread_seeds is not None and args.spread_seeds < 1:
        raise PUAuditError(f"--spread-seeds must be at least 1 (1: no spread), got {args.spread_seeds}.")
    floor = args.fail_under_agreement
    if floor is not None and not 0 < floor <= 1:
        raise PUAuditError(f"--fail-under-agreement must be in (0, 1] (e.g. 0.7), got {floor}.")
    check_output_path(args.output, inputs=[args.input, args.embeddings, args.human],
                      what="report (-o)", table=False)
    return cfg


def command_line(args) -> str:
    """The ``puaudit report`` command that rebuilds this report (options left at their
    defaults are omitted; every audit setting is spelled out)."""
    from puaudit.cli.options import config_from_args

    words = ["puaudit", "report", args.input, "-o", args.output]
    parser = _PARSER[0] if _PARSER else None
    for action in (parser._actions if parser else []):  # noqa: SLF001 - argparse's own list
        dest = action.dest
        if (not action.option_strings or dest.startswith("cfg_") or dest in _NOT_IN_COMMAND
                or dest == "help"):
            continue
        value = getattr(args, dest, action.default)
        if value == action.default or value is None:
            continue
        flag = action.option_strings[-1]
        words += [flag] if action.nargs == 0 else [flag, str(value)]
    words += config_from_args(args).to_cli()
    return " ".join(shlex.quote(str(w)) for w in words)


def _audit(args, table, cfg):
    """(result, m_curve, spread, no_audit, encoder): the audit as ``puaudit audit`` runs it
    with its reversals vs m, or why not."""
    from puaudit.audit.evaluate import default_spread_seeds, delta_over_seeds
    from puaudit.audit.m_curve import audit_with_m_curve
    from puaudit.cli.table_input import embeddings, preload_scorers

    if not table.n_annotated:
        return None, None, None, ("The table has no human verdicts: nothing measures the "
                                  "judge's agreement with people, so the audit is not run."), ""
    emb = None  # --no-texts: the evidence-only audit, no encoder
    if cfg.texts:
        preload_scorers()
        emb = embeddings(args, table)
    encoder = "none (evidence only, --no-texts)" if emb is None else emb.encoder
    t0 = time.perf_counter()
    print(f"auditing {len(table):,} rows (scorer {cfg.scorer}, rule {cfg.rule}) and its "
          "reversals vs m...", file=sys.stderr, flush=True)
    try:
        # the same audit as PUAudit(cfg).fit; the curve reuses its split and scores
        res, curve = audit_with_m_curve(table, emb, cfg)
    except PUAuditError as exc:  # e.g. too few labels: the report says so and shows the rest
        return None, None, None, f"The audit could not run: {exc}", encoder
    print(f"audited in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    n_spread = args.spread_seeds or default_spread_seeds(len(table))
    spread = None
    if n_spread > 1:
        print(f"auditing {n_spread - 1} more seeded splits for the spread...", file=sys.stderr,
              flush=True)
        spread = delta_over_seeds(table, emb, cfg, n_seeds=n_spread,
                                  first_delta=res.summary()["delta"])
    return res, curve, spread, None, encoder


def _write(args, parts, card) -> int:
    """Write the report; returns its size in bytes."""
    from puaudit.data.writers import write_bytes_atomic
    from puaudit.data.jsonsafe import dumps

    if _format(args) == "json":
        data = (dumps(card, indent=2) + "\n").encode("utf-8")
    else:
        from puaudit.report.html import render_report

        data = render_report(parts, card).encode("utf-8")
    write_bytes_atomic(args.output, data)
    return len(data)


def run(args: argparse.Namespace) -> int:
    """Run ``puaudit report``: the gate's 0/1 (bad input raises :class:`PUAuditError`)."""
    from puaudit.cli.output import report_stream
    from puaudit.cli.table_input import load_table
    from puaudit.data.jsonsafe import dumps
    from puaudit.report.card import build_card, gate
    from puaudit.report.parts import assemble_report, file_sha256

    cfg = _check(args)
    table = load_table(args)
    result, curve, spread, no_audit, encoder = _audit(args, table, cfg)
    t0 = time.perf_counter()
    source = {"name": args.input, "sha256": file_sha256(args.input)
              if Path(args.input).is_file() else None,
              # the split read: the one asked for, else the one a folder opened at
              "split": args.split or table.frame.attrs.get("split")}
    parts = assemble_report(table, cfg, result, m_curve=curve, spread=spread, no_audit=no_audit,
                     source=source, encoder=encoder, command=command_line(args))
    card = build_card(parts)
    size = _write(args, parts, card)
    out = report_stream(args)  # stderr under --json: stdout holds the JSON line alone
    print(f"wrote the audit card ({_format(args)}, {size / 1e6:.2f} MB) to {args.output} "
          f"in {time.perf_counter() - t0:.1f}s after the audit", file=out)
    if card["audit"] and card["audit"].get("verdict"):
        print(card["audit"]["verdict"], file=out)
    for part, why in card["notes"].items():
        print(f"note: no {part}: {why}", file=sys.stderr)
    passed = True
    if args.fail_under_agreement is not None:
        passed, line = gate(card, args.fail_under_agreement)
        print(line, file=out)
    if args.json:
        print(dumps(card))
    return 0 if passed else 1

