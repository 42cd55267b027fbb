"""Opening a dashboard page under Streamlit's AppTest with a table and audit settings already in
the session, as the Data page would leave them (shared by the page tests)."""

from __future__ import annotations

import time

import pandas as pd
from streamlit.testing.v1 import AppTest

from puaudit.audit.config import AuditConfig
from puaudit.data.schema import load_comparisons
from tests.conftest import ROOT


def open_page(page: str, frame: pd.DataFrame | None = None, *, wait_background: bool = False,
              **audit) -> AppTest:
    """``page`` after the app's first run, with ``frame`` loaded (the demo when None) and the
    audit settings ``audit`` over the defaults. ``wait_background``: poll until no caption says
    work is running in the background (the m curve, the spread), at most 300 s."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    if frame is not None:
        from components.data_summary import mapping_defaults

        at.session_state["raw_frame"] = frame
        at.session_state["source_name"] = "upload.csv"
        at.session_state["columns"] = {r: c for r, c in mapping_defaults(frame).items() if c}
        at.session_state["table"] = load_comparisons(frame)
    at.session_state["audit"] = {**AuditConfig.defaults(), "encoder": None, **audit}
    at.switch_page(page).run()
    assert not at.exception, at.exception
    if wait_background:
        # each page run pauses background jobs while it answers and draws
        # (components.audit_runs.DRAW_S), so poll slower than that, as the page's fragments do
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and any(
                "in the background" in c.value for c in at.caption):
            time.sleep(2.0)
            at.run()
        assert not at.exception, at.exception
    return at
