"""Command line: ``puaudit audit | evaluate | sweep | demo | trustjudge | annotators | models |
judge | review | report | cascade``.

Each command is one module of :mod:`puaudit.cli` with ``add_parser(subparsers)`` and
``run(args) -> int``; :data:`COMMANDS` names them, in ``puaudit --help``'s order. Bad input
prints one message on stderr and exits with status 2. SIGTERM ends a command the way Ctrl-C
does (:func:`puaudit.cli.signals.sigterm_as_interrupt`): files being written are removed, the
judge's requests in flight finish and are cached, and the exit status is 143 (128 + SIGTERM).
"""

from __future__ import annotations

import argparse
import sys

import puaudit.cli.annotators as annotators
import puaudit.cli.audit as audit
import puaudit.cli.cascade as cascade
import puaudit.cli.demo as demo
import puaudit.cli.evaluate as evaluate
import puaudit.cli.judge as judge
import puaudit.cli.leaderboard as leaderboard
import puaudit.cli.report as report
import puaudit.cli.review as review
import puaudit.cli.sweep as sweep
import puaudit.cli.trustjudge as trustjudge
from puaudit.cli.signals import interrupt_status, sigterm_as_interrupt
from puaudit.errors import PUAuditError

__all__ = ["main", "build_parser", "COMMANDS"]

#: every command, by its name: the module that adds its parser and runs it
COMMANDS = {"audit": audit, "evaluate": evaluate, "sweep": sweep, "demo": demo,
            "trustjudge": trustjudge, "annotators": annotators, "models": leaderboard,
            "judge": judge, "review": review, "report": report, "cascade": cascade}


def build_parser() -> argparse.ArgumentParser:
    """The ``puaudit`` parser, one subcommand per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog="puaudit", description=(
        "Audit LLM-as-a-judge pairwise verdicts against scarce human labels."))
    parser.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():  # SIGTERM cleans up as Ctrl-C does (no .tmp left behind)
            return COMMANDS[args.command].run(args)
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


if __name__ == "__main__":
    sys.exit(main())
