"""A cascade of judges over seeds: does the guarantee hold, how much is trusted, who is asked?

For each data set, target and seed: ``run_cascade`` of the cheap judge then the strong one
(each stage certified on its region at R/K to route, the union certified jointly at R: the
default), the same stages answered per stage (``CascadeResult.as_per_stage``: Trust or
Escalate's rule), and the strong judge alone on the same judge-independent split at risk R
(``run_cascade`` with one judge: the same rows, the same denominator). Reported per set and
target: the share of seeds whose trusted validation rows (items once) agree at least T (a seed
trusting nothing meets it trivially), coverage mean (sd), the share of rows each judge was asked,
the strong judge alone's coverage, per-stage coverage, and the per-stage answer's coverage.

    python -m bench.cascade [--seeds 20] [--sets mtbench llmfao] [--targets 0.85 0.9]
                            [--budget 0.7]

``--budget S`` runs the cascade with each later judge asked about S of the rows (the stage
before it sends its least confident certified rows on too); the per-stage answer is then not
defined (the regions overlap) and is left out.

Prints ``ratio=<mean cascade coverage / mean strong-judge-alone coverage>`` on MT-Bench at the
first target last (>= 1: the cascade trusts at least as much as the strong judge alone).
"""

from __future__ import annotations

import time

from bench._support import (LLMFAO, MTBENCH, add_data_arguments, bench_encoder, load_set, meets,
                            parser)

SETS = {
    "mtbench": (MTBENCH, ["rule:longer", "judge_winner"], "votes"),
    "llmfao": (LLMFAO, ["judge_winner_gpt35", "judge_winner"], "consensus"),
}


def one_seed(table, emb, judges, target, seed, source, args) -> tuple:
    """One seed: the cascade, its per-stage answer (without a budget) and the strong judge
    alone on the same split; prints the seed's line and returns its figures."""
    from puaudit.audit.certify.cascade import PEOPLE, run_cascade
    from puaudit.audit.config import AuditConfig

    cfg = AuditConfig(random_state=seed, human_source=source)
    res = run_cascade(table, emb, judges, target=target, risk=args.risk, config=cfg,
                      budget=args.budget)
    s = res.summary()
    # the same stages, each certified on its own (not defined with a budget)
    per_stage = None if args.budget else res.as_per_stage()
    ps = None if per_stage is None else per_stage.summary()
    alone = run_cascade(table, emb, judges[-1:], target=target, risk=args.risk, config=cfg)
    a = alone.summary()
    met, a_met = meets(res.realised(), target), meets(alone.realised(), target)
    ps_met = ps is not None and meets(per_stage.realised(), target)
    st = s["stages"]
    row = (met, s["coverage"], s["realised"], [x["asked"] for x in st],
           [x["coverage"] for x in st], a["coverage"], a_met, a["realised"],
           float("nan") if ps is None else ps["coverage"], ps_met)
    print(f"  T={target:g} seed {seed}: met {met} coverage {s['coverage']:.3f} "
          f"realised {s['realised']:.3f} asked "
          f"{' / '.join(f'{x:.3f}' for x in row[3])} stage coverage "
          f"{' / '.join(f'{x:.3f}' for x in row[4])} | alone coverage "
          f"{a['coverage']:.3f} met {a_met} realised {a['realised']:.3f} | "
          + ("" if ps is None else f"per-stage coverage {ps['coverage']:.3f} met "
                                   f"{ps_met} realised {ps['realised']:.3f}"),
          flush=True)
    assert (res.stage[res.audited] != PEOPLE).mean() == s["coverage"]
    return row


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--risk", type=float, default=0.1)
    ap.add_argument("--targets", nargs="+", type=float, default=[0.85, 0.90])
    ap.add_argument("--budget", type=float, default=None,
                    help="share of the rows each later judge may be asked about")
    add_data_arguments(ap, SETS, default=["mtbench"])
    args = ap.parse_args()

    import numpy as np

    from puaudit.embed.pairs import embed_table

    encoder = bench_encoder(args.encoder)
    first_ratio = None
    for name in args.sets:
        path, judges, source = SETS[name]
        table = load_set(path, judge_column=judges[-1])
        emb = embed_table(table, encoder)
        print(f"\n{name}: judges {judges}, human_source {source}, risk {args.risk}, "
              f"encoder {emb.encoder}", flush=True)
        for target in args.targets:
            rows = []
            t0 = time.perf_counter()
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                rows.append(one_seed(table, emb, judges, target, seed, source, args))
            secs = (time.perf_counter() - t0) / len(rows)
            met = [r[0] for r in rows]
            cov = np.array([r[1] for r in rows])
            asked = np.array([r[3] for r in rows])
            stage_cov = np.array([r[4] for r in rows])
            alone_cov = np.array([r[5] for r in rows])
            real = np.array([r[2] for r in rows], dtype=float)
            print(f"{name} T={target:g}: cascade meets T in {sum(met)}/{len(met)} seeds; coverage "
                  f"{cov.mean():.3f} ({cov.std(ddof=1):.3f}); realised mean "
                  f"{np.nanmean(real):.3f}; asked "
                  + " / ".join(f"{j} {m:.3f}" for j, m in zip(judges, asked.mean(0)))
                  + f" (strong judge asked <= 0.70 in {(asked[:, -1] <= 0.70).sum()}/{len(met)}"
                  f" seeds); stage coverage "
                  + " / ".join(f"{m:.3f}" for m in stage_cov.mean(0))
                  + f"; {judges[-1]} alone coverage {alone_cov.mean():.3f} "
                  f"({alone_cov.std(ddof=1):.3f}), meets T in {sum(r[6] for r in rows)}/"
                  f"{len(rows)}; cascade >= alone in {(cov >= alone_cov).sum()}/{len(rows)} "
                  + ("seeds; " if args.budget else
                     f"seeds; per-stage answer coverage {np.mean([r[8] for r in rows]):.3f}, "
                     f"meets T in {sum(r[9] for r in rows)}/{len(rows)}; ")
                  + f"{secs:.0f}s per seed",
                  flush=True)
            if first_ratio is None and name == "mtbench":
                first_ratio = cov.mean() / max(alone_cov.mean(), 1e-9)
    if first_ratio is not None:
        print(f"ratio={first_ratio:.3f}")


if __name__ == "__main__":
    main()
