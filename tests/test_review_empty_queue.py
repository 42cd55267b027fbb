"""The Review page says why the queue is empty: on a fully annotated table every row already
has a human verdict (not "nothing left with these filters")."""

import pytest
from streamlit.testing.v1 import AppTest

from components.data_summary import mapping_defaults
from components.review import empty_queue_text
from puaudit.audit.config import AuditConfig
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("PUAUDIT_REVIEW_URL", raising=False)
    monkeypatch.setenv("PUAUDIT_REVIEW_DB", str(tmp_path / "review.sqlite"))


def _fully_annotated():
    frame = generate_demo(n_rows=200, random_state=3)
    frame["human_winner"] = frame["true_winner"]  # every row judged by a person
    return frame


def test_fully_annotated_table_says_every_row_has_a_human_verdict(db):
    frame = _fully_annotated()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.session_state["raw_frame"] = frame
    at.session_state["source_name"] = "annotated.csv"
    at.session_state["columns"] = {r: c for r, c in mapping_defaults(frame).items() if c}
    at.session_state["table"] = load_comparisons(frame)
    at.session_state["audit"] = {**AuditConfig.defaults(), "encoder": None, "scorer": "centroid"}
    at.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    boxes = [s.value for s in at.success]
    assert any(b.startswith("Nothing to review: every row the judge decided already has a "
                            "human verdict") for b in boxes), boxes
    assert not any("with these filters" in b for b in boxes)


def test_empty_queue_reasons():
    import numpy as np
    import pandas as pd

    class R:  # only the split matters
        split = np.array(["unlabelled"] * 3 + ["P", "validation", "excluded"], dtype=object)

    empty = pd.DataFrame(columns=["key"])
    assert empty_queue_text(R, empty, filtered=True).startswith(
        "None of the 3 rows without a human verdict matches these filters")
    assert empty_queue_text(R, pd.DataFrame({"key": [1, 2, 3]}), filtered=False).startswith(
        "You have decided every row in your queue (3 rows)")
    R.split = np.array(["P", "validation", "excluded"], dtype=object)
    assert "(2 annotated rows; 1 left out" in empty_queue_text(R, empty, filtered=False)
