"""Pair relations: baseline, bidirectional and perplexity rules on hand-computed cases."""

import math

import numpy as np
import pandas as pd
import pytest

from puaudit.errors import PUAuditError
from puaudit.trustjudge import (
    aggregate_probabilities,
    normalise_verdict,
    pair_relations,
    read_pairwise,
    relation_baseline,
    relation_bidirectional,
    relation_ppl,
)

NAN = math.nan


@pytest.mark.parametrize("v1, v2, expected", [
    ("A", "B", ">"),       # i first and wins; j first, second-shown (i) wins
    ("B", "A", "<"),
    ("A", "A", "="),       # position bias: first-shown wins both times
    ("B", "B", "="),
    ("tie", "B", "="),
    ("A", "tie", "="),
    ("tie", "tie", "="),
    ("A", None, ">"),      # one order only: its verdict
    ("B", None, "<"),
    ("tie", None, "="),
    (None, "B", ">"),
    (None, "A", "<"),
])
def test_baseline_relation(v1, v2, expected):
    assert list(relation_baseline([v1], [v2])) == [expected]


def test_aggregate_sums_swapped_orders_and_missing_letter_counts_zero():
    p1 = np.array([[0.6, 0.3, 0.1], [0.7, 0.3, NAN]])
    p2 = np.array([[0.2, 0.7, 0.1], [0.5, NAN, 0.2]])
    P, n = aggregate_probabilities(p1, p2)
    # P[i] = P1[A] + P2[B], P[j] = P1[B] + P2[A], P[tie] = P1[tie] + P2[tie]
    np.testing.assert_allclose(P, [[1.3, 0.5, 0.2], [0.7, 0.8, 0.2]])
    assert list(n) == [2, 2]


@pytest.mark.parametrize("p1, p2, delta, expected", [
    ([0.6, 0.3, 0.1], [0.2, 0.7, 0.1], 0.0, ">"),     # margin (1.3 - 0.5)/2 = 0.4
    ([0.6, 0.3, 0.1], [0.2, 0.7, 0.1], 0.39, ">"),
    ([0.6, 0.3, 0.1], [0.2, 0.7, 0.1], 0.41, "="),
    ([0.7, 0.3, NAN], [0.5, NAN, 0.2], 0.0, "<"),     # P = (0.7, 0.8, 0.2), margin 0.05
    ([0.7, 0.3, NAN], [0.5, NAN, 0.2], 0.06, "="),
    ([0.1, 0.1, 0.8], [0.1, 0.2, 0.7], 0.0, "="),     # tie is the argmax
    ([0.5, 0.4, 0.1], [NAN, NAN, NAN], 0.08, ">"),   # one order: margin 0.1, not halved
    ([0.5, 0.4, 0.1], [NAN, NAN, NAN], 0.2, "="),
    ([0.5, 0.5, 0.0], [NAN, NAN, NAN], 0.0, "="),    # exact top tie
])
def test_bidirectional_relation(p1, p2, delta, expected):
    assert list(relation_bidirectional(np.array([p1]), np.array([p2]), delta=delta)) == [expected]


def test_bidirectional_is_symmetric_under_swapping_candidates():
    rng = np.random.default_rng(0)
    p1 = rng.dirichlet([1, 1, 1], 200)
    p2 = rng.dirichlet([1, 1, 1], 200)
    fwd = relation_bidirectional(p1, p2, delta=0.05)
    # swapping i and j exchanges the two orders
    back = relation_bidirectional(p2, p1, delta=0.05)
    flip = {">": "<", "<": ">", "=": "="}
    assert [flip[r] for r in fwd] == list(back)


@pytest.mark.parametrize("v1, v2, q1, q2, delta, expected", [
    ("A", "A", 2.0, 3.0, 0.0, ">"),   # order 1 more confident: A = i
    ("A", "A", 3.0, 2.0, 0.0, "<"),   # order 2 more confident: A = j
    ("tie", "B", 1.5, 4.0, 0.0, "="),
    ("A", "A", 2.0, 2.4, 0.5, "="),   # |PPL1 - PPL2| <= delta
    ("A", "A", 2.0, 2.0, 0.0, "="),
])
def test_ppl_relation(v1, v2, q1, q2, delta, expected):
    assert list(relation_ppl([v1], [v2], [q1], [q2], delta=delta)) == [expected]


@pytest.mark.parametrize("raw, canon", [
    ("A", "A"), ("a", "A"), ("model_a", "A"), ("Model_A", "A"), ("1", "A"), (1, "A"), (1.0, "A"),
    ("[[A]]", "A"), ("B", "B"), ("model_b", "B"), ("2", "B"), ("TIE", "tie"), ("Tie", "tie"),
    ("draw", "tie"), ("tie (inconsistent)", "tie"), ("", None), (None, None), (NAN, None),
])
def test_normalise_verdict(raw, canon):
    assert normalise_verdict(raw) == canon


def test_normalise_verdict_rejects_unknown_with_column_and_row():
    with pytest.raises(PUAuditError, match="verdict_1.*row 3") as err:
        normalise_verdict("maybe", column="verdict_1", row=3)
    assert err.value.column == "verdict_1" and err.value.row == 3


def _table(**extra):
    base = {"question": ["q1", "q1", "q1"], "model_a": ["x", "x", "y"], "model_b": ["y", "z", "z"],
            "winner": ["model_a", "TIE", "2"]}
    base.update(extra)
    return pd.DataFrame(base)


def test_read_pairwise_detects_aliases_and_defaults():
    df = read_pairwise(_table(**{"Prob_1_A": ["0.7", "0.2", ""], "prob_1_b": ["0.2", "0.2", ""],
                                 "prob_1_tie": ["0.1", "0.6", ""]}))
    assert list(df["verdict_1"]) == ["A", "tie", "B"]
    assert list(df["verdict_2"]) == [None, None, None]
    assert list(df["judge"]) == ["judge"] * 3 and list(df["category"]) == ["all"] * 3
    np.testing.assert_allclose(df["p1_A"].to_numpy()[:2], [0.7, 0.2])
    assert np.isnan(df["p1_A"].iloc[2]) and np.isnan(df["p2_A"]).all()
    assert df.attrs["has_probabilities"]


def test_pair_relations_bidirectional_falls_back_to_baseline_without_probabilities():
    df = read_pairwise(_table(p1_A=["0.7", "0.2", ""], p1_B=["0.2", "0.2", ""],
                              p1_tie=["0.1", "0.6", ""]))
    rel, log = pair_relations(df, method="bidirectional", log=True)
    assert list(rel["relation"]) == [">", "=", "<"]
    assert log["n_fallback"] == 1
    np.testing.assert_allclose(rel[["prob_i", "prob_j", "prob_tie"]].to_numpy()[0], [0.7, 0.2, 0.1])
    np.testing.assert_allclose(rel["margin"].to_numpy(), [0.5, 0.4, 1.0])


def test_baseline_margin_is_negative_for_disagreeing_orders():
    df = read_pairwise(pd.DataFrame({"question_id": ["q"], "candidate_i": ["x"], "candidate_j": ["y"],
                                     "verdict_1": ["A"], "verdict_2": ["A"]}))
    rel = pair_relations(df)
    assert rel["relation"].iloc[0] == "="
    np.testing.assert_allclose(rel[["prob_i", "prob_j", "prob_tie"]].to_numpy()[0], [0.5, 0.5, 0.0])
    assert rel["margin"].iloc[0] == pytest.approx(-0.5)


def test_likelihood_methods_need_their_columns():
    df = read_pairwise(_table())
    with pytest.raises(PUAuditError, match="p1_A"):
        pair_relations(df, method="bidirectional")
    with pytest.raises(PUAuditError, match="ppl_1"):
        pair_relations(df, method="ppl")
    with pytest.raises(PUAuditError, match="Unknown method"):
        pair_relations(df, method="magic")


@pytest.mark.parametrize("change, match", [
    ({"model_b": ["y", "x", "z"]}, "compares 'x' with itself"),
    ({"model_b": ["y", "y", "x"]}, "repeats the pair x / y"),
    ({"winner": ["A", "perhaps", "B"]}, "verdict 'perhaps'"),
    ({"p1_A": ["0.5", "1.7", ""]}, "outside \\[0, 1\\]"),
    ({"p1_A": ["0.5", "high", ""]}, "not a number"),
    ({"ppl_1": ["2", "-1", ""], "ppl_2": ["2", "2", "2"]}, "perplexity must be positive"),
    ({"question": ["q1", "", "q1"]}, "empty at row 2"),
])
def test_read_pairwise_errors_name_the_row(change, match):
    with pytest.raises(PUAuditError, match=match):
        read_pairwise(_table(**change))


def test_read_pairwise_missing_column_lists_columns():
    with pytest.raises(PUAuditError, match="no column for candidate_j.*Columns found"):
        read_pairwise(pd.DataFrame({"question_id": ["1"], "candidate_i": ["x"], "verdict_1": ["A"]}))


def test_read_pairwise_from_csv_bytes():
    csv = b"question_id,candidate_i,candidate_j,verdict_1,verdict_2\n1,x,y,A,B\n1,x,z,b,\n"
    df = read_pairwise(csv)
    assert list(pair_relations(df)["relation"]) == [">", "<"]


def test_rows_repeating_a_judgment_are_one_pair_and_the_other_listing_is_the_other_order():
    # one row per human vote: the judge's verdict repeated, the pair sometimes listed y / x
    df = read_pairwise(pd.DataFrame({
        "question": ["q1"] * 5, "human_judge": ["h1", "h2", "h3", "h4", "h5"],
        "model_a": ["x", "x", "y", "x", "y"], "model_b": ["y", "y", "x", "z", "z"],
        "judge_winner": ["model_a", "model_a", "model_b", "tie", "model_a"]}))
    assert df.attrs["merged_repeats"] == 2
    assert list(df["row"]) == [1, 4, 5]  # each pair keeps its first row's place and number
    first = df.iloc[0]
    # row 3 showed y first and picked B = x: the same preference, in the other order
    assert (first["candidate_i"], first["verdict_1"], first["verdict_2"]) == ("x", "A", "B")
    assert list(pair_relations(df)["relation"]) == [">", "=", ">"]


def test_a_pair_whose_rows_disagree_in_the_same_order_names_the_row():
    frame = pd.DataFrame({"question": ["q1"] * 4, "model_a": ["x", "x", "x", "y"],
                          "model_b": ["y", "z", "y", "x"],
                          "winner": ["A", "B", "A", "A"]})  # row 4: y first, picked y
    assert read_pairwise(frame.iloc[:3]).attrs["merged_repeats"] == 1
    with pytest.raises(PUAuditError, match="row 3 repeats the pair x / y .* same answer order"):
        read_pairwise(frame.assign(winner=["A", "B", "B", "A"]))  # rows 1 and 3 disagree
    df = read_pairwise(frame)  # row 4 (y first, picked y) is the other order: no clash
    assert (df["verdict_1"].iloc[0], df["verdict_2"].iloc[0]) == ("A", "A")
    assert pair_relations(df)["relation"].iloc[0] == "="  # the order decided


def test_each_turn_is_its_own_question():
    df = read_pairwise(pd.DataFrame({"question_id": ["81"] * 4, "turn": [1, 1, 2, 2],
                                     "model_a": ["x", "y", "x", "y"],
                                     "model_b": ["y", "z", "y", "z"],
                                     "winner": ["A", "A", "B", "A"]}))
    assert df.attrs["merged_repeats"] == 0
    assert list(df["question_id"]) == ["81 · turn 1"] * 2 + ["81 · turn 2"] * 2
    one_turn = read_pairwise(pd.DataFrame({"question_id": ["81"], "turn": [1], "model_a": ["x"],
                                           "model_b": ["y"], "winner": ["A"]}))
    assert list(one_turn["question_id"]) == ["81"]
