"""The dashboard process ends cleanly when it is stopped mid-computation (SIGTERM, Ctrl-C).

Streamlit stops its server on SIGTERM and the interpreter then finalises while worker threads
(the audit's daemon thread of :func:`components.audit_runs.with_progress`, a warm-up) may still be
inside a C++ library such as torch. Python 3.11 ends such a daemon thread with ``pthread_exit``
when it next asks for the GIL; unwinding its C++ frames calls ``std::terminate`` and the
process aborts ("terminate called without an active exception", exit status -6, a core dump on
some systems).

:func:`exit_cleanly_at_shutdown` registers an exit hook (once per process) that, when daemon
threads are still running at exit, flushes the logs and the output and ends the process with
``os._exit(0)`` before finalisation reaches those threads. Nothing is left to save by then:
review decisions are committed as they are made and files are written atomically; the
unfinished computation is dropped, as the stop asked. Streamlit's own exit status after a
stop is 0, so that is the status given.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading

__all__ = ["exit_cleanly_at_shutdown", "busy_daemon_threads"]

_REGISTERED = threading.Event()


def busy_daemon_threads() -> list[str]:
    """Names of the daemon threads still alive (other than the calling one)."""
    me = threading.current_thread()
    return [t.name for t in threading.enumerate() if t.daemon and t.is_alive() and t is not me]


def _exit_before_finalising() -> None:
    if not busy_daemon_threads():
        return  # nothing running: the ordinary shutdown is safe
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(0)


def exit_cleanly_at_shutdown() -> None:
    """Register the exit hook described above (the first call in a process does it)."""
    if not _REGISTERED.is_set():
        _REGISTERED.set()
        atexit.register(_exit_before_finalising)
