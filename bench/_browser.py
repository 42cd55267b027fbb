"""What the browser benchmark (``bench/browser_sliders.py``) and the browser tests
(``tests/browser_support.py``) share: a Streamlit server on a free port, Debian's Chromium driven
by Playwright, and the moves on the dashboard (wait for a run to end, read a metric, upload a
table, move a slider, pick a page).

No pytest here: a benchmark runs without it. The tests wrap :func:`streamlit_server` and
:func:`chromium` to skip when Chromium or Playwright is missing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ROOT", "CHROMIUM", "ARGS", "ServerDidNotStart", "have_chromium", "free_port",
           "streamlit_server", "real_encoder_env", "chromium", "open_app", "run_started",
           "run_ended", "idle", "metric", "wait_for_value", "upload_table", "choose", "go",
           "slider", "press_to"]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
_UPLOADER = '[data-testid="stFileUploaderDropzoneInput"]'


class ServerDidNotStart(RuntimeError):
    """``streamlit run`` did not open its port in time."""


def have_chromium() -> bool:
    """Whether Chromium and Playwright are both installed."""
    import importlib.util

    return importlib.util.find_spec("playwright") is not None and Path(CHROMIUM).exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(proc: subprocess.Popen, port: int, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise ServerDidNotStart("streamlit did not start")


@contextlib.contextmanager
def streamlit_server(env: dict, log_path: Path, *, launcher: tuple = ("-m", "streamlit")):
    """``streamlit run app.py`` on a free local port with the whole environment ``env``, its
    output to ``log_path``; yields its URL, stops it after. ``launcher`` runs ``streamlit``
    (the benchmark's profiled server: ``("-m", "bench._profiled_server", DIR)``). Raises
    :class:`ServerDidNotStart` when the port does not open within two minutes."""
    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, *launcher, "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def real_encoder_env(**extra: str) -> dict:
    """This process's environment without the tests' hashing encoder (the dashboard's real
    encoder, its embeddings read from the embedding cache), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PUAUDIT_TEST_ENCODER"}
    return {**env, **extra}


@contextlib.contextmanager
def chromium():
    """A headless Chromium (Playwright), closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def open_app(owner, url: str, *, timeout_ms: int, **page_options):
    """A new page of ``owner`` (a browser, or a browser context: one per visitor keeps their
    sessions apart) at ``url``, with default timeout ``timeout_ms`` and ``page_options`` for
    ``new_page``, once the first metric is drawn (the Data page's)."""
    page = owner.new_page(**page_options)
    page.set_default_timeout(timeout_ms)
    page.goto(url)
    page.wait_for_selector('[data-testid="stMetric"]')
    return page


# --- moves on the dashboard -------------------------------------------------------------------
_RUNNING = ("() => { const app = document.querySelector('[data-testid=stApp]');"
            " const s = app && app.getAttribute('data-test-script-state');"
            " return (s && s !== 'notRunning' && s !== 'initial')"
            " || document.querySelector('[data-testid=stStatusWidget]') !== null; }")
_ENDED = ("() => { const app = document.querySelector('[data-testid=stApp]');"
          " const s = app && app.getAttribute('data-test-script-state');"
          " return (s === 'notRunning' || s === 'initial')"
          " && document.querySelector('[data-testid=stStatusWidget]') === null"
          " && document.querySelectorAll('[data-stale=\"true\"]').length === 0; }")


def run_started(page, timeout_ms: float = 1500) -> bool:
    """Wait until a script run (or a fragment's) has started; False when none started within
    ``timeout_ms`` (the run was short and already over, or nothing reran)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    # the app root's script state turns "running" as soon as a run starts (the status widget
    # only shows after a display delay, and never for a short run)
    try:
        page.wait_for_function(_RUNNING, timeout=timeout_ms, polling=10)
    except PlaywrightTimeout:
        return False
    return True


def run_ended(page, timeout_s: float = 900) -> float:
    """Wait until no run is going and no element of the previous run is left stale; returns
    the ``time.perf_counter()`` at which that was seen (polled every 10 ms)."""
    page.wait_for_function(_ENDED, timeout=timeout_s * 1000, polling=10)
    return time.perf_counter()


def idle(page, timeout_s: float = 900) -> None:
    """Wait until the script run finished (the 'running' status widget is gone)."""
    run_started(page)
    run_ended(page, timeout_s)
    page.wait_for_timeout(300)


def metric(page, label: str) -> str:
    """The value shown by the first metric labelled ``label``."""
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def wait_for_value(page, text: str) -> None:
    """Wait until some metric shows ``text`` (a row count once an upload is read)."""
    page.wait_for_function(
        "(text) => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
        ".some(e => e.innerText === text)", arg=text, polling=10)


def upload_table(page, path: Path, *, rows: str) -> None:
    """Upload ``path`` on the Data page and wait until it shows ``rows`` (as formatted there)."""
    page.set_input_files(_UPLOADER, str(path))
    wait_for_value(page, rows)


def choose(page, label: str, option: str, *, attempts: int = 5) -> None:
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
            idle(page, 120)
        try:
            box.locator("input").click(timeout=30_000)
            page.locator('[role="option"]', has_text=option).first.click(timeout=15_000)
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            idle(page, 120)
            continue
        idle(page, 300)
        shown = box.inner_text(timeout=30_000) + " " + box.locator("input").input_value()
        if option in shown:
            return
    raise AssertionError(f"could not choose {option!r} in {label!r}: shows {shown!r}")


def go(page, title: str) -> None:
    """Open the page titled ``title`` from the sidebar and wait for its run to end."""
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()
    idle(page)


def slider(page, label: str):
    """The thumb (a range input) of the first slider whose label contains ``label``."""
    return page.locator('[data-testid="stSlider"]', has_text=label).locator(
        'input[type="range"]').first


def press_to(page, thumb, value: float) -> None:
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
