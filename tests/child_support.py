"""Running a case in a fresh interpreter and reading its peak memory (the hostile-input tests)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

from tests.conftest import ROOT


def run_measured(code: str, *, cwd, limit_mb: int | None = None, timeout: int = 300,
                 env_extra: dict | None = None) -> tuple[int, str, float, float]:
    """Run ``code`` (which sets ``RC``) in a fresh interpreter, its address space capped at
    ``limit_mb`` when given; returns (returncode, stderr, peak resident MB, seconds).

    The peak is the child's own ``VmHWM``, not ``ru_maxrss``: Linux carries ``ru_maxrss`` over
    from the parent across exec.
    """
    script = (code + "\nimport sys as _s\n"
              "hwm = next(l.split()[1] for l in open('/proc/self/status') "
              "if l.startswith('VmHWM'))\n"
              "print('PEAK', hwm, file=_s.stderr)\n"
              "_s.exit(RC)\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(cwd),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           **{k: v for k, v in os.environ.items() if k == "PUAUDIT_CACHE_DIR"},
           **(env_extra or {})}

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb * 2**20, limit_mb * 2**20))

    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout,
                          preexec_fn=None if limit_mb is None else cap)
    seconds = time.perf_counter() - t0
    assert "PEAK" in proc.stderr, proc.stderr[-3000:]  # it ended, not killed
    peak_mb = int(proc.stderr.rsplit("PEAK", 1)[1].split()[0]) / 1024
    return proc.returncode, proc.stderr, peak_mb, seconds
