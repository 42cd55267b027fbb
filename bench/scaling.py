"""Scaling of ``puaudit audit``: wall time and peak memory at 1k, 10k and 100k rows.

Generated comparisons (``puaudit.demo``) with precomputed embeddings of dimension 384 (planted:
the better answer is shifted along a hidden direction), so the numbers measure the audit itself
(splits, denoising, partial OT, cross-fitted calibration, export), not the encoder. Each size runs
``python -m puaudit audit`` in a fresh process; peak memory is the child's maximum RSS.

The last line is ``ratio=<(t_largest / t_previous) / (n_largest / n_previous)>``: 1.0 means the
audit grows linearly between the two largest sizes, above 1 faster than linear.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_inputs(n: int, folder: Path, *, d: int = 384, seed: int = 0) -> tuple[Path, Path]:
    from puaudit.demo import generate_demo

    df = generate_demo(n_rows=n, random_state=seed)
    rng = np.random.default_rng(seed)
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    base = rng.normal(size=(n, d)).astype(np.float32)
    e_a = base + 0.6 * rng.normal(size=(n, d)).astype(np.float32)
    e_b = base + 0.6 * rng.normal(size=(n, d)).astype(np.float32)
    truth_a = (df["true_winner"] == "A").to_numpy()
    e_a[truth_a] += 2.0 * v.astype(np.float32)
    e_b[~truth_a] += 2.0 * v.astype(np.float32)
    csv = folder / f"in_{n}.csv"
    npz = folder / f"emb_{n}.npz"
    df.to_csv(csv, index=False)
    np.savez(npz, e_a=e_a, e_b=e_b)
    return csv, npz


def run_one(csv: Path, npz: Path, out: Path) -> tuple[float, float]:
    code = (
        "import resource, sys, runpy;"
        "sys.argv = ['puaudit', 'audit', %r, '-o', %r, '--embeddings', %r];"
        "from puaudit.cli import main;"
        "rc = main(sys.argv[1:]);"
        "print('PEAK_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr);"
        "sys.exit(rc)" % (str(csv), str(out), str(npz)))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"audit failed at {csv.name}:\n{proc.stderr[-2000:]}")
    peak_kb = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_KB")][0]
    return wall, peak_kb / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1k and 10k rows only")
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    args = ap.parse_args()
    sizes = args.sizes or ([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in sizes:
            csv, npz = make_inputs(n, tmp)
            wall, peak = run_one(csv, npz, tmp / f"out_{n}.csv")
            rows.append((n, wall, peak))
            print(f"rows={n:>7}  wall={wall:8.1f}s  peak_rss={peak:8.0f} MB", flush=True)
    print()
    print("| rows | wall time (s) | peak memory (MB) | time growth vs previous |")
    print("|---:|---:|---:|---:|")
    prev = None
    for n, wall, peak in rows:
        growth = "" if prev is None else f"×{wall / prev[1]:.1f} for ×{n // prev[0]} rows"
        print(f"| {n:,} | {wall:.1f} | {peak:.0f} | {growth} |")
        prev = (n, wall)
    (n1, t1, _), (n2, t2, _) = rows[-2], rows[-1]
    print(f"ratio={(t2 / t1) / (n2 / n1):.3f}")


if __name__ == "__main__":
    main()
