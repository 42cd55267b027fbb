"""Trust or escalate in a real browser (Chromium via Playwright, hashing test encoder, the
built-in demo data): tick "Certify verdicts", move the target slider down, and see the trusted
count grow while the coverage curve stays drawn and the box names the new target.

The demo data and the hashing encoder keep the audit to seconds: the test measures the page,
not the encoder (the certified numbers themselves are tested in tests/test_audit_certify.py and
tests/test_page_certify.py)."""

from __future__ import annotations

import re
import time

import pytest

from bench._browser import go, idle, open_app, press_to, slider
from tests.browser_support import ARTIFACTS, chromium, hashing_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _certified_count(page) -> int:
    """Trusted verdicts in the Audit page's certification box (0 when nothing is certified)."""
    box = page.locator('[data-testid="stAlert"]', has_text="trusted").first
    m = re.search(r"([\d,]+) of [\d,]+ audited verdicts are trusted", box.inner_text())
    return int(m.group(1).replace(",", "")) if m else 0


def test_certify_target_slider_moves_the_curve_and_the_counts(hashing_server):  # noqa: F811
    with chromium() as browser:
        page = open_app(browser, hashing_server, timeout_ms=240_000,
                        viewport={"width": 1400, "height": 2400})
        idle(page)
        go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        charts_plain = page.locator('[data-testid="stPlotlyChart"]').count()
        page.locator('[data-testid="stCheckbox"]', has_text="Certify verdicts").first.click()
        idle(page)
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
        thumb = slider(page, "Target agreement")
        assert float(thumb.input_value()) == pytest.approx(0.90)
        press_to(page, thumb, 0.60)
        idle(page)
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
