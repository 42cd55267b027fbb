"""SIGTERM as Ctrl-C: ``kill PID`` (or a service manager stopping a job) ends a command the way
Ctrl-C does, with the shell's exit status for the signal. Every command runs inside
:func:`sigterm_as_interrupt` (:func:`puaudit.cli.commands.main`); ``puaudit judge`` reads
:func:`interrupt_status` to say which it was."""

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
