"""One format per kind of number across pages: changes in points (as on the Audit page), no
"None" cells, no arrow on an unchanged number; radar panels and cycle-graph labels that do not
sit on each other."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from puaudit.report.figures.consistency import cycle_graph
from puaudit.report.figures.metrics import as_percent
from puaudit.percents import points
from puaudit.report.figures.radar import consistency_radar, radar_frame

PER_TYPE = {"coding": {"n": 40, "cons_orig": 0.5304, "cons_adj": 0.6304, "delta": 0.1},
            "writing": {"n": 0, "cons_orig": None, "cons_adj": None, "delta": None}}


def test_radar_table_in_points_with_no_none():
    df = radar_frame({"judge": PER_TYPE})
    row = df.set_index("question_type").loc["coding"]
    assert row["delta_pts"] == pytest.approx(10.0)  # "+10.0 pts", as the Audit page says
    assert row["cons_orig_pct"] == pytest.approx(53.04) and row["cons_adj_pct"] == pytest.approx(63.04)
    empty = df.set_index("question_type").loc["writing"]
    assert all(isinstance(v, float) and math.isnan(v)
               for v in empty[["cons_orig_pct", "cons_adj_pct", "delta_pts"]])
    assert "None" not in df.astype(str).to_numpy().ravel().tolist()
    assert df[["cons_orig_pct", "cons_adj_pct", "delta_pts"]].dtypes.eq(float).all()


def test_no_arrow_on_an_unchanged_number():
    assert points(0.0) is None and points(0.0004) is None
    assert points(None) is None and points(float("nan")) is None
    assert points(0.1) == "+10.0 pts" and points(-0.0234) == "-2.3 pts"


def test_radar_panels_leave_room_for_their_labels():
    fig = consistency_radar({"judge": PER_TYPE, "judge padded": PER_TYPE})
    left, right = fig.layout.polar.domain.x, fig.layout.polar2.domain.x
    gap = right[0] - left[1]
    assert gap >= 0.25, (left, right)  # room for the angular labels of both circles


def test_cycle_graph_labels_point_away_from_the_arrows():
    names = ["alpha", "beta", "gamma", "delta", "epsilon"]
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            rows.append({"judge": "j", "question_id": "q", "candidate_i": a, "candidate_j": b,
                         "relation": ">", "verdict_1": "A", "verdict_2": "B", "prob_i": 0.6,
                         "prob_j": 0.3, "prob_tie": 0.1, "margin": 0.3})
    rel = pd.DataFrame(rows)
    viol = pd.DataFrame(columns=["judge", "question_id", "cand_1", "cand_2", "cand_3", "kind"])
    fig = cycle_graph(rel, viol, judge="j", question_id="q")
    nodes = fig.data[-1]
    for x, y, where in zip(nodes.x, nodes.y, nodes.textposition):
        # the label lies on the far side of its node from the centre
        if where.startswith("top"):
            assert y > 0
        elif where.startswith("bottom"):
            assert y < 0
        elif where.endswith("right"):
            assert x > 0
        else:
            assert where.endswith("left") and x < 0
    assert fig.layout.xaxis.range[1] - 1 >= 0.8  # labels beyond the unit circle stay in view


def test_shares_shown_as_percent_with_one_decimal():
    df = pd.DataFrame({"cons_orig": [0.6304, 0.25, None], "n": [3, 4, 5]})
    shown = as_percent(df, ["cons_orig"])
    assert shown["cons_orig"].tolist()[:2] == pytest.approx([63.04, 25.0])
    assert math.isnan(shown["cons_orig"].iloc[2]) and shown["n"].tolist() == [3, 4, 5]
    assert ["%.1f%%" % v for v in shown["cons_orig"][:2]] == ["63.0%", "25.0%"]
    assert df["cons_orig"].iloc[0] == 0.6304  # the builder's table is left as it was



def test_headline_has_no_arrow_when_the_audit_changes_nothing():
    from types import SimpleNamespace

    from puaudit.report.figures.metrics import headline_metrics

    base = {"cons_orig": 0.53, "cons_orig_ci": (0.5, 0.56), "cons_adj_ci": (0.5, 0.56),
            "n_reversed": 0, "n": 300, "reversal_precision": float("nan")}
    for delta, shown in ((0.0, None), (0.0004, None), (-0.0004, None), (0.021, "+2.1 pts"),
                         (-0.047, "-4.7 pts")):
        result = SimpleNamespace(metrics={**base, "cons_adj": 0.53 + delta, "delta": delta})
        cards = {c["label"]: c for c in headline_metrics(result)}
        assert cards["Cons_adj"]["delta"] == shown, delta  # st.metric draws no arrow for None
        assert cards["Reversal precision"]["value"] == "n/a"  # not "nan%" nor "None"
