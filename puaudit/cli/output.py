"""Where a command's report goes, and how its numbers are printed.

With ``--json`` every command prints one JSON object alone on stdout and its human-readable
report, tables and progress on stderr (:func:`report_stream`), so ``| jq`` reads it.
"""

from __future__ import annotations

import math
import sys

__all__ = ["report_stream", "print_flushed", "fmt", "add_json_argument"]


def report_stream(args):
    """Where a command's human-readable report goes: stdout, or stderr under ``--json``, so that
    stdout holds the JSON line alone (``puaudit X --json | jq`` reads it).

    Looked up at each call: ``puaudit judge`` swaps ``sys.stdout`` for a stream that redacts the
    API key while it runs."""
    return sys.stderr if getattr(args, "json", False) else sys.stdout


def add_json_argument(p, *, report: str = "report") -> None:
    """``--json``: one JSON object alone on stdout, the ``report`` on stderr."""
    p.add_argument("--json", action="store_true",
                   help=f"print one JSON object alone on stdout (the {report} goes to stderr)")


def print_flushed(*parts, file=None) -> None:
    """``print``, flushed (the report and the progress lines share stderr under ``--json``)."""
    print(*parts, file=file, flush=True)


def fmt(x, nd=3):
    """``x`` with ``nd`` decimals; ``n/a`` for None, NaN and infinities."""
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"
