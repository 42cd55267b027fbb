"""pages/consistency.py under Streamlit's AppTest: demo default, uploads, errors, inspector, the
Data page's table (e.g. the output of ``puaudit judge``), weighting, score rules, rescaling."""

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from puaudit.percents import shown_change

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
    assert method.value == "bidirectional"
    assert method.options == ["bidirectional", "weighted", "ppl", "baseline"]
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


# --- the Data page's table: puaudit judge -> the Consistency page --------------------------------
@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """puaudit judge on the stub: 4 questions x 4 candidates, both orders, scores."""
    from puaudit.cli.commands import main
    from tests.judge_stub import StubJudgeServer, stub_answers

    d = tmp_path_factory.mktemp("judged")
    stub_answers(n_candidates=4, n_questions=4).to_csv(d / "answers.csv", index=False)
    with StubJudgeServer() as stub:
        rc = main(["judge", str(d / "answers.csv"), "--endpoint", stub.url, "--model", "stub",
                   "--both-orders", "--scores", "-o", str(d / "pairs.csv"), "--no-progress"])
    assert rc == 0
    from puaudit.data.io import read_table
    return read_table(d / "pairs.csv"), (d / "pairs.scores.csv").read_bytes()


def _with_data_page(frame, name, sha="0" * 64):
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["raw_frame"] = frame
    at.session_state["source_name"] = name
    at.session_state["source_sha256"] = sha
    return at


def _metric(at, label):
    return [m for m in at.metric if m.label == label][0]


def test_uses_the_data_page_table_when_it_fits(judged):
    from puaudit.trustjudge import analyse

    frame, score_bytes = judged
    at = _with_data_page(frame, "pairs.csv")
    at.run()
    assert not at.exception and not at.error
    assert [r.value for r in at.radio if r.label == "Pairwise table"] == ["data"]
    assert any("Data page: pairs.csv · 24 pairs" in c.value for c in at.caption)
    assert not any("token log-probabilities" in c.value for c in at.caption)  # ppl columns given
    method = [s for s in at.selectbox if s.label == "Aggregation (after)"][0]
    assert method.options == ["bidirectional", "weighted", "ppl", "baseline"]
    before, after = analyse(frame, method="baseline"), analyse(frame, method="bidirectional")
    assert _metric(at, "NTR_5").value == "n/a"  # 4 candidates per question
    for k in (3, 4):
        m = _metric(at, f"NTR_{k}")
        assert float(m.value.rstrip("%")) == pytest.approx(100 * after.ntr[k], abs=0.05)
        # the change as the two percents read (issue 39: a change equals their difference)
        assert float(m.delta.split()[0]) == shown_change(before.ntr[k], after.ntr[k])
    assert before.ntr[3] > after.ntr[3]
    assert _metric(at, "Conflict Ratio").value == "n/a"  # no scores for a Data page table

    # with the scores uploaded: CR before/after, score rule, rescaling
    at.file_uploader[1].set_value(("pairs.scores.csv", score_bytes, "text/csv")).run()
    assert not at.exception and not at.error
    scores = read_table_bytes(score_bytes)
    cr_after = analyse(frame, scores, method="bidirectional").cr
    cr_before = analyse(frame, scores, method="baseline").cr
    assert _pct(at, "Conflict Ratio") == pytest.approx(100 * cr_after, abs=0.05)
    assert float(_metric(at, "Conflict Ratio").delta.split()[0]) == shown_change(cr_before,
                                                                                  cr_after)
    rule = [s for s in at.selectbox if s.label == "Score rule (after)"][0]
    assert rule.value == "distribution" and rule.options == ["distribution", "geval", "baseline"]
    rule.set_value("geval").run()
    cr_geval = analyse(frame, scores, method="bidirectional", score_method="geval").cr
    assert _pct(at, "Conflict Ratio") == pytest.approx(100 * cr_geval, abs=0.05)
    [s for s in at.selectbox if s.label == "Score rule (after)"][0].set_value("distribution").run()
    [c for c in at.checkbox if c.label == "Rescale distribution scores"][0].check().run()
    [n for n in at.number_input if n.label == "Score tolerance"][0].set_value(0.3).run()
    assert not at.exception and not at.error
    cr_rescaled = analyse(frame, scores, method="bidirectional", rescale_to=(1, 5), tol=0.3).cr
    assert _pct(at, "Conflict Ratio") == pytest.approx(100 * cr_rescaled, abs=0.05)
    assert any("rescaled to 1–5" in e.label for e in at.expander)

    # the exp(−γ·PPL) weighting
    [s for s in at.selectbox if s.label == "Aggregation (after)"][0].set_value("weighted").run()
    [n for n in at.number_input if n.label == "Confidence γ"][0].set_value(3.0).run()
    assert not at.exception and not at.error
    w = analyse(frame, scores, method="weighted", gamma=3.0, rescale_to=(1, 5), tol=0.3)
    assert _pct(at, "NTR_4") == pytest.approx(100 * w.ntr[4], abs=0.05)
    assert _pct(at, "Conflict Ratio") == pytest.approx(100 * w.cr, abs=0.05)


def read_table_bytes(data):
    from puaudit.data.io import read_table
    return read_table(data, name="scores.csv")


def test_generated_audit_demo_is_offered_not_preferred():
    from puaudit.data.demo import generate_demo

    at = _with_data_page(generate_demo(n_rows=200, random_state=0), "demo data (generated)", None)
    at.run()
    assert not at.exception and not at.error
    src = [r for r in at.radio if r.label == "Pairwise table"][0]
    assert src.value == "demo"
    assert src.options == ["Data page: demo data (generated)", "Generated TrustJudge demo"]
    src.set_value("data").run()
    assert not at.exception and not at.error
    assert [s for s in at.selectbox if s.label == "Aggregation (after)"][0].options == ["baseline"]


def test_data_page_table_that_does_not_fit_says_why():
    frame = pd.DataFrame({"prompt": ["p"], "response_a": ["a"], "response_b": ["b"],
                          "judge_winner": ["A"], "note": ["*not* markdown"]})
    at = _with_data_page(frame, "my_[table](http://x).csv")
    at.run()
    assert not at.exception and not at.error
    assert not [r for r in at.radio if r.label == "Pairwise table"]  # only the demo
    reason = [c.value for c in at.caption if c.value.startswith("The Data page")]
    assert len(reason) == 1 and "no column for question_id" in reason[0]
    assert "my\\_\\[table\\](http" in reason[0]  # data-derived text escaped: no link


def test_perplexity_from_token_logprobs_on_the_page(judged):
    frame, _ = judged
    at = _with_data_page(frame.drop(columns=["ppl_1", "ppl_2"]), "pairs.csv")
    at.run()
    assert not at.exception and not at.error
    assert any("computed from the judge's token log-probabilities" in c.value for c in at.caption)
    method = [s for s in at.selectbox if s.label == "Aggregation (after)"][0]
    assert method.options == ["bidirectional", "weighted", "ppl", "baseline"]
    method.set_value("ppl").run()
    assert not at.exception and not at.error
