"""Benchmark: the graded prior-ot scorer against POT's dense unbalanced Sinkhorn (docs/scorers.md).

    python -m bench.prior_ot           # (200,2k) (500,5k) (2k,20k) vs POT, then (2k,100k), (2k,1M)
    python -m bench.prior_ot --quick   # the sizes compared with POT only

Up to ``max_targets`` (20,000) audited rows prior-ot is POT's own fixed point (the reference
column checks it); above, the source potentials are solved on a seeded sample and every row is
scored in one streamed pass. Every size runs in its own subprocess so that peak memory
(ru_maxrss) belongs to that size alone. The last line is ``ratio=<POT dense time / prior-ot
time at the largest size compared>`` (the same machine, the same run).
"""

from __future__ import annotations

import time

import numpy as np

from bench._support import add_size_arguments, parser, peak_mb, result, run_sizes
from bench.partial_ot import make_structured

M = 0.7


def run_one(n_p: int, n_u: int, *, compare: bool) -> dict:
    from puaudit.audit.scorers.prior_transport import PRIOR_OT_REG, PRIOR_OT_REG_M, prior_ot_scores

    zp, zu, truth = make_structured(n_p, n_u)
    prior_ot_scores(zp[:8], zu[:8], M)  # imports and first-call set-up are not the solver's time
    out = {"n_p": n_p, "n_u": n_u, "data_mb": (zp.nbytes + zu.nbytes) / 2**20}
    t = time.perf_counter()
    s, lg = prior_ot_scores(zp, zu, M, log=True)
    out["ours_s"] = time.perf_counter() - t
    out["ours_peak_mb"] = peak_mb()
    out["sampled"] = lg["sampled"]
    out["distinct"] = int(len(np.unique(np.round(s, 6))))
    # how well the graded score separates the planted right / wrong rows (AUC)
    from scipy.stats import rankdata

    r = rankdata(s)
    n1 = int(truth.sum())
    out["auc"] = float((r[truth].sum() - n1 * (n1 + 1) / 2) / (n1 * (len(s) - n1)))
    if compare:
        import ot

        t = time.perf_counter()
        zp64, zu64 = zp.astype(np.float64), zu.astype(np.float64)
        src = np.vstack([zp64, -zp64])
        a = np.r_[np.full(n_p, M / n_p), np.full(n_p, (1 - M) / n_p)]
        b = np.full(n_u, 1.0 / n_u)
        plan = ot.unbalanced.sinkhorn_unbalanced(a, b, 1.0 - src @ zu64.T, PRIOR_OT_REG,
                                                 PRIOR_OT_REG_M, stopThr=1e-6)
        ref = plan[:n_p].sum(0) / plan.sum(0)
        out["pot_s"] = time.perf_counter() - t
        out["pot_peak_mb"] = peak_mb()
        out["max_abs_diff"] = float(np.abs(ref - s).max())
    return out


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="only the sizes compared with POT")
    add_size_arguments(ap)
    args = ap.parse_args(argv)
    if args.child:
        return result(run_one(args.n_p, args.n_u, compare=args.compare))
    compared = [(200, 2_000), (500, 5_000)] + ([] if args.quick else [(2_000, 20_000)])
    print(f"prior-ot, m={M}, structured data (d=384)")
    print(f"{'(|P|, |U|)':>14} {'POT s':>8} {'ours s':>8} {'speedup':>8} {'max|diff|':>10} "
          f"{'AUC':>6} {'distinct':>9} {'POT MB':>8} {'ours MB':>8}")
    ratio = None
    for size, r in run_sizes("bench.prior_ot", compared, compare=True, timeout=900):
        ratio = r["pot_s"] / r["ours_s"]
        print(f"{str(size):>14} {r['pot_s']:8.2f} {r['ours_s']:8.2f} {ratio:8.1f} "
              f"{r['max_abs_diff']:10.2e} {r['auc']:6.3f} {r['distinct']:9d} "
              f"{r['pot_peak_mb']:8.0f} {r['ours_peak_mb']:8.0f}", flush=True)
    if not args.quick:
        print(f"{'(|P|, |U|)':>14} {'ours s':>8} {'peak MB':>8} {'data MB':>8} {'sampled':>8} "
              f"{'AUC':>6}")
        for size, r in run_sizes("bench.prior_ot", [(2_000, 100_000), (2_000, 1_000_000)],
                                 compare=False, timeout=3600):
            print(f"{str(size):>14} {r['ours_s']:8.1f} {r['ours_peak_mb']:8.0f} "
                  f"{r['data_mb']:8.0f} {r['sampled']:8d} {r['auc']:6.3f}", flush=True)
    print(f"ratio={ratio:.1f}" if ratio is not None else "ratio=nan")


if __name__ == "__main__":
    main()
