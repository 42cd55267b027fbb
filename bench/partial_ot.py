"""Benchmark: PUAudit's partial-OT scorer against POT's exact solver (docs/transport.md).

    python -m bench.partial_ot          # (200,2k) (500,5k) (1k,10k) vs POT, then (2k,100k), (2k,1M)
    python -m bench.partial_ot --quick  # (200,2k) and (500,5k) vs POT only (under a minute)

Prints one table row per size and, as its last line, ``ratio=<speedup vs POT exact at the
largest size compared>``. Every size runs in its own subprocess so that peak memory (ru_maxrss)
belongs to that size alone.
"""

from __future__ import annotations

import time

import numpy as np

from bench._support import add_size_arguments, parser, peak_mb, result, run_sizes

D = 384
M = 0.7


def make_structured(n_p: int, n_u: int, *, d: int = D, pos_share: float = 0.7, n_topics: int = 5,
                    seed: int = 0, dtype=np.float32, chunk: int = 100_000):
    """Audit-like unit vectors: P' and U positives share a 'human-preferred' direction.

    Every row is ``normalise(±β·u + γ·c_t + noise)`` with ``u`` the preferred direction, ``c_t``
    one of a few topic centres (question types) and isotropic noise; P' rows and the positive
    share of U take ``+u``, the other U rows ``-u`` (the judge picked the worse response, so the
    difference vector is roughly reversed). β varies per row so that U is a continuum from
    clearly near P' to clearly far, with overlap in the middle.
    """
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    centres = rng.standard_normal((n_topics, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)

    def rows(n, sign, out):
        for s in range(0, n, chunk):
            k = min(chunk, n - s)
            beta = rng.uniform(0.2, 1.2, size=(k, 1))
            sg = sign if np.isscalar(sign) else sign[s : s + k, None]
            z = (sg * beta * u + 0.8 * centres[rng.integers(0, n_topics, k)]
                 + rng.standard_normal((k, d)) / np.sqrt(d) * 1.0)
            z /= np.linalg.norm(z, axis=1, keepdims=True)
            out[s : s + k] = z
        return out

    zp = rows(n_p, 1.0, np.empty((n_p, d), dtype=dtype))
    sign = np.where(rng.random(n_u) < pos_share, 1.0, -1.0)
    zu = rows(n_u, sign, np.empty((n_u, d), dtype=dtype))
    return zp, zu, sign > 0


def run_one(n_p: int, n_u: int, *, compare: bool, backend: str) -> dict:
    from scipy.stats import spearmanr

    from puaudit.audit.scorers.transport import partial_ot_scores

    zp, zu, _ = make_structured(n_p, n_u)
    out = {"n_p": n_p, "n_u": n_u, "data_mb": (zp.nbytes + zu.nbytes) / 2**20,
           "mem_before_mb": peak_mb()}
    t = time.perf_counter()
    s, lg = partial_ot_scores(zp, zu, M, method="fast", backend=backend, log=True)
    out["ours_s"] = time.perf_counter() - t
    out["ours_peak_mb"] = peak_mb()
    out["rounds"] = lg.get("rounds")
    out["n_iter"] = lg.get("n_iter")
    out["mass"] = lg["mass"]
    if compare:
        t = time.perf_counter()
        s_ex, lg_ex = partial_ot_scores(zp, zu, M, method="exact", log=True)
        out["pot_s"] = time.perf_counter() - t
        out["pot_peak_mb"] = peak_mb()
        k = int(np.floor(M * n_u))
        top_ex = set(np.argsort(-s_ex, kind="stable")[:k])
        top = set(np.argsort(-s, kind="stable")[:k])
        out["overlap"] = len(top & top_ex) / k
        out["spearman"] = float(spearmanr(s, s_ex).statistic)
        out["cost_ratio"] = lg["cost"] / lg_ex["cost"]
    return out


def main(argv=None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="only the sizes compared with POT")
    ap.add_argument("--backend", default="auto", choices=["auto", "numpy", "torch"])
    add_size_arguments(ap)
    args = ap.parse_args(argv)
    if args.child:
        return result(run_one(args.n_p, args.n_u, compare=args.compare, backend=args.backend))

    # POT's exact solver alone needs over a minute at (1k, 10k) on 2 shared cores: --quick
    # stops at (500, 5k).
    compared = [(200, 2_000), (500, 5_000)] + ([] if args.quick else [(1_000, 10_000)])
    print(f"partial OT, m={M}, d={D}, structured data, backend={args.backend}")
    hdr = (f"{'(|P|, |U|)':>14} {'POT s':>8} {'ours s':>8} {'speedup':>8} {'overlap':>8} "
           f"{'spearman':>9} {'cost/opt':>9} {'POT MB':>8} {'ours MB':>8}")
    print(hdr)
    ratio = None
    backend = ["--backend", args.backend]
    for size, r in run_sizes("bench.partial_ot", compared, compare=True, timeout=600,
                             extra=backend):
        ratio = r["pot_s"] / r["ours_s"]
        print(f"{str(size):>14} {r['pot_s']:8.2f} {r['ours_s']:8.2f} {ratio:8.1f} "
              f"{r['overlap']:8.4f} {r['spearman']:9.4f} {r['cost_ratio']:9.4f} "
              f"{r['pot_peak_mb']:8.0f} {r['ours_peak_mb']:8.0f}", flush=True)
    if not args.quick:
        print(f"{'(|P|, |U|)':>14} {'ours s':>8} {'peak MB':>8} {'data MB':>8} {'rounds':>7}")
        for size, r in run_sizes("bench.partial_ot", [(2_000, 100_000), (2_000, 1_000_000)],
                                 compare=False, timeout=3600, extra=backend):
            print(f"{str(size):>14} {r['ours_s']:8.1f} {r['ours_peak_mb']:8.0f} "
                  f"{r['data_mb']:8.0f} {r['rounds']:>7}", flush=True)
    print(f"ratio={ratio:.1f}" if ratio is not None else "ratio=nan")


if __name__ == "__main__":
    main()
