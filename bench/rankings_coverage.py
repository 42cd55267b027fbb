"""Coverage of the model-ranking intervals on simulated data with known truth (docs/models.md).

8 models with planted strengths, a judge with a length bias, human labels on a uniform random
10% of 5,000 comparisons (:func:`puaudit.rankings.simulate.simulate_comparisons`). Over R replicates,
for each source (judge, human, ppi): the share of 95% intervals that cover the true human win
rate and the true Bradley–Terry strength, and the mean interval width.

    python -m bench.rankings_coverage                     # 200 replicates, 1000 resamples
    python -m bench.rankings_coverage --replicates 20 --resamples 300 --jobs 2

Prints one line per source and, last, one JSON object (``--out FILE`` also writes it).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from bench._support import parser


SOURCES = ("judge", "human", "ppi")


def replicate(args) -> dict:
    seed, n, share, bias, resamples = args
    from puaudit.rankings.estimate import model_rankings
    from puaudit.rankings.simulate import simulate_comparisons

    df, truth = simulate_comparisons(n, label_share=share, length_bias=bias, random_state=seed)
    res = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                         n_resamples=resamples, random_state=seed)
    f = res.frame.set_index("model").loc[truth["model"]]
    out = {"lambda_winrate": res.diagnostics.get("lambda_winrate"),
           "lambda_bt": res.diagnostics.get("lambda_bt"),
           "rank_judge_wrong": int((f["rank_judge"].to_numpy() != np.arange(len(f), 0, -1)).sum()),
           "rank_ppi_wrong": int((f["rank_ppi"].to_numpy() != np.arange(len(f), 0, -1)).sum())}
    for s in SOURCES:
        for stat, true in (("winrate", truth["winrate_true"]), ("bt", truth["bt_true"])):
            lo, hi = f[f"{stat}_{s}_lo"].to_numpy(), f[f"{stat}_{s}_hi"].to_numpy()
            t = true.to_numpy()
            out[f"{stat}_{s}_covered"] = ((lo <= t) & (t <= hi)).tolist()
            out[f"{stat}_{s}_width"] = (hi - lo).tolist()
    return out


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--comparisons", type=int, default=5000)
    ap.add_argument("--label-share", type=float, default=0.1)
    ap.add_argument("--length-bias", type=float, default=1.5)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="also write the JSON summary here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    tasks = [(seed, args.comparisons, args.label_share, args.length_bias, args.resamples)
             for seed in range(args.replicates)]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            reps = list(pool.map(replicate, tasks))
    else:
        reps = [replicate(t) for t in tasks]
    summary = {"replicates": args.replicates, "comparisons": args.comparisons,
               "label_share": args.label_share, "length_bias": args.length_bias,
               "resamples": args.resamples, "seconds": round(time.perf_counter() - t0, 1),
               "lambda_winrate_mean": float(np.mean([r["lambda_winrate"] for r in reps])),
               "lambda_bt_mean": float(np.mean([r["lambda_bt"] for r in reps])),
               "replicates_with_judge_rank_error": int(sum(r["rank_judge_wrong"] > 0 for r in reps)),
               "replicates_with_ppi_rank_error": int(sum(r["rank_ppi_wrong"] > 0 for r in reps))}
    for s in SOURCES:
        for stat in ("winrate", "bt"):
            cov = np.concatenate([r[f"{stat}_{s}_covered"] for r in reps])
            width = np.concatenate([r[f"{stat}_{s}_width"] for r in reps])
            summary[f"{stat}_{s}_coverage"] = round(float(cov.mean()), 4)
            summary[f"{stat}_{s}_width"] = round(float(width.mean()), 4)
        print(f"{s:<6} win rate: coverage {summary[f'winrate_{s}_coverage']:.3f}, mean width "
              f"{summary[f'winrate_{s}_width']:.4f} | Bradley-Terry: coverage "
              f"{summary[f'bt_{s}_coverage']:.3f}, mean width {summary[f'bt_{s}_width']:.4f}")
    line = json.dumps(summary)
    if args.out:
        Path(args.out).write_text(line + "\n", encoding="utf-8")
    print(line)


if __name__ == "__main__":
    main()
