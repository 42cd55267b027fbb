"""Each slider one step on MT-Bench in a real browser (paper rule, so m moves the numbers):
after every step the numbers shown are those of ``puaudit audit`` with the same settings (the
stage cache reuses what the step did not change and must give the same audit as a fresh run; a
step reruns only the page's audit fragment, which must read every setting as it is now)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench._browser import ROOT, choose, go, idle, metric, open_app, press_to, slider, upload_table
from tests.browser_support import ARTIFACTS, chromium, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PUAUDIT_TEST_ENCODER"}


def _cli(path, tmp_path, *, m: float, p_ratio: float) -> dict:
    out = subprocess.run([sys.executable, "-m", "puaudit", "audit", str(path), "-o",
                          str(tmp_path / "out.csv"), "--seed", "0", "--m", str(m), "--p-ratio",
                          str(p_ratio), "--rule", "paper", "--json"], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _shown(page) -> tuple[str, str, str]:
    return metric(page, "Cons_orig"), metric(page, "Cons_adj"), metric(page, "Reversed")


def _expected(js: dict) -> tuple[str, str, str]:
    n_rev = round(js["reversed_share"] * js["n_validation"])
    return f"{js['cons_orig']:.1%}", f"{js['cons_adj']:.1%}", f"{n_rev} of {js['n_validation']}"


def _step(page, label: str, delta: float) -> float:
    thumb = slider(page, label)
    target = round(float(thumb.input_value()) + delta, 2)
    press_to(page, thumb, target)
    idle(page)
    return target


def test_each_slider_step_shows_the_cli_audit(mtbench_path, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with streamlit_server(_env(), "streamlit_sliders.log") as url, chromium() as browser:
        page = open_app(browser, url, timeout_ms=900_000,
                        viewport={"width": 1400, "height": 1800})
        upload_table(page, mtbench_path, rows="3,355")
        idle(page)
        go(page, "Audit")
        page.wait_for_selector('[data-testid="stMetric"]:has-text("Cons_adj")')
        # the paper rule keeps the top m share of each type: an m step moves the numbers
        choose(page, "Relabel rule", "paper")
        m = _step(page, "m —", 0.01)
        after_m = _shown(page)
        p_ratio = _step(page, "p_ratio", 0.05)
        after_p = _shown(page)
        # each step reruns the page's audit fragment only: the m step back reads the p_ratio
        # the fragment's previous run set, and returns to an m whose split is new
        m_back = _step(page, "m —", -0.01)
        after_back = _shown(page)
        page.screenshot(path=str(ARTIFACTS / "page_audit_slider_steps.png"), full_page=True)
    assert p_ratio == pytest.approx(0.35)
    assert m_back == pytest.approx(round(m - 0.01, 2))
    assert after_m == _expected(_cli(mtbench_path, tmp_path, m=m, p_ratio=0.3))
    assert after_p == _expected(_cli(mtbench_path, tmp_path, m=m, p_ratio=p_ratio))
    assert after_back == _expected(_cli(mtbench_path, tmp_path, m=m_back, p_ratio=p_ratio))
