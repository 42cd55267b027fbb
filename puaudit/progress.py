"""Progress lines on stderr for long command-line runs (the dashboard draws its own bars)."""

from __future__ import annotations

import sys
from typing import Callable

__all__ = ["stderr_progress"]


def stderr_progress(what: str, *, unit: str = "rows",
                    min_total: int = 0) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback that prints ``what: done of total unit`` on stderr
    each time another tenth of the work is done (and once at the end).

    Parameters
    ----------
    what : str
        What is being done ("read", "embedding on Ray").
    unit : str, default "rows"
        What ``done`` and ``total`` count.
    min_total : int, default 0
        Print nothing for less work than this (a small file is done before a line would help).
    """
    last = [0]

    def report(done: int, total: int) -> None:
        if total < max(min_total, 1):
            return
        tenth = min(10, (10 * done) // total)
        if tenth > last[0]:
            last[0] = tenth
            print(f"{what}: {done:,} of {total:,} {unit}", file=sys.stderr, flush=True)

    return report
