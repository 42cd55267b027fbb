"""The Data page's "Other judges" picker (the name heuristic preselected, a choice names the
columns) and the Audit page's table of each other judge's agreement and weight."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from puaudit.audit.config import AuditConfig
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")


def _frame() -> pd.DataFrame:
    frame = generate_demo(n_rows=240, random_state=0)
    rng = np.random.default_rng(0)
    human = frame["human_winner"].to_numpy()
    frame["judge_winner_gpt35"] = np.where(rng.random(len(frame)) < 0.8, human, "A")
    frame["second_opinion"] = np.where(rng.random(len(frame)) < 0.7, human, "B")
    return frame


def _page(path: str, frame: pd.DataFrame, **audit) -> AppTest:
    from components.data_summary import mapping_defaults

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.session_state["raw_frame"] = frame
    at.session_state["source_name"] = "upload.csv"
    at.session_state["columns"] = {r: c for r, c in mapping_defaults(frame).items() if c}
    at.session_state["data_version"] = 3
    at.session_state["table"] = load_comparisons(frame)
    if audit:
        at.session_state["audit"] = {**AuditConfig.defaults(), "encoder": None, **audit}
    at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def test_data_page_preselects_the_heuristic_and_a_choice_names_the_judges():
    at = _page("pages/data.py", _frame())
    pick = next(m for m in at.multiselect if m.label == "Other judges")
    assert pick.value == ["judge_winner_padded", "judge_winner_gpt35"]  # names saying judge
    assert "second_opinion" in pick.options and "judge_winner" not in pick.options
    assert at.session_state["audit"]["other_judges"] is None  # untouched: the heuristic
    pick.set_value(["second_opinion"]).run()
    assert not at.exception, at.exception
    assert at.session_state["audit"]["other_judges"] == ("second_opinion",)
    pick = next(m for m in at.multiselect if m.label == "Other judges")
    pick.set_value([]).run()
    assert at.session_state["audit"]["other_judges"] == ()   # none


def test_audit_page_shows_each_other_judges_agreement_and_weight():
    at = _page("pages/audit.py", _frame(), other_judges=("judge_winner_gpt35", "second_opinion"),
               scorer="evidence")
    shown = [d.value for d in at.dataframe]
    table = next(d for d in shown if "agreement" in d.columns and "weight" in d.columns)
    assert list(table["judge"]) == ["judge_winner_gpt35", "second_opinion"]
    assert (table["agreement_lo"] <= table["agreement"]).all()
    assert (table["agreement"] <= table["agreement_hi"]).all()
    assert table["weight"].notna().all()


def test_certify_section_runs_a_cascade_and_shows_its_funnel():
    at = _page("pages/audit.py", _frame(), target_agreement=0.8, risk=0.1)
    pick = next(m for m in at.multiselect if m.label == "Judges, cheapest first")
    assert "rule:longer" in pick.options and "judge_winner_gpt35" in pick.options
    pick.set_value(["judge_winner_gpt35", "judge_winner"]).run()
    assert not at.exception, at.exception
    stages = next(d.value for d in at.dataframe if "share asked" in str(d.proto)
                  or "asked" in d.value.columns)
    assert list(stages["stage"]) == ["1. judge_winner_gpt35", "2. judge_winner", "people"]
    assert stages.loc[0, "asked"] == 1.0
    assert any("Coverage" in m.value and "guarantee" in m.value for m in at.markdown)
    assert any(b.label.startswith("Download the cascade's export") for b in at.get("download_button"))
    # certified together by default; each stage on its own on request, where a stage's trusted
    # share is what its own certification trusted
    how = next(r for r in at.radio if r.label == "Certify the trusted rows")
    assert how.value == "joint"
    assert any("certified together" in m.value for m in at.markdown)
    how.set_value("per-stage").run()
    assert not at.exception, at.exception
    assert any("each stage certified on its own" in m.value for m in at.markdown)
    alone = next(d.value for d in at.dataframe if "trusted_alone" in d.value.columns)
    np.testing.assert_allclose(alone["trusted"][:2], alone["trusted_alone"][:2])
    np.testing.assert_allclose(alone["trusted_alone"][:2], stages["trusted_alone"][:2])
    # a budget needs the joint test: off while each stage certifies on its own
    budget = next(s for s in at.select_slider if s.label.startswith("Budget"))
    assert budget.disabled and budget.value is None
    how.set_value("joint").run()
    budget = next(s for s in at.select_slider if s.label.startswith("Budget"))
    assert not budget.disabled
    budget.set_value(1.0).run()
    assert not at.exception, at.exception
    spent = next(d.value for d in at.dataframe if "n_handed_on" in d.value.columns)
    # judge 2 asked about every routed row: stage 1 sent all it certified on as well
    assert spent.loc[1, "asked"] == 1.0
    assert spent.loc[0, "n_handed_on"] > 0 or stages.loc[1, "asked"] == 1.0
