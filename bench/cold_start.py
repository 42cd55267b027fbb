"""A newcomer's first audit on a cold cache (docs/encoders.md, "Cold start"): time to the first
numbers (evidence only) and to the full audit on the path ``auto`` takes.

    python -m bench.cold_start [--repeats 1] [--input FILE] [--rows N | --quick] [--threads T]
                                [--emulate-avx2] [--modes fast full]

Each run is a fresh ``python -m puaudit audit FILE -o OUT --spread-seeds 1`` on an empty
embedding cache (``--cache-dir`` and ``PUAUDIT_CACHE_DIR``): ``--no-texts`` (first numbers; it
must leave the cache empty) and ``--encoder-mode auto`` (the full audit), alternating; wall time
from outside, CPU time from the child's resource usage. ``--emulate-avx2`` caps the children to
AVX2 kernels (:data:`puaudit.embed.device.ISA_CAP_ENV`), so ``auto`` takes float32;
``--modes fast full`` also times those modes and compares their exported labels. Default input:
MT-Bench; ``--rows N`` (``--quick``: 600) audits its first N rows only.

The last line is ``ratio=<first numbers / full cold audit>`` (wall time, best run of each;
target <= 0.2 in both CPU classes).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._support import MTBENCH, ROOT, child_env, cpu_seconds, parser

QUICK_ROWS = 600


def run_once(kind: str, data: Path, tmp: Path, tag: str, env: dict) -> dict:
    """One cold ``puaudit audit``: ``kind`` is ``first`` (--no-texts) or an encoder mode."""
    cache = tmp / f"cache-{tag}"
    cache.mkdir()  # empty: the run is cold
    out = tmp / f"out-{tag}.csv"
    cmd = [sys.executable, "-m", "puaudit", "audit", str(data), "-o", str(out),
           "--cache-dir", str(cache), "--spread-seeds", "1"]
    cmd += ["--no-texts"] if kind == "first" else ["--encoder-mode", kind]
    env = dict(env, PUAUDIT_CACHE_DIR=str(cache))
    load = os.getloadavg()[0]
    cpu0 = cpu_seconds(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    m = re.search(r"embedded \d+ rows with (\S+) in ([0-9.]+)s", proc.stderr)
    return {"kind": kind, "wall": wall, "cpu": cpu, "load": load, "out": out,
            "embed": float(m.group(2)) if m else 0.0, "encoder": m.group(1) if m else "none",
            "cache_files": sum(1 for _ in cache.rglob("*"))}


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--input", type=Path, default=MTBENCH)
    ap.add_argument("--rows", type=int, default=None, help="audit the first N rows only")
    ap.add_argument("--quick", action="store_true", help=f"--rows {QUICK_ROWS}")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each (default 1)")
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP threads (default: torch's choice)")
    ap.add_argument("--emulate-avx2", action="store_true",
                    help="children capped to AVX2 kernels (ATEN_CPU_CAPABILITY=avx2, "
                         "ONEDNN_MAX_CPU_ISA=AVX2): auto takes float32")
    ap.add_argument("--modes", nargs="+", choices=["fast", "full"], default=[],
                    help="also time cold audits in these explicit encoder modes")
    args = ap.parse_args(argv)
    if not args.input.exists():
        sys.exit(f"{args.input} not found (the MT-Bench file lives in ../shared/data).")
    rows = QUICK_ROWS if args.quick and args.rows is None else args.rows
    import pandas as pd

    from puaudit.embed.device import ISA_CAP_ENV

    env = child_env()
    if args.threads:
        env.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    if args.emulate_avx2:
        env.update(ISA_CAP_ENV)
        os.environ.update(ISA_CAP_ENV)  # so the mode printed below is the children's
    from bench.embed import hardware_class
    from puaudit.embed.hf_encoder import HFEncoder

    auto = HFEncoder(None, mode="auto", cache_dir=None)
    auto._resolve()
    device = "cuda" if auto._auto_device_type() == "cuda" else "cpu"
    kinds = ["first", "auto"] + [m for m in args.modes]
    with tempfile.TemporaryDirectory() as tmp:
        data = args.input
        if rows:
            data = Path(tmp) / f"first-{rows}-{args.input.name}"
            pd.read_csv(args.input, nrows=rows).to_csv(data, index=False)
        cpu_class = hardware_class(device) + (" (emulated: ATEN_CPU_CAPABILITY=avx2, "
                                              "ONEDNN_MAX_CPU_ISA=AVX2)" if args.emulate_avx2
                                              else "")
        print(f"input {args.input.name}" + (f" (first {rows} rows)" if rows else "")
              + f"; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}; machine: "
              f"{cpu_class}; auto takes mode {auto.mode_}; running {' '.join(kinds)}",
              flush=True)
        runs, order = [], []
        for r in range(args.repeats):
            order += kinds if r % 2 == 0 else kinds[::-1]
        for i, kind in enumerate(order):
            res = run_once(kind, data, Path(tmp), f"{i}-{kind}", env)
            runs.append(res)
            what = ("first numbers (--no-texts)" if kind == "first"
                    else f"full audit, mode {kind} ({res['encoder']})")
            print(f"  run {i + 1}/{len(order)} {what}: {res['wall']:6.1f} s wall, "
                  f"{res['cpu']:6.1f} s CPU, embedding {res['embed']:6.1f} s, "
                  f"{res['cache_files']} cache files (load average {res['load']:.1f} at start)",
                  flush=True)
        best = {k: min((r for r in runs if r["kind"] == k), key=lambda r: r["wall"])
                for k in kinds}
        if "fast" in best and "full" in best:
            a, b = (pd.read_csv(best[k]["out"], dtype=str) for k in ("fast", "full"))
            same = a["puaudit_adjusted"].fillna("").equals(b["puaudit_adjusted"].fillna(""))
            print(f"fast vs full: exported labels identical: {same}; embedding time ratio "
                  f"{best['fast']['embed'] / max(best['full']['embed'], 1e-9):.3f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    first, full = best["first"], best["auto"]
    if first["cache_files"]:
        print(f"warning: the first-numbers run wrote {first['cache_files']} files to its cache")
    print(f"time to first numbers (evidence only): {first['wall']:.1f} s wall, "
          f"{first['cpu']:.1f} s CPU")
    print(f"full cold audit on auto's path (mode {auto.mode_}): {full['wall']:.1f} s wall, "
          f"{full['cpu']:.1f} s CPU (embedding {full['embed']:.1f} s)")
    print(f"CPU-time ratio first / full: {first['cpu'] / full['cpu']:.3f}")
    print(f"ratio={first['wall'] / full['wall']:.3f}")


if __name__ == "__main__":
    main()
