"""Annotator figures: display table, agreement chart, bias scatter, disagreements."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit.report.figures.annotators import (
    JUDGE_COLOR,
    agreement_figure,
    annotator_table,
    bias_scatter,
    disagreements_table,
)
from puaudit.annotators.agreement import annotator_report
from puaudit.data.schema import load_comparisons
from tests.test_annotators_agreement import hand_frame


@pytest.fixture(scope="module")
def table():
    return load_comparisons(hand_frame())


@pytest.fixture(scope="module")
def report(table):
    return annotator_report(table, min_votes_flag=1)


def test_annotator_table_keeps_numbers_sortable(report):
    t = annotator_table(report)
    assert t["Annotator"].tolist() == report.annotators["annotator"].astype(str).tolist()
    assert t["Role"].tolist() == ["judge", "person", "person", "person", "person"]
    assert pd.api.types.is_float_dtype(t["Agree peers"])
    p2 = t[t["Annotator"] == "p2"].iloc[0]
    assert p2["Agree peers"] == 0.5 and p2["Agree peers n"] == 1 and p2["Votes"] == 3
    row = report.annotators[report.annotators["annotator"] == "p2"].iloc[0]
    assert p2["Pick A 95% CI"] == f"[{row['pick_a_share_lo']:.2f}, {row['pick_a_share_hi']:.2f}]"
    # a missing share shows an empty interval, not "nan"
    assert t[t["Annotator"] == "p4"].iloc[0]["Agree peers 95% CI"] == ""
    assert t[t["Annotator"] == "LLM judge"].iloc[0]["Agree judge 95% CI"] == ""
    assert t["Flags"].map(type).eq(str).all()


def test_agreement_figure_sorted_with_judge_highlighted(report):
    fig = agreement_figure(report, metric="agree_peers", median=0.5)
    names = {tr.name: tr for tr in fig.data}
    assert set(names) == {"people", "LLM judge"}
    judge = names["LLM judge"]
    assert judge.marker.color == JUDGE_COLOR and list(judge.y) == ["LLM judge"]
    assert judge.x[0] == pytest.approx(4 / 6)
    people = names["people"]
    assert list(people.y) == ["p3", "p1", "p2"]  # sorted by agree_peers; p4 has none
    df = report.annotators.set_index("annotator")
    np.testing.assert_allclose(people.error_x.array, df.loc[["p3", "p1", "p2"], "agree_peers_hi"]
                               - df.loc[["p3", "p1", "p2"], "agree_peers"])
    assert list(fig.layout.yaxis.categoryarray) == ["p3", "p1", "p2", "LLM judge"]
    # agree_judge: the judge has no value of its own; min_n drops small annotators
    fig = agreement_figure(report, metric="agree_judge", min_n=3)
    assert [tr.name for tr in fig.data] == ["people"] and list(fig.data[0].y) == ["p3"]
    with pytest.raises(ValueError):
        agreement_figure(report, metric="nope")


def test_bias_scatter_points_and_error_bars(report):
    fig = bias_scatter(report)
    pts = {t: (x, y) for tr in fig.data for t, x, y in zip(tr.text, tr.x, tr.y)}
    assert set(pts) == {"LLM judge", "p1", "p2", "p3", "p4"}
    assert pts["p3"] == pytest.approx((2 / 3, 0.5))
    assert pts["LLM judge"] == pytest.approx((0.75, 0.25))
    judge = [tr for tr in fig.data if tr.name == "LLM judge"][0]
    assert judge.marker.symbol == "diamond"
    for tr in fig.data:
        assert (np.asarray(tr.error_x.array) >= 0).all()
        assert (np.asarray(tr.error_y.arrayminus) >= 0).all()


def test_disagreements_table(table):
    d = disagreements_table(table, "p3")
    # p3: r2 disagrees with the judge; r6 has no judge verdict, r10 a judge tie.
    assert d["row"].tolist() == [3]
    assert d.iloc[0][["vote", "judge", "consensus"]].tolist() == ["B", "A", "A"]
    assert d.iloc[0]["response_a"] == "x" * 10 and d.iloc[0]["response_b"] == "y" * 20
    assert disagreements_table(table, "p4")["row"].tolist() == [9]
    assert disagreements_table(table, "p1").empty
    # the judge: items whose strict consensus differs from it (item 5: people U, judge V)
    j = disagreements_table(table, "LLM judge")
    assert j["row"].tolist() == [9] and j.iloc[0][["vote", "judge"]].tolist() == ["B", "A"]
