"""pages/annotators.py under Streamlit's AppTest: table from the app, annotator column choice,
drill-down, export and the demo fallback."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from puaudit.data.schema import load_comparisons
from tests.test_annotators_agreement import hand_frame

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "annotators.py")


def _metric(at, label):
    return [m.value for m in at.metric if m.label == label][0]


def test_page_with_the_apps_table():
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["table"] = load_comparisons(hand_frame())
    at.run()
    assert not at.exception and not at.error
    assert _metric(at, "Annotators") == "4" and _metric(at, "Items with 2+ votes") == "4"
    shown = at.dataframe[0].value
    assert shown["Annotator"].tolist() == ["LLM judge", "p1", "p2", "p3", "p4"]
    # the annotator report and the latent-truth model's report (tests/test_page_annotator_models)
    assert len(at.get("download_button")) == 2
    assert len(at.get("plotly_chart")) == 4
    who = [s for s in at.selectbox if s.label == "Annotator"][0]
    who.select("p3").run()
    assert not at.exception
    assert any("1 row(s) where p3" in m.value for m in at.markdown)
    dis = [d.value for d in at.dataframe if "vote" in d.value.columns][0]
    assert dis["row"].tolist() == [3] and dis["vote"].tolist() == ["B"]
    assert len(at.expander) >= 1


def test_page_asks_for_the_annotator_column():
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["table"] = load_comparisons(hand_frame().rename(columns={"annotator": "who"}))
    at.run()
    assert not at.exception
    # an optional column: an info note pointing to the Data page's mapping, not a red error
    # naming a CLI flag and a Python dict (issue 39)
    assert not at.error
    note = " ".join(i.value for i in at.info)
    assert "no annotator column" in note and "Column mapping on the Data page" in note
    assert "--annotator-col" not in note and "columns={" not in note
    col = [s for s in at.sidebar.selectbox if s.label == "Annotator column"][0]
    col.select("who").run()
    assert not at.exception and not at.error
    assert _metric(at, "Annotators") == "4"


def test_page_falls_back_to_the_demo():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception and not at.error
    assert any("demo" in c.value for c in at.caption)
    assert int(_metric(at, "Annotators")) >= 2
    assert at.dataframe[0].value["Role"].tolist()[0] == "judge"
