"""Time and peak memory of ``puaudit models FILE --json`` on many models (docs/models.md, *Scale*).

Cases: 10,000 models over 50,000 comparisons and 500 models over 5,000 comparisons, each with the
models in disjoint pairs (``pairs``) or on a chain (``chain``): shapes where a fit that spends
models² on every refit is all cost and no information. Judge verdicts A/B/tie on every row, a
human vote on one row in ten, short texts (``puaudit models`` embeds nothing: the audited source
comes from an audit export, and none is given here). Each run is a fresh interpreter; peak memory
is its VmHWM. Targets: 10,000 models under 60 s, 500 under 20 s, every run under 2 GB.

Time is the CPU time of the command itself (``main(['models', FILE, '--json'])``, imports
before it excluded): on a shared machine its wall time is inflated by other jobs, and is printed
alongside. Prints one line per case, then the worst ratio measured / target (CPU time or memory)
last.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from bench._support import parser, run_child, timed

CASES = {"10k-pairs": (10_000, 50_000, "pairs", 60.0), "10k-chain": (10_000, 50_000, "chain", 60.0),
         "500-pairs": (500, 5_000, "pairs", 20.0), "500-chain": (500, 5_000, "chain", 20.0)}
PEAK_TARGET_MB = 2048.0

_CHILD = """
import time
from bench._support import cpu_seconds, result, vm_peak_mb
from puaudit.cli.commands import main
t, c = time.perf_counter(), cpu_seconds()
rc = main(['models', {path!r}, '--json'])
result({{'wall': time.perf_counter() - t, 'cpu': cpu_seconds() - c, 'peak': vm_peak_mb(),
         'rc': rc}})
"""


def comparisons(n_models: int, n_rows: int, layout: str, *, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    if layout == "chain":
        link = rng.integers(0, n_models - 1, n_rows)
        a, b = link, link + 1
    else:
        pair = rng.integers(0, n_models // 2, n_rows)
        a, b = 2 * pair, 2 * pair + 1
    swap = rng.random(n_rows) < 0.5
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    p = expit((s := rng.normal(size=n_models))[a] - s[b])
    judge = np.where(rng.random(n_rows) < p, "A", "B").astype(object)
    judge[rng.random(n_rows) < 0.05] = "tie"
    human = np.where(rng.random(n_rows) < p, "A", "B").astype(object)
    human[rng.random(n_rows) >= 0.1] = None
    return pd.DataFrame({"prompt": [f"question {r}" for r in range(n_rows)],
                         "response_a": "short", "response_b": "answer",
                         "model_a": [f"model-{c:05d}" for c in a],
                         "model_b": [f"model-{c:05d}" for c in b], "judge": judge,
                         "human": human})


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = ap.parse_args()
    worst = worst_wall = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            n_models, n_rows, layout, target_s = CASES[name]
            path = Path(tmp) / f"{name}.csv"
            comparisons(n_models, n_rows, layout).to_csv(path, index=False)
            r, total = timed(lambda: run_child(["-c", _CHILD.format(path=str(path))], label=name))
            wall, cpu, peak, rc = r["wall"], r["cpu"], r["peak"], r["rc"]
            ratio = max(cpu / target_s, peak / PEAK_TARGET_MB)
            worst = max(worst, ratio)
            worst_wall = max(worst_wall, wall / target_s)
            print(f"{name:>10}: {n_models:,} models, {n_rows:,} comparisons: CPU {cpu:.1f} s, "
                  f"wall {wall:.1f} s (with interpreter start and imports {total:.1f} s), peak "
                  f"{peak:.0f} MB, exit {rc}; target {target_s:.0f} s / {PEAK_TARGET_MB:.0f} MB "
                  f"-> {ratio:.2f}")
    print(f"wall / target (inflated by other jobs on a shared machine): {worst_wall:.2f}")
    print(f"worst measured (CPU seconds of the command, peak memory) / target: {worst:.2f}")


if __name__ == "__main__":
    main()
