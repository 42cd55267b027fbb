"""Certified trust or escalate over seeds: does the guarantee hold, and how much is trusted?

For each data set and seed, one audit certifies at target 0.90 (risk 0.1) and the same scores are
certified again at 0.85 (:func:`puaudit.audit.certify.judge.with_target`, no refit). Reported
per data set and target: the share of seeds whose realised agreement among trusted validation rows
(items counted once) is at least the target (a seed that trusts nothing meets it trivially),
coverage (share of audited rows trusted) mean and sd, and the mean certified threshold.

    python -m bench.certified [--seeds 20] [--encoder hashing] [--sets ...] [--no-texts]
                              [--per-seed]

``--per-seed``: also one line per seed and target (coverage, realised agreement on trusted
validation items and their number, the folds' certified shares).

``--no-texts``: the evidence-only audit (no encoder; :mod:`puaudit.audit.scorers.evidence`).

Prints ``ratio=<worst seed-share meeting the target / 0.9>`` last (>= 1: the guarantee held in
at least 90% of seeds everywhere, as risk 0.1 promises).
"""

from __future__ import annotations

import math
import sys
import time

from bench._support import (LLMFAO, MTBENCH, add_data_arguments, bench_encoder, load_set, meets,
                            parser)

SETS = {
    "MT-Bench, GPT-4": (MTBENCH, None),
    "MT-Bench, longer answer wins": (MTBENCH, "longer"),
    "llmfao, GPT-4": (LLMFAO, None),
}
TARGETS = (0.85, 0.90)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--risk", type=float, default=0.1)
    ap.add_argument("--p-ratio", type=float, default=0.3)
    add_data_arguments(ap, SETS)
    ap.add_argument("--no-texts", action="store_true", help="the evidence-only audit")
    ap.add_argument("--per-seed", action="store_true", help="one line per seed and target")
    args = ap.parse_args()

    import numpy as np

    from puaudit.audit.certify.judge import with_target
    from puaudit.audit.config import AuditConfig
    from puaudit.audit.stages import audit_table
    from puaudit.embed.pairs import embed_table

    encoder = None if args.no_texts else bench_encoder(args.encoder)
    shares = []
    print(f"seeds {args.seeds}, risk {args.risk}, p_ratio {args.p_ratio}"
          + ("; evidence only (--no-texts)" if args.no_texts else ""))
    print("data | target | seeds meeting the target | coverage mean | coverage sd | "
          "realised (mean over seeds trusting any) | threshold (mean) | seconds per audit")
    for name in args.sets:
        path, rule = SETS[name]
        table = load_set(path, rule)
        emb = None if args.no_texts else embed_table(table, encoder)
        rows = {t: [] for t in TARGETS}
        t0 = time.perf_counter()
        for seed in range(args.seeds):
            cfg = AuditConfig(target_agreement=max(TARGETS), risk=args.risk,
                              p_ratio=args.p_ratio, random_state=seed,
                              texts=not args.no_texts)
            res = audit_table(table, emb, cfg)
            for t in TARGETS:
                c = with_target(res, t, args.risk).certification
                r = c.realised()
                met = meets(r, t)
                rows[t].append((met, c.coverage(), r["agreement"], c.threshold))
                if args.per_seed:
                    fold_shares = " ".join(f"{f['share']:.2f}"
                                           for f in c.choice.get("folds", []))
                    print(f"  {name} | {t:.2f} | seed {seed} | coverage {c.coverage():.3f} | "
                          f"realised {r['agreement']:.3f} on {r['n']} items | met {met} | "
                          f"fold shares {fold_shares}", flush=True)
        secs = (time.perf_counter() - t0) / args.seeds
        for t in TARGETS:
            met, cov, real, thr = (np.array(v, dtype=float) for v in zip(*rows[t]))
            share = float(met.mean())
            shares.append(share)
            real_txt = f"{np.nanmean(real):.3f}" if np.isfinite(real).any() else "n/a"
            thr_f = thr[np.isfinite(thr)]
            print(f"{name} | {t:.2f} | {int(met.sum())}/{len(met)} ({share:.2f}) | "
                  f"{cov.mean():.3f} | {cov.std(ddof=1) if len(cov) > 1 else math.nan:.3f} | "
                  f"{real_txt} | {thr_f.mean() if len(thr_f) else math.nan:.3f} | {secs:.1f}")
        sys.stdout.flush()
    print(f"ratio={min(shares) / 0.9:.3f}")


if __name__ == "__main__":
    main()
