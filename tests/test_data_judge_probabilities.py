"""Each judge's own probabilities: which columns are whose (prefixed, unprefixed for the default
judge only, ``puaudit judge``'s names as they are), the two-order rule against hand-computed
values, and no judge ever reading another's probabilities."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.evidence import verdict_evidence
from puaudit.data.judge_probabilities import (default_judge_column, judge_confidence,
                                              judge_probabilities, owner_of_probability_columns,
                                              probability_columns)
from puaudit.data.schema import load_comparisons


def _frame(**cols):
    n = len(next(iter(cols.values())))
    return pd.DataFrame({"prompt": [f"q{i}" for i in range(n)],
                         "response_a": [f"answer a {i}" for i in range(n)],
                         "response_b": [f"answer b {i}" for i in range(n)], **cols})


def _two_judges():
    return _frame(judge_winner=["A", "B", "A"], judge_winner_mistral=["B", "B", "tie"],
                  p_A=[0.9, 0.2, 0.7], p_B=[0.1, 0.8, 0.3],
                  judge_winner_mistral_p_A=[0.3, 0.4, 0.2],
                  judge_winner_mistral_p_B=[0.6, 0.5, 0.2],
                  judge_winner_mistral_p_tie=[0.1, 0.1, 0.6])


def test_each_judge_reads_its_own_columns_and_the_default_judge_the_unprefixed():
    df = _two_judges()
    assert default_judge_column(df.columns) == "judge_winner"
    own, note = probability_columns(df.columns, "judge_winner_mistral")
    assert note == "" and own == {1: {"a": "judge_winner_mistral_p_A",
                                      "b": "judge_winner_mistral_p_B",
                                      "tie": "judge_winner_mistral_p_tie"}}
    plain, note = probability_columns(df.columns, "judge_winner")
    assert note == "" and plain == {1: {"a": "p_A", "b": "p_B"}}
    np.testing.assert_allclose(
        judge_confidence(load_comparisons(df, judge_column="judge_winner_mistral")),
        [0.6, 0.5, 0.6])
    # no p_tie: the tie gets 0
    np.testing.assert_allclose(judge_confidence(load_comparisons(df)), [0.9, 0.8, 0.7])


def test_another_judges_unprefixed_probabilities_are_refused_with_what_to_do():
    df = _two_judges().drop(columns=[c for c in _two_judges() if c.startswith("judge_winner_m")
                                     and "_p_" in c])
    t = load_comparisons(df, judge_column="judge_winner_mistral")
    assert judge_confidence(t) is None
    probs = judge_probabilities(df, "judge_winner_mistral")
    assert not probs and probs.columns == []
    (msg,) = probs.messages
    assert "p_A, p_B describe the default judge 'judge_winner'" in msg
    assert "judge_winner_mistral_p_A, judge_winner_mistral_p_B" in msg
    ev = verdict_evidence(t)
    assert "p_chosen" not in ev.values and "p_entropy" not in ev.values
    assert any("describe the default judge" in m for m in ev.messages)


def test_puaudit_judge_names_are_read_as_they_are_and_both_orders_merge():
    # ``puaudit judge --both-orders`` into judge2_winner: order 2 showed the answers swapped
    df = _frame(judge_winner=["A", "A", "B"], judge2_winner=["A", "B", "tie"],
                judge2_winner_p1_A=[0.8, 0.3, 0.2], judge2_winner_p1_B=[0.1, 0.6, 0.3],
                judge2_winner_p1_tie=[0.1, 0.1, 0.5],
                judge2_winner_p2_A=[0.2, 0.7, ""], judge2_winner_p2_B=[0.6, 0.2, ""],
                judge2_winner_p2_tie=[0.2, 0.1, ""])
    cols, _ = probability_columns(df.columns, "judge2_winner")
    assert sorted(cols) == [1, 2] and cols[2]["a"] == "judge2_winner_p2_A"
    probs = judge_probabilities(df, "judge2_winner")
    # order 2's A is the table's B
    np.testing.assert_allclose(probs.by_order[2][:2], [[0.6, 0.2, 0.2], [0.2, 0.7, 0.1]])
    np.testing.assert_allclose(probs.mean(), [[0.7, 0.15, 0.15], [0.25, 0.65, 0.1],
                                              [0.2, 0.3, 0.5]])
    np.testing.assert_allclose(probs.of_verdicts(["A", "B", "tie"]), [0.7, 0.65, 0.5])
    np.testing.assert_allclose(judge_confidence(load_comparisons(df, judge_column="judge2_winner")),
                               [0.7, 0.65, 0.5])
    # the default judge has no probability of its own here, and reads none of judge2's
    assert judge_confidence(load_comparisons(df)) is None


def test_prefixed_columns_win_and_spellings_follow_the_old_readers():
    df = _frame(judge_winner=["A", "B"], p_A=[0.9, 0.1], p_B=[0.1, 0.9],
                judge_winner_prob_a=[0.6, 0.45], judge_winner_prob_b=[0.4, 0.55])
    cols, _ = probability_columns(df.columns, "judge_winner")
    assert cols == {1: {"a": "judge_winner_prob_a", "b": "judge_winner_prob_b"}}
    np.testing.assert_allclose(judge_confidence(load_comparisons(df)), [0.6, 0.55])
    cols, _ = probability_columns(["judge_winner", "p_A_1", "p_B_1", "P_A_2", "p_b_2"],
                                  "judge_winner")
    assert cols == {1: {"a": "p_A_1", "b": "p_B_1"}, 2: {"a": "P_A_2", "b": "p_b_2"}}


def test_a_malformed_column_names_its_row_and_the_judge_keeps_its_verdicts():
    df = _frame(judge_winner=["A", "B", "A"], judge_winner_p_A=[0.9, "high", 0.5],
                judge_winner_p_B=[0.1, 0.2, 0.5])
    probs = judge_probabilities(df, "judge_winner")
    assert not probs
    assert "Column 'judge_winner_p_A' row 2: 'high' is not a number" in probs.messages[0]
    assert judge_confidence(load_comparisons(df)) is None


def test_a_rule_judge_and_empty_rows_read_no_probability():
    df = _frame(judge_winner=["A", "B", "A"], p_A=[0.9, "", 0.4], p_B=[0.1, "", 0.6])
    conf = judge_confidence(load_comparisons(df))
    assert conf[0] == pytest.approx(0.9) and np.isnan(conf[1]) and conf[2] == pytest.approx(0.4)
    from puaudit.data.schema import apply_judge_rule
    assert judge_confidence(apply_judge_rule(load_comparisons(df), "position-a")) is None


def test_unprefixed_columns_belong_to_the_default_judge_only_when_it_is_a_stage():
    cols = ["p_A", "p_B", "judge_winner_mistral_p_A", "prompt"]
    assert owner_of_probability_columns(cols, ["judge_winner", "judge_winner_mistral"],
                                        default_judge="judge_winner") == {
        "p_A": "judge_winner", "p_B": "judge_winner"}
    got = owner_of_probability_columns(["p_A", "p_B"], ["judge_winner_mistral"],
                                       default_judge="judge_winner")
    assert got == {}
