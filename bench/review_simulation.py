"""The review queue against random order, with a simulated reviewer (docs/review.md).

On MT-Bench (judge: "longer answer wins", and GPT-4) and llmfao (GPT-4 vs crowd votes), one
seeded default audit per seed splits the annotated items into P and validation; the validation
rows play the unchecked rows. The queue (guarded-uncertain, then reversal candidates, then
|p_judge_right - 0.5|) or a seeded random order picks items among them; the reviewer answers with
the held-back human verdict; the reviewed rows join P and the audit reruns. Reported: agreement
with people of the final labels on the validation rows (reviewer's verdict on reviewed items,
the rerun audit's elsewhere), mean over seeds, after 50 / 100 / 200 / 400 reviews.

    python -m bench.review_simulation [--seeds 3] [--encoder hashing]

Also printed: the same on the validation rows that were not reviewed ("remaining"; the queue
takes the judge's likely errors out of that set, so part of its lead there is selection), and how
many judge errors each order put in front of the reviewer. Prints one table per data set and,
last, ``ratio=<mean over data sets and budgets of queue / random final-label consistency>``
(above 1: the queue's final labels agree with people more).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench._support import (LLMFAO, MTBENCH, add_data_arguments, bench_encoder, load_set,
                            parser)

SETS = {
    "MT-Bench, longer answer wins": (MTBENCH, "longer"),
    "MT-Bench, GPT-4": (MTBENCH, None),
    "llmfao, GPT-4": (LLMFAO, None),
}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budgets", type=int, nargs="+", default=[50, 100, 200, 400])
    add_data_arguments(ap, SETS)
    ap.add_argument("--json", default=None, help="also write every line of the simulation here")
    args = ap.parse_args()

    import pandas as pd

    from puaudit.embed.pairs import embed_table
    from puaudit.review.simulate import simulate_review, summarise_simulation

    encoder = bench_encoder(args.encoder)
    ratios, everything = [], []
    for name in args.sets:
        path, rule = SETS[name]
        t0 = time.perf_counter()
        table = load_set(path, rule)
        emb = embed_table(table, encoder)
        sim = simulate_review(table, emb, budgets=tuple(args.budgets),
                              seeds=tuple(range(args.seeds)))
        sim.insert(0, "data", name)
        everything.append(sim)
        s = summarise_simulation(sim).set_index("budget")
        base = s.loc[0, "value_cons_final"]
        print(f"\n{name} ({len(table)} rows, {int(sim['n_validation'].iloc[0])} validation rows, "
              f"{args.seeds} seeds, {time.perf_counter() - t0:.0f} s); no review: {base:.3f}")
        rem = sim.groupby(["order", "budget"])["cons_remaining"].mean()
        print("reviews | final: queue | random | queue - random | remaining: queue | random "
              "| judge errors found: queue / random")
        for k in args.budgets:
            if k not in s.index:
                continue
            q, r = s.loc[k, "value_cons_final"], s.loc[k, "random_cons_final"]
            print(f"{k:7d} | {q:.3f} | {r:.3f} | {q - r:+.3f} | {rem[('value', k)]:.3f} | "
                  f"{rem[('random', k)]:.3f} | "
                  f"{s.loc[k, 'value_fixed']:.0f} / {s.loc[k, 'random_fixed']:.0f}")
            ratios.append(q / r)
        sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps(pd.concat(everything).to_dict(orient="records"),
                                              default=str))
    ratio = sum(ratios) / len(ratios) if ratios else float("nan")
    print(f"ratio={ratio:.3f}")


if __name__ == "__main__":
    main()
