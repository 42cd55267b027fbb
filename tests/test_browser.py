"""The dashboard in a real browser (Debian's Chromium driven by Playwright): upload the MT-Bench
file, move the m slider, see the metrics change, download the CSV export and check it; save a
screenshot of each page under tests/artifacts/. Uses the real default encoder (the embedding
cache makes reruns fast; a cold run embeds ~2,000 distinct texts)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ENCODER_LOG = ARTIFACTS / "encoder_loads.log"
PAGES = ("Data", "Audit", "Scores", "Embedding map", "Question types", "Export")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict, log_name: str):
    """``streamlit run app.py`` on a free local port with ``env``; yields its URL, stops it after.

    Skips when Chromium or Playwright is missing; fails when the server does not start.
    """
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright")
    port = _free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("streamlit did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def server():
    env = {k: v for k, v in os.environ.items() if k != "PUAUDIT_TEST_ENCODER"}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ENCODER_LOG.unlink(missing_ok=True)
    env["PUAUDIT_ENCODER_LOG"] = str(ENCODER_LOG)
    with streamlit_server(env, "streamlit.log") as url:
        yield url


def _idle(page, timeout_s: float = 900) -> None:
    """Wait until the script run finished (the 'running' status widget is gone)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:  # a rerun may take a moment to start after an interaction
        page.wait_for_selector('[data-testid="stStatusWidget"]', state="attached", timeout=3000)
    except PlaywrightTimeout:
        pass
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached",
                           timeout=timeout_s * 1000)
    # stale elements of the previous run are removed just after the run ends
    page.wait_for_function("() => document.querySelectorAll('[data-stale=\"true\"]').length === 0",
                           timeout=30_000)
    page.wait_for_timeout(300)


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def _choose(page, label: str, option: str, *, attempts: int = 5) -> None:
    """Pick ``option`` in the selectbox labelled ``label`` (inside the Advanced expander).

    A dropdown opened just as a rerun redraws the page can close before the option is clicked;
    retry with short timeouts rather than waiting on a menu that is gone.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator('[data-testid="stSelectbox"]', has_text=label).first
    shown = ""
    for _ in range(attempts):
        if not box.is_visible():
            page.locator('[data-testid="stExpander"]', has_text="Advanced").first.click(
                timeout=30_000)
            _idle(page, 120)
        try:
            box.locator("input").click(timeout=30_000)
            page.locator('[role="option"]', has_text=option).first.click(timeout=15_000)
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            _idle(page, 120)
            continue
        _idle(page, 300)
        shown = box.inner_text(timeout=30_000) + " " + box.locator("input").input_value()
        if option in shown:
            return
    raise AssertionError(f"could not choose {option!r} in {label!r}: shows {shown!r}")


def _go(page, title: str) -> None:
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()
    _idle(page)


def test_upload_audit_slider_export(server, mtbench_path, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1800}, accept_downloads=True)
        page.set_default_timeout(900_000)
        page.goto(server)
        page.wait_for_selector('[data-testid="stMetric"]')
        assert _metric(page, "Rows") == "600"  # demo data with no upload

        page.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(mtbench_path))
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
            ".some(e => e.innerText === '3,355')")
        _idle(page)
        page.screenshot(path=str(ARTIFACTS / "page_data.png"), full_page=True)

        _go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        # The paper rule keeps the top ⌊m·|U|⌋ per type, so m moves the metrics directly.
        _choose(page, "Relabel rule", "paper")
        before = (_metric(page, "Cons_adj"), _metric(page, "Reversed"))
        thumb = page.locator('[data-testid="stSlider"]', has_text="m —").locator(
            'input[type="range"]').first
        start = thumb.input_value()
        # ten steps of 0.01; a press that lands while the page reruns can be dropped, so press
        # until the slider shows the target (at most 30 presses)
        for _ in range(30):
            if float(thumb.input_value()) <= float(start) - 0.10 + 1e-9:
                break
            thumb.focus()
            page.keyboard.press("ArrowLeft")
            page.wait_for_timeout(100)
        _idle(page)
        deadline = time.time() + 180
        while time.time() < deadline and (_metric(page, "Cons_adj"), _metric(page, "Reversed")) == before:
            page.wait_for_timeout(500)
        after = (_metric(page, "Cons_adj"), _metric(page, "Reversed"))
        assert float(thumb.input_value()) == pytest.approx(float(start) - 0.10)
        assert after != before, (before, after)
        page.screenshot(path=str(ARTIFACTS / "page_audit.png"), full_page=True)

        for title in PAGES[2:5]:
            _go(page, title)
            page.screenshot(path=str(ARTIFACTS / f"page_{title.lower().replace(' ', '_')}.png"),
                            full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0, title

        _go(page, "Export")
        with page.expect_download() as dl:
            page.get_by_role("button", name="Download CSV").click()
        path = tmp_path / "export.csv"
        dl.value.save_as(path)
        page.screenshot(path=str(ARTIFACTS / "page_export.png"), full_page=True)
        browser.close()

    out = pd.read_csv(path, dtype=str, keep_default_na=False)
    src = pd.read_csv(mtbench_path, dtype=str, keep_default_na=False)
    assert len(out) == 3355 == len(src)
    assert list(out.columns[: len(src.columns)]) == list(src.columns)
    assert {"puaudit_split", "puaudit_score", "puaudit_adjusted"} <= set(out.columns)
    pd.testing.assert_frame_equal(out[src.columns], src)


def test_two_browser_sessions_are_isolated(server, mtbench_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        one, two = browser.new_context(), browser.new_context()
        p1, p2 = one.new_page(), two.new_page()
        for p in (p1, p2):
            p.set_default_timeout(600_000)
            p.goto(server)
            p.wait_for_selector('[data-testid="stMetric"]')
        p1.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(mtbench_path))
        p1.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
            ".some(e => e.innerText === '3,355')")
        p2.reload()
        p2.wait_for_selector('[data-testid="stMetric"]')
        _idle(p2)
        assert _metric(p2, "Rows") == "600"  # the other visitor still has the demo
        assert p2.get_by_text("mtbench_human_vs_gpt4.csv").count() == 0
        assert _metric(p1, "Rows") == "3,355"
        browser.close()


def test_five_concurrent_sessions_complete_with_one_encoder(server):
    """Five visitors audit the demo data at the same time: every one gets its metrics, and the
    server process loaded the encoder once (for the whole test module)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        pages = []
        for _ in range(5):
            p = browser.new_context().new_page()
            p.set_default_timeout(900_000)
            p.goto(server + "/audit")
            pages.append(p)
        values = []
        for p in pages:  # all five are already running server-side; collect each result
            p.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
            _idle(p)
            values.append((_metric(p, "Cons_orig"), _metric(p, "Cons_adj")))
            assert p.locator('[data-testid="stException"]').count() == 0
        browser.close()
    assert len(values) == 5 and len(set(values)) == 1  # same demo data, same numbers
    loads = [line for line in ENCODER_LOG.read_text().splitlines() if line.strip()]
    assert len(loads) == 1, loads


def test_default_audit_reverses_a_weak_judge(server, mtbench_path, tmp_path):
    """Upload a file whose judge is weak ('longer answer wins' on MT-Bench), keep every
    default (auto scorer, guarded rule): the Audit page shows reversals and Cons_adj > Cons_orig;
    the Audit and Scores pages are saved as screenshots."""
    from playwright.sync_api import sync_playwright

    df = pd.read_csv(mtbench_path, dtype=str, keep_default_na=False)
    la, lb = df["response_a"].str.len(), df["response_b"].str.len()
    df["judge_winner"] = ["model_a" if a > b else "model_b" if b > a else "tie"
                          for a, b in zip(la, lb)]
    weak = tmp_path / "mtbench_longer_judge.csv"
    df.to_csv(weak, index=False)

    def pct(text: str) -> float:
        return float(text.strip().rstrip("%"))

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 2200})
        page.set_default_timeout(900_000)
        page.goto(server)
        page.wait_for_selector('[data-testid="stMetric"]')
        page.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(weak))
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
            ".some(e => e.innerText === '3,355')")
        _idle(page)
        _go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        _idle(page)
        orig, adj = pct(_metric(page, "Cons_orig")), pct(_metric(page, "Cons_adj"))
        reversed_ = int(_metric(page, "Reversed").split(" of ")[0].replace(",", ""))
        assert page.get_by_text("auto chose").count() >= 1
        page.screenshot(path=str(ARTIFACTS / "page_audit_default_weak_judge.png"),
                        full_page=True)
        assert reversed_ > 0 and adj > orig, (orig, adj, reversed_)
        _go(page, "Scores")
        assert page.locator('[data-testid="stException"]').count() == 0
        page.screenshot(path=str(ARTIFACTS / "page_scores_default_weak_judge.png"),
                        full_page=True)
        browser.close()


def test_a_deep_link_as_the_first_visit_gets_the_apps_navigation(tmp_path):
    """Streamlit runs a ``pages/`` file on its own when the first visit after a server start is a
    deep link (the folder's file names become the menu, for every later session too); the pages
    send that visit through ``app.py``'s navigation instead."""
    from playwright.sync_api import sync_playwright

    env = dict(os.environ, PUAUDIT_TEST_ENCODER="hashing", PUAUDIT_UMAP_WARMUP="0",
               PUAUDIT_REVIEW_DB=str(tmp_path / "review.sqlite"))
    with streamlit_server(env, "streamlit_deep_link.log") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        for path, heading in (("/review", "Review"), ("/audit", "Audit")):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(300_000)
            page.goto(url + path)
            page.wait_for_selector(f'h1:has-text("{heading}")')
            _idle(page)
            nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
            # the app's sections and titles, not the folder's file names
            assert "Judges & people" in nav and "Question types" in nav, nav
            assert "app" not in nav.split(), nav
            assert page.locator('[data-testid="stException"]').count() == 0
            page.close()
        browser.close()


def test_a_parquet_bomb_upload_is_refused_and_the_server_stays_up(tmp_path):
    """A 34 KB Parquet file that decodes to 5 GB (64 rows of 10 million zeros): the Data page
    shows the upload limit's message (refused from the file's footer), and a second visitor
    still gets the app."""
    from playwright.sync_api import sync_playwright

    from tests.test_data_hostile_round3 import parquet_bomb

    bomb = tmp_path / "bomb.parquet"
    parquet_bomb(bomb)
    env = dict(os.environ, PUAUDIT_TEST_ENCODER="hashing", PUAUDIT_UMAP_WARMUP="0",
               PUAUDIT_REVIEW_DB=str(tmp_path / "review.sqlite"))
    with streamlit_server(env, "streamlit_bomb.log") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_context().new_page()
        page.set_default_timeout(300_000)
        page.goto(url)
        page.wait_for_selector('[data-testid="stMetric"]')
        page.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(bomb))
        alert = page.locator('[data-testid="stAlert"]', has_text="bomb.parquet").first
        alert.wait_for()
        text = alert.inner_text()
        assert "more than 200 MB of data once decoded" in text, text
        assert "PUAUDIT_MAX_UPLOAD_MB" in text, text
        _idle(page)
        assert _metric(page, "Rows") == "600"  # still the demo data
        other = browser.new_context().new_page()
        other.set_default_timeout(300_000)
        other.goto(url)
        other.wait_for_selector('[data-testid="stMetric"]')
        _idle(other)
        assert _metric(other, "Rows") == "600"
        assert other.locator('[data-testid="stException"]').count() == 0
        browser.close()


def test_fully_annotated_weak_judge_numbers_agree_with_the_cli(server, mtbench_path, tmp_path):
    """A fully annotated file with a weak judge ('longer answer wins' on MT-Bench, every row
    judged by people): the m curve spans the slider's range and holds the current m; Cons_orig,
    Cons_adj and the reversals equal ``puaudit audit --json`` with the same seed; the change
    over seeded splits is shown and equals the CLI's ``delta_over_seeds``."""
    import json
    import re

    from playwright.sync_api import sync_playwright

    df = pd.read_csv(mtbench_path, dtype=str, keep_default_na=False)
    la, lb = df["response_a"].str.len(), df["response_b"].str.len()
    df["judge_winner"] = ["model_a" if a > b else "model_b" if b > a else "tie"
                          for a, b in zip(la, lb)]
    weak = tmp_path / "mtbench_longer_judge_annotated.csv"
    df.to_csv(weak, index=False)
    env = {k: v for k, v in os.environ.items() if k != "PUAUDIT_TEST_ENCODER"}
    cli = subprocess.run([sys.executable, "-m", "puaudit", "audit", str(weak), "-o",
                          str(tmp_path / "out.csv"), "--seed", "0", "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1800)
    assert cli.returncode == 0, cli.stderr
    js = json.loads(cli.stdout.strip().splitlines()[-1])
    spread = js["delta_over_seeds"]
    assert spread["n"] == 5

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.set_default_timeout(900_000)
        page.goto(server)
        page.wait_for_selector('[data-testid="stMetric"]')
        page.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(weak))
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
            ".some(e => e.innerText === '3,355')")
        _idle(page)
        _go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        # the spread arrives in the background after the first result
        spread_box = page.get_by_text(re.compile(r"Change over 5 seeded splits")).first
        spread_box.wait_for(timeout=900_000)
        _idle(page)
        shown_spread = spread_box.inner_text()
        curve = page.evaluate("""() => {
            for (const el of document.querySelectorAll('.js-plotly-plot')) {
                const t = el.layout && el.layout.yaxis && el.layout.yaxis.title;
                if (t && (t.text || t) === 'rows reversed')
                    return {range: el.layout.xaxis.range, x: el.data[0].x, current: el.data[1].x[0]};
            }
            return null; }""")
        slider = page.locator('[data-testid="stSlider"]', has_text="m —").locator(
            'input[type="range"]').first
        lo, hi = (float(slider.get_attribute(a)) for a in ("min", "max"))
        now = float(slider.input_value())
        cons_orig, cons_adj = _metric(page, "Cons_orig"), _metric(page, "Cons_adj")
        reversed_txt = _metric(page, "Reversed")
        page.screenshot(path=str(ARTIFACTS / "page_audit_fully_annotated_weak_judge.png"),
                        full_page=True)
        browser.close()

    assert curve is not None
    assert curve["range"] == [lo, hi] == [0.05, 1.0]
    assert lo <= curve["current"] <= hi and curve["current"] in curve["x"]
    assert abs(curve["current"] - now) <= 0.005  # the slider shows the m in use, rounded
    assert cons_orig == f"{js['cons_orig']:.1%}" and cons_adj == f"{js['cons_adj']:.1%}"
    n_rev = round(js["reversed_share"] * js["n_validation"])
    assert reversed_txt == f"{n_rev} of {js['n_validation']}"
    assert (f"mean {100 * spread['mean']:+.1f} pts (range {100 * spread['min']:+.1f} to "
            f"{100 * spread['max']:+.1f})") in shown_spread
