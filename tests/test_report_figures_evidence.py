"""The evidence on screen: the weights table and figure, the note, the signals of the rows nearest
each threshold, and the Audit and Scores pages showing them (hashing test encoder)."""

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from puaudit.report.figures.evidence import (evidence_note, evidence_weights_figure,
                                             evidence_weights_frame)
from puaudit.report.figures.scores import nearest_threshold_rows
from puaudit.audit.config import AuditConfig
from puaudit.audit.stages import audit_table
from tests.conftest import ROOT
from tests.test_audit_evidence import _position_planted


@pytest.fixture(scope="module")
def audited():
    table, emb, _ = _position_planted(n=900, seed=2)
    return table, audit_table(table, emb, AuditConfig(calibration_bags=5))


def test_weights_frame_orders_by_size_and_says_the_direction(audited):
    _, res = audited
    df = evidence_weights_frame(res)
    assert df["coef"].abs().is_monotonic_decreasing
    top = df.iloc[0]
    assert top["feature"] == "position_first"
    assert top["signal"] == "judge picked the first-shown answer"
    # negative in the full fit and across the fold fits' range
    assert top["direction"] == "judge more likely wrong" and top["lo"] <= top["hi"] < 0
    fig = evidence_weights_figure(res, top=3)
    assert list(fig.data[0].y)[-1] == top["signal"]  # largest drawn at the top
    assert len(fig.data[0].x) == 3


def test_note_names_the_signals_and_the_choice(audited):
    _, res = audited
    note = evidence_note(res)
    assert "position_first" in note and "gives this audit's P(judge right)" in note


def test_nearest_rows_carry_their_evidence(audited):
    table, res = audited
    near = nearest_threshold_rows(res, table, k=3)
    assert not near.empty
    col = "evidence: position_first"
    np.testing.assert_array_equal(near[col].to_numpy(),
                                  (table.judge[near["row"].to_numpy() - 1] == "A").astype(float))


def test_audit_and_scores_pages_show_the_evidence(app_env):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.run()
    at.switch_page("pages/audit.py").run()
    assert not at.exception, at.exception
    labels = [e.label for e in at.expander]
    assert any(label.startswith("Verdict evidence") for label in labels), labels
    at.switch_page("pages/scores.py").run()
    assert not at.exception, at.exception
    frames = [d.value for d in at.dataframe]
    assert any(any(c.startswith("evidence: ") for c in f.columns) for f in frames)
