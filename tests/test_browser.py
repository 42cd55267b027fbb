"""The dashboard in a real browser (Debian's Chromium driven by Playwright): upload the MT-Bench
file, move the m slider, see the metrics change, download the CSV export and check it; save a
screenshot of each page under tests/artifacts/. Uses the real default encoder (the embedding
cache makes reruns fast; a cold run embeds ~2,000 distinct texts)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from bench._browser import ROOT, choose, go, idle, metric, open_app, press_to, slider, upload_table
from tests.browser_support import ARTIFACTS, chromium, hashing_env, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ENCODER_LOG = ARTIFACTS / "encoder_loads.log"
PAGES = ("Data", "Audit", "Scores", "Embedding map", "Question types", "Export")


@pytest.fixture(scope="module")
def server():
    env = {k: v for k, v in os.environ.items() if k != "PUAUDIT_TEST_ENCODER"}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ENCODER_LOG.unlink(missing_ok=True)
    env["PUAUDIT_ENCODER_LOG"] = str(ENCODER_LOG)
    with streamlit_server(env, "streamlit.log") as url:
        yield url


def _longer_answer_wins(mtbench_path, out):
    """MT-Bench with a weak judge, 'the longer answer wins' (a tie on equal lengths), written
    to ``out`` as CSV; returns ``out``."""
    df = pd.read_csv(mtbench_path, dtype=str, keep_default_na=False)
    la, lb = df["response_a"].str.len(), df["response_b"].str.len()
    df["judge_winner"] = ["model_a" if a > b else "model_b" if b > a else "tie"
                          for a, b in zip(la, lb)]
    df.to_csv(out, index=False)
    return out


def _audited(browser, server: str, path, *, height: int):
    """A new page of ``browser`` with MT-Bench-sized ``path`` (3,355 rows) uploaded, on the
    Audit page once its first result is drawn."""
    page = open_app(browser, server, timeout_ms=900_000,
                    viewport={"width": 1400, "height": height})
    upload_table(page, path, rows="3,355")
    idle(page)
    go(page, "Audit")
    page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
    return page


def test_upload_audit_slider_export(server, mtbench_path, tmp_path):
    with chromium() as browser:
        page = open_app(browser, server, timeout_ms=900_000,
                        viewport={"width": 1400, "height": 1800}, accept_downloads=True)
        assert metric(page, "Rows") == "600"  # demo data with no upload

        upload_table(page, mtbench_path, rows="3,355")
        idle(page)
        page.screenshot(path=str(ARTIFACTS / "page_data.png"), full_page=True)

        go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        # The paper rule keeps the top ⌊m·|U|⌋ per type, so m moves the metrics directly.
        choose(page, "Relabel rule", "paper")
        before = (metric(page, "Cons_adj"), metric(page, "Reversed"))
        thumb = slider(page, "m —")
        start = thumb.input_value()
        press_to(page, thumb, float(start) - 0.10)  # ten steps of 0.01
        idle(page)
        deadline = time.time() + 180
        while time.time() < deadline and (metric(page, "Cons_adj"), metric(page, "Reversed")) == before:
            page.wait_for_timeout(500)
        after = (metric(page, "Cons_adj"), metric(page, "Reversed"))
        assert float(thumb.input_value()) == pytest.approx(float(start) - 0.10)
        assert after != before, (before, after)
        page.screenshot(path=str(ARTIFACTS / "page_audit.png"), full_page=True)

        for title in PAGES[2:5]:
            go(page, title)
            page.screenshot(path=str(ARTIFACTS / f"page_{title.lower().replace(' ', '_')}.png"),
                            full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0, title

        go(page, "Export")
        with page.expect_download() as dl:
            page.get_by_role("button", name="Download CSV").click()
        path = tmp_path / "export.csv"
        dl.value.save_as(path)
        page.screenshot(path=str(ARTIFACTS / "page_export.png"), full_page=True)

    out = pd.read_csv(path, dtype=str, keep_default_na=False)
    src = pd.read_csv(mtbench_path, dtype=str, keep_default_na=False)
    assert len(out) == 3355 == len(src)
    assert list(out.columns[: len(src.columns)]) == list(src.columns)
    assert {"puaudit_split", "puaudit_score", "puaudit_adjusted"} <= set(out.columns)
    pd.testing.assert_frame_equal(out[src.columns], src)


def test_two_browser_sessions_are_isolated(server, mtbench_path):
    with chromium() as browser:
        # two browser contexts: separate cookies, so two Streamlit sessions
        p1, p2 = (open_app(browser.new_context(), server, timeout_ms=600_000) for _ in range(2))
        upload_table(p1, mtbench_path, rows="3,355")
        p2.reload()
        p2.wait_for_selector('[data-testid="stMetric"]')
        idle(p2)
        assert metric(p2, "Rows") == "600"  # the other visitor still has the demo
        assert p2.get_by_text("mtbench_human_vs_gpt4.csv").count() == 0
        assert metric(p1, "Rows") == "3,355"


def test_five_concurrent_sessions_complete_with_one_encoder(server):
    """Five visitors audit the demo data at the same time: every one gets its metrics, and the
    server process loaded the encoder once (for the whole test module)."""
    with chromium() as browser:
        pages = []
        for _ in range(5):
            p = browser.new_context().new_page()
            p.set_default_timeout(900_000)
            p.goto(server + "/audit")
            pages.append(p)
        values = []
        for p in pages:  # all five are already running server-side; collect each result
            p.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
            idle(p)
            values.append((metric(p, "Cons_orig"), metric(p, "Cons_adj")))
            assert p.locator('[data-testid="stException"]').count() == 0
    assert len(values) == 5 and len(set(values)) == 1  # same demo data, same numbers
    loads = [line for line in ENCODER_LOG.read_text().splitlines() if line.strip()]
    assert len(loads) == 1, loads


def test_default_audit_reverses_a_weak_judge(server, mtbench_path, tmp_path):
    """Upload a file whose judge is weak ('longer answer wins' on MT-Bench), keep every
    default (auto scorer, guarded rule): the Audit page shows reversals and Cons_adj > Cons_orig;
    the Audit and Scores pages are saved as screenshots."""
    weak = _longer_answer_wins(mtbench_path, tmp_path / "mtbench_longer_judge.csv")

    def pct(text: str) -> float:
        return float(text.strip().rstrip("%"))

    with chromium() as browser:
        page = _audited(browser, server, weak, height=2200)
        idle(page)
        orig, adj = pct(metric(page, "Cons_orig")), pct(metric(page, "Cons_adj"))
        reversed_ = int(metric(page, "Reversed").split(" of ")[0].replace(",", ""))
        assert page.get_by_text("auto chose").count() >= 1
        page.screenshot(path=str(ARTIFACTS / "page_audit_default_weak_judge.png"),
                        full_page=True)
        assert reversed_ > 0 and adj > orig, (orig, adj, reversed_)
        go(page, "Scores")
        assert page.locator('[data-testid="stException"]').count() == 0
        page.screenshot(path=str(ARTIFACTS / "page_scores_default_weak_judge.png"),
                        full_page=True)


def test_a_deep_link_as_the_first_visit_gets_the_apps_navigation(tmp_path):
    """Streamlit runs a ``pages/`` file on its own when the first visit after a server start is a
    deep link (the folder's file names become the menu, for every later session too); the pages
    send that visit through ``app.py``'s navigation instead."""
    env = hashing_env(review_db=tmp_path / "review.sqlite")
    with streamlit_server(env, "streamlit_deep_link.log") as url, chromium() as browser:
        for path, heading in (("/review", "Review"), ("/audit", "Audit")):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(300_000)
            page.goto(url + path)
            page.wait_for_selector(f'h1:has-text("{heading}")')
            idle(page)
            nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
            # the app's sections and titles, not the folder's file names
            assert "Judges & people" in nav and "Question types" in nav, nav
            assert "app" not in nav.split(), nav
            assert page.locator('[data-testid="stException"]').count() == 0
            page.close()


def test_a_parquet_bomb_upload_is_refused_and_the_server_stays_up(tmp_path):
    """A 34 KB Parquet file that decodes to 5 GB (64 rows of 10 million zeros): the Data page
    shows the upload limit's message (refused from the file's footer), and a second visitor
    still gets the app."""
    from bench._hostile_files import parquet_bomb

    bomb = tmp_path / "bomb.parquet"
    parquet_bomb(bomb)
    env = hashing_env(review_db=tmp_path / "review.sqlite")
    with streamlit_server(env, "streamlit_bomb.log") as url, chromium() as browser:
        page = open_app(browser.new_context(), url, timeout_ms=300_000)
        page.set_input_files('[data-testid="stFileUploaderDropzoneInput"]', str(bomb))
        alert = page.locator('[data-testid="stAlert"]', has_text="bomb.parquet").first
        alert.wait_for()
        text = alert.inner_text()
        assert "more than 200 MB of data once decoded" in text, text
        assert "PUAUDIT_MAX_UPLOAD_MB" in text, text
        idle(page)
        assert metric(page, "Rows") == "600"  # still the demo data
        other = open_app(browser.new_context(), url, timeout_ms=300_000)
        idle(other)
        assert metric(other, "Rows") == "600"
        assert other.locator('[data-testid="stException"]').count() == 0


def test_fully_annotated_weak_judge_numbers_agree_with_the_cli(server, mtbench_path, tmp_path):
    """A fully annotated file with a weak judge ('longer answer wins' on MT-Bench, every row
    judged by people): the m curve spans the slider's range and holds the current m; Cons_orig,
    Cons_adj and the reversals equal ``puaudit audit --json`` with the same seed; the change
    over seeded splits is shown and equals the CLI's ``delta_over_seeds``."""
    import json
    import re

    weak = _longer_answer_wins(mtbench_path, tmp_path / "mtbench_longer_judge_annotated.csv")
    env = {k: v for k, v in os.environ.items() if k != "PUAUDIT_TEST_ENCODER"}
    cli = subprocess.run([sys.executable, "-m", "puaudit", "audit", str(weak), "-o",
                          str(tmp_path / "out.csv"), "--seed", "0", "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1800)
    assert cli.returncode == 0, cli.stderr
    js = json.loads(cli.stdout.strip().splitlines()[-1])
    spread = js["delta_over_seeds"]
    assert spread["n"] == 5

    with chromium() as browser:
        page = _audited(browser, server, weak, height=2400)
        # the spread arrives in the background after the first result
        spread_box = page.get_by_text(re.compile(r"Change over 5 seeded splits")).first
        spread_box.wait_for(timeout=900_000)
        idle(page)
        shown_spread = spread_box.inner_text()
        curve = page.evaluate("""() => {
            for (const el of document.querySelectorAll('.js-plotly-plot')) {
                const t = el.layout && el.layout.yaxis && el.layout.yaxis.title;
                if (t && (t.text || t) === 'rows reversed')
                    return {range: el.layout.xaxis.range, x: el.data[0].x, current: el.data[1].x[0]};
            }
            return null; }""")
        thumb = slider(page, "m —")
        lo, hi = (float(thumb.get_attribute(a)) for a in ("min", "max"))
        now = float(thumb.input_value())
        cons_orig, cons_adj = metric(page, "Cons_orig"), metric(page, "Cons_adj")
        reversed_txt = metric(page, "Reversed")
        page.screenshot(path=str(ARTIFACTS / "page_audit_fully_annotated_weak_judge.png"),
                        full_page=True)

    assert curve is not None
    assert curve["range"] == [lo, hi] == [0.05, 1.0]
    assert lo <= curve["current"] <= hi and curve["current"] in curve["x"]
    assert abs(curve["current"] - now) <= 0.005  # the slider shows the m in use, rounded
    assert cons_orig == f"{js['cons_orig']:.1%}" and cons_adj == f"{js['cons_adj']:.1%}"
    n_rev = round(js["reversed_share"] * js["n_validation"])
    assert reversed_txt == f"{n_rev} of {js['n_validation']}"
    assert (f"mean {100 * spread['mean']:+.1f} pts (range {100 * spread['min']:+.1f} to "
            f"{100 * spread['max']:+.1f})") in shown_spread


def _upload_audits_as_the_cli(server, path, tmp_path, shot: str) -> dict:
    """``path`` uploaded on the Data page is read as ``puaudit audit`` reads it, and the Audit
    page's Cons_orig, Cons_adj and reversals equal the CLI's ``--json`` on the same file, with
    the same default encoder."""
    import json

    env = {k: v for k, v in os.environ.items() if k != "PUAUDIT_TEST_ENCODER"}
    cli = subprocess.run([sys.executable, "-m", "puaudit", "audit", str(path), "-o",
                          str(tmp_path / "out.csv"), "--spread-seeds", "1", "--json"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=1800)
    assert cli.returncode == 0, cli.stderr
    js = json.loads(cli.stdout.strip().splitlines()[-1])

    with chromium() as browser:
        page = open_app(browser, server, timeout_ms=900_000,
                        viewport={"width": 1400, "height": 2000})
        upload_table(page, path, rows=f"{js['n_rows']:,}")
        idle(page)
        go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        # the first look (judge evidence alone) shows while the texts are embedded: the full
        # audit replaces it
        page.wait_for_function("() => !document.body.innerText.includes('preliminary: judge')",
                               timeout=900_000)
        idle(page)
        cons_orig, cons_adj = metric(page, "Cons_orig"), metric(page, "Cons_adj")
        reversed_txt = metric(page, "Reversed")
        page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    assert cons_orig == f"{js['cons_orig']:.1%}" and cons_adj == f"{js['cons_adj']:.1%}"
    n_rev = round(js["reversed_share"] * js["n_validation"])
    assert reversed_txt == f"{n_rev} of {js['n_validation']}"
    return js


def test_a_label_studio_export_uploaded_audits_as_the_cli_audits_it(server, tmp_path):
    """Issue 52: a Label Studio export (one row per vote) uploaded audits as the CLI audits it."""
    from tests.test_page_data_upload_formats import labelstudio_export

    path = labelstudio_export(tmp_path / "project-export.json")
    js = _upload_audits_as_the_cli(server, path, tmp_path, "page_audit_label_studio_upload.png")
    assert js["reversed_share"] > 0


def test_a_zipped_mtbench_release_uploaded_audits_as_the_cli_audits_it(server, tmp_path):
    """Issue 52: the MT-Bench release (GPT-4's judgments, the people's votes, the questions and
    model answers) zipped as one upload audits as ``puaudit audit`` audits the zip: its 3,355
    votes, the CLI's Cons_orig, Cons_adj and reversals."""
    from tests.test_data_formats_release import make_release, zipped

    root = make_release(tmp_path / "mt_bench", questions=range(81, 161))
    path = zipped(root, tmp_path / "mt_bench.zip")
    js = _upload_audits_as_the_cli(server, path, tmp_path, "page_audit_mtbench_release.png")
    assert js["n_rows"] == 3355
