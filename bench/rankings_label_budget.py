"""Prediction-powered rankings on real data with a small label budget (docs/models.md).

Every MT-Bench row carries a human vote, so there PPI equals the human-only estimate. This keeps
the human votes of a uniform random share of the items (``--share``, default 10%), hides the
rest, and compares, per model, the human-only and the prediction-powered (judge on every row +
the kept votes) win rates and Bradley–Terry strengths with the estimate from *all* the votes:
mean interval width, mean absolute error, and how often the interval contains the all-votes
value (not a coverage of the truth: the all-votes value is itself an estimate).

    python -m bench.rankings_label_budget ../shared/data/mtbench/mtbench_human_vs_gpt4.csv

Prints one line per source and, last, one JSON object.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from bench._support import parser


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("input")
    ap.add_argument("--share", type=float, default=0.1, help="share of items keeping their votes")
    ap.add_argument("--replicates", type=int, default=40)
    ap.add_argument("--resamples", type=int, default=300)
    args = ap.parse_args()

    from puaudit.data.io import read_table
    from puaudit.rankings.estimate import table_models, table_rankings
    from puaudit.data.schema import load_comparisons

    t0 = time.perf_counter()
    table = load_comparisons(read_table(args.input))
    table_models(table)
    full = table_rankings(table, n_resamples=args.resamples, random_state=0).frame.set_index("model")
    items = np.unique(table.item_id)
    acc = {s: {"width": [], "err": [], "covered": [], "bt_width": [], "bt_err": []}
           for s in ("human", "ppi")}
    lams = []
    for rep in range(args.replicates):
        rng = np.random.default_rng(rep)
        keep = set(rng.choice(items, int(round(args.share * len(items))), replace=False))
        human = np.array([h if i in keep else None for h, i in zip(table.human, table.item_id)],
                         dtype=object)
        sub = load_comparisons(table.frame, columns=table.columns)
        sub.human = human
        res = table_rankings(sub, n_resamples=args.resamples, random_state=rep)
        lams.append(res.diagnostics.get("lambda_winrate", np.nan))
        f = res.frame.set_index("model").loc[full.index]
        ref, ref_bt = full["winrate_human"].to_numpy(), full["bt_human"].to_numpy()
        for s in acc:
            lo, hi = f[f"winrate_{s}_lo"].to_numpy(), f[f"winrate_{s}_hi"].to_numpy()
            acc[s]["width"].extend(hi - lo)
            acc[s]["err"].extend(np.abs(f[f"winrate_{s}"].to_numpy() - ref))
            acc[s]["covered"].extend((lo <= ref) & (ref <= hi))
            acc[s]["bt_width"].extend(f[f"bt_{s}_hi"].to_numpy() - f[f"bt_{s}_lo"].to_numpy())
            acc[s]["bt_err"].extend(np.abs(f[f"bt_{s}"].to_numpy() - ref_bt))
    summary = {"input": Path(args.input).name, "share": args.share,
               "replicates": args.replicates, "resamples": args.resamples,
               "n_models": len(full), "lambda_winrate_mean": float(np.nanmean(lams)),
               "seconds": round(time.perf_counter() - t0, 1)}
    for s, d in acc.items():
        for k, v in d.items():
            summary[f"{s}_{k}"] = round(float(np.mean(v)), 4)
        print(f"{s:<6} win rate: width {summary[f'{s}_width']:.4f}, |error| {summary[f'{s}_err']:.4f}, "
              f"contains the all-votes value {summary[f'{s}_covered']:.3f} | Bradley-Terry: width "
              f"{summary[f'{s}_bt_width']:.3f}, |error| {summary[f'{s}_bt_err']:.3f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
