"""pages/consistency.py under Streamlit's AppTest: demo default, uploads, errors, inspector."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "consistency.py")
PRD = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "prd_vicuna80" / "prd_vicuna80_pairwise.csv"


def _pct(at, label):
    return float([m.value for m in at.metric if m.label == label][0].rstrip("%"))


@pytest.fixture(scope="module")
def demo_page():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    return at


def test_demo_runs_and_aggregation_lowers_inconsistency(demo_page):
    at = demo_page
    assert not at.exception and not at.error
    method = [s for s in at.selectbox if s.label == "Aggregation (after)"][0]
    assert method.value == "bidirectional" and method.options == ["bidirectional", "ppl", "baseline"]
    deltas = {m.label: m.delta for m in at.metric}
    assert set(deltas) == {"Conflict Ratio", "NTR_3", "NTR_4", "NTR_5"}
    assert all(d.startswith("-") for d in deltas.values())  # after < before everywhere
    assert len(at.get("plotly_chart")) == 3
    assert len(at.get("download_button")) == 2
    assert any("Suggested weakest edge" in m.value for m in at.markdown)


def test_inspector_switches_to_baseline_and_question(demo_page):
    at = demo_page
    at.radio[0].set_value("before (baseline)").run()
    assert not at.exception
    q = [s for s in at.selectbox if s.label.startswith("Question")][0]
    q.set_value("q24").run()
    assert [s for s in at.selectbox if s.label.startswith("Question")][0].value == "q24"
    assert not at.exception and not at.error


def test_bad_upload_shows_error_not_traceback():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.file_uploader[0].set_value(("bad.csv", b"question_id,candidate_i,candidate_j,verdict_1\n1,x,y,maybe\n",
                                   "text/csv")).run()
    assert not at.exception
    assert len(at.error) == 1 and "verdict 'maybe'" in at.error[0].value


@pytest.mark.skipif(not PRD.exists(), reason="shared PRD data not available")
def test_prd_upload_uses_baseline_only():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.file_uploader[0].set_value(("prd.csv", PRD.read_bytes(), "text/csv")).run()
    assert not at.exception and not at.error
    assert [s for s in at.selectbox if s.label == "Aggregation (after)"][0].options == ["baseline"]
    assert _pct(at, "NTR_3") == pytest.approx(28.2)
    assert [m.value for m in at.metric if m.label == "Conflict Ratio"][0] == "n/a"
