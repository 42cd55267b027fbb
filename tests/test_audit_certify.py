"""Certified trust or escalate: bounds, the fixed-sequence choice, bad input, export, queue."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta
from statsmodels.stats.proportion import proportion_confint

from puaudit.audit.certify import (choose_threshold, lower_bound,
                                   out_of_fold_probabilities, realised_agreement, rows_needed,
                                   with_target)
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


# -- the fixed-sequence choice against a hand-computed case -------------------------------------
def _ladder(outcomes):
    """Rows with strictly decreasing probabilities and the given outcomes (first = most sure)."""
    n = len(outcomes)
    return np.linspace(0.99, 0.6, n), np.asarray(outcomes, dtype=bool)


def test_threshold_is_the_lowest_passing_candidate_and_testing_stops_at_the_first_failure():
    # 25 right, 1 wrong, then 34 right. Candidates with n < 22 are not tested (they could not
    # pass). n = 22..25: all right, L = 0.1^(1/n) >= 0.9. n = 26, k = 25: L < 0.9: stop.
    outcomes = [True] * 25 + [False] + [True] * 34
    prob, correct = _ladder(outcomes)
    assert beta.ppf(0.1, 25, 2) < 0.9           # the first failure (hand check)
    assert beta.ppf(0.1, 59, 2) >= 0.9          # all 60 rows would pass: only the stop keeps them out
    out = choose_threshold(prob, correct, target=0.9, risk=0.1, log=True)
    assert out["threshold"] == prob[24]
    assert (out["n"], out["k"]) == (25, 25.0)
    assert out["lower"] == pytest.approx(0.1 ** (1 / 25))
    assert out["n_tested"] == 5 and out["stopped_at"] == prob[25]
    assert [p["n"] for p in out["path"]] == [22, 23, 24, 25, 26]
    assert [p["passed"] for p in out["path"]] == [True] * 4 + [False]
    assert out["message"] == ""


def test_the_sequence_starts_at_a_share_of_the_items_fixed_before_the_outcomes():
    # the first 22 right, then a wrong one at 23: from 22 items the sequence passes once and
    # stops at 23; started at half the 80 items (40) it never sees that dip
    outcomes = [True] * 22 + [False] + [True] * 57
    prob, correct = _ladder(outcomes)
    small = choose_threshold(prob, correct, target=0.9, risk=0.1, start_share=0.0, log=True)
    assert small["n"] == 22 and [p["n"] for p in small["path"]] == [22, 23]
    big = choose_threshold(prob, correct, target=0.9, risk=0.1, start_share=0.5, log=True)
    assert big["path"][0]["n"] == 40 and big["n_start"] == 40
    ks = np.cumsum(correct)
    assert big["n"] == 80 and all(beta.ppf(0.1, ks[n - 1], n - ks[n - 1] + 1) >= 0.9
                                  for n in range(40, 81))


def test_a_lower_target_goes_further_down_the_sequence():
    outcomes = [True] * 25 + [False] + [True] * 34
    prob, correct = _ladder(outcomes)
    out = choose_threshold(prob, correct, target=0.8, risk=0.1)
    # at 0.8 every candidate from n = 11 on passes (checked with the beta quantile directly)
    ks = np.cumsum(correct)
    assert all(beta.ppf(0.1, ks[n - 1], n - ks[n - 1] + 1) >= 0.8 for n in range(11, 61))
    assert out["threshold"] == prob[-1] and out["n"] == 60


def test_tied_probabilities_enter_or_leave_together():
    prob = np.r_[np.full(30, 0.95), np.full(10, 0.7)]
    correct = np.r_[np.ones(30, bool), np.zeros(10, bool)]
    out = choose_threshold(prob, correct, target=0.9, risk=0.1, log=True)
    assert out["threshold"] == 0.95 and out["n"] == 30
    assert [p["n"] for p in out["path"]] == [30, 40]


def test_votes_of_one_item_count_once():
    # 21 items x 2 votes, every vote right: 42 votes would pass, 21 items cannot (22 needed)
    prob = np.repeat(np.linspace(0.99, 0.8, 21), 2)
    correct = np.ones(42, bool)
    groups = np.repeat(np.arange(21), 2)
    assert choose_threshold(prob, correct, target=0.9, risk=0.1)["n"] == 42
    out = choose_threshold(prob, correct, target=0.9, risk=0.1, groups=groups)
    assert math.isinf(out["threshold"]) and out["n_items"] == 21
    assert "22" in out["message"] and "21" in out["message"]
    # an item whose two votes split counts as half right
    correct[41] = False  # the least confident item's second vote
    full = choose_threshold(prob, correct, target=0.6, risk=0.1, groups=groups, log=True)
    assert full["path"][-1]["k"] == pytest.approx(20.5)


def test_a_verdict_more_likely_wrong_than_right_is_never_trusted():
    prob = np.linspace(0.49, 0.3, 40)
    out = choose_threshold(prob, np.ones(40, bool), target=0.9, risk=0.1)
    assert math.isinf(out["threshold"]) and out["n_tested"] == 0
    assert "0.5" in out["message"]


def test_too_few_items_say_how_many_are_needed():
    out = choose_threshold(np.full(10, 0.99), np.ones(10, bool), target=0.9, risk=0.1)
    assert math.isinf(out["threshold"])
    assert "at least 22 items" in out["message"] and "has 10" in out["message"]
    out = choose_threshold(np.full(50, 0.99), np.ones(50, bool), target=0.95, risk=0.05)
    assert math.isinf(out["threshold"]) and "at least 59 items" in out["message"]


@pytest.mark.parametrize("kw", [{"target_agreement": 1.0}, {"target_agreement": 0.5},
                                {"target_agreement": 0.3}, {"risk": 0.0}, {"risk": 0.6},
                                {"target_agreement": "high"}])
def test_bad_target_or_risk_is_one_clear_error(kw):
    with pytest.raises(PUAuditError, match="target_agreement|risk"):
        AuditConfig(**kw)
    target, risk = kw.get("target_agreement", 0.9), kw.get("risk", 0.1)
    with pytest.raises(PUAuditError, match="target_agreement|risk"):
        choose_threshold(np.ones(30), np.ones(30, bool), target=target, risk=risk)


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
    # audited rows: the certified share of P's items, carried over as a share: the top
    # floor(share * n_U) rows by (unshifted) calibrated probability, ties by raw score, that
    # also clear t, less the reversed ones
    u = c.u_rows
    share = s["certification"]["n_certified_items"] / s["certification"]["n_p_items"]
    assert s["certification"]["certified_share"] == pytest.approx(share)
    k = int(np.floor(share * np.isfinite(c.u_prob).sum() + 1e-9))
    order = np.lexsort((np.arange(len(u)), -res.score[u], -np.nan_to_num(c.u_prob, nan=-1)))
    top = np.zeros(len(u), bool)
    top[order[:k]] = True
    top &= c.u_prob >= t
    want = top & (res.group[u] != "negative")
    assert np.array_equal(trusted[u].astype(bool), want)
    assert s["certification"]["threshold_audited"] == pytest.approx(c.u_prob[top].min())
    assert not (trusted[u].astype(bool) & (c.u_prob < c.u_prob[top].min())).any()
    assert s["coverage"] == pytest.approx(want.mean())
    assert 0 < s["coverage"] < 1
    assert s["certification"]["n_trusted"] + s["certification"]["n_escalated"] == audited.sum()
    # P rows by their out-of-fold probability; excluded rows neither
    assert np.array_equal(trusted[c.p_rows].astype(bool), c.p_prob >= t)
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


def test_too_few_p_items_export_with_nobody_trusted(planted):
    df, e_a, e_b, _ = planted
    table = load_comparisons(df)
    res = audit_table(table, PairEmbeddings(e_a, e_b),
                      AuditConfig(target_agreement=0.97, p_ratio=0.1))
    s = res.summary()
    assert s["coverage"] == 0 and math.isinf(res.certification.threshold)
    need = rows_needed(0.97, risk=0.1)
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
    from puaudit.audit.certify import escalated_rows

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

    # about 36 P items, nearly all judged right: whether the 11 most confident hold a wrong one
    # (then nothing certifies) is the draw's; seed 1 certifies a part, as the cascade needs
    df, e_a, e_b, _ = planted_set(n=300, judge_acc=0.85, seed=1)
    table = load_comparisons(df)
    res = audit_table(table, PairEmbeddings(e_a, e_b),
                      AuditConfig(target_agreement=0.8, risk=0.2))
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
               "judge2_winner", "--target-agreement", "0.8", "--json"])
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
