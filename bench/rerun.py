"""Slider benchmark (docs/performance.md, "Slider steps"): what the dashboard computes for one
slider step, against the first audit of the same table, with cached embeddings.

    python -m bench.rerun               # MT-Bench and llmfao, default settings (auto scorer)
    python -m bench.rerun --quick       # MT-Bench only, fewer steps
    python -m bench.rerun --app         # also m steps through the page (Streamlit AppTest)
    python -m bench.rerun --tables mtbench llmfao generated   # + 100,000 generated rows
    python -m bench.rerun --tables generated --rows 100000    # the large table alone

``generated`` (opt-in) is :func:`puaudit.data.demo.generate_demo` with ``--rows`` rows,
embedded (not timed) with the hashing encoder at :data:`GENERATED_DIM` dimensions. Each table
gets a fresh :class:`puaudit.audit.stages.StageCache`; timed, after one small warm-up audit: the
first audit, ``m`` steps of 0.01, ``p_ratio`` steps of 0.05 without and with the page's
precompute of the neighbouring value, and Certify at 0.9. Prints the figures and the process's
peak memory per table and, last, ``ratio=<median m step / first audit>`` (the largest over the
tables). Targets: m step <= 0.10, p_ratio step <= 0.5 without precompute, Certify <= 0.2.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from bench._support import LLMFAO, MTBENCH, ROOT, parser, peak_mb, timed

TABLES = {"mtbench": MTBENCH, "llmfao": LLMFAO}
#: the opt-in large table: rows of generate_demo embedded with the hashing encoder at this size
GENERATED_DIM = 384


def warm_up() -> None:
    """One small audit first, so the first timed audit does not pay the process's imports
    (torch, POT, scikit-learn) and first calls: the dashboard's server has paid them before a
    visitor's first audit."""
    import numpy as np

    from puaudit.audit.config import AuditConfig
    from puaudit.embed.pairs import PairEmbeddings
    from puaudit.audit.stages import audit_table
    from puaudit.data.demo import generate_demo
    from puaudit.data.schema import load_comparisons

    table = load_comparisons(generate_demo(n_rows=300, random_state=0))
    rng = np.random.default_rng(0)
    emb = PairEmbeddings(rng.normal(size=(300, 16)), rng.normal(size=(300, 16)), "warm-up")
    audit_table(table, emb, AuditConfig(target_agreement=0.9))


def real_table(path: Path):
    """A real data set and its embeddings from the embedding cache (embedded first when
    missing, not timed), with the seconds the cache read took (what an upload pays)."""
    import pandas as pd

    from puaudit.data.schema import load_comparisons
    from puaudit.embed.pairs import embed_table

    table = load_comparisons(pd.read_csv(path), name=path.name)
    embed_table(table, None)  # fills the embedding cache when it is empty (not timed)
    emb, fetch = timed(lambda: embed_table(table, None))
    return table, emb, fetch


def generated_table(n_rows: int):
    """``n_rows`` generated comparisons (:func:`~puaudit.data.demo.generate_demo`, seed 0) and
    their embeddings by the hashing encoder at :data:`GENERATED_DIM` dimensions, with the
    seconds the embedding took (not part of any timing below: precomputed embeddings)."""
    from puaudit.data.demo import generate_demo
    from puaudit.data.schema import load_comparisons
    from puaudit.embed.hashing import HashingEncoder
    from puaudit.embed.pairs import embed_table

    table = load_comparisons(generate_demo(n_rows=n_rows, random_state=0),
                             name=f"generated-{n_rows}")
    emb, seconds = timed(lambda: embed_table(table, HashingEncoder(dim=GENERATED_DIM)))
    return table, emb, seconds


def bench_table(name: str, table, emb, fetch: float, *, n_m: int, n_p: int,
                scorer: str) -> dict:
    from puaudit.audit.config import AuditConfig
    from puaudit.audit.stages import StageCache

    cache = StageCache(table, emb)
    cfg = AuditConfig(scorer=scorer)
    result, first = timed(lambda: cache.audit(cfg))
    m0 = round(float(result.m), 2)
    m_steps = []
    for k in range(1, n_m + 1):  # one slider step at a time, each to a new value
        m_steps.append(timed(lambda: cache.audit(cfg.replace(m=round(m0 + 0.01 * k, 2))))[1])
    certify = timed(lambda: cache.audit(cfg.replace(target_agreement=0.9)))[1]
    p_cold = [timed(lambda: cache.audit(cfg.replace(p_ratio=round(0.3 + 0.05 * k, 2))))[1]
              for k in range(1, n_p + 1)]
    p_warm = []
    for k in range(1, n_p + 1):
        step = cfg.replace(p_ratio=round(0.3 - 0.05 * k, 2))
        cache.audit(step)  # the page's idle-time precompute of the neighbouring value
        p_warm.append(timed(lambda: cache.audit(step))[1])
    row = {"table": name, "rows": len(table), "first": first, "fetch": fetch, "m_steps": m_steps,
           "m_step": statistics.median(m_steps), "p_cold": statistics.median(p_cold),
           "p_warm": statistics.median(p_warm), "certify": certify,
           "scorer_used": result.params["scorer_used"], "calls": dict(cache.calls),
           "peak_mb": peak_mb()}
    print(f"{name}: {len(table):,} rows, scorer {scorer} (used {row['scorer_used']})")
    print(f"  embeddings {'generated' if name == 'generated' else 'from the cache'} "
          f"{fetch:5.2f} s (not in the first audit below)")
    print(f"  first audit            {first:7.2f} s")
    print(f"  m step (median of {n_m})   {row['m_step']:7.2f} s  = {row['m_step'] / first:.3f} x "
          f"first  [{', '.join(f'{t:.2f}' for t in m_steps)}]  target <= 0.10")
    print(f"  p_ratio step, no precompute {row['p_cold']:6.2f} s  = "
          f"{row['p_cold'] / first:.3f} x first  target <= 0.5")
    print(f"  p_ratio step, precomputed   {row['p_warm']:6.4f} s  = "
          f"{row['p_warm'] / first:.4f} x first")
    print(f"  Certify                {certify:7.2f} s  = {certify / first:.3f} x first  "
          f"target <= 0.2")
    print(f"  stages computed: {row['calls']}")
    print(f"  peak resident memory of the process so far: {row['peak_mb']:,.0f} MB")
    return row


def app_m_steps(path: Path) -> tuple[float, float]:
    """Two m steps through the Audit page (AppTest: the page's whole rerun): one right after the
    first audit (nothing precomputed yet), one after the page's idle-time precompute finished."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=3600)
    at.run()
    at.file_uploader[0].upload(path.name, path.read_bytes(), "text/csv").run()
    at.switch_page("pages/audit.py").run()

    def step() -> float:
        slider = next(s for s in at.slider if s.label.startswith("m "))
        t0 = time.perf_counter()
        slider.set_value(round(float(slider.value) + 0.01, 2)).run()
        return time.perf_counter() - t0

    cold = step()
    from components import audit_runs

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # the page is idle: its precompute runs
        jobs = [j for k, j in list(audit_runs.runner()._jobs.items())
                if isinstance(k, tuple) and k[0] == "precompute"]
        if jobs and all(j.done() for j in jobs):
            break
        if not jobs and deadline - time.monotonic() > 280:
            continue
        if not jobs:  # no runner shared with the page: wait no longer
            break
        time.sleep(0.5)
    return cold, step()


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="MT-Bench only, 3 m steps, 1 p step")
    ap.add_argument("--tables", nargs="+", choices=[*TABLES, "generated"], default=None,
                    help="default mtbench llmfao (--quick: mtbench); 'generated' is opt-in")
    ap.add_argument("--rows", type=int, default=100_000,
                    help="rows of the generated table (default 100,000)")
    ap.add_argument("--scorer", default="auto", help="scorer (default auto, the dashboard's)")
    ap.add_argument("--app", action="store_true", help="also time m steps of the page")
    args = ap.parse_args()
    os.environ.setdefault("PUAUDIT_UMAP_WARMUP", "0")
    names = args.tables or (["mtbench"] if args.quick else list(TABLES))
    warm_up()
    rows = []
    for name in names:
        large = name == "generated"
        table, emb, fetch = generated_table(args.rows) if large else real_table(TABLES[name])
        rows.append(bench_table(name, table, emb, fetch, n_m=3 if args.quick or large else 5,
                                n_p=1 if args.quick or large else 2, scorer=args.scorer))
        del table, emb  # the next table's peak is not this one's
    if args.app:
        cold, warm = app_m_steps(TABLES["mtbench"])
        print(f"page m step (AppTest, MT-Bench): {cold:.2f} s right after the first audit, "
              f"{warm:.2f} s once the idle-time precompute finished")
    print(f"ratio={max(r['m_step'] / r['first'] for r in rows):.4f}")


if __name__ == "__main__":
    main()
