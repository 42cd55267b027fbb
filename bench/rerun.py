"""Dashboard rerun benchmark (docs/performance.md): cold first audit of the MT-Bench file vs a
slider change, timed with Streamlit's AppTest.

    python -m bench.rerun            # cold: a fresh embedding cache, the real default encoder
    python -m bench.rerun --quick    # under a minute: reuses the embedding cache (or --hashing)

Prints the timings and, last, ``ratio=<slider rerun seconds / cold run seconds>``.
Target: rerun < 1 s and ratio < 0.05.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from bench._support import MTBENCH, ROOT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reuse the embedding cache; 3 reruns")
    ap.add_argument("--hashing", action="store_true", help="use the hashing test encoder")
    ap.add_argument("--scorer", default="pot", help="scorer for the audit (default pot)")
    ap.add_argument("--rule", default="guarded")
    ap.add_argument("--reruns", type=int, default=None)
    args = ap.parse_args()
    os.environ["PUAUDIT_UMAP_WARMUP"] = "0"
    if args.hashing:
        os.environ["PUAUDIT_TEST_ENCODER"] = "hashing"
    if not args.quick:
        os.environ["PUAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="puaudit-bench-cache-")
    from streamlit.testing.v1 import AppTest

    data = MTBENCH.read_bytes()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=3600)
    at.run()
    at.file_uploader[0].upload(MTBENCH.name, data, "text/csv").run()
    at.session_state["audit"]["scorer"] = args.scorer
    at.session_state["audit"]["rule"] = args.rule

    t0 = time.perf_counter()
    at.switch_page("pages/audit.py").run()
    cold = time.perf_counter() - t0
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    first = {m.label: m.value for m in at.metric}

    slider = next(s for s in at.slider if s.label.startswith("m "))
    values = [0.70, 0.75, 0.80, 0.65, 0.60][: args.reruns or (3 if args.quick else 5)]
    times = []
    for v in values:
        t0 = time.perf_counter()
        slider.set_value(v).run()
        times.append(time.perf_counter() - t0)
        slider = next(s for s in at.slider if s.label.startswith("m "))
        assert not at.exception
    rerun = statistics.median(times)
    print(f"encoder={'hashing' if args.hashing else 'default'} cache={'reused' if args.quick else 'fresh'} "
          f"scorer={args.scorer} rule={args.rule} rows=3355")
    print(f"cold first audit: {cold:.2f} s  (Cons_orig {first['Cons_orig']}, Cons_adj {first['Cons_adj']})")
    print("slider reruns: " + ", ".join(f"m={v}: {t:.2f} s" for v, t in zip(values, times)))
    print(f"median slider rerun: {rerun:.2f} s  (target < 1 s)")
    print(f"ratio={rerun / cold:.4f}")


if __name__ == "__main__":
    main()
