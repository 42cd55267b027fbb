"""``streamlit run`` with every script run profiled: ``python -m bench._profiled_server DIR
ARGS...`` runs ``streamlit ARGS...`` and writes one cProfile dump per script run (a whole-page
run or a fragment's) to ``DIR/run-<n>.prof``, with ``DIR/runs.jsonl`` naming each: the page,
whether it was a fragment run, its seconds.

For ``bench/browser_sliders.py --profile``; the dashboard's own code is untouched (the hook
wraps Streamlit's ``exec_func_with_error_handling``, which every run goes through, in the script
thread, so the profile is that thread's alone: background jobs run in other threads).
"""

from __future__ import annotations

import cProfile
import itertools
import json
import pstats
import sys
import threading
import time
from pathlib import Path


def _install(out: Path) -> None:
    import streamlit.runtime.scriptrunner.script_runner as sr

    out.mkdir(parents=True, exist_ok=True)
    inner = sr.exec_func_with_error_handling
    counter = itertools.count()
    lock = threading.Lock()

    def profiled(func, ctx):
        n = next(counter)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        try:
            return inner(func, ctx)
        finally:
            prof.disable()
            seconds = time.perf_counter() - t0
            prof.dump_stats(str(out / f"run-{n}.prof"))
            # a whole-app run executes app.py; a fragment's runs its function alone
            whole = any(f.endswith("app.py") and fn == "<module>"
                        for f, _, fn in pstats.Stats(prof).stats)
            row = {"n": n, "t_end": time.time(), "seconds": seconds, "fragment": not whole}
            with lock, open(out / "runs.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")

    sr.exec_func_with_error_handling = profiled


def main() -> None:
    _install(Path(sys.argv[1]))
    from streamlit.web.cli import main as streamlit_main

    sys.argv = ["streamlit", *sys.argv[2:]]
    streamlit_main()


if __name__ == "__main__":
    main()
