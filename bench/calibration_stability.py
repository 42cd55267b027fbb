"""How much the default audit depends on the draw of its cross-fitting folds.

For one seeded split per data set, the audit is scored with several fold seeds (the split, the
embeddings and the scorer's inputs stay the same; only the folds that cross-fit the calibration
change), once with a single cross-fit and a single isotonic map (``--cv-repeats 1
--calibration-bags 0``) and once with the defaults (repeated folds, bagged isotonic map).
Reported per data set: mean number of audited rows whose guarded group (positive / uncertain /
negative) differs between two fold seeds, and the mean number reversed.

    python -m bench.calibration_stability [--fold-seeds 4] [--encoder hashing]

Prints ``ratio=<default flips / single-fit flips, mean over data sets>`` last (below 1: the
default depends less on the folds).
"""

from __future__ import annotations

import itertools
import sys
import time

from bench._support import (LLMFAO, MTBENCH, add_data_arguments, bench_encoder, load_set,
                            parser)

SETS = {
    "MT-Bench, longer answer wins": (MTBENCH, "longer"),
    "llmfao, GPT-4": (LLMFAO, None),
}
SETTINGS = {"single fit": {"cv_repeats": 1, "calibration_bags": 0}, "default": {}}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--fold-seeds", type=int, default=4)
    add_data_arguments(ap, SETS)
    args = ap.parse_args()

    import numpy as np

    from puaudit.audit.config import AuditConfig
    from puaudit.embed.pairs import embed_table
    from puaudit.audit.splits import prepare_split
    from puaudit.audit.relabel import relabel_split
    from puaudit.audit.scorers.scoring import score_split

    encoder = bench_encoder(args.encoder)
    ratios = []
    print("data | setting | audited rows | rows changing group between fold seeds | reversed "
          "(mean) | seconds per audit")
    for name in args.sets:
        path, rule = SETS[name]
        table = load_set(path, rule)
        prep = prepare_split(table, embed_table(table, encoder), AuditConfig())
        u = prep.u_rows
        flips = {}
        for setting, kw in SETTINGS.items():
            t0 = time.perf_counter()
            groups = [np.asarray(relabel_split(prep, score_split(prep, AuditConfig(random_state=s, **kw)))
                                 ["group"])[u] for s in range(args.fold_seeds)]
            secs = (time.perf_counter() - t0) / args.fold_seeds
            flips[setting] = float(np.mean([(a != b).sum()
                                            for a, b in itertools.combinations(groups, 2)]))
            reversed_ = float(np.mean([(g == "negative").sum() for g in groups]))
            print(f"{name} | {setting} | {len(u)} | {flips[setting]:.0f} | {reversed_:.0f} | "
                  f"{secs:.1f}")
            sys.stdout.flush()
        ratios.append(flips["default"] / max(flips["single fit"], 1.0))
    print(f"ratio={sum(ratios) / len(ratios):.3f}")


if __name__ == "__main__":
    main()
