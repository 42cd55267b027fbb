"""Score rules, score-table reading and the Conflict Ratio on hand-made cases."""

import json

import numpy as np
import pandas as pd
import pytest

from puaudit.errors import PUAuditError
from puaudit.trustjudge import (
    analyse,
    conflict_ratio,
    expected_relation,
    read_scores,
    score_baseline,
    score_distribution,
    score_geval,
    score_table,
)


def test_scores_on_a_normalised_distribution():
    d = {1: 0.2, 2: 0.3, 3: 0.5}
    assert score_baseline(d) == 3
    assert score_geval(d) == pytest.approx(2.3)
    assert score_distribution(d) == pytest.approx(2.3)


def test_geval_is_not_normalised_but_distribution_is():
    d = {1: 0.1, 2: 0.1, 3: 0.3}  # mass 0.5 on the allowed tokens
    assert score_geval(d) == pytest.approx(0.1 + 0.2 + 0.9)
    assert score_distribution(d) == pytest.approx(1.2 / 0.5)
    assert score_baseline(d) == 3


def test_fully_confident_judge_scores_that_token():
    assert score_distribution({1: 0.0, 2: 0.0, 3: 1.0, 4: 0.0}) == 3
    assert score_distribution({7: 0.9}) == 7          # other tokens missing, mass not 1
    assert score_distribution({100: 1.0}, rescale_to=(1, 5), scale=(1, 100)) == pytest.approx(5)


def test_rescaling_from_fine_scale():
    d = {1: 0.5, 100: 0.5}                            # expectation 50.5 on 1-100
    assert score_distribution(d) == pytest.approx(50.5)
    assert score_distribution(d, rescale_to=(1, 5)) == pytest.approx(1 + 49.5 * 4 / 99)
    assert score_distribution({1: 1.0}, rescale_to=(1, 10), scale=(1, 100)) == pytest.approx(1)


def test_baseline_argmax_tie_takes_lowest_token():
    assert score_baseline({1: 0.4, 2: 0.4, 3: 0.2}) == 1


def test_expected_relation_and_conflict_ratio_hand_case():
    rel = np.array([">", "=", ">", "<", "=", ">"], dtype=object)
    s_i = np.array([5, 3, 4, 2, 4, np.nan])
    s_j = np.array([3, 3, 4, 5, 2, 1])
    assert list(expected_relation(s_i, s_j)) == [">", "=", "=", "<", ">", None]
    cr, log = conflict_ratio(rel, s_i, s_j, log=True)
    # conflicts: equal scores with a strict verdict (idx 2), a tie between different scores (idx 4)
    assert log["n_pairs"] == 5 and log["n_conflicts"] == 2 and cr == pytest.approx(0.4)
    assert list(log["conflict"]) == [False, False, True, False, True, False]
    # with tol=2 the differences of 2 count as equal
    assert conflict_ratio(rel, s_i, s_j, tol=2) == pytest.approx(2 / 5)
    assert conflict_ratio(rel[:0], s_i[:0], s_j[:0]) is None


def test_read_scores_distribution_columns_with_empty_cell():
    df = read_scores(pd.DataFrame({"question_id": ["1", "1"], "model": ["x", "y"],
                                   "p_1": ["0.5", ""], "p_2": ["0.5", "1.0"], "p_3": ["", ""]}))
    assert df["distribution"].iloc[0] == {1.0: 0.5, 2.0: 0.5, 3.0: 0.0}
    assert list(score_table(df, method="distribution")) == [1.5, 2.0]
    assert list(score_table(df, method="baseline")) == [1.0, 2.0]
    assert df["judge"].isna().all()


def test_read_scores_json_distribution_and_plain_score():
    df = read_scores(pd.DataFrame({"question_id": ["1", "1"], "candidate": ["x", "y"],
                                   "score_distribution": [json.dumps({"1": 0.25, "3": 0.75}), ""],
                                   "score": ["", "2"]}))
    assert list(score_table(df, method="baseline")) == [3.0, 2.0]
    with pytest.raises(PUAuditError, match="row 2 has none"):
        score_table(df, method="geval")


@pytest.mark.parametrize("frame, match", [
    ({"question_id": ["1"], "candidate": ["x"], "p_1": ["0"], "p_2": ["0"]}, "no mass"),
    ({"question_id": ["1"], "candidate": ["x"], "p_1": ["-0.1"], "p_2": ["1"]}, "negative"),
    ({"question_id": ["1"], "candidate": ["x"]}, "no score column"),
    ({"question_id": ["1", "1"], "candidate": ["x", "x"], "score": ["1", "2"]}, "second time"),
    ({"question_id": ["1"], "candidate": ["x"], "score": ["good"]}, "not a number"),
    ({"question_id": ["1"], "candidate": ["x"], "score_distribution": ["{1: 2"]}, "not valid JSON"),
])
def test_read_scores_errors(frame, match):
    with pytest.raises(PUAuditError, match=match):
        read_scores(pd.DataFrame(frame))


def _pairs():
    return pd.DataFrame({"judge": ["j"] * 3, "question_id": ["q"] * 3,
                         "candidate_i": ["a", "a", "b"], "candidate_j": ["b", "c", "c"],
                         "verdict_1": ["A", "A", "A"], "verdict_2": ["B", "B", "B"]})


def test_analyse_conflict_ratio_with_shared_and_per_judge_scores():
    # a > b, a > c, b > c; scores a=3, b=3, c=1 -> a vs b conflicts (equal scores, strict verdict)
    shared = pd.DataFrame({"question_id": ["q"] * 3, "candidate": ["a", "b", "c"],
                           "score": ["3", "3", "1"]})
    rep = analyse(_pairs(), shared)
    assert rep.cr == pytest.approx(1 / 3) and rep.per_judge["j"]["cr"] == pytest.approx(1 / 3)
    assert rep.per_type["all"]["n_conflicts"] == 1
    # scores given for this judge override shared ones; the distribution separates a from b
    own = pd.DataFrame({"judge": ["j"] * 3, "question_id": ["q"] * 3, "candidate": ["a", "b", "c"],
                        "p_1": ["0", "0", "1"], "p_2": ["0", "0.4", "0"], "p_3": ["1", "0.6", "0"]})
    assert analyse(_pairs(), own, score_method="baseline").cr == pytest.approx(1 / 3)
    assert analyse(_pairs(), own, score_method="distribution").cr == 0.0


def test_unscored_candidates_are_not_counted():
    scores = pd.DataFrame({"question_id": ["q", "q"], "candidate": ["a", "b"], "score": ["2", "1"]})
    rep = analyse(_pairs(), scores)
    assert rep.per_judge["j"]["n_pairs"] == 1 and rep.cr == 0.0
    other = pd.DataFrame({"question_id": ["zz"], "candidate": ["a"], "score": ["2"]})
    assert analyse(_pairs(), other).cr is None
