"""The dashboard process ends cleanly when it is stopped mid-computation (SIGTERM, Ctrl-C).

At exit, daemon worker threads may still be inside torch's C++ code; Python ends them with
``pthread_exit``, which aborts the process ("terminate called without an active exception",
docs/hostile_inputs.md). :func:`exit_cleanly_at_shutdown` registers an exit hook that, while
such threads run, flushes the logs and output and calls ``os._exit(0)`` (Streamlit's status
after a stop) first: decisions and files are already saved, the unfinished work is dropped.
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
