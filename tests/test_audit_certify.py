"""Certified trust or escalate: bounds, the fixed-sequence choice, bad input, export, queue."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta
from statsmodels.stats.proportion import proportion_confint

from puaudit.audit.certify.judge import (AUDIT, CERTIFY_FOLDS, CHOSEN, CONFIDENCE, Certification,
                                         certify_folds, choose_certificate, realised_agreement,
                                         with_target)
from puaudit.audit.scorers.calibration import out_of_fold_probabilities
from puaudit.audit.certify.sequence import (SHARE_STEP, START_SHARE, choose_share, lower_bound,
                                          rows_needed, share_grid)
from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.stages import audit_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from puaudit.review.queue import review_order, review_queue


# -- the bound and the number of items needed ---------------------------------------------------
@pytest.mark.parametrize("k,n", [(20, 22), (1, 5), (39, 40), (12.5, 14)])
def test_lower_bound_is_the_one_sided_clopper_pearson_bound(k, n):
    want = proportion_confint(k, n, alpha=0.2, method="beta")[0]
    assert lower_bound(k, n, risk=0.1) == pytest.approx(want, abs=1e-12)
    assert lower_bound(k, n, risk=0.1) == pytest.approx(beta.ppf(0.1, k, n - k + 1))


def test_all_right_bound_is_risk_to_the_one_over_n_and_rows_needed_is_its_first_pass():
    assert lower_bound(22, 22, risk=0.1) == pytest.approx(0.1 ** (1 / 22))
    assert lower_bound(0, 10, risk=0.1) == 0.0
    # ln 0.1 / ln 0.9 = 21.85, ln 0.1 / ln 0.85 = 14.17, ln 0.05 / ln 0.95 = 58.4
    assert rows_needed(0.9, risk=0.1) == 22
    assert rows_needed(0.85, risk=0.1) == 15
    assert rows_needed(0.95, risk=0.05) == 59
    for target, risk in ((0.9, 0.1), (0.85, 0.1), (0.95, 0.05)):
        n = rows_needed(target, risk=risk)
        assert lower_bound(n, n, risk=risk) >= target > lower_bound(n - 1, n - 1, risk=risk)


# -- the fixed-sequence choice over a grid of shares, against hand-computed cases -------------
def _ladder(outcomes, top=0.99, bottom=0.6):
    """Items with strictly decreasing probabilities and the given outcomes (first = most sure)."""
    n = len(outcomes)
    return np.linspace(top, bottom, n), np.asarray(outcomes, dtype=bool)


def test_the_grid_of_shares_is_fixed_before_the_outcomes():
    assert share_grid().tolist() == pytest.approx([0.30 + 0.05 * i for i in range(15)])
    assert (START_SHARE, SHARE_STEP) == (0.3, 0.05)
    assert share_grid(start_share=0.5, step=0.2).tolist() == pytest.approx([0.5, 0.7, 0.9, 1.0])


def test_share_is_the_last_passing_candidate_and_testing_stops_at_the_first_failure():
    # 100 items, wrong at positions 33, 48 and 49. Candidates n = 30, 35, ..., 100:
    # n = 30: 30/30, L = 0.1^(1/30) = 0.926 >= 0.9; n = 35: 34/35, L = 0.893 < 0.9: stop.
    # All 100 would pass (97/100, L = 0.934): only the stop keeps them out.
    correct = np.ones(100, bool)
    correct[[32, 47, 48]] = False
    prob, correct = _ladder(correct)
    assert beta.ppf(0.1, 34, 2) < 0.9 <= beta.ppf(0.1, 97, 4)
    out = choose_share([(prob, correct, None)], target=0.9, risk=0.1, log=True)
    assert out["share"] == pytest.approx(0.3)
    assert (out["n"], out["k"]) == (30, 30.0)
    assert out["lower"] == pytest.approx(0.1 ** (1 / 30))
    assert out["thresholds"] == [prob[29]]
    assert out["n_tested"] == 2 and out["stopped_at"] == pytest.approx(0.35)
    assert [p["n"] for p in out["path"]] == [30, 35]
    assert [p["passed"] for p in out["path"]] == [True, False]
    assert out["message"] == ""
    # at 0.85 every candidate passes (checked with the beta quantile directly)
    ks = np.cumsum(correct)
    assert all(beta.ppf(0.1, ks[n - 1], n - ks[n - 1] + 1) >= 0.85 for n in range(30, 101, 5))
    loose = choose_share([(prob, correct, None)], target=0.85, risk=0.1)
    assert loose["share"] == 1.0 and loose["n"] == 100 and loose["thresholds"] == [prob[-1]]


def test_sources_are_pooled_by_share_each_with_its_own_threshold():
    # A: 40 items, all right. B: 60 items, wrong at B's 20th. Share 0.30: 12 + 18 = 30 items,
    # all right (L = 0.926); share 0.35: 14 + 21 = 35 items, 34 right (L = 0.893): stop.
    pa, ca = _ladder([True] * 40, top=0.99, bottom=0.7)
    cb = np.ones(60, bool)
    cb[19] = False
    pb, cb = _ladder(cb, top=0.95, bottom=0.55)
    out = choose_share([(pa, ca, None), (pb, cb, None)], target=0.9, risk=0.1, log=True)
    assert [p["n"] for p in out["path"]] == [30, 35]
    assert out["share"] == pytest.approx(0.3) and out["n"] == 30
    assert out["thresholds"] == [pa[11], pb[17]]
    assert out["n_items"] == 100 and out["n_items_by_source"] == [40, 60]
    # the order of the rows within a source does not matter, only their probabilities
    perm = np.random.default_rng(0).permutation(60)
    again = choose_share([(pa, ca, None), (pb[perm], cb[perm], None)], target=0.9, risk=0.1)
    assert again["thresholds"] == out["thresholds"]


def test_tied_probabilities_enter_or_leave_together():
    prob = np.r_[np.full(30, 0.95), np.full(70, 0.7)]
    correct = np.r_[np.ones(30, bool), np.zeros(70, bool)]
    out = choose_share([(prob, correct, None)], target=0.9, risk=0.1, log=True)
    assert out["thresholds"] == [0.95] and out["n"] == 30
    # share 0.35 reaches into the tied block at 0.7, which enters whole
    assert [p["n"] for p in out["path"]] == [30, 100]


def test_votes_of_one_item_count_once():
    # 21 items x 2 votes, every vote right: 42 votes would pass, 21 items cannot (22 needed)
    prob = np.repeat(np.linspace(0.99, 0.8, 21), 2)
    correct = np.ones(42, bool)
    groups = np.repeat(np.arange(21), 2)
    assert choose_share([(prob, correct, None)], target=0.9, risk=0.1)["n"] == 42
    out = choose_share([(prob, correct, groups)], target=0.9, risk=0.1)
    assert out["share"] == 0 and math.isinf(out["thresholds"][0]) and out["n_items"] == 21
    assert "at least 22 items" in out["message"] and "have 21" in out["message"]
    # an item whose two votes split counts as half right
    correct[1] = False  # the most confident item's second vote
    half = choose_share([(prob, correct, groups)], target=0.6, risk=0.1, log=True)
    assert half["path"][-1]["k"] == pytest.approx(20.5)


def test_a_verdict_more_likely_wrong_than_right_is_never_trusted():
    prob = np.linspace(0.49, 0.3, 40)
    out = choose_share([(prob, np.ones(40, bool), None)], target=0.9, risk=0.1)
    assert out["share"] == 0 and out["n_tested"] == 0
    assert "0.5" in out["message"]
    # a source below the floor ends the sequence for every source
    good = np.linspace(0.99, 0.9, 100)
    out = choose_share([(good, np.ones(100, bool), None), (prob, np.ones(40, bool), None)],
                       target=0.9, risk=0.1)
    assert out["share"] == 0 and out["n_tested"] == 0


def test_too_few_items_say_how_many_are_needed():
    out = choose_share([(np.full(10, 0.99), np.ones(10, bool), None)], target=0.9, risk=0.1)
    assert out["share"] == 0
    assert "at least 22 items" in out["message"] and "have 10" in out["message"]
    out = choose_share([(np.full(50, 0.99), np.ones(50, bool), None)], target=0.95, risk=0.05)
    assert out["share"] == 0 and "at least 59 items" in out["message"]


# -- cross-certification: P and validation certified on, each validation fold held out ----------
def _sim_certification(seed, *, n_p=300, n_v=700, n_u=1000, p_noise=0.3):
    """A certification with a known truth: each item's probability of agreeing with people is
    ``p = sigmoid(2 + 1.5 z)``; validation and unlabelled rows are calibrated exactly (``q =
    p``), P's out-of-fold probabilities see ``z`` through noise. Returns ``(cert, p_audited)``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n_p + n_v + n_u)
    p = 1 / (1 + np.exp(-(2.0 + 1.5 * z)))
    y = rng.random(len(p)) < p
    q = p.copy()
    q[:n_p] = 1 / (1 + np.exp(-(2.0 + 1.5 * (z[:n_p] + p_noise * rng.normal(size=n_p)))))
    P = np.arange(n_p)
    u = np.arange(n_p, len(p))
    val = np.r_[np.ones(n_v, bool), np.zeros(n_u, bool)]
    g = np.arange(len(p)).astype(str)
    fold = certify_folds(g, random_state=seed)
    cert = Certification(n_rows=len(p), p_rows=P, p_prob=q[P], p_correct=y[P], p_groups=g[P],
                         u_rows=u, u_prob=q[u], u_val=val, u_correct=y[u], u_groups=g[u],
                         p_fold=fold[P], u_fold=fold[u])
    return cert, p[u]


def test_certify_folds_are_dealt_by_item_evenly_and_from_the_seed_only():
    groups = np.repeat(np.arange(53), 2).astype(str)
    f = certify_folds(groups, random_state=3)
    assert np.array_equal(f[::2], f[1::2])                  # both votes of an item together
    assert sorted(np.bincount(f[::2])) == [10, 10, 11, 11, 11]
    assert np.array_equal(f, certify_folds(groups, random_state=3))
    assert not np.array_equal(f, certify_folds(groups, random_state=4))


def test_a_row_is_trusted_by_a_threshold_its_own_fold_did_not_choose():
    cert, _ = _sim_certification(0)
    c = cert.at(0.9, 0.1)
    val, fold = c.u_val, c.u_fold
    # the risk split: each fold's certification at risk / K, on P and the other folds
    assert [f["risk"] for f in c.choice["folds"]] == pytest.approx([0.1 / CERTIFY_FOLDS] * 5)
    for f in c.choice["folds"]:
        assert f["n_items_by_source"] == [300, int((val & (fold != f["fold"])).sum())]
        # validation and unlabelled rows of a fold: one threshold
        rows = fold == f["fold"]
        assert np.array_equal(c._u_trusted()[rows], c.u_prob[rows] >= f["thresholds"][1])
        assert np.array_equal(np.asarray(c.trusted[c.p_rows][c.p_fold == f["fold"]], bool),
                              c.p_prob[c.p_fold == f["fold"]] >= f["thresholds"][0])
    trusted = c._u_trusted()
    assert 0 < trusted[val].mean() < 1 and 0 < trusted[~val].mean() < 1
    # flip every outcome of fold 0's validation rows: fold 0's rows (validation and unlabelled)
    # keep their trust; every other fold's moves (it was certified on fold 0's outcomes)
    flipped = c.u_correct.copy()
    f0v = val & (fold == 0)
    flipped[f0v] = ~flipped[f0v]
    t2 = dataclasses.replace(cert, u_correct=flipped).at(0.9, 0.1)._u_trusted()
    assert np.array_equal(trusted[fold == 0], t2[fold == 0])
    for f in range(1, CERTIFY_FOLDS):
        assert not np.array_equal(trusted[fold == f], t2[fold == f])
    s = c.summary()["certification"]
    assert s["n_items"] == 300 + 700 and s["n_folds"] == 5
    assert s["certified_share"] == pytest.approx(np.mean([f["share"] for f in s["folds"]]))
    assert s["certified_lower"] == min(f["certified_lower"] for f in s["folds"]) >= 0.9


def test_without_validation_items_each_fold_trusts_its_share_of_unlabelled_rows():
    # p_ratio = 1: P alone is certified on, so every fold's test is the same one, made at the
    # full risk; fold f's unlabelled rows are its top floor(s_f * n_f) by probability that
    # also reach P's threshold at s_f
    cert, _ = _sim_certification(1, n_v=0)
    c = cert.at(0.9, 0.1)
    assert not c.u_val.any() and c.summary()["certification"]["n_validation_items"] == 0
    assert [f["risk"] for f in c.choice["folds"]] == [0.1] * 5
    assert len({f["share"] for f in c.choice["folds"]}) == 1
    trusted = c._u_trusted()
    assert 0 < trusted.mean() < 1
    for f in c.choice["folds"]:
        rows = np.flatnonzero(c.u_fold == f["fold"])
        k = int(np.floor(f["share"] * len(rows) + 1e-9))
        top = rows[np.argsort(-c.u_prob[rows], kind="stable")[:k]]
        want = np.zeros(len(c.u_prob), bool)
        want[top] = True
        want &= c.u_prob >= f["thresholds"][0]
        assert np.array_equal(trusted[rows], want[rows])


def test_certified_sets_meet_the_target_on_a_known_truth_and_coverage_does_not_swing():
    """Over 100 draws with a known truth: the trusted rows' true agreement (mean p) is below
    the target in at most a few draws (risk 0.1 allows 10%), and coverage varies little from
    draw to draw. The procedure before cross-certification (P alone, every distinct
    probability, from P's top 30%) trusted nothing in some draws and had sd 0.25 here (0.085
    now)."""
    cov, fail_val, fail_unl = [], 0, 0
    for seed in range(100):
        cert, p = _sim_certification(seed)
        c = cert.at(0.9, 0.1)
        t = c._u_trusted()
        cov.append(c.coverage())
        fail_val += bool((t & c.u_val).any() and p[t & c.u_val].mean() < 0.9)
        fail_unl += bool((t & ~c.u_val).any() and p[t & ~c.u_val].mean() < 0.9)
    cov = np.array(cov)
    assert fail_val <= 10 and fail_unl <= 10
    assert cov.min() > 0.2 and cov.std(ddof=1) < 0.1 and cov.mean() > 0.55


@pytest.mark.parametrize("kw", [{"target_agreement": 1.0}, {"target_agreement": 0.5},
                                {"target_agreement": 0.3}, {"risk": 0.0}, {"risk": 0.6},
                                {"target_agreement": "high"}])
def test_bad_target_or_risk_is_one_clear_error(kw):
    with pytest.raises(PUAuditError, match="target_agreement|risk"):
        AuditConfig(**kw)
    target, risk = kw.get("target_agreement", 0.9), kw.get("risk", 0.1)
    with pytest.raises(PUAuditError, match="target_agreement|risk"):
        choose_share([(np.ones(30), np.ones(30, bool), None)], target=target, risk=risk)


def test_default_config_does_not_certify():
    cfg = AuditConfig()
    assert cfg.target_agreement is None and cfg.risk == 0.1
    assert AuditConfig(target_agreement=0.9, risk=0.05).target_agreement == 0.9


# -- out-of-fold calibration --------------------------------------------------------------------
def test_out_of_fold_probability_of_a_row_ignores_its_own_label():
    rng = np.random.default_rng(0)
    n = 300
    scores = rng.normal(size=n)
    correct = rng.random(n) < 1 / (1 + np.exp(-2 * scores))
    folds = np.arange(n) % 5
    q = out_of_fold_probabilities(scores, correct, folds, bags=10, random_state=1)
    flipped = correct.copy()
    flipped[folds == 0] = ~flipped[folds == 0]  # every label of fold 0
    q2 = out_of_fold_probabilities(scores, flipped, folds, bags=10, random_state=1)
    assert np.array_equal(q[folds == 0], q2[folds == 0])
    assert not np.allclose(q[folds != 0], q2[folds != 0])
    # monotone within a fold, and a probability
    for f in range(5):
        o = np.argsort(scores[folds == f])
        assert np.all(np.diff(q[folds == f][o]) >= -1e-12)
    assert np.all((q >= 0) & (q <= 1))


def test_realised_agreement_counts_items_and_gives_an_exact_interval():
    prob = np.array([0.9, 0.9, 0.8, 0.7, 0.4])
    correct = np.array([True, False, True, True, False])
    r = realised_agreement(prob, correct, 0.75, groups=np.array([1, 1, 2, 3, 4]))
    assert r["n"] == 2 and r["agreement"] == pytest.approx(0.75)
    lo, hi = proportion_confint(1.5, 2, alpha=0.05, method="beta")
    assert r["ci"] == (pytest.approx(lo), pytest.approx(hi))


# -- the audit: export column, summary, re-certification ----------------------------------------
@pytest.fixture(scope="module")
def planted_audits(planted):
    df, e_a, e_b, _ = planted
    table = load_comparisons(df)
    emb = PairEmbeddings(e_a, e_b)
    plain = audit_table(table, emb, AuditConfig())
    cert = audit_table(table, emb, AuditConfig(target_agreement=0.9, risk=0.1))
    return table, emb, plain, cert


def test_certified_audit_exports_trusted_rows_and_summary_fields(planted_audits):
    table, _, plain, res = planted_audits
    c = res.certification
    s = res.summary()
    t = s["threshold"]
    assert 0.5 <= t < 1 and s["certified_lower"] >= 0.9
    frame = res.to_frame(table)
    trusted = frame["puaudit_trusted"].to_numpy()
    audited = frame["puaudit_split"].isin(["unlabelled", "validation"]).to_numpy()
    # certified on P (out-of-fold) and every validation item, pooled by share
    u, val = c.u_rows, c.u_val
    cs = s["certification"]
    assert cs["n_items"] == cs["n_p_items"] + cs["n_validation_items"]
    assert cs["n_validation_items"] == len(set(c.u_groups[val])) > 0
    p_src = (c.p_prob, c.p_correct, c.p_groups)
    # the rows of fold f (validation and unlabelled): the threshold certified on P and the
    # other folds' validation items at risk / K
    fold_all = certify_folds(np.asarray(table.item_id).astype(str), random_state=0)
    assert np.array_equal(c.u_fold, fold_all[u]) and np.array_equal(c.p_fold, fold_all[c.p_rows])
    want_thr = np.full(len(u), np.inf)
    for f in range(CERTIFY_FOLDS):
        rest = val & (c.u_fold != f)
        fold = choose_share([p_src, (c.u_prob[rest], c.u_correct[rest], c.u_groups[rest])],
                            target=0.9, risk=0.1 / CERTIFY_FOLDS)
        want_thr[c.u_fold == f] = fold["thresholds"][1]
        assert cs["folds"][f]["threshold"] == fold["thresholds"][1]
        assert cs["folds"][f]["risk"] == pytest.approx(0.02)
        assert np.array_equal(trusted[c.p_rows][c.p_fold == f].astype(bool),
                              c.p_prob[c.p_fold == f] >= fold["thresholds"][0])
    top = c.u_prob >= want_thr
    want = top & (res.group[u] != "negative")
    assert np.array_equal(trusted[u].astype(bool), want)
    assert cs["threshold_audited"] == pytest.approx(c.u_prob[top].min())
    assert s["coverage"] == pytest.approx(want.mean())
    assert 0 < s["coverage"] < 1
    assert s["certification"]["n_trusted"] + s["certification"]["n_escalated"] == audited.sum()
    assert cs["certified_share"] == pytest.approx(np.mean([f["share"] for f in cs["folds"]]))
    assert t == min(f["threshold"] for f in cs["folds"] if f["share"] > 0)
    # realised agreement on trusted validation rows, by hand
    val = (frame["puaudit_split"] == "validation").to_numpy() & (trusted == True)  # noqa: E712
    agree = (frame["judge_winner"] == frame["human_winner"]).to_numpy()[val]
    assert s["certification"]["realised"] == pytest.approx(agree.mean())
    lo, hi = s["certification"]["realised_ci"]
    assert lo <= agree.mean() <= hi
    # the manifest keeps the threshold and how to reproduce it
    from puaudit.audit.manifest import run_manifest

    manifest = run_manifest(res)
    assert manifest["certification"]["threshold"] == t
    assert "--target-agreement 0.9 --risk 0.1" in manifest["reproduce"]
    # the default audit is unchanged: same groups and verdicts, no certification fields
    assert "puaudit_trusted" not in plain.to_frame(table).columns
    assert "coverage" not in plain.summary() and "certification" not in plain.summary()
    assert np.array_equal(plain.group, res.group)
    assert np.allclose(plain.p_judge_right, res.p_judge_right, equal_nan=True)


def test_recertifying_at_another_target_needs_no_refit(planted_audits):
    *_, res = planted_audits
    looser = with_target(res, 0.8, 0.1)
    stricter = with_target(res, 0.97, 0.1)
    assert looser.summary()["coverage"] >= res.summary()["coverage"] >= \
        stricter.summary()["coverage"]
    assert looser.params["target_agreement"] == 0.8
    curve = res.certification.curve([0.8, 0.9, 0.97])
    assert [r["coverage"] for r in curve] == pytest.approx(
        [looser.summary()["coverage"], res.summary()["coverage"], stricter.summary()["coverage"]])


def test_too_few_annotated_items_export_with_nobody_trusted():
    from tests.conftest import planted_set

    df, e_a, e_b, _ = planted_set(n=150)
    table = load_comparisons(df)
    res = audit_table(table, PairEmbeddings(e_a, e_b),
                      AuditConfig(target_agreement=0.97, p_ratio=0.3))
    s = res.summary()
    need = rows_needed(0.97, risk=0.1 / CERTIFY_FOLDS)   # each fold certifies at risk / K
    assert s["certification"]["n_items"] < need
    assert "at risk 0.1 (0.02 in each of 5 certification folds)" in s["certification"]["message"]
    assert s["coverage"] == 0 and math.isinf(res.certification.threshold)
    assert f"at least {need} items" in s["certification"]["message"]
    frame = res.to_frame(table)
    assert not frame.loc[frame["puaudit_split"].isin(["unlabelled", "validation"]),
                         "puaudit_trusted"].any()


# -- the review queue ---------------------------------------------------------------------------
def test_queue_takes_escalated_rows_first_farthest_below_the_threshold():
    # threshold 0.8; rows 0..5
    p = np.array([0.95, 0.79, 0.55, 0.85, 0.2, np.nan])
    below = 0.8 - p
    order = review_order(p, np.array(["positive"] * 6, dtype=object), np.arange(6), below=below)
    # escalated: 4 (0.6 below), 2 (0.25), 1 (0.01); trusted: 3 (0.05 above), 0; no probability last
    assert order.tolist() == [4, 2, 1, 3, 0, 5]


def test_review_queue_uses_the_certification(planted_audits):
    table, _, plain, res = planted_audits
    q = review_queue(table, res)
    tiers = q["tier"].tolist()
    n_esc = tiers.count("escalated")
    assert 0 < n_esc < len(tiers) and tiers[:n_esc] == ["escalated"] * n_esc
    below = res.certification.distance_below()[q["row"].to_numpy()]
    assert np.all(below[:n_esc] > 0) and np.all(np.diff(below[:n_esc]) <= 0)
    assert set(review_queue(table, plain)["tier"]) <= {"uncertain", "reversal candidate", "other"}


# -- the cascade: a second judge on the escalated rows only -------------------------------------
def test_escalated_rows_of_an_export_and_clear_errors():
    from puaudit.audit.certify.escalation import escalated_rows

    frame = pd.DataFrame({"prompt": list("abcde"), "puaudit_trusted": ["True", "False", "", "false", None],
                          "puaudit_group": ["positive"] * 5})
    out = escalated_rows(frame)
    assert out["prompt"].tolist() == ["b", "d"] and list(out.columns) == ["prompt"]
    with pytest.raises(PUAuditError, match="no 'puaudit_trusted' column"):
        escalated_rows(frame.drop(columns="puaudit_trusted"))
    with pytest.raises(PUAuditError, match="Row 2 .* 'maybe'"):
        escalated_rows(frame.assign(puaudit_trusted=["True", "maybe", "", "", ""]))
    with pytest.raises(PUAuditError, match="nothing to send"):
        escalated_rows(frame.assign(puaudit_trusted=[True, True, None, True, True]))


def test_only_escalated_rows_go_to_the_second_judge_and_the_rerun_certifies(
        tmp_path, capsys, monkeypatch):
    import json

    from puaudit.cli.commands import main
    from puaudit.data.io import read_table
    from puaudit.data.writers import write_table
    from tests.judge_stub import StubJudgeServer
    from tests.conftest import planted_set

    # about 118 annotated items, nearly all judged right; at 0.85 seed 1 certifies a part, as
    # the cascade needs (at 0.8 it trusts every row)
    df, e_a, e_b, _ = planted_set(n=300, judge_acc=0.85, seed=1)
    table = load_comparisons(df)
    res = audit_table(table, PairEmbeddings(e_a, e_b),
                      AuditConfig(target_agreement=0.85, risk=0.2))
    export = tmp_path / "audited.csv"
    write_table(res.to_frame(table), export)
    trusted = res.certification.trusted
    n_esc = int(sum(t is False or t is np.False_ for t in trusted))
    assert 0 < n_esc < len(df)
    out = tmp_path / "second.csv"
    with StubJudgeServer() as stub:
        rc = main(["judge", str(export), "--only-escalated", "--endpoint", stub.url,
                   "--model", "second", "-o", str(out), "--winner-column", "judge2_winner",
                   "--backoff", "0.01", "--max-backoff", "0.05", "--no-progress"])
        n_calls = len(stub.calls)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert f"{n_esc} of {len(df)} rows escalated" in err
    second = read_table(out)
    assert n_calls == n_esc and len(second) == n_esc
    assert not [c for c in second.columns if c.startswith("puaudit_")]
    esc_prompts = set(df["prompt"][[t is False or t is np.False_ for t in trusted]])
    assert set(second["prompt"]) == esc_prompts
    assert second["judge2_winner"].notna().all()
    # the re-audit of the second judge's verdicts certifies again (its own P among these rows)
    monkeypatch.setenv("PUAUDIT_TEST_ENCODER", "hashing")
    rc = main(["audit", str(out), "-o", str(tmp_path / "again.csv"), "--judge-col",
               "judge2_winner", "--target-agreement", "0.85", "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert {"coverage", "certified_lower", "threshold"} <= set(summary)
    assert summary["n_rows"] == n_esc


def test_distance_below_is_positive_exactly_on_escalated_audited_rows(planted_audits):
    """The Review queue's tiers read ``distance_below() > 0`` as escalated: on audited rows that
    must be exactly the rows not trusted, ties at the last trusted probability included."""
    _, _, _, res = planted_audits
    c = res.certification
    below = c.distance_below()[c.u_rows]
    trusted = np.asarray(c.trusted[c.u_rows], dtype=bool)
    ok = np.isfinite(c.u_prob)
    assert np.array_equal((below > 0)[ok], ~trusted[ok])


# -- candidates: the audit's probabilities and the judge's own confidence, chosen per fold -------
def _two_certificates(seed, *, n_p=300, n_v=700, n_u=1000):
    """The same rows and folds certified on by two sources with a known truth ``p``: the audit's
    probabilities see ``z`` through heavy noise, the judge's confidence is a monotone map of a
    less noisy view (no outcome chose it; floor 0). Returns ``(audit, confidence, p_audited)``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n_p + n_v + n_u)
    p = 1 / (1 + np.exp(-(2.0 + 1.5 * z)))
    y = rng.random(len(p)) < p
    noisy = lambda s: 1 / (1 + np.exp(-(2.0 + 1.5 * (z + s * rng.normal(size=len(z))))))  # noqa
    q_audit, q_conf = noisy(1.2), 0.5 + 0.5 * noisy(0.4)
    P, u = np.arange(n_p), np.arange(n_p, len(p))
    val = np.r_[np.ones(n_v, bool), np.zeros(n_u, bool)]
    g = np.arange(len(p)).astype(str)
    fold = certify_folds(g, random_state=seed)
    common = dict(n_rows=len(p), p_rows=P, p_correct=y[P], p_groups=g[P], u_rows=u, u_val=val,
                  u_correct=y[u], u_groups=g[u], p_fold=fold[P], u_fold=fold[u])
    audit = Certification(p_prob=q_audit[P], u_prob=q_audit[u], name=AUDIT, **common)
    conf = Certification(p_prob=q_conf[P], u_prob=q_conf[u], name=CONFIDENCE, floor=0.0,
                         **common)
    return audit, conf, p[u]


def test_each_fold_takes_the_candidate_trusting_more_of_its_rows_at_its_risk_share():
    audit, conf, _ = _two_certificates(0)
    a, c = audit.at(0.9, 0.05), conf.at(0.9, 0.05)
    ch = choose_certificate({AUDIT: a, CONFIDENCE: c}, risk=0.1)
    assert ch.name == CHOSEN and ch.choice["risk"] == 0.1
    assert [f["risk"] for f in a.choice["folds"]] == pytest.approx([0.01] * CERTIFY_FOLDS)
    ta, tc, t = a._u_trusted(), c._u_trusted(), ch._u_trusted()
    for f in range(CERTIFY_FOLDS):
        rows = ch.u_fold == f
        pick = ch.choice["folds"][f]["certificate"]
        assert pick == ch.chosen[f]
        assert t[rows].sum() == max(ta[rows].sum(), tc[rows].sum())
        assert np.array_equal(t[rows], (ta if pick == AUDIT else tc)[rows])
    # the sharper confidence wins most folds here; with two candidates, the whole set trusts
    # at least as many rows as either alone at the same share of the risk
    assert ch.chosen.count(CONFIDENCE) >= 3
    assert t.sum() >= max(ta.sum(), tc.sum())
    s = ch.summary()["certification"]
    assert set(s["certificates"]) == {AUDIT, CONFIDENCE}
    assert s["certificates"][AUDIT]["coverage"] == pytest.approx(a.coverage())
    assert s["certificates"][CONFIDENCE]["risk"] == pytest.approx(0.05)
    assert [f["certificate"] for f in s["folds"]] == list(ch.chosen)
    # certified again at another target: each candidate again at risk / 2, chosen again
    again = ch.at(0.85, 0.1)
    want = choose_certificate({AUDIT: audit.at(0.85, 0.05), CONFIDENCE: conf.at(0.85, 0.05)},
                              risk=0.1)
    assert np.array_equal(again._u_trusted(), want._u_trusted())
    assert again.chosen == want.chosen


def test_a_tie_goes_to_the_first_candidate_and_other_rows_are_refused():
    audit, _, _ = _two_certificates(1)
    a = audit.at(0.9, 0.05)
    ch = choose_certificate({AUDIT: a, CONFIDENCE: dataclasses.replace(a, name=CONFIDENCE)},
                            risk=0.1)
    assert ch.chosen == (AUDIT,) * CERTIFY_FOLDS
    other = dataclasses.replace(a, u_rows=a.u_rows[:-1] + 1)
    with pytest.raises(PUAuditError, match="same audited rows"):
        choose_certificate({AUDIT: a, CONFIDENCE: other}, risk=0.1)


def test_choosing_spends_no_validity_and_costs_little_coverage():
    """Over 60 draws with a known truth: the chosen set's true agreement misses the target in
    at most 10% of the draws (the union bound over both candidates' folds at risk / 2 each), and
    its coverage is the better candidate's at the full risk minus a small cost, the price of
    halving the risk (0.017 on average here, at most 0.05; docs/method.md states it)."""
    fails, gaps = 0, []
    for seed in range(60):
        audit, conf, p = _two_certificates(seed)
        ch = choose_certificate({AUDIT: audit.at(0.85, 0.05), CONFIDENCE: conf.at(0.85, 0.05)},
                                risk=0.1)
        t = ch._u_trusted()
        fails += bool(t.any() and p[t].mean() < 0.85)
        gaps.append(max(audit.at(0.85, 0.1).coverage(), conf.at(0.85, 0.1).coverage())
                    - ch.coverage())
    gaps = np.array(gaps)
    assert fails <= 6
    assert 0 <= gaps.mean() < 0.03 and gaps.max() <= 0.06


def _with_confidence(planted, conf):
    from puaudit.data.simulate_judges import add_judge_probabilities
    df, e_a, e_b, _ = planted
    return (load_comparisons(add_judge_probabilities(df, "judge_winner", conf, prefix="")),
            PairEmbeddings(e_a, e_b))


def test_an_audit_certifies_with_both_certificates_when_the_judge_gives_probabilities(planted):
    from puaudit.data.simulate_judges import simulated_confidence
    df = planted[0]
    agree = (df["judge_winner"] == df["true_winner"]).to_numpy(float)
    conf = simulated_confidence(agree, df["question_id"].to_numpy(), auroc=0.8)
    table, emb = _with_confidence(planted, conf)
    res = audit_table(table, emb, AuditConfig(target_agreement=0.85, risk=0.1))
    cs = res.summary()["certification"]
    assert set(cs["certificates"]) == {AUDIT, CONFIDENCE}
    assert [c["risk"] for c in cs["certificates"].values()] == pytest.approx([0.05, 0.05])
    c = res.certification
    assert c.candidates[CONFIDENCE].floor == 0.0
    np.testing.assert_allclose(c.candidates[CONFIDENCE].u_prob, conf[c.u_rows])
    assert res.certification._u_trusted().sum() >= max(
        x._u_trusted().sum() for x in c.candidates.values())
    assert cs["certificate"] in (AUDIT, CONFIDENCE, f"{CONFIDENCE}+{AUDIT}",
                                 f"{AUDIT}+{CONFIDENCE}")
    only = audit_table(table, emb, AuditConfig(target_agreement=0.85, risk=0.1,
                                               certificate="confidence"))
    assert only.certification.name == CONFIDENCE
    assert only.summary()["certification"]["folds"][0]["risk"] == pytest.approx(0.1 / 5)
    with pytest.raises(PUAuditError, match="needs the judge's own probabilities"):
        audit_table(load_comparisons(df), emb, AuditConfig(target_agreement=0.85,
                                                           certificate="confidence"))


def test_a_constant_confidence_spends_no_risk(planted):
    table, emb = _with_confidence(planted, np.full(len(planted[0]), 0.9))
    res = audit_table(table, emb, AuditConfig(target_agreement=0.85, risk=0.1))
    assert res.certification.name == AUDIT and not res.certification.candidates
    assert res.summary()["certification"]["folds"][0]["risk"] == pytest.approx(0.1 / 5)
