"""pages/models.py under Streamlit's AppTest: the four rankings on the demo data and on the real
MT-Bench and LLMFAO files, the options, and the message when model columns are missing.

The audit behind the "audited" source runs with the hashing test encoder (no model)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from puaudit.data.schema import load_comparisons
from tests.conftest import SHARED

pytestmark = pytest.mark.usefixtures("app_env")


PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "models.py")
LLMFAO = SHARED / "data" / "llmfao" / "llmfao_crowd_vs_gpt4.csv"


def _metric(at, label):
    return [m.value for m in at.metric if m.label == label][0]


def _load(at, frame, name):
    table = load_comparisons(frame)
    at.session_state["raw_frame"] = frame
    at.session_state["source_name"] = name
    at.session_state["columns"] = dict(table.columns)
    at.session_state["table"] = table


def _sidebar(at, kind, label):
    return [w for w in getattr(at.sidebar, kind) if w.label == label][0]


def test_demo_four_rankings_figures_and_download():
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.run()
    assert not at.exception and not at.error
    assert _metric(at, "Models") == "5" and _metric(at, "Comparisons") == "600"
    ranks = at.dataframe[0].value
    for s in ("Judge", "Audited", "Human", "PPI"):
        assert f"{s} rank" in ranks.columns
    assert ranks["Model"].nunique() == 5
    assert len(at.get("plotly_chart")) == 3
    assert len(at.get("download_button")) == 1
    # Options: no audit, ties left out, length control on.
    _sidebar(at, "checkbox", "Include the audited verdicts").uncheck()
    _sidebar(at, "checkbox", "Length-controlled win rate").check()
    _sidebar(at, "radio", "Ties").set_value("exclude")
    at.run()
    assert not at.exception and not at.error
    assert "Audited rank" not in at.dataframe[0].value.columns
    assert any("No audited verdicts" in i.value for i in at.info)
    value = [r for r in at.radio if r.label == "Value shown"][0]
    assert "Length-controlled win rate" in value.options
    value.set_value("lc_winrate").run()
    assert not at.exception
    assert "PPI lc_winrate" in at.dataframe[0].value.columns


def test_missing_model_columns_message():
    frame = pd.DataFrame({"prompt": ["p1", "p2", "p3"], "response_a": ["a", "bb", "c"],
                          "response_b": ["x", "y", "zz"], "judge_winner": ["A", "B", "tie"]})
    at = AppTest.from_file(PAGE, default_timeout=120)
    _load(at, frame, "no-models.csv")
    at.run()
    assert not at.exception
    assert at.error and "model_a" in at.error[0].value and "Data page" in at.error[0].value
    assert not at.get("plotly_chart")


def test_judge_only_table_ranks_without_audit():
    from puaudit.rankings.simulate import simulate_comparisons

    df, _ = simulate_comparisons(300, n_models=4, label_share=0.0, random_state=0)
    frame = pd.DataFrame({"prompt": [f"q{i}" for i in range(len(df))],
                          "response_a": ["a" * int(v) for v in df["length_a"]],
                          "response_b": ["b" * int(v) for v in df["length_b"]],
                          "model_a": df["model_a"], "model_b": df["model_b"],
                          "judge_winner": df["judge_winner"]})
    at = AppTest.from_file(PAGE, default_timeout=300)
    _load(at, frame, "judge-only.csv")
    at.run()
    assert not at.exception and not at.error
    assert at.warning and "audit could not run" in at.warning[0].value
    ranks = at.dataframe[0].value
    assert "Judge rank" in ranks.columns and "PPI rank" not in ranks.columns
    assert any("No human verdicts" in i.value for i in at.info)


@pytest.mark.slow
def test_mtbench_page(mtbench_path):
    from puaudit.data.io import read_table

    at = AppTest.from_file(PAGE, default_timeout=600)
    _load(at, read_table(mtbench_path), mtbench_path.name)
    at.run()
    assert not at.exception and not at.error
    assert _metric(at, "Models") == "6"
    ranks = at.dataframe[0].value
    assert ranks["Model"].iloc[0] == "gpt-4"
    assert ranks[["Judge rank", "Audited rank", "Human rank", "PPI rank"]].notna().all().all()
    # Every MT-Bench row has a human vote: PPI adds nothing, and the page says so.
    assert any("nothing for the judge to add" in i.value for i in at.info)
    # GPT-4 judging GPT-4: its win rate is above the people's interval.
    dis = at.dataframe[1].value
    assert "gpt-4" in dis["model"].tolist()


@pytest.mark.slow
def test_llmfao_page_many_models():
    if not LLMFAO.exists():
        pytest.skip("../shared/data is not present")
    from puaudit.data.io import read_table

    at = AppTest.from_file(PAGE, default_timeout=600)
    _load(at, read_table(LLMFAO), LLMFAO.name)
    at.session_state["models_draws"] = 200
    at.run()
    assert not at.exception and not at.error
    assert int(_metric(at, "Models")) >= 50
    ranks = at.dataframe[0].value
    assert ranks[["Judge rank", "Audited rank", "Human rank", "PPI rank"]].notna().all().all()
    assert (ranks["Human vs judge"].abs() >= 10).any()  # GPT-4 and the crowd disagree a lot


def test_reachable_from_the_app():
    app = str(Path(PAGE).parents[1] / "app.py")
    at = AppTest.from_file(app, default_timeout=300)
    at.run()
    assert not at.exception
    at.session_state["models_audited"] = False
    at.switch_page("pages/models.py").run()
    assert not at.exception and not at.error
    assert at.title[0].value == "Models"
    assert "PPI rank" in at.dataframe[0].value.columns


def test_sixty_models_heatmap_selector_and_captions():
    import json

    from puaudit.rankings.simulate import simulate_comparisons

    df, _ = simulate_comparisons(3000, n_models=60, label_share=0.3, random_state=2)
    frame = pd.DataFrame({"prompt": [f"q{i}" for i in range(len(df))],
                          "response_a": ["a" * int(v) for v in df["length_a"]],
                          "response_b": ["b" * int(v) for v in df["length_b"]],
                          "model_a": df["model_a"], "model_b": df["model_b"],
                          "judge_winner": df["judge_winner"], "human_winner": df["human_winner"]})
    at = AppTest.from_file(PAGE, default_timeout=300)
    _load(at, frame, "sixty.csv")
    at.session_state["models_audited"] = False
    at.session_state["models_draws"] = 200
    at.run()
    assert not at.exception and not at.error

    def heatmap():  # the last chart's trace (its z is binary-encoded; y holds the models)
        spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
        return spec["data"][0], spec["layout"]["title"]["text"]

    cell, title = heatmap()
    assert len(cell["y"]) == 30 and title.endswith("the top 30 of 60 models by the "
                                                   "Prediction-powered (judge + humans) ranking")
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Showing the top 30 of 60 models") for c in captions)
    assert any("Shown: the top 50 of 60 models" in c for c in captions)  # the rank chart
    [n] = [w for w in at.number_input if w.label == "Models in the heatmap"]
    n.set_value(60).run()
    cell, title = heatmap()
    assert len(cell["y"]) == 60 and title.endswith("all 60 models")
    assert any(c.startswith("Showing all 60 models") for c in (c.value for c in at.caption))
