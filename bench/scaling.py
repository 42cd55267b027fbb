"""Scaling of ``puaudit audit`` with the default settings (docs/performance.md, "A million rows
on one machine"): wall time and peak memory at 100k, 1M and 3M rows (``--quick``: 10k and
100k; ``--sizes N ...``).

Generated comparisons with precomputed embeddings of the distinct texts (:func:`make_inputs`),
so the numbers measure the audit itself, not the encoder; each size runs ``puaudit audit`` in a
fresh process (peak memory: its VmHWM). ``--format parquet``: Parquet in and out, the streamed
path. The last line is ``ratio=<(t_largest / t_previous) / (n_largest / n_previous)>``: 1.0
means the audit grows linearly between the two largest sizes, above 1 faster than linear.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench._support import parser, run_child, timed


def make_inputs(n: int, folder: Path, *, d: int = 384, n_prompts: int = 400,
                annotated: float = 0.3, judge_acc: float = 0.7, seed: int = 0,
                fmt: str = "csv") -> tuple[Path, Path]:
    """``n`` comparisons over a pool of distinct answers (as real judge logs have: many pairs,
    fewer distinct texts), with precomputed embeddings of the distinct texts only.

    Each answer has a latent quality ``q``; its embedding is its prompt's centre plus noise plus
    ``2q`` along a hidden direction. A row pairs two answers to one prompt; the truth is the
    higher quality, the judge is right with probability ``judge_acc``, people label
    ``annotated`` of the rows. Six question types. The ``.npz`` holds ``vectors`` (one per
    distinct answer) and ``idx_a`` / ``idx_b`` (which vector each row's answers are).
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    n_texts = min(max(n // 20, 1_000), 50_000)
    types = np.array(["coding", "math", "writing", "reasoning", "extraction", "stem"])
    prompt_of_text = np.arange(n_texts) % n_prompts
    type_of_prompt = types[rng.integers(0, len(types), n_prompts)]
    q = rng.random(n_texts)
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    centres = rng.normal(size=(n_prompts, d))
    vectors = (centres[prompt_of_text] + 0.7 * rng.normal(size=(n_texts, d))
               + (2.0 * q)[:, None] * v).astype(np.float32)
    per_prompt = n_texts // n_prompts  # answers k, k + n_prompts, k + 2 n_prompts, ... of prompt k
    p = rng.integers(0, n_prompts, n)
    a = rng.integers(0, per_prompt, n)
    b = (a + 1 + rng.integers(0, per_prompt - 1, n)) % per_prompt
    ia, ib = p + a * n_prompts, p + b * n_prompts
    truth = np.where(q[ia] > q[ib], "A", "B")
    right = rng.random(n) < judge_acc
    judge = np.where(right, truth, np.where(truth == "A", "B", "A"))
    human = np.where(rng.random(n) < annotated, truth, "")
    df = pd.DataFrame({"question_id": p, "category": type_of_prompt[p],
                       "prompt": np.char.add("prompt ", p.astype(str)),
                       "response_a": np.char.add("answer ", ia.astype(str)),
                       "response_b": np.char.add("answer ", ib.astype(str)),
                       "judge_winner": judge, "human_winner": human})
    csv = folder / f"in_{n}.{fmt}"
    npz = folder / f"emb_{n}.npz"
    if fmt == "parquet":
        df.to_parquet(csv, index=False, row_group_size=65_536)
    else:
        df.to_csv(csv, index=False)
    # the encoder's own layout: each distinct "Question: ...\nAnswer: ..." text once
    np.savez(npz, vectors=vectors, idx_a=ia, idx_b=ib)
    return csv, npz


def run_one(csv: Path, npz: Path, out: Path) -> tuple[float, float]:
    """``puaudit audit`` of ``csv`` in a fresh process: its wall seconds and peak memory (MB)."""
    argv = ["audit", str(csv), "-o", str(out), "--embeddings", str(npz), "--max-rows", "0"]
    code = ("from bench._support import result, vm_peak_mb\n"
            "from puaudit.cli.commands import main\n"
            f"rc = main({argv!r})\n"
            "result({'peak_mb': vm_peak_mb()})\n"
            "raise SystemExit(rc)")
    r, wall = timed(lambda: run_child(["-c", code], label=f"audit at {csv.name}"))
    return wall, r["peak_mb"]


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="1k and 10k rows only")
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--format", choices=["csv", "parquet"], default="csv",
                    help="input and export format (parquet: the streamed path)")
    args = ap.parse_args()
    sizes = args.sizes or ([10_000, 100_000] if args.quick else [100_000, 1_000_000, 3_000_000])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in sizes:
            csv, npz = make_inputs(n, tmp, fmt=args.format)
            wall, peak = run_one(csv, npz, tmp / f"out_{n}.{args.format}")
            rows.append((n, wall, peak))
            print(f"rows={n:>7}  wall={wall:8.1f}s  peak_rss={peak:8.0f} MB", flush=True)
    print()
    print("| rows | wall time (s) | peak memory (MB) | time growth vs previous | "
          "extra memory per extra row |")
    print("|---:|---:|---:|---:|---:|")
    prev = None
    for n, wall, peak in rows:
        growth = "" if prev is None else f"×{wall / prev[1]:.1f} for ×{n // prev[0]} rows"
        per_row = ("" if prev is None else
                   f"{(peak - prev[2]) * 2**20 / (n - prev[0]):.0f} B")
        print(f"| {n:,} | {wall:.1f} | {peak:.0f} | {growth} | {per_row} |")
        prev = (n, wall, peak)
    (n1, t1, _), (n2, t2, _) = rows[-2], rows[-1]
    print(f"ratio={(t2 / t1) / (n2 / n1):.3f}")


if __name__ == "__main__":
    main()
