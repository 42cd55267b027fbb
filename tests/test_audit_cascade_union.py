"""The cascade's union certified by one fixed-sequence test (puaudit.audit.certify.cascade): the
rule against a brute-force count, one judge equal to the single-judge certification, the fold
rule, p_ratio = 1, and validity against known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from puaudit.audit.certify.cascade import certify_union, choose_union_share, union_sources
from puaudit.audit.certify.judge import certify_folds
from puaudit.audit.certify.sequence import choose_share, lower_bound, share_grid
from puaudit.errors import PUAuditError


def _draw(n=1500, seed=0, *, asked_below=0.85):
    """Two judges with known P(right) per row; judge 2 is asked where judge 1's is below
    ``asked_below`` (a label-free rule); outcomes drawn from those probabilities."""
    rng = np.random.default_rng(seed)
    t1 = np.clip(rng.beta(6, 2, n), 0.01, 0.99)
    t2 = np.clip(rng.beta(8, 2, n), 0.01, 0.99)
    prob = np.vstack([t1, np.where(t1 < asked_below, t2, np.nan)])
    correct = (rng.random((2, n)) < np.vstack([t1, t2])).astype(float)
    role = rng.choice(np.array(["P", "validation", "unlabelled"]), size=n, p=[0.3, 0.4, 0.3])
    items = np.array([f"i{j}" for j in range(n)])
    return prob, correct, role, items, certify_folds(items, random_state=seed), (t1, t2)


def test_each_candidate_counts_the_last_judge_reaching_the_threshold():
    rng = np.random.default_rng(3)
    n = 60
    prob = np.vstack([rng.uniform(0.4, 1, n), rng.uniform(0.4, 1, n)])
    prob[1, ::4] = np.nan                                    # judge 2 not asked there
    correct = (rng.random((2, n)) < 0.8).astype(float)
    src = union_sources(prob, correct, np.arange(n).astype(str), np.arange(n))
    out = choose_union_share([src], target=0.7, risk=0.1, floor=0.45, log=True)
    # brute force: every grid share, its most confident items by the best probability
    c = np.nanmax(prob, axis=0)
    order = np.argsort(-c, kind="stable")
    for step in out["path"]:
        m = math.ceil(step["share"] * n - 1e-9)
        tau = c[order[m - 1]]
        k = 0.0
        for i in order[:m]:
            last = max(j for j in range(2) if np.isfinite(prob[j, i]) and prob[j, i] >= tau)
            k += correct[last, i]
        assert step["n"] == m and step["k"] == pytest.approx(k)
        assert step["lower"] == pytest.approx(lower_bound(k, m, risk=0.1))
    passed = [s["passed"] for s in out["path"]]
    assert passed[:-1] == [True] * (len(passed) - 1)          # stops at the first failure
    if out["share"] > 0:
        assert out["thresholds"][0] == pytest.approx(
            c[order[math.ceil(out["share"] * n - 1e-9) - 1]])


def test_one_judge_is_the_single_judge_certification():
    prob, correct, role, items, folds, _ = _draw(seed=1)
    prob, correct = prob[:1], correct[:1]
    out = certify_union(prob, correct, role, items, folds, target=0.8, risk=0.1)
    assert out["risk_fold"] == pytest.approx(0.02)
    p, v = role == "P", role == "validation"
    for f, ans in enumerate(out["folds"]):
        vf = v & (folds != f)
        want = choose_share([(prob[0, p], correct[0, p], items[p]),
                             (prob[0, vf], correct[0, vf], items[vf])], target=0.8, risk=0.02)
        assert ans["share"] == want["share"] and ans["n"] == want["n"]
        assert ans["thresholds"] == pytest.approx(want["thresholds"])
        # the fold's audited rows: trusted at or above the validation threshold
        mine = (folds == f) & np.isin(role, ["validation", "unlabelled"])
        np.testing.assert_array_equal(out["stage"][mine] == 0,
                                      prob[0, mine] >= want["thresholds"][1])


def test_a_folds_outcomes_never_choose_its_threshold():
    prob, correct, role, items, folds, _ = _draw(seed=2)
    out = certify_union(prob, correct, role, items, folds, target=0.85, risk=0.1)
    flipped = correct.copy()
    mine = (folds == 0) & (role == "validation")
    flipped[:, mine] = 1 - flipped[:, mine]
    again = certify_union(prob, flipped, role, items, folds, target=0.85, risk=0.1)
    assert again["folds"][0]["share"] == out["folds"][0]["share"]
    assert again["folds"][0]["thresholds"] == out["folds"][0]["thresholds"]
    np.testing.assert_array_equal(again["stage"][folds == 0], out["stage"][folds == 0])
    assert any(again["folds"][f]["n"] != out["folds"][f]["n"]
               or again["folds"][f]["k"] != out["folds"][f]["k"] for f in range(1, 5))


def test_the_union_lends_one_stages_margin_to_the_next():
    """Judge 1 is right 0.97 of the time where it is confident, judge 2 0.80 elsewhere: each
    stage alone at 0.85 leaves judge 2 nothing; together they reach further."""
    prob, correct, role, items, folds, (t1, t2) = _draw(seed=4)
    out = certify_union(prob, correct, role, items, folds, target=0.85, risk=0.1)
    stage = out["stage"]
    audited = np.isin(role, ["validation", "unlabelled"])
    assert (stage[audited] == 1).any() and (stage[audited] == 0).any()
    # a row is given judge 2 only where judge 2 was asked and reaches the fold's threshold;
    # judge 1 where judge 2 does not (the later, stronger judge first)
    assert np.isfinite(prob[1, stage == 1]).all()
    for f, ans in enumerate(out["folds"]):
        tau = ans["thresholds"][1]
        mine = (folds == f) & audited & (stage >= 0)
        np.testing.assert_array_equal(stage[mine] == 1, np.nan_to_num(prob[1, mine]) >= tau)
        assert (prob[0, mine & (stage == 0)] >= tau).all()
    # judge 2 alone on its region at the same target
    alone = certify_union(np.where(np.isfinite(prob[1]), prob[1], np.nan)[None], correct[1:],
                          role, items, folds, target=0.85, risk=0.1)
    assert (stage[audited] >= 0).mean() > (alone["stage"][audited] >= 0).mean()


def test_validity_against_known_truth():
    """Over 100 draws the trusted audited rows' true agreement (the mean probability of the
    judge each is given) meets the target in at least 1 - risk of them, and something is
    certified in most."""
    met, covered = [], []
    for seed in range(100):
        prob, correct, role, items, folds, (t1, t2) = _draw(n=1200, seed=100 + seed)
        out = certify_union(prob, correct, role, items, folds, target=0.88, risk=0.1)
        trusted = np.isin(role, ["validation", "unlabelled"]) & (out["stage"] >= 0)
        truth = np.where(out["stage"] == 0, t1, t2)[trusted]
        met.append(len(truth) == 0 or truth.mean() >= 0.88)
        covered.append(trusted.any())
    assert np.mean(met) >= 0.9
    assert np.mean(covered) >= 0.8


def test_without_validation_rows_one_test_on_p_and_each_folds_top_share():
    prob, correct, role, items, folds, _ = _draw(seed=5)
    role = np.where(role == "validation", "unlabelled", role)
    out = certify_union(prob, correct, role, items, folds, target=0.85, risk=0.1)
    assert out["risk_fold"] == 0.1
    shares = {a["share"] for a in out["folds"]}
    assert len(shares) == 1 and shares.pop() > 0
    c = np.nanmax(prob, axis=0)
    tau_p = out["folds"][0]["thresholds"][0]
    for f, ans in enumerate(out["folds"]):
        mine = (folds == f) & (role == "unlabelled")
        n_top = int(math.floor(ans["share"] * mine.sum() + 1e-9))
        trusted = mine & (out["stage"] >= 0)
        assert trusted.sum() <= n_top and (c[trusted] >= tau_p).all()


def test_nothing_certified_says_why_and_bad_shapes_are_refused():
    prob, correct, role, items, folds, _ = _draw(n=300, seed=6)
    out = certify_union(prob, np.zeros_like(correct), role, items, folds, target=0.9, risk=0.1)
    assert (out["stage"] == -1).all() and out["n_folds_certified"] == 0
    assert "No share of the cascade's trusted rows" in out["message"]
    with pytest.raises(PUAuditError, match="disagree"):
        certify_union(prob, correct[:, :10], role, items, folds, target=0.9, risk=0.1)
    assert len(share_grid()) == 15


def test_an_earlier_judge_that_disagrees_with_a_later_one_is_capped_by_it():
    from puaudit.audit.certify.cascade import coherent_probabilities

    prob = np.array([[0.95, 0.95, 0.95, 0.95, 0.95, 0.90],
                     [0.70, 0.70, np.nan, 0.70, 0.30, 0.20],
                     [0.60, np.nan, np.nan, np.nan, np.nan, 0.85]])
    verdicts = [np.array(["A", "A", "A", "A", "tie", "A"], dtype=object),
                np.array(["A", "B", None, "tie", "A", "B"], dtype=object),
                np.array(["B", None, None, None, None, "B"], dtype=object)]
    out = coherent_probabilities(prob, verdicts)
    want = np.array([[0.40, 0.30, 0.95, 0.95, 0.95, 0.15],
                     [0.40, 0.70, np.nan, 0.70, 0.30, 0.20],
                     [0.60, np.nan, np.nan, np.nan, np.nan, 0.85]])
    # row 0: judges 1 and 2 agree, judge 3 disagrees with both; row 1: judge 2 disagrees;
    # rows 2-4: not asked, a tie, the earlier judge's tie: nothing to cap; row 5: both later
    # judges disagree with judge 1 (the tighter cap holds), judges 2 and 3 agree
    np.testing.assert_allclose(out, want)
    assert np.isnan(prob).sum() == np.isnan(out).sum() and prob[0, 0] == 0.95  # a copy
    # the last judge is never capped, and no pair of opposite strict verdicts sums above 1
    np.testing.assert_array_equal(out[-1], prob[-1])
    for j in range(3):
        for k in range(j + 1, 3):
            apart = (np.isin(verdicts[j], ["A", "B"]) & np.isin(verdicts[k], ["A", "B"])
                     & (verdicts[j] != verdicts[k]) & np.isfinite(out[j]) & np.isfinite(out[k]))
            assert (out[j, apart] + out[k, apart] <= 1 + 1e-12).all()
