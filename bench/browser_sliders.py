"""Browser slider benchmark (docs/performance.md, "Slider steps in the browser"): what a visitor
waits for in Chromium when moving the Audit page's sliders, against the first audit of the same
table in the same run, on MT-Bench with cached embeddings.

    python -m bench.browser_sliders            # 3 steps a slider, page switch, upload, export
    python -m bench.browser_sliders --profile  # + one cProfile dump per script run, summarised

One ``streamlit run app.py`` (the real encoder, no UMAP warm-up) and one headless Chromium
(:mod:`bench._browser`). Timed from the action until the page's run has ended and nothing of the
previous run is left stale: the upload, the first audit (opening the Audit page), ``--steps``
``m`` steps (0.01) up and one back, the same for ``p_ratio`` (0.05), a page switch, the Export
page and its CSV download, with the websocket bytes of each. Between two steps it waits
``--pause`` seconds (a visitor reading, while the page precomputes the neighbouring values).

Prints one line per figure, the load average before and after, and last
``ratio=<median m step / first audit>``. Targets: ``m`` step <= 0.15, ``p_ratio`` step <= 0.30
of the first audit (medians of the new steps).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from bench._browser import (ROOT, chromium, go, have_chromium, idle, real_encoder_env, run_ended,
                            run_started, slider, streamlit_server)
from bench._support import MTBENCH, parser
from bench.rerun import real_table

ARTIFACTS = ROOT / "bench" / "results"  # the server log and a screenshot (not committed)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (``uptime``'s), as text."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Deltas:
    """Bytes the page received over its websocket (Streamlit's deltas), since :meth:`start`."""

    def __init__(self, page):
        self.total = 0
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        self.total += len(payload)


#: (what, wall-clock start, end) of each timed action: the profile's runs are matched to them
MARKS: list[tuple[str, float, float]] = []
#: seconds from each timed action until the browser showed its run as started
STARTED: list[float] = []


def time_run(page, action, deltas: Deltas, *, until=None, label: str = "") -> tuple[float, int]:
    """Seconds from ``action()`` until the run it starts has ended (and ``until(page)``, when
    given, holds), and the websocket bytes received meanwhile."""
    b0 = deltas.total
    wall0 = time.time()
    t0 = time.perf_counter()
    action()
    run_started(page)
    started = time.perf_counter()
    while True:
        t1 = run_ended(page)
        if until is None or until(page):
            break
        page.wait_for_timeout(10)
    MARKS.append((label, wall0, wall0 + t1 - t0))
    STARTED.append(started - t0)
    return t1 - t0, deltas.total - b0


def step(page, label: str, key: str, deltas: Deltas) -> tuple[float, int, float]:
    """One arrow key on the slider labelled ``label``: (seconds, bytes, the value now)."""
    thumb = slider(page, label)
    before = float(thumb.input_value())
    thumb.focus()
    seconds, size = time_run(page, lambda: page.keyboard.press(key), deltas,
                          label=f"{label.strip(' —')} {key}")
    now = float(thumb.input_value())
    if abs(now - before) < 1e-9:
        raise RuntimeError(f"the {label!r} slider did not move from {before}")
    return seconds, size, now


def slider_steps(page, label: str, deltas: Deltas, *, n: int, pause_s: float) -> dict:
    """``n`` steps up, each to a new value, then one back to a value already shown."""
    new, sizes, values = [], [], []
    for _ in range(n):
        page.wait_for_timeout(pause_s * 1000)
        s, b, v = step(page, label, "ArrowRight", deltas)
        new.append(s), sizes.append(b), values.append(v)
    page.wait_for_timeout(pause_s * 1000)
    back, back_bytes, v = step(page, label, "ArrowLeft", deltas)
    return {"new": new, "bytes": sizes, "values": values, "repeated": back,
            "repeated_bytes": back_bytes, "median": statistics.median(new)}


#: what the profile table reports for each script run (cumulative seconds of each)
PROFILED = {
    "audit": ("components/audit_runs.py", "run_audit"),
    "m estimate": ("components/audit_runs.py", "m_estimate"),
    "stage cache lookups": ("components/audit_runs.py", "stage_cache"),
    "st.cache_data/resource lookups": ("streamlit/runtime/caching/cache_utils.py",
                              "_get_or_create_cached_value"),
    "m curve figure": ("puaudit/report/figures/m_curve.py", "m_curve_figure"),
    "evidence figure": ("puaudit/report/figures/evidence.py", "evidence_weights_figure"),
    "certify figure": ("puaudit/report/figures/certify.py", "coverage_curve_figure"),
    "per-type table": ("puaudit/report/figures/metrics.py", "per_type_table"),
    "st.plotly_chart": ("streamlit/elements/plotly_chart.py", "plotly_chart"),
    "st.dataframe": ("streamlit/elements/arrow.py", "dataframe"),
    "spread job": ("components/audit_runs.py", "spread_job"),
    "precompute": ("components/audit_jobs.py", "precompute_neighbours"),
}


def summarise_profile(folder: Path) -> None:
    """For each timed action, the script runs that started during it (whole app or fragment),
    their seconds, and the seconds of what :data:`PROFILED` names (cumulative, under cProfile,
    which slows Python code about twice)."""
    import json
    import pstats

    rows = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]
    print(f"profile: {len(rows)} script runs in {folder} (cProfile)")
    for label, start, end in MARKS:
        runs = [r for r in rows if start - 0.05 <= r["t_end"] - r["seconds"] <= end]
        print(f"  {label} ({end - start:.2f} s in the browser, run seen running after "
              f"{STARTED[MARKS.index((label, start, end))]:.3f} s): "
              + ("no script run" if not runs else ""))
        for r in runs:
            stats = pstats.Stats(str(folder / f"run-{r['n']}.prof")).stats
            parts = []
            for name, (path, fn) in PROFILED.items():
                ct = sum(v[3] for (f, _, g), v in stats.items() if g == fn and f.endswith(path))
                if ct >= 0.001:
                    parts.append(f"{name} {ct:.3f}")
            print(f"    run {r['n']}: {'fragment' if r['fragment'] else 'whole app'} "
                  f"{r['seconds']:.3f} s; " + ", ".join(parts))


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--steps", type=int, default=3, help="new values per slider (default 3)")
    ap.add_argument("--pause", type=float, default=5.0,
                    help="seconds between two steps, a visitor reading (default 5)")
    ap.add_argument("--profile", action="store_true",
                    help="profile every script run of the server (cProfile; slows it)")
    args = ap.parse_args()
    if not have_chromium():
        raise SystemExit("needs Chromium (/usr/bin/chromium) and Playwright")
    real_table(MTBENCH)  # fills the embedding cache (not timed)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    launcher: tuple = ("-m", "streamlit")
    prof_dir = None
    if args.profile:
        prof_dir = Path(tempfile.mkdtemp(prefix="puaudit-profile-"))
        launcher = ("-m", "bench._profiled_server", str(prof_dir))
    env = real_encoder_env(PUAUDIT_UMAP_WARMUP="0")
    print(f"load average before: {load_average()}")
    with streamlit_server(env, ARTIFACTS / "browser_sliders.log", launcher=launcher) as url, \
            chromium() as browser:
        page = browser.new_page(accept_downloads=True, viewport={"width": 1400, "height": 1800})
        page.set_default_timeout(900_000)
        deltas = Deltas(page)  # before the page opens its websocket
        page.goto(url)
        page.wait_for_selector('[data-testid="stMetric"]')
        idle(page)
        upload, upload_b = time_run(page, lambda: page.set_input_files(
            '[data-testid="stFileUploaderDropzoneInput"]', str(MTBENCH)), deltas,
            until=lambda p: p.locator('[data-testid="stMetricValue"]',
                                      has_text="3,355").count() > 0, label="upload")
        idle(page)
        first, first_b = time_run(page, lambda: page.locator(
            '[data-testid="stSidebarNav"] a', has_text="Audit").first.click(), deltas,
            until=lambda p: p.locator('[data-testid="stMetric"]',
                                      has_text="Cons_adj").count() > 0, label="first audit")
        m = slider_steps(page, "m —", deltas, n=args.steps, pause_s=args.pause)
        p = slider_steps(page, "p_ratio", deltas, n=args.steps, pause_s=args.pause)
        page.wait_for_timeout(args.pause * 1000)
        nav = lambda title: lambda: page.locator(  # noqa: E731
            '[data-testid="stSidebarNav"] a', has_text=title).first.click()
        to_scores, _ = time_run(page, nav("Scores"), deltas, label="to Scores")
        to_audit, _ = time_run(page, nav("Audit"), deltas,
                            until=lambda q: q.locator('[data-testid="stMetric"]',
                                                      has_text="Cons_adj").count() > 0,
                            label="to Audit")
        page.wait_for_timeout(args.pause * 1000)
        to_export, _ = time_run(page, nav("Export"), deltas, label="to Export")
        t0 = time.perf_counter()
        with page.expect_download() as dl:
            page.locator('[data-testid="stDownloadButton"]', has_text="CSV").first.click()
        dl.value.path()  # the whole file has arrived
        download = time.perf_counter() - t0
        page.screenshot(path=str(ARTIFACTS / "browser_sliders.png"), full_page=True)
        go(page, "Audit")
    load_after = load_average()

    def line(name: str, r: dict) -> None:
        print(f"{name} steps to {r['values']}: "
              f"{', '.join(f'{s:.2f}' for s in r['new'])} s "
              f"(median {r['median']:.2f} s = {r['median'] / first:.3f} x first audit; first step "
              f"{r['new'][0] / first:.3f} x), repeated {r['repeated']:.2f} s "
              f"({r['repeated'] / first:.3f} x); deltas "
              f"{', '.join(f'{b / 1024:.0f}' for b in r['bytes'])} KiB")

    print(f"upload of MT-Bench (3,355 rows)  {upload:6.2f} s  ({upload_b / 1024:.0f} KiB received)")
    print(f"first audit (Audit page opened)  {first:6.2f} s  ({first_b / 1024:.0f} KiB received)")
    line("m", m)
    line("p_ratio", p)
    print(f"page switch: Audit -> Scores {to_scores:.2f} s, Scores -> Audit {to_audit:.2f} s")
    print(f"export: Export page {to_export:.2f} s, CSV download {download:.2f} s")
    print(f"targets: m step <= 0.15 x ({m['median'] / first:.3f}), p_ratio step <= 0.30 x "
          f"({p['median'] / first:.3f})")
    print(f"load average after: {load_after}")
    if prof_dir is not None:
        summarise_profile(prof_dir)
    print(f"ratio={m['median'] / first:.4f}")


if __name__ == "__main__":
    main()
