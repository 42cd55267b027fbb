"""SIGTERM ends a command the way Ctrl-C does: files being written are removed, the judge's
requests in flight finish and are cached, and the exit status is 143 (128 + SIGTERM).

Without this, SIGTERM (``kill PID``, a container or service manager stopping the job) kills the
process where it stands and leaves the temporary file of an atomic write
(``.out.csv.XXXX.tmp``) behind. :func:`sigterm_as_interrupt` turns the signal into
:class:`Terminated`, a :class:`KeyboardInterrupt`, so that every clean-up written for Ctrl-C
(``write_bytes_atomic`` removing its temporary file, the judge finishing its requests in flight)
also runs for SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Terminated", "sigterm_as_interrupt", "interrupt_status", "EXIT_TERMINATED",
           "EXIT_INTERRUPTED"]

#: exit statuses the shell gives a process ended by the signal: 128 + its number
EXIT_TERMINATED = 128 + signal.SIGTERM
EXIT_INTERRUPTED = 128 + signal.SIGINT


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM."""

    #: how messages name it (code below the command line reads it without importing this)
    word = "terminated"


def _raise_terminated(signum, frame):
    raise Terminated()


def interrupt_status(exc: KeyboardInterrupt) -> tuple[int, str]:
    """The exit status and the word for an interruption: ``(143, "terminated")`` for SIGTERM
    (:class:`Terminated`), ``(130, "interrupted")`` for Ctrl-C (SIGINT)."""
    if isinstance(exc, Terminated):
        return EXIT_TERMINATED, Terminated.word
    return EXIT_INTERRUPTED, "interrupted"


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (outside the
    main thread, where Python cannot install handlers, nothing changes). The previous handler
    is restored on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
