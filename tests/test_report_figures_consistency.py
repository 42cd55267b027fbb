"""Figures and tables of the Consistency page."""

import numpy as np
import pandas as pd
import pytest

from puaudit.report.figures.consistency import (
    cycle_graph,
    metrics_bar_chart,
    metrics_table,
    question_violations,
    weakest_edges,
)
from puaudit.trustjudge import analyse, make_demo


@pytest.fixture(scope="module")
def reports():
    pairs, scores = make_demo(n_questions=8, n_candidates=5, random_state=3)
    return analyse(pairs, scores), analyse(pairs, scores, method="bidirectional")


def test_metrics_table_holds_both_stages(reports):
    before, after = reports
    t = metrics_table(before, after, by="judge")
    assert set(t["stage"]) == {"before (baseline)", "after (bidirectional)"}
    assert set(t["metric"]) == {"CR", "NTR_3", "NTR_4", "NTR_5"}
    assert len(t) == 2 * 2 * 4  # stages x judges x metrics
    row = t[(t["group"] == "judge-small") & (t["metric"] == "NTR_3") & (t["stage"] == "before (baseline)")]
    assert row["value"].iloc[0] == pytest.approx(before.per_judge["judge-small"]["ntr"][3])
    by_type = metrics_table(before, after, by="type")
    assert set(by_type["group"]) == set(before.per_type)


def test_metrics_bar_chart_has_one_trace_per_stage_and_panel(reports):
    before, after = reports
    fig = metrics_bar_chart(metrics_table(before, after), by="judge")
    assert {tr.name for tr in fig.data} == {"before (baseline)", "after (bidirectional)"}
    assert len(fig.data) == 2 * 4
    total = sum(float(np.nansum(tr.y)) for tr in fig.data)
    t = metrics_table(before, after)
    assert total == pytest.approx(100 * t["value"].sum())


def test_metrics_bar_chart_drops_undefined_cr():
    pairs, _ = make_demo(n_questions=4, n_candidates=4)
    rep = analyse(pairs)  # no scores: CR undefined; 4 candidates: NTR_5 undefined
    fig = metrics_bar_chart(metrics_table(rep, rep))
    shown = {tr.hovertemplate.split("metric=")[1].split("<br>")[0] for tr in fig.data}
    assert shown == {"NTR_3", "NTR_4"} and len(fig.data) == 2 * 2


def _cycle_report():
    df = pd.DataFrame({"judge": ["j"] * 4, "question_id": ["q"] * 4,
                       "candidate_i": ["a", "b", "a", "a"], "candidate_j": ["b", "c", "c", "d"],
                       "verdict_1": ["A", "A", "B", "A"], "verdict_2": ["B", "B", "A", "B"],
                       "p1_A": [0.9, 0.55, 0.1, 0.8], "p1_B": [0.1, 0.45, 0.9, 0.2],
                       "p1_tie": [0, 0, 0, 0], "p2_A": [0.1, 0.45, 0.8, 0.1],
                       "p2_B": [0.9, 0.55, 0.2, 0.9], "p2_tie": [0, 0, 0, 0],
                       "rationale_1": ["a is <better>", "", "", ""]})
    return analyse(df, method="bidirectional")


def test_weakest_edge_and_triples_of_a_cycle():
    rep = _cycle_report()  # a > b (0.9), b > c (0.55), c > a (0.85): b > c is weakest
    w = weakest_edges(rep.violations, judge="j", question_id="q")
    assert w["edge"].tolist() == ["b > c"] and w["n_triples"].tolist() == [1]
    assert w["margin"].iloc[0] == pytest.approx(0.1)
    t = question_violations(rep.violations, judge="j", question_id="q")
    assert t["triple"].tolist() == ["a > b > c > a"] and t["kind"].tolist() == ["strict cycle"]
    assert weakest_edges(rep.violations, judge="j", question_id="zz").empty


def test_cycle_graph_highlights_cycle_edges_and_shows_hover():
    rep = _cycle_report()
    fig = cycle_graph(rep.relations, rep.violations, judge="j", question_id="q", rankings=rep.rankings)
    arrows = fig.layout.annotations
    assert len(arrows) == 4  # every pair is strict
    red = [a for a in arrows if a.arrowcolor == "#d62728"]
    assert len(red) == 3  # the a-b-c cycle; a -> d stays grey
    assert max(a.arrowwidth for a in arrows) == 5  # weakest edge drawn thickest
    hover = [t for t in fig.data[0].hovertext]
    assert len(hover) == 4
    first = hover[0]
    assert "order 1 (a shown first): A (P A/B/tie 0.90/0.10/0.00)" in first
    assert "order 2 (b shown first): B" in first
    assert "rationale 1:</i> a is &lt;better&gt;" in first
    nodes = fig.data[-1]
    assert [t.split(" ")[0] for t in nodes.text] == ["a", "b", "c", "d"]
    assert nodes.text[-1] == "d (#4)"  # d loses its only comparison: ranked last


def test_source_and_option_helpers():
    from puaudit.report.figures.consistency import (
        default_score_method,
        method_options,
        pairwise_fit,
        score_options,
    )

    assert method_options(has_probabilities=True, has_perplexity=True) == [
        "bidirectional", "weighted", "ppl", "baseline"]
    assert method_options(has_probabilities=False, has_perplexity=True) == ["weighted", "ppl", "baseline"]
    assert method_options(has_probabilities=False, has_perplexity=False) == ["baseline"]
    assert score_options(True) == ["distribution", "geval", "baseline"] and score_options(False) == ["baseline"]
    assert default_score_method("weighted", True) == "distribution"
    assert default_score_method("baseline", True) == default_score_method("ppl", False) == "baseline"
    pairs, _ = make_demo(n_questions=2, n_candidates=3, random_state=0)
    ok, reason = pairwise_fit(pairs, name="t")
    assert reason is None and ok.attrs["has_probabilities"]
    none, reason = pairwise_fit(pairs.drop(columns=["verdict_1"]), name="t")
    assert none is None and "verdict_1" in reason


def test_candidate_scores_before_and_after(reports):
    from puaudit.report.figures.consistency import candidate_scores

    pairs, scores = make_demo(n_questions=8, n_candidates=5, random_state=3)
    before, after = reports
    t = candidate_scores(before, after)
    assert list(t.columns) == ["judge", "question_id", "candidate", "score before (baseline)",
                               "score after (distribution)"]
    assert len(t) == 2 * 8 * 5
    row = t.iloc[0]
    from puaudit.trustjudge import read_scores, score_table
    s = read_scores(scores)
    s["d"] = score_table(s, method="distribution")
    mine = s[(s["question_id"] == row["question_id"]) & (s["candidate"] == row["candidate"])
             & (s["judge"].isna() | (s["judge"] == row["judge"]))]
    assert row["score after (distribution)"] == pytest.approx(mine["d"].iloc[0])
    empty = candidate_scores(analyse(pairs), analyse(pairs))
    assert list(empty.columns) == ["judge", "question_id", "candidate"] and empty.empty
