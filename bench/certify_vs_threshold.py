"""Certification against the research baseline, a threshold on the judge's own confidence
(:func:`threshold_baseline`; docs/method.md, "Measured against the judge's threshold").

PUAudit is the default audit with ``--target-agreement`` (``certificate="auto"``); both run on
the same split of every seed; coverage is the share of audited rows trusted, "valid" the seeds
whose trusted validation rows (items once) agree with people at least the target (trusting
nothing is valid vacuously). Data (``--sets``): MT-Bench with GPT-4's confidence from its two
answer orders (``judge_winner_raw``); MT-Bench and llmfao with GPT-4's real verdicts and
probabilities generated at AUROC 0.75 (:mod:`puaudit.data.simulate_judges`: no public pairwise
set has a judge's probabilities); MT-Bench with a generated judge right 78% of the time.
``--cascade``: two generated judges (0.70, 0.78) and GPT-4, cheapest first, and "longer answer"
-> GPT-4 (two orders), each at 0.85 against its last judge alone on the same split.

    python -m bench.certify_vs_threshold [--seeds 10] [--targets 0.8 0.85 0.9] [--cascade]
                                         [--sets ...] [--encoder hashing]

Prints ``ratio=<min over data sets and targets of mean coverage, PUAudit / baseline>`` last
(targets where the baseline trusts nothing count as 1 when PUAudit is valid there).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from bench._support import LLMFAO, MTBENCH, add_data_arguments, bench_encoder, meets, parser

SETS = ("MT-Bench, GPT-4 (two orders)", "MT-Bench, GPT-4 (generated, AUROC 0.75)",
        "MT-Bench, a judge at 0.78 (generated, AUROC 0.75)",
        "llmfao, GPT-4 (generated, AUROC 0.75)")


def two_order_frame(frame):
    """MT-Bench with ``p_A``, ``p_B``, ``p_tie`` from GPT-4's two orders (``judge_winner_raw``)."""
    raw = frame["judge_winner_raw"].astype(str).str.lower()
    out = frame.copy()
    out["p_A"] = np.where(raw == "model_a", 1.0, np.where(raw.str.contains("inconsistent"), .5, 0.))
    out["p_B"] = np.where(raw == "model_b", 1.0, np.where(raw.str.contains("inconsistent"), .5, 0.))
    out["p_tie"] = np.where(raw == "tie", 1.0, 0.0)
    return out


def generated_frame(frame, *, column: str = "judge_winner", prefix: str | None = "",
                    random_state: int = 0, auroc: float = 0.75):
    """``frame`` with probabilities of ``column``'s verdicts generated at ``auroc``."""
    from puaudit.data.schema import load_comparisons
    from puaudit.data.simulate_judges import add_judge_probabilities, simulated_confidence

    t = load_comparisons(frame, columns={"judge": column})
    strict_h = np.isin(t.human, ["A", "B"])
    agree = np.where(strict_h & np.isin(t.judge, ["A", "B"]),
                     (t.judge == t.human).astype(float), np.nan)
    conf = simulated_confidence(agree, t.item_id, auroc=auroc, random_state=random_state)
    return add_judge_probabilities(frame, column, conf, prefix=prefix)


def auroc_of(conf, correct) -> float:
    from sklearn.metrics import roc_auc_score

    ok = np.isfinite(conf)
    if len(set(correct[ok].tolist())) < 2:
        return float("nan")
    return float(roc_auc_score(correct[ok], conf[ok]))


def threshold_baseline(conf, split, correct, items, *, target: float, risk: float) -> dict:
    """The baseline's trusted audited rows: Trust or Escalate's valid variant (Jung et al. 2024).

    On P's items, thresholds on the judge's probability of its verdict walk from 1.00 down in
    steps of 0.01 (fixed before any outcome is seen); each set "confidence >= threshold" is
    tested with the one-sided exact Clopper-Pearson bound at level 1 - risk (items once; sets
    under the fewest items that could pass skipped), stopping at the first failure. Trusted:
    the audited rows (validation and unlabelled) at or above the last threshold passed.
    """
    from puaudit.audit.certify.sequence import item_outcomes, lower_bound, rows_needed

    conf = np.asarray(conf, dtype=np.float64)
    is_p = (split == "P") & np.isfinite(conf)
    p_item, share, _ = item_outcomes(conf[is_p], correct[is_p], items[is_p])
    need = rows_needed(target, risk=risk)
    chosen = math.inf
    for lam in np.round(np.arange(1.0, -0.001, -0.01), 2):
        sel = p_item >= lam - 1e-12
        n = int(sel.sum())
        if n < need:
            continue
        if lower_bound(float(share[sel].sum()), n, risk=risk) < target:
            break
        chosen = lam
    audited = np.isin(split, ["validation", "unlabelled"])
    trusted = audited & np.isfinite(conf) & (conf >= chosen - 1e-12)
    return {"threshold": chosen, "trusted": trusted,
            "coverage": float(trusted[audited].mean()) if audited.any() else math.nan}


def realised(trusted, split, correct, items) -> dict:
    """Agreement of the trusted validation rows (items once) and their number of items."""
    from puaudit.audit.certify.sequence import item_outcomes

    v = trusted & (split == "validation")
    _, share, _ = item_outcomes(np.zeros(int(v.sum())), correct[v], items[v])
    return {"agreement": float(share.mean()) if len(share) else math.nan, "n": len(share)}


def load(name: str):
    from puaudit.data.io import read_table
    from puaudit.data.schema import load_comparisons

    if name.startswith("MT-Bench"):
        frame = read_table(MTBENCH)
        if "a judge at" in name:  # a weaker judge's verdicts, simulated from the people's
            from puaudit.data.simulate_judges import simulated_judge

            t = load_comparisons(frame)
            v = simulated_judge(t.human, t.item_id, accuracy=0.78, random_state=11)
            frame["judge_winner"] = np.where(v == "A", "model_a", "model_b")
            frame = frame.drop(columns=["judge_winner_raw"])
        frame = two_order_frame(frame) if "two orders" in name else generated_frame(frame)
    else:
        frame = generated_frame(read_table(LLMFAO))
    return load_comparisons(frame, name=name)


def compare(name, table, emb, *, seeds, targets, risk, per_seed) -> list[float]:
    from puaudit.audit.certify.judge import with_target
    from puaudit.audit.config import AuditConfig
    from puaudit.audit.stages import audit_table
    from puaudit.data.judge_probabilities import judge_confidence

    conf = judge_confidence(table)
    judge, human = np.asarray(table.judge, object), np.asarray(table.human, object)
    correct = (judge == human).astype(float)
    items = np.asarray(table.item_id).astype(str)
    strict = np.isin(human, ["A", "B"]) & np.isin(judge, ["A", "B"])
    print(f"{name}: AUROC of the judge's confidence on annotated rows "
          f"{auroc_of(conf[strict], correct[strict]):.3f}", flush=True)
    rows = {t: [] for t in targets}
    t0 = time.perf_counter()
    for seed in range(seeds):
        res = audit_table(table, emb, AuditConfig(target_agreement=max(targets), risk=risk,
                                                  random_state=seed))
        split = np.asarray(res.split).astype(str)
        for t in targets:
            c = with_target(res, t, risk).certification
            r = c.realised()
            base = threshold_baseline(conf, split, correct, items, target=t, risk=risk)
            b = realised(base["trusted"], split, correct, items)
            rows[t].append((c.coverage(), meets(r, t), base["coverage"], meets(b, t),
                            c.certificate_used))
            if per_seed:
                print(f"  {name} | {t:.2f} | seed {seed} | ours {c.coverage():.3f} "
                      f"({c.certificate_used}; realised {r['agreement']:.3f} on {r['n']}) | "
                      f"baseline {base['coverage']:.3f} (threshold {base['threshold']}; "
                      f"realised {b['agreement']:.3f} on {b['n']})", flush=True)
    secs = (time.perf_counter() - t0) / seeds
    ratios = []
    for t in targets:
        cov, ok, bcov, bok, used = zip(*rows[t])
        cov, bcov = np.array(cov), np.array(bcov)
        ratio = (cov.mean() / bcov.mean() if bcov.mean() > 0
                 else (1.0 if np.mean(ok) >= 0.9 else 0.0))
        ratios.append(ratio)
        kinds = {u: used.count(u) for u in sorted(set(used))}
        print(f"{name} | {t:.2f} | PUAudit {cov.mean():.3f} (sd {cov.std(ddof=1):.3f}), "
              f"valid {sum(ok)}/{len(ok)}, certificate {kinds} | baseline {bcov.mean():.3f} "
              f"(sd {bcov.std(ddof=1):.3f}), valid {sum(bok)}/{len(bok)} | "
              f"ours/baseline {ratio:.3f} | {secs:.1f} s per audit", flush=True)
    return ratios


def cascade_table():
    """MT-Bench with two generated judges and GPT-4, each with its own probabilities."""
    from puaudit.data.io import read_table
    from puaudit.data.schema import load_comparisons
    from puaudit.data.simulate_judges import simulated_judge

    frame = read_table(MTBENCH)
    t = load_comparisons(frame)
    for k, (col, acc) in enumerate((("judge_weak", 0.70), ("judge_mid", 0.78))):
        v = simulated_judge(t.human, t.item_id, accuracy=acc, random_state=10 + k)
        frame[col] = np.where(v == "A", "model_a", "model_b")
        frame = generated_frame(frame, column=col, prefix=None, random_state=20 + k)
    frame = generated_frame(frame, column="judge_winner", prefix=None, random_state=30)
    return load_comparisons(frame, name="MT-Bench, three judges")


def cascades(emb_for, *, seeds, risk, per_seed) -> list[float]:
    from puaudit.audit.certify.cascade import run_cascade
    from puaudit.audit.config import AuditConfig

    ratios = []
    setups = [("MT-Bench, three judges (generated p)", cascade_table(),
               ["judge_weak", "judge_mid", "judge_winner"]),
              ("MT-Bench, longer -> GPT-4 (two orders)", load(SETS[0]),
               ["rule:longer", "judge_winner"])]
    for name, table, judges in setups:
        emb = emb_for(table)
        got = []
        for seed in range(seeds):
            cfg = AuditConfig(random_state=seed)
            cas = run_cascade(table, emb, judges, target=0.85, risk=risk, config=cfg)
            alone = run_cascade(table, emb, judges[-1:], target=0.85, risk=risk, config=cfg)
            got.append((cas.coverage(), meets(cas.realised(), 0.85), alone.coverage(),
                        meets(alone.realised(), 0.85)))
            if per_seed:
                print(f"  {name} | seed {seed} | cascade {cas.coverage():.3f} "
                      f"(realised {cas.realised()['agreement']:.3f}) | alone "
                      f"{alone.coverage():.3f}",
                      flush=True)
        cov, ok, acov, aok = (np.array(v, dtype=float) for v in zip(*got))
        ratio = cov.mean() / acov.mean() if acov.mean() > 0 else 1.0
        ratios.append(ratio)
        print(f"{name} | 0.85 | cascade {cov.mean():.3f} (sd {cov.std(ddof=1):.3f}), valid "
              f"{int(ok.sum())}/{len(ok)}, >= alone in {int((cov >= acov - 1e-12).sum())}/"
              f"{len(cov)} | {judges[-1]} alone {acov.mean():.3f} (sd {acov.std(ddof=1):.3f}), "
              f"valid {int(aok.sum())}/{len(aok)} | ratio {ratio:.3f}", flush=True)
    return ratios


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--risk", type=float, default=0.1)
    ap.add_argument("--targets", type=float, nargs="+", default=[0.80, 0.85, 0.90])
    ap.add_argument("--cascade", action="store_true", help="also the three-judge cascade")
    ap.add_argument("--per-seed", action="store_true")
    add_data_arguments(ap, SETS)
    args = ap.parse_args()

    from puaudit.embed.pairs import embed_table

    encoder = bench_encoder(args.encoder)
    print(f"seeds {args.seeds}, risk {args.risk}, targets {args.targets}, encoder "
          f"{getattr(encoder, 'name', encoder)}")
    ratios = []
    for name in args.sets:
        table = load(name)
        ratios += compare(name, table, embed_table(table, encoder), seeds=args.seeds,
                          targets=args.targets, risk=args.risk, per_seed=args.per_seed)
        sys.stdout.flush()
    if args.cascade:
        ratios += cascades(lambda t: embed_table(t, encoder), seeds=args.seeds,
                           risk=args.risk, per_seed=args.per_seed)
    print(f"ratio={min(ratios):.3f}")


if __name__ == "__main__":
    main()
