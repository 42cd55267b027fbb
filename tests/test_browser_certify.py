"""Trust or escalate in a real browser (Chromium via Playwright, hashing test encoder, the
built-in demo data): tick "Certify verdicts", move the target slider down, and see the trusted
count grow while the coverage curve stays drawn and the box names the new target.

The demo data and the hashing encoder keep the audit to seconds: the test measures the page,
not the encoder (the certified numbers themselves are tested in tests/test_audit_certify.py and
tests/test_page_certify.py)."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.test_browser import ARGS, ARTIFACTS, CHROMIUM, _go, _idle, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def hashing_server():
    env = {**os.environ, "PUAUDIT_TEST_ENCODER": "hashing", "PUAUDIT_UMAP_WARMUP": "0"}
    with streamlit_server(env, "streamlit_certify.log") as url:
        yield url


def _certified_count(page) -> int:
    """Trusted verdicts in the Audit page's certification box (0 when nothing is certified)."""
    box = page.locator('[data-testid="stAlert"]', has_text="trusted").first
    m = re.search(r"([\d,]+) of [\d,]+ audited verdicts are trusted", box.inner_text())
    return int(m.group(1).replace(",", "")) if m else 0


def _press_to(page, thumb, value: float) -> None:
    """Press the arrow keys on the slider until it shows ``value`` and stays there (a press
    landing during a rerun can be dropped or arrive late and overshoot, so the loop reads the
    value back instead of counting presses, and steps back when it passed ``value``)."""
    for _ in range(80):
        now = float(thumb.input_value())
        if abs(now - value) < 1e-9:
            page.wait_for_timeout(600)  # a late press would show by now
            if abs(float(thumb.input_value()) - value) < 1e-9:
                return
            continue
        thumb.focus()
        page.keyboard.press("ArrowLeft" if now > value else "ArrowRight")
        page.wait_for_timeout(150)


def test_certify_target_slider_moves_the_curve_and_the_counts(hashing_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.set_default_timeout(240_000)
        page.goto(hashing_server)
        page.wait_for_selector('[data-testid="stMetric"]')
        _idle(page)
        _go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        charts_plain = page.locator('[data-testid="stPlotlyChart"]').count()
        page.locator('[data-testid="stCheckbox"]', has_text="Certify verdicts").first.click()
        _idle(page)
        try:
            page.wait_for_selector('[data-testid="stSlider"]:has-text("Target agreement")')
        finally:  # what the page showed, when the slider never came
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "page_audit_certify_start.png"), full_page=True)
        page.wait_for_selector('[data-testid="stAlert"]:has-text("trusted")')
        # the coverage-vs-target curve joins the page
        page.wait_for_function(
            f"() => document.querySelectorAll('[data-testid=stPlotlyChart]').length > {charts_plain}")
        charts_before = page.locator('[data-testid="stPlotlyChart"]').count()
        at_90 = _certified_count(page)
        thumb = page.locator('[data-testid="stSlider"]', has_text="Target agreement").locator(
            'input[type="range"]').first
        assert float(thumb.input_value()) == pytest.approx(0.90)
        _press_to(page, thumb, 0.60)
        _idle(page)
        deadline = time.time() + 120
        while time.time() < deadline and _certified_count(page) == at_90:
            page.wait_for_timeout(500)
        at_60 = _certified_count(page)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "page_audit_certified.png"), full_page=True)
        assert float(thumb.input_value()) == pytest.approx(0.60)
        assert at_60 > at_90, (at_90, at_60)
        box = page.locator('[data-testid="stAlert"]', has_text="audited verdicts are trusted")
        assert "0.6" in box.first.inner_text()
        assert page.locator('[data-testid="stPlotlyChart"]').count() == charts_before
        browser.close()
