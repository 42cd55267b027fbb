"""A newcomer's first audit: the cold path, fast mode against full precision, in the same run.

    python bench/cold_start.py [--repeats 1] [--input FILE] [--threads T]

Each run is a fresh process doing exactly what the README's quick start does,

    python -m puaudit audit FILE -o OUT --cache-dir EMPTY_FOLDER --encoder-mode fast|full

with an empty embedding cache, so it imports everything, loads the encoder, embeds every distinct
text and audits (default settings: scorer auto, guarded rule). The two modes alternate (fast,
full, full, fast, ... so that a change in the machine's load hits both) and the wall-clock time
of each run is taken from outside the process. Default input: the MT-Bench human-vs-GPT-4 file.

Also reported: the time each run spent embedding (from its own "embedded ... in X s" line), the
load average around the runs (the development machine is shared), and whether the two modes'
exported labels (``puaudit_adjusted``) and groups are identical. The last line is
``ratio=<fast wall time / full wall time>`` (best run of each).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MTBENCH = ROOT.parent / "shared" / "data" / "mtbench" / "mtbench_human_vs_gpt4.csv"


def run_once(mode: str, data: Path, tmp: Path, tag: str, threads: int | None) -> dict:
    cache = tmp / f"cache-{tag}"
    cache.mkdir()  # empty: the run is cold
    out = tmp / f"out-{tag}.csv"
    cmd = [sys.executable, "-m", "puaudit", "audit", str(data), "-o", str(out),
           "--cache-dir", str(cache), "--encoder-mode", mode]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    m = re.search(r"embedded \d+ rows with .* in ([0-9.]+)s", proc.stderr)
    return {"mode": mode, "wall": wall, "embed": float(m.group(1)) if m else float("nan"),
            "load": load, "out": out}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, default=MTBENCH)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each mode (default 1)")
    ap.add_argument("--threads", type=int, default=None, help="OMP threads (default: torch's choice)")
    args = ap.parse_args(argv)
    if not args.input.exists():
        sys.exit(f"{args.input} not found (the MT-Bench file lives in ../shared/data).")
    import pandas as pd

    print(f"input {args.input.name}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}", flush=True)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        order = []
        for r in range(args.repeats):
            order += ["fast", "full"] if r % 2 == 0 else ["full", "fast"]
        for i, mode in enumerate(order):
            res = run_once(mode, args.input, Path(tmp), f"{i}-{mode}", args.threads)
            runs.append(res)
            print(f"  run {i + 1}/{len(order)} {mode:4s}: {res['wall']:6.1f} s wall, embedding "
                  f"{res['embed']:6.1f} s (load average {res['load']:.1f} at start)", flush=True)
        fast = min((r for r in runs if r["mode"] == "fast"), key=lambda r: r["wall"])
        full = min((r for r in runs if r["mode"] == "full"), key=lambda r: r["wall"])
        a, b = pd.read_csv(fast["out"], dtype=str), pd.read_csv(full["out"], dtype=str)
        same_labels = a["puaudit_adjusted"].fillna("").equals(b["puaudit_adjusted"].fillna(""))
        same_groups = a["puaudit_group"].equals(b["puaudit_group"])
        reversed_ = [int((x["puaudit_group"] == "negative").sum()) for x in (a, b)]
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"cold audit, fast mode:  {fast['wall']:.1f} s (embedding {fast['embed']:.1f} s)  (target <= 25 s on 2 cores)")
    print(f"cold audit, full mode:  {full['wall']:.1f} s (embedding {full['embed']:.1f} s)")
    print(f"embedding time ratio fast / full: {fast['embed'] / full['embed']:.3f}")
    print(f"exported labels identical: {same_labels}; groups identical: {same_groups}; "
          f"reversed verdicts fast {reversed_[0]}, full {reversed_[1]}")
    print(f"ratio={fast['wall'] / full['wall']:.3f}")


if __name__ == "__main__":
    main()
