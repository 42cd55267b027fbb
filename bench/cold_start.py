"""A newcomer's first audit: the cold path, the mode ``auto`` takes against full precision.

    python -m bench.cold_start [--repeats 1] [--input FILE] [--threads T] [--modes fast full]

Each run is a fresh process doing exactly what the README's quick start does,

    python -m puaudit audit FILE -o OUT --cache-dir EMPTY_FOLDER --encoder-mode fast|full

with an empty embedding cache, so it imports everything, loads the encoder, embeds every distinct
text and audits (default settings: scorer auto, guarded rule). The modes alternate (fast,
full, full, fast, ... so that a change in the machine's load hits both) and the wall-clock time
of each run is taken from outside the process. Default input: the MT-Bench human-vs-GPT-4 file.

The machine's class (native bfloat16 or not) and the mode ``auto`` takes on it are printed
first. Default modes: ``fast`` and ``full`` where ``auto`` takes ``fast``; ``full`` alone where
it takes ``full`` (CPUs without native bfloat16, where ``fast`` is emulated bfloat16 and takes
minutes; ``--modes fast full`` measures it anyway).

Also reported: the time each run spent embedding (from its own "embedded ... in X s" line), the
load average around the runs (the development machine is shared), and whether the two modes'
exported labels (``puaudit_adjusted``) and groups are identical. The last line is
``ratio=<wall time of auto's mode / full wall time>`` (best run of each; 1 where auto is full).
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

from bench._support import MTBENCH, ROOT


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
    ap.add_argument("--modes", nargs="+", choices=["fast", "full"], default=None,
                    help="modes to run (default: auto's mode and full)")
    args = ap.parse_args(argv)
    if not args.input.exists():
        sys.exit(f"{args.input} not found (the MT-Bench file lives in ../shared/data).")
    import pandas as pd

    from bench.embed import hardware_class
    from puaudit.embed.encoders import HFEncoder

    auto = HFEncoder(None, mode="auto", cache_dir=None)
    auto._resolve()
    modes = args.modes or (["fast", "full"] if auto.mode_ == "fast" else ["full"])
    device = "cuda" if auto._auto_device_type() == "cuda" else "cpu"
    print(f"input {args.input.name}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}; "
          f"machine: {hardware_class(device)}; auto takes mode {auto.mode_}; running {' '.join(modes)}",
          flush=True)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        order = []
        for r in range(args.repeats):
            order += modes if r % 2 == 0 else modes[::-1]
        for i, mode in enumerate(order):
            res = run_once(mode, args.input, Path(tmp), f"{i}-{mode}", args.threads)
            runs.append(res)
            print(f"  run {i + 1}/{len(order)} {mode:4s}: {res['wall']:6.1f} s wall, embedding "
                  f"{res['embed']:6.1f} s (load average {res['load']:.1f} at start)", flush=True)
        best = {m: min((r for r in runs if r["mode"] == m), key=lambda r: r["wall"]) for m in modes}
        full = best.get("full")
        if "fast" in best and full is not None:
            a, b = pd.read_csv(best["fast"]["out"], dtype=str), pd.read_csv(full["out"], dtype=str)
            same_labels = a["puaudit_adjusted"].fillna("").equals(b["puaudit_adjusted"].fillna(""))
            same_groups = a["puaudit_group"].equals(b["puaudit_group"])
            reversed_ = [int((x["puaudit_group"] == "negative").sum()) for x in (a, b)]
            compared = (f"exported labels identical: {same_labels}; groups identical: {same_groups}; "
                        f"reversed verdicts fast {reversed_[0]}, full {reversed_[1]}")
        else:
            compared = ""
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    for m, r in best.items():
        tag = "  <- auto's path" if m == auto.mode_ else ""
        print(f"cold audit, {m} mode:  {r['wall']:.1f} s (embedding {r['embed']:.1f} s){tag}")
    if "fast" in best and full is not None:
        print(f"embedding time ratio fast / full: {best['fast']['embed'] / full['embed']:.3f}")
    if compared:
        print(compared)
    if full is None or auto.mode_ not in best:
        print(f"ratio=nan (run full and auto's mode {auto.mode_} to get it)")
        return
    print(f"cold audit on auto's path: {best[auto.mode_]['wall']:.1f} s  (target <= 25 s on 2 cores)")
    print(f"ratio={best[auto.mode_]['wall'] / full['wall']:.3f}")


if __name__ == "__main__":
    main()
