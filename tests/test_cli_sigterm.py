"""SIGTERM during ``puaudit ... -o out.csv`` (issue 41, item 11): the temporary file of the
atomic write is removed, as it is for Ctrl-C, and the exit status is 143.

The construction: the command runs in a child process whose ``os.fsync`` (called by the atomic
write once the whole table is in its temporary file) announces itself and waits, so the signal
arrives exactly while ``.out.csv.XXXX.tmp`` exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

_CHILD = """
import os, sys, time
marker = sys.argv[1]
real_fsync = os.fsync
def slow_fsync(fd):
    open(marker, "w").close()  # the temporary file is written: signal now
    time.sleep(60)
    real_fsync(fd)
os.fsync = slow_fsync
from puaudit.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("sig, rc", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_the_write_leaves_no_temporary_file(tmp_path, sig, rc):
    out = tmp_path / "out.csv"
    marker = tmp_path / "writing"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(marker), "demo", "--rows", "400",
                             "-o", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.time() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the write never started"
            time.sleep(0.05)
        assert [p.name for p in tmp_path.glob(".out.csv.*.tmp")]  # the construction holds
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == rc, err
    assert ("terminated" if sig == signal.SIGTERM else "interrupted") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["writing"]  # no .tmp, no out.csv
