"""UMAP start-up benchmark (docs/performance.md): with the background warm-up started at process
start (as app.py does), how long until the first UMAP projection of real-sized data is
available, vs a warm call; and how long the first map view takes (PCA, never blocked).

    python -m bench.umap_start [--quick]

Last line: ``ratio=<first UMAP call after warm-up / warm call>`` (1.0 = no compile cost left).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from bench._support import parser


def main() -> None:
    t_start = time.perf_counter()
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="600 rows instead of 3,355")
    ap.add_argument("--dim", type=int, default=384)
    args = ap.parse_args()
    import puaudit.audit.estimator  # noqa: F401  (the app imports the library before any page is viewed)
    from puaudit.embed.projection import project_2d, umap_ready, umap_warmup_seconds, warm_umap

    th = threading.Thread(target=warm_umap, daemon=True)
    th.start()  # what app.py does at server start
    n = 600 if args.quick else 3355
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(8, args.dim))
    z = centres[rng.integers(0, 8, n)] + 0.5 * rng.normal(size=(n, args.dim))

    time.sleep(2.0)  # a visitor opens the map page a moment after start, mid-compilation
    t0 = time.perf_counter()
    project_2d(z, method="pca")  # the map page's first view while UMAP compiles
    pca_s = time.perf_counter() - t0
    ready_at_first_view = umap_ready()
    th.join()
    warm_done = time.perf_counter() - t_start
    t0 = time.perf_counter()
    project_2d(z, method="umap", random_state=0)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    project_2d(z, method="umap", random_state=0)
    warm = time.perf_counter() - t0
    print(f"rows={n} dim={args.dim}")
    print(f"first map view (PCA, UMAP ready: {ready_at_first_view}): {pca_s:.3f} s")
    print(f"UMAP warm-up: {umap_warmup_seconds():.1f} s (done {warm_done:.1f} s after process start, "
          "in the background)")
    print(f"first UMAP projection after warm-up: {first:.2f} s; warm call: {warm:.2f} s")
    print(f"ratio={first / warm:.3f}")


if __name__ == "__main__":
    main()
