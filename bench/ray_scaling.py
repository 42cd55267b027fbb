"""The Ray backend (docs/ray.md, "Measured and planned"): embedding with 1 vs 2 local Ray
workers, and a 1M-row Parquet file audited end to end through Ray with the driver's peak memory.

1. **Speed-up.** Distinct generated texts are embedded by :func:`embed_texts_ray` with one
   worker, then two (interleaved, best of two, actors started afresh, no cache), by a stub
   that *sleeps* ``--per-text`` seconds per text (default: MiniLM's measured cost here) and
   returns hashing vectors: what the scheduling gives when each worker has its own compute.
2. **1M rows end to end** (skipped by ``--quick``; ``--rows N``): ``bench/scaling.py``'s
   generated comparisons as Parquet; a fresh child reads them, embeds the distinct texts
   through Ray (a stub returning each answer's planted vector after ``--per-text-1m`` s),
   audits with the defaults (jobs as Ray tasks) and writes the Parquet export. Reported: wall
   time and the driver's peak RSS per stage, and whether the local path gives the same groups.

The last line is ``ratio=<t(1 worker) / t(2 workers)>`` for the embedding stage.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from bench._support import child_env, parser, peak_mb, result, run_child, timed

#: seconds per text of all-MiniLM-L6-v2 on the 2-core development machine (947 texts in 46 s)
MEASURED_PER_TEXT_S = 46 / 947


class SleepEncoder:
    """Stub encoder: sleeps ``per_text`` seconds per text, returns hashing vectors (or, with
    ``npz``, the planted vector of the answer number that ends each text)."""

    name = "sleep-stub"

    def __init__(self, per_text: float, dim: int = 384, npz: str | None = None):
        self.per_text, self.dim, self.npz = per_text, dim, npz

    def encode(self, texts, **kwargs) -> np.ndarray:
        texts = list(texts)
        time.sleep(self.per_text * len(texts))
        if self.npz is not None:
            if getattr(self, "_vectors", None) is None:
                self._vectors = np.load(self.npz)["vectors"]
            ids = [int(re.search(r"(\d+)\s*$", t).group(1)) for t in texts]
            return self._vectors[ids].astype(np.float32)
        from puaudit.embed.hashing import HashingEncoder

        return HashingEncoder(self.dim).encode(texts)


def _ray_init(num_cpus: int):
    import ray

    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": child_env()["PYTHONPATH"]}})
    return ray


def speedup(n_texts: int, per_text: float, batch: int) -> tuple[float, float]:
    """Seconds to embed ``n_texts`` distinct texts with 1 and with 2 Ray workers."""
    from puaudit.scale.ray_embed import embed_texts_ray

    texts = [f"Question: generated prompt {i % 50}\nAnswer: generated answer {i}"
             for i in range(n_texts)]
    enc = SleepEncoder(per_text)
    # warm-up: Ray Data's first run starts worker processes and imports (not counted)
    embed_texts_ray(texts[:8], SleepEncoder(0.0), cache_dir=None, num_workers=2, batch_size=4)
    times = {1: [], 2: []}
    for workers in (2, 1, 2, 1):  # interleaved, best of two: the machine is shared
        t0 = time.perf_counter()
        out = embed_texts_ray(texts, enc, cache_dir=None, num_workers=workers, batch_size=batch)
        times[workers].append(time.perf_counter() - t0)
        assert out.shape == (n_texts, enc.dim)
        print(f"embed {n_texts} texts x {per_text * 1000:.0f} ms, {workers} worker(s): "
              f"{times[workers][-1]:.1f} s ({n_texts / times[workers][-1]:.1f} texts/s; sleeping "
              f"alone {n_texts * per_text / workers:.1f} s)", flush=True)
    return min(times[1]), min(times[2])


def _child(parquet: str, npz: str, out: str, per_text: float, compare_local: bool) -> None:
    """The 1M run's driver process: Parquet in, Ray embedding + scoring, Parquet out."""
    _ray_init(2)
    from puaudit import PUAudit

    stages, t0 = {}, time.perf_counter()

    def done(name):
        nonlocal t0
        stages[name] = {"s": round(time.perf_counter() - t0, 1), "peak_rss_mb": round(peak_mb())}
        t0 = time.perf_counter()

    from puaudit.data.parquet import read_comparisons_parquet, write_export_parquet

    table = read_comparisons_parquet(parquet, max_rows=None)
    done("read")
    from puaudit.scale.ray_embed import embed_table_ray

    emb = embed_table_ray(table, SleepEncoder(per_text, npz=npz), cache_dir=None,
                          num_workers=2, batch_size=2048)
    done("embed (Ray Data, 2 workers)")
    est = PUAudit(backend="ray").fit(table, emb)
    done("audit (scoring jobs as Ray tasks)")
    write_export_parquet(est.result_, parquet, out)
    done("write export")
    peak_ray = round(peak_mb())
    s = est.result_.summary()
    audit_stages = est.result_.diagnostics.get("stages", [])
    same = None
    if compare_local:  # the same audit on the local path, in this process, after the Ray run
        from puaudit.audit.stages import audit_table

        t1 = time.perf_counter()
        local = audit_table(table, emb, est.config_)
        stages["audit on the local path (same process, for comparison)"] = {
            "s": round(time.perf_counter() - t1, 1), "peak_rss_mb": None}
        same = bool(np.array_equal(local.group, est.result_.group)
                    and np.array_equal(local.split, est.result_.split))
    result({
        "streaming_parquet": True, "stages": stages, "n_rows": s["n_rows"],
        "n_texts": int(len(emb.vectors)), "scorer_used": s["scorer_used"],
        "cons_orig": s["cons_orig"], "cons_adj": s["cons_adj"], "peak_rss_mb": peak_ray,
        "audit_stages": audit_stages, "same_groups_as_local": same})


def end_to_end(n_rows: int, per_text: float, *, compare_local: bool = True) -> dict:
    import pandas as pd

    from bench.scaling import make_inputs

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        csv, npz = make_inputs(n_rows, tmp)
        parquet = tmp / f"in_{n_rows}.parquet"
        pd.read_csv(csv, keep_default_na=False).to_parquet(parquet, index=False)
        csv.unlink()
        mb = parquet.stat().st_size / 2**20
        print(f"{n_rows:,} rows -> {parquet.name} ({mb:.0f} MB)", flush=True)
        res, wall = timed(lambda: run_child(
            ["-m", "bench.ray_scaling", "--child", str(parquet), str(npz), str(tmp / "out.parquet"),
             str(per_text), "1" if compare_local else "0"], label=f"the {n_rows:,}-row run"))
        out_rows = __import__("pyarrow.parquet").parquet.ParquetFile(
            tmp / "out.parquet").metadata.num_rows
        res.update(wall_s=round(wall, 1), out_rows=out_rows, parquet_mb=round(mb))
        return res


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="120 texts, no 1M-row run")
    ap.add_argument("--texts", type=int, default=600)
    ap.add_argument("--per-text", type=float, default=MEASURED_PER_TEXT_S)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the end-to-end run")
    ap.add_argument("--per-text-1m", type=float, default=0.001)
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--no-local", action="store_true",
                    help="skip the local-path audit of the end-to-end run (comparison)")
    args = ap.parse_args()
    if args.child:
        p, npz, out, per, cmp_local = args.child
        _child(p, npz, out, float(per), cmp_local == "1")
        return
    if not args.quick and args.rows:
        r = end_to_end(args.rows, args.per_text_1m, compare_local=not args.no_local)
        print(f"end to end: {r['n_rows']:,} rows ({r['n_texts']:,} distinct texts, Parquet "
              f"{r['parquet_mb']} MB, streaming Parquet path: {r['streaming_parquet']}) in "
              f"{r['wall_s']} s; driver peak RSS {r['peak_rss_mb']:,} MB; scorer "
              f"{r['scorer_used']}, Cons_orig {r['cons_orig']:.3f} -> Cons_adj "
              f"{r['cons_adj']:.3f}; export rows {r['out_rows']:,}")
        for name, st in r["stages"].items():
            peak = "" if st["peak_rss_mb"] is None else f", driver peak so far {st['peak_rss_mb']:,} MB"
            print(f"  {name}: {st['s']} s{peak}")
        for st in r["audit_stages"]:
            print(f"    audit stage {st['stage']}: {st['seconds']} s")
        if r["same_groups_as_local"] is not None:
            print(f"  same split and groups as the local path: {r['same_groups_as_local']}")
    n = 120 if args.quick else args.texts
    if n < 2:
        raise SystemExit("--texts must be at least 2")
    ray = _ray_init(2)
    try:
        t1, t2 = speedup(n, args.per_text, batch=max(5, n // 24))
    finally:
        ray.shutdown()
    print(f"ratio={t1 / t2:.3f}")


if __name__ == "__main__":
    main()
