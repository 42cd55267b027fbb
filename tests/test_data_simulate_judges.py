"""Simulated judges with their own probabilities: the AUROC asked for is the AUROC measured on
the labelled rows, one probability per item, and the columns follow the convention."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from puaudit.data.judge_probabilities import judge_confidence
from puaudit.data.schema import load_comparisons
from puaudit.data.simulate_judges import (add_judge_probabilities, simulated_confidence,
                                          simulated_judge)


@pytest.mark.parametrize("auroc", [0.65, 0.75, 0.85])
def test_the_auroc_asked_for_is_measured_on_the_labelled_rows(auroc):
    rng = np.random.default_rng(0)
    items = np.repeat(np.arange(600), 2)            # two votes per item, sometimes disagreeing
    agree = (rng.random(1200) < 0.75).astype(float)
    agree[1::2] = np.where(rng.random(600) < 0.8, agree[::2], 1 - agree[::2])
    agree[1000:] = np.nan                           # unlabelled rows
    p = simulated_confidence(agree, items, auroc=auroc, random_state=1)
    known = np.isfinite(agree)
    assert roc_auc_score(agree[known], p[known]) == pytest.approx(auroc, abs=0.005)
    assert np.array_equal(p[::2], p[1::2])          # one probability per item
    assert p.min() >= 0.34 and p.max() <= 0.999
    assert np.array_equal(p, simulated_confidence(agree, items, auroc=auroc, random_state=1))


def test_columns_follow_the_convention_and_read_back_as_the_confidence():
    df = pd.DataFrame({"prompt": ["q0", "q1", "q2"], "response_a": ["a0", "a1", "a2"],
                       "response_b": ["b0", "b1", "b2"], "judge_winner": ["A", "B", "tie"],
                       "judge_winner_weak": ["B", "B", "A"]})
    conf = np.array([0.9, 0.6, 0.5])
    out = add_judge_probabilities(df, "judge_winner_weak", conf)
    assert list(out.columns[-3:]) == ["judge_winner_weak_p_A", "judge_winner_weak_p_B",
                                      "judge_winner_weak_p_tie"]
    np.testing.assert_allclose(out[out.columns[-3:]].sum(axis=1), 1.0)
    np.testing.assert_allclose(out["judge_winner_weak_p_B"], [0.9, 0.6, 0.4])
    np.testing.assert_allclose(
        judge_confidence(load_comparisons(out, judge_column="judge_winner_weak")), conf)
    plain = add_judge_probabilities(df, "judge_winner", conf, prefix="")
    assert {"p_A", "p_B", "p_tie"} <= set(plain.columns)
    np.testing.assert_allclose(judge_confidence(load_comparisons(plain)), conf)
    assert df.columns.tolist() == out.columns.tolist()[:5]   # the input is kept, not edited


def test_a_simulated_judge_is_right_at_its_accuracy_one_verdict_per_item():
    rng = np.random.default_rng(2)
    items = np.repeat(np.arange(2000), 3)
    human = np.where(rng.random(6000) < 0.5, "A", "B").astype(object)
    v = simulated_judge(human, items, accuracy=0.8, random_state=3)
    assert set(v) <= {"A", "B"}
    assert (v[::3] == v[1::3]).all() and (v[::3] == v[2::3]).all()
    a = (human == "A").reshape(-1, 3).sum(axis=1)
    major = np.where(a >= 2, "A", "B")
    assert np.mean(v[::3] == major) == pytest.approx(0.8, abs=0.025)
