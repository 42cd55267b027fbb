"""Where a command's report goes, and how its numbers are printed.

With ``--json`` every command prints one JSON object alone on stdout and its human-readable
report, tables and progress on stderr (:func:`report_stream`), so ``| jq`` reads it.
"""

from __future__ import annotations

import math
import sys

__all__ = ["report_stream", "print_flushed", "fmt", "add_json_argument", "exclusion_note"]


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


def exclusion_note(summary: dict) -> str:
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
