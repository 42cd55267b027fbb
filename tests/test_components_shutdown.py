"""The dashboard stopped mid-audit (issue 41, item 11): with a worker thread still computing when
the interpreter exits, Python 3.11 ends that daemon thread inside its C++ library and the
process aborted ("terminate called without an active exception", exit -6; seen in 2 of 5
SIGTERMs sent 15 s into an audit). The exit hook of :mod:`components.shutdown` ends the process
before finalisation reaches such threads; with none left it lets the ordinary shutdown run.

The construction: a child process with the hook registered, a busy daemon worker, and an exit
hook registered earlier that reports whether finalisation went on past the hook.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

_CHILD = """
import atexit, sys, threading, time
atexit.register(lambda: print("FINALISING", flush=True))  # runs after the hook (LIFO)
from components.shutdown import exit_cleanly_at_shutdown
exit_cleanly_at_shutdown()
exit_cleanly_at_shutdown()  # once per process
if sys.argv[1] == "busy":
    def work():
        while True:
            sum(i * i for i in range(10_000))
    threading.Thread(target=work, name="puaudit-work", daemon=True).start()
    time.sleep(0.2)
print("stopping", end="")  # unflushed output still reaches the reader
sys.exit(0)
"""


@pytest.mark.parametrize("mode", ["busy", "idle"])
def test_exit_with_a_busy_worker_skips_finalisation(mode):
    proc = subprocess.run([sys.executable, "-c", _CHILD, mode], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("stopping")
    # busy: the process ends at the hook; idle: the ordinary shutdown runs every hook
    assert ("FINALISING" in proc.stdout) == (mode == "idle"), proc.stdout
