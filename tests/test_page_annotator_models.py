"""The Annotators page's latent-truth model section under Streamlit's AppTest: metrics, the
model table, MACE, a confusion matrix with its flags, the consensus changes, CROWDLAB with the
app's audit (hashing test encoder), markup in names shown as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from puaudit.annotators import simulate_votes
from puaudit.data.schema import load_comparisons

pytestmark = pytest.mark.usefixtures("app_env")

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "annotators.py")


def _metric(at, label):
    return [m.value for m in at.metric if m.label == label][0]


def _frame_with(at, column):
    return [d.value for d in at.dataframe if column in d.value.columns][0]


@pytest.fixture(scope="module")
def planted():
    df, info = simulate_votes(200, random_state=6)
    return df, info


def _page(df):
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.session_state["table"] = load_comparisons(df)
    at.run()
    assert not at.exception, at.exception
    return at


def test_model_section_shows_skill_flags_confusion_and_consensus(planted):
    df, info = planted
    at = _page(df)
    assert not at.error, [e.value for e in at.error]
    assert 0 < float(_metric(at, "Fleiss' kappa")) < 1
    n_diff = int(_metric(at, "Consensus differs from majority"))
    assert int(_metric(at, "Flagged by the model")) >= 3
    table = _frame_with(at, "Skill")
    assert {"Skill 95% CI", "Position bias", "Length bias", "Cohen's kappa",
            "Model flags"} <= set(table.columns)
    rows = table.set_index("Annotator")
    assert rows.loc["random_01", "Model flags"].startswith("spammer")
    assert rows.loc["good_01", "Skill"] > 0.7
    changes = _frame_with(at, "majority")
    assert len(changes) == n_diff and {"model", "confidence", "prompt"} <= set(changes.columns)
    summary = _frame_with(at, "agree_judge_common")
    assert summary["consensus"].tolist() == ["majority vote", "Dawid-Skene"]
    pick = [s for s in at.selectbox if s.label == "Confusion matrix of"][0]
    pick.select("always_a_01").run()
    assert not at.exception
    assert any("position-biased" in w.value for w in at.warning)
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert spec["data"][0]["type"] == "heatmap" and "always_a_01" in spec["layout"]["title"]["text"]


def test_switching_to_mace_and_the_statistic(planted):
    df, _ = planted
    at = _page(df)
    model = [s for s in at.selectbox if s.label == "Model"][0]
    assert model.options == ["Dawid-Skene", "MACE", "CROWDLAB"]
    model.select("mace").run()
    assert not at.exception and not at.error
    assert "Competence" in _frame_with(at, "Skill").columns
    stat = [r for r in at.radio if r.label == "Model statistic"][0]
    stat.set_value("length_bias").run()
    assert not at.exception
    fig = json.loads(at.get("plotly_chart")[2].proto.spec)
    assert "Length bias" in fig["layout"]["xaxis"]["title"]["text"]


def test_crowdlab_uses_the_apps_audit(planted):
    df, _ = planted
    at = AppTest.from_file(str(Path(PAGE).parents[1] / "app.py"), default_timeout=240)
    at.run()
    at.file_uploader[0].upload("votes.csv", df.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception, at.exception
    at.switch_page("pages/annotators.py").run()
    assert not at.exception, at.exception
    [s for s in at.selectbox if s.label == "Model"][0].select("crowdlab").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert "Weight" in _frame_with(at, "Skill").columns
    assert _frame_with(at, "agree_judge_common")["consensus"].tolist()[1] == "CROWDLAB"


def test_one_vote_per_item_explains_instead_of_failing():
    df, _ = simulate_votes(60, random_state=1)
    at = _page(df.drop_duplicates("question_id"))
    assert not at.error
    assert any("two or more votes" in i.value for i in at.info)


def test_markup_in_annotator_names_is_text(planted):
    df, _ = planted
    bad = df.assign(annotator=df["annotator"].str.replace(
        "good_01", "<a href='http://x'>good_01</a>![](http://x/i.png)", regex=False))
    at = _page(bad)
    assert not at.error
    for chart in at.get("plotly_chart"):
        spec = chart.proto.spec
        assert "<a href" not in spec and "<img" not in spec
    [s for s in at.selectbox if s.label == "Confusion matrix of"][0].select(
        "<a href='http://x'>good_01</a>![](http://x/i.png)").run()
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert "&lt;a href" in spec["layout"]["title"]["text"]
