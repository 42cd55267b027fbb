"""What the browser tests (``tests/test_browser*.py``) share: a Streamlit server on a free port,
Debian's Chromium driven by Playwright, and the few moves every test makes on the dashboard
(wait for a run to end, read a metric, upload a table, move a slider, pick a page).

The moves and the server live in :mod:`bench._browser`, which the browser benchmark
(``bench/browser_sliders.py``) drives too; here they skip a test when Chromium or Playwright is
missing and fail it when the server does not start. The module-scoped :func:`hashing_server`
fixture is imported by the tests that use it (pytest finds a fixture by its name in the test
module). Screenshots and server logs go to tests/artifacts/.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from bench import _browser
from bench._browser import (ARGS, CHROMIUM, ROOT, choose, go, idle, metric, open_app, press_to,
                            slider, upload_table, wait_for_value)

__all__ = ["ROOT", "ARTIFACTS", "CHROMIUM", "ARGS", "require_chromium", "streamlit_server",
           "hashing_env", "hashing_server", "chromium", "open_app", "idle", "metric",
           "wait_for_value", "upload_table", "choose", "go", "slider", "press_to"]

ARTIFACTS = ROOT / "tests" / "artifacts"


def require_chromium() -> None:
    """Skip the test when Chromium or Playwright is missing."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright")


@contextlib.contextmanager
def streamlit_server(env: dict, log_name: str):
    """``streamlit run app.py`` on a free local port with ``env``; yields its URL, stops it after.

    Skips when Chromium or Playwright is missing; fails when the server does not start.

    Parameters
    ----------
    env : dict
        The server's whole environment.
    log_name : str
        File under tests/artifacts/ that receives the server's output.
    """
    require_chromium()
    try:
        with _browser.streamlit_server(env, ARTIFACTS / log_name) as url:
            yield url
    except _browser.ServerDidNotStart:
        pytest.fail("streamlit did not start")


def hashing_env(*, review_db: Path | None = None) -> dict:
    """This process's environment with the instant hashing test encoder and no UMAP warm-up,
    so that a test measures the page rather than the encoder; ``review_db`` keeps the Review
    page's decisions in that SQLite file."""
    env = {**os.environ, "PUAUDIT_TEST_ENCODER": "hashing", "PUAUDIT_UMAP_WARMUP": "0"}
    if review_db is not None:
        env["PUAUDIT_REVIEW_DB"] = str(review_db)
    return env


@pytest.fixture(scope="module")
def hashing_server(request):
    """A server with :func:`hashing_env` for the whole test module; its log is named after the
    module (``test_browser_certify`` -> ``streamlit_certify.log``)."""
    topic = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_browser_")
    with streamlit_server(hashing_env(), f"streamlit_{topic}.log") as url:
        yield url


@contextlib.contextmanager
def chromium():
    """A headless Chromium (Playwright), closed on the way out; skips when either is missing."""
    require_chromium()
    with _browser.chromium() as browser:
        yield browser
