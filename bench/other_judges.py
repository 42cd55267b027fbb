"""Does a second judge named as a column raise one judge's certified coverage, and keep validity?

For each seed, the same audit (same split, same scorers) certifies the judge at the target twice:
with no other judge (``other_judges=()``) and with the other judge's column
(``other_judges=(COL,)``, the evidence signal ``agrees_<COL>``). Reported: share of seeds whose
trusted validation rows meet the target, coverage mean (sd) of each, and the mean change.

    python -m bench.other_judges [--seeds 10] [--target 0.75] [--scorer evidence]

Prints ``ratio=<mean coverage with / mean coverage without>`` for the first pair last.
"""

from __future__ import annotations

from bench._support import LLMFAO, bench_encoder, load_set, meets, parser

PAIRS = {  # (file, judge, other judge, human_source)
    "llmfao GPT-4 + GPT-3.5": (LLMFAO, "judge_winner", "judge_winner_gpt35", "consensus"),
    "llmfao GPT-3.5 + GPT-4": (LLMFAO, "judge_winner_gpt35", "judge_winner", "consensus"),
}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--target", type=float, default=0.75)
    ap.add_argument("--risk", type=float, default=0.1)
    ap.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    ap.add_argument("--scorer", default="auto", help="the audit's scorer (default auto)")
    args = ap.parse_args()

    import numpy as np

    from puaudit.audit.config import AuditConfig
    from puaudit.audit.stages import audit_table
    from puaudit.embed.pairs import embed_table

    encoder = bench_encoder(None)
    ratio = None
    for name in args.pairs:
        path, judge, other, source = PAIRS[name]
        table = load_set(path, judge_column=judge)
        emb = embed_table(table, encoder)
        res = {(): [], (other,): []}
        for seed in range(args.seeds):
            for others in res:
                cfg = AuditConfig(random_state=seed, human_source=source, other_judges=others,
                                  target_agreement=args.target, risk=args.risk,
                                  scorer=args.scorer)
                c = audit_table(table, emb, cfg).certification
                res[others].append((meets(c.realised(), args.target), c.coverage()))
            print(f"  {name} seed {seed}: coverage without {res[()][-1][1]:.3f} with "
                  f"{res[(other,)][-1][1]:.3f}", flush=True)
        without = np.array([c for _, c in res[()]])
        with_ = np.array([c for _, c in res[(other,)]])
        print(f"{name}, scorer {args.scorer}, T={args.target:g}, risk {args.risk:g}, "
              f"{args.seeds} seeds: without "
              f"meets T in {sum(m for m, _ in res[()])}/{args.seeds}, coverage {without.mean():.3f} "
              f"({without.std(ddof=1):.3f}); with meets T in "
              f"{sum(m for m, _ in res[(other,)])}/{args.seeds}, coverage {with_.mean():.3f} "
              f"({with_.std(ddof=1):.3f}); mean change {np.mean(with_ - without):+.3f}",
              flush=True)
        if ratio is None:
            ratio = with_.mean() / max(without.mean(), 1e-9)
    print(f"ratio={ratio:.3f}")


if __name__ == "__main__":
    main()
