"""Verdict evidence: each signal against a hand-computed table, malformed columns, and the
evidence scorer on planted data where only the judge's position habit carries its errors."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.stages import audit_table
from puaudit.audit.splits import prepare_split
from puaudit.audit.scorers.scoring import score_split
from puaudit.audit.evaluate import auroc_judge_right
from puaudit.audit.evidence import verdict_evidence
from puaudit.data.schema import apply_judge_rule, load_comparisons
from puaudit.errors import PUAuditError


def _table(**cols):
    n = len(next(iter(cols.values())))
    base = {"prompt": [f"q{i}" for i in range(n)],
            "response_a": [f"answer a {i}" for i in range(n)],
            "response_b": [f"answer b {i}" for i in range(n)]}
    return load_comparisons(pd.DataFrame({**base, **cols}))


def test_position_and_length_signals_by_hand():
    t = load_comparisons(pd.DataFrame({
        "prompt": ["p"] * 4, "response_a": ["aaaa", "a", "- x\n- y\n# h", "same"],
        "response_b": ["b", "bbbbbbb", "plain", "other"],
        "judge_winner": ["A", "B", "A", "tie"]}))
    ev = verdict_evidence(t)
    np.testing.assert_array_equal(ev.values["position_first"][:3], [1, 0, 1])
    assert np.isnan(ev.values["position_first"][3])  # a tie has no chosen answer
    np.testing.assert_allclose(ev.values["log_length_ratio"][:3],
                               [np.log(5 / 2), np.log(8 / 2), np.log(12 / 6)])
    # three structure lines (two list items, one heading) against none
    assert ev.values["structure_gap"][2] == pytest.approx(np.log1p(3))


def test_judge_position_oriented_by_the_verdict_b():
    t = _table(judge_winner=["B", "A", "B"])
    ev = verdict_evidence(t)
    np.testing.assert_array_equal(ev.values["position_first"], [0, 1, 0])


def test_bradley_terry_upset_in_a_four_model_table():
    # the judge ranks m1 > m2 > m3 > m4 on every comparison but one: m4 beats m1
    pairs = [("m1", "m2"), ("m2", "m3"), ("m3", "m4"), ("m1", "m3"), ("m2", "m4"), ("m1", "m4")]
    rows = []
    for a, b in pairs:
        rows += [(a, b, "A")] * 5 + [(b, a, "B")] * 5  # both display orders, winner a
    rows.append(("m4", "m1", "A"))  # the upset
    ma, mb, j = zip(*rows)
    t = _table(model_a=list(ma), model_b=list(mb), judge_winner=list(j))
    ev = verdict_evidence(t)
    fav, upset, gap = (ev.values[k] for k in ("bt_favourite", "bt_upset", "bt_gap"))
    assert fav[-1] == 0 and (fav[:-1] == 1).all()
    assert gap[-1] < 0 < gap[:-1].min()
    assert upset.argmax() == len(rows) - 1
    np.testing.assert_allclose(upset, np.logaddexp(0, -gap))
    # a pair the judge splits 3:1 in either display order: sigma(gap) near 3/4, shrunk by the prior
    t2 = _table(model_a=["x", "x", "y", "y"], model_b=["y", "y", "x", "x"],
                judge_winner=["A", "A", "B", "A"])
    g = verdict_evidence(t2).values["bt_gap"]
    assert 0.6 < expit(g[0]) < 0.75 and g[0] == pytest.approx(-g[3])


def test_both_orders_one_inconsistent_pair():
    # verdict_2 is the verdict with the answers swapped: its A is the table's B
    t = load_comparisons(pd.DataFrame({
        "prompt": ["p1", "p2", "p3", "p4"], "response_a": ["a1", "a2", "a3", "a4"],
        "response_b": ["b1", "b2", "b3", "b4"], "verdict_1": ["A", "A", "B", "B"],
        "verdict_2": ["B", "A", "A", ""]}), judge_column="verdict_1")
    ev = verdict_evidence(t)
    v = ev.values["order_consistent"]
    np.testing.assert_array_equal(v[:3], [1, 0, 1])
    assert np.isnan(v[3])  # the swapped order was not asked
    assert "agrees_verdict_2" not in ev.values  # the same judge, not another one


def test_raw_inconsistent_marks_and_other_judges():
    t = _table(judge_winner=["A", "B", "A", "B"],
               judge_winner_raw=["A", "tie (inconsistent)", "A", "B"],
               judge_winner_gpt35=["A", "A", "tie", ""],
               true_winner=["A", "A", "A", "A"], human_winner=["A", "", "", "B"])
    ev = verdict_evidence(t)
    np.testing.assert_array_equal(ev.values["order_consistent"], [1, 0, 1, 1])
    a = ev.values["agrees_gpt35"]
    np.testing.assert_array_equal(a[:3], [1, -1, 0])
    assert np.isnan(a[3])
    # hidden truth and people are never read as a judge
    assert not any("true" in k or "human" in k for k in ev.values)


def test_judge_probabilities_both_orders_and_entropy():
    t = _table(judge_winner=["A", "B", "A"],
               p1_A=[0.8, 0.3, 0.5], p1_B=[0.1, 0.6, 0.5], p1_tie=[0.1, 0.1, 0.0],
               # swapped order: its B is the table's A
               p2_A=[0.2, 0.7, ""], p2_B=[0.7, 0.2, ""], p2_tie=[0.1, 0.1, ""])
    ev = verdict_evidence(t)
    np.testing.assert_allclose(ev.values["p_chosen"], [(0.8 + 0.7) / 2, (0.6 + 0.7) / 2, 0.5])
    h = lambda *p: -sum(x * np.log(x) for x in p if x > 0)  # noqa: E731
    np.testing.assert_allclose(ev.values["p_entropy"],
                               [(h(.8, .1, .1) + h(.2, .7, .1)) / 2,
                                (h(.3, .6, .1) + h(.7, .2, .1)) / 2, h(.5, .5)])


@pytest.mark.parametrize("bad, says", [(["0.9", "high", "0.5"], "row 2: 'high' is not a number"),
                                       ([0.9, 1.5, 0.5], "row 2: 1.5 is outside [0.0, 1.0]"),
                                       ([0.9, np.inf, 0.5], "row 2")])
def test_malformed_probability_column_is_left_out_with_one_message(bad, says):
    t = _table(judge_winner=["A", "B", "A"], p_A=bad, p_B=[0.1, 0.2, 0.5],
               ppl=[1.2, -3.0, 2.0])
    ev = verdict_evidence(t)
    assert "p_chosen" not in ev.values and "p_entropy" not in ev.values
    assert "log_perplexity" not in ev.values
    prob_msgs = [m for m in ev.messages if "'p_A'" in m]
    assert len(prob_msgs) == 1 and says in prob_msgs[0]
    assert any("'ppl'" in m and "perplexities must be positive" in m for m in ev.messages)
    assert "position_first" in ev.values  # the rest is still there


def test_rule_judge_reads_no_column_of_the_files_judge():
    t = _table(judge_winner=["A", "B", "A"], judge_winner_gpt35=["A", "A", "B"],
               p_A=[0.9, 0.1, 0.8], p_B=[0.1, 0.9, 0.2])
    ev = verdict_evidence(apply_judge_rule(t, "position-a"))
    assert not any(k.startswith(("agrees", "p_")) for k in ev.values)


def test_unknown_signal_names_are_refused():
    with pytest.raises(PUAuditError, match="Unknown evidence signal"):
        AuditConfig(evidence="position_first,nope")
    assert AuditConfig(evidence="position_first, bt_gap").evidence == ("position_first", "bt_gap")


def _position_planted(n=1500, seed=0):
    """Random embeddings (no text signal); the judge is wrong on 45% of the rows where it picks
    A and on 5% where it picks B."""
    rng = np.random.default_rng(seed)
    judge = rng.choice(["A", "B"], n)
    wrong = rng.random(n) < np.where(judge == "A", 0.45, 0.05)
    human = np.where(wrong, np.where(judge == "A", "B", "A"), judge).astype(object)
    human[rng.random(n) > 0.5] = ""
    df = pd.DataFrame({"prompt": [f"q{i}" for i in range(n)],
                       "response_a": [f"a {i}" for i in range(n)],
                       "response_b": [f"b {i}" for i in range(n)],
                       "category": rng.choice(["x", "y"], n),
                       "judge_winner": judge, "human_winner": human})
    emb = PairEmbeddings(rng.normal(size=(n, 16)), rng.normal(size=(n, 16)))
    return load_comparisons(df), emb, ~wrong


def test_evidence_scorer_finds_the_position_errors():
    table, emb, right = _position_planted()
    prep = prepare_split(table, emb, AuditConfig(p_ratio=0.4))
    auto = score_split(prep, AuditConfig(calibration_bags=10))
    assert auto.scorer == "evidence"
    info = auto.diagnostics["auto"]
    assert info["log_loss"]["evidence"] < min(v for k, v in info["log_loss"].items()
                                              if k != "evidence")
    coef = auto.diagnostics["evidence"]["coef"]
    assert coef[0]["feature"] == "position_first" and coef[0]["coef"] < 0
    assert coef[0]["hi"] < 0  # negative in every fold fit
    # P(judge right): ~0.55 where the judge picked A, ~0.95 where it picked B
    u = prep.u_rows
    pa = auto.p_judge_right[u][prep.judge[u] == "A"].mean()
    pb = auto.p_judge_right[u][prep.judge[u] == "B"].mean()
    assert pa == pytest.approx(0.55, abs=0.08) and pb == pytest.approx(0.95, abs=0.05)
    assert auroc_judge_right(prep, auto) > 0.7
    # the embedding scorers alone see nothing
    none = score_split(prepare_split(table, emb, AuditConfig(p_ratio=0.4, evidence="none")),
                       AuditConfig(calibration_bags=10))
    assert none.scorer != "evidence" and auroc_judge_right(prep, none) < 0.6


def test_audit_exports_evidence_columns_and_none_switches_them_off():
    table, emb, _ = _position_planted(n=600, seed=1)
    res = audit_table(table, emb, AuditConfig(calibration_bags=5))
    cols = res.columns()
    np.testing.assert_array_equal(cols["puaudit_evidence_position_first"],
                                  (table.judge == "A").astype(float))
    assert res.summary()["scorer_used"] == "evidence"
    off = audit_table(table, emb, AuditConfig(calibration_bags=5, evidence="none"))
    assert not any(k.startswith("puaudit_evidence_") for k in off.columns())
    assert off.summary()["scorer_used"] != "evidence"
    with pytest.raises(PUAuditError, match="no signal to learn from"):
        audit_table(table, emb, AuditConfig(scorer="evidence", evidence="none"))


def test_a_judges_text_column_is_not_taken_for_verdicts():
    t = _table(judge_winner=["A", "B", "A", "B"],
               g1_judgment=["Assistant A explains more.", "B is better [[B]]", "tie?", "long"],
               judge_winner_gpt35=["A", "A", "B", "maybe"])
    ev = verdict_evidence(t)
    assert not any("g1_judgment" in m for m in ev.messages)
    # a verdict column with one unreadable value is named, not silently dropped
    assert any("'judge_winner_gpt35'" in m and "'maybe'" in m for m in ev.messages)


def _planted_with_confidence(signal, seed=0):
    from puaudit.data.simulate_judges import add_judge_probabilities, simulated_confidence
    from tests.conftest import planted_set
    df, a, b, _ = planted_set(n=800, signal=signal, seed=seed)
    agree = (df.judge_winner == df.true_winner).to_numpy(float)
    conf = simulated_confidence(agree, df.question_id.to_numpy(), auroc=0.75, random_state=seed)
    return df, add_judge_probabilities(df, "judge_winner", conf, prefix=""), PairEmbeddings(a, b)


def test_auto_keeps_the_judges_confidence_on_a_log_loss_tie_and_yields_to_a_real_gain():
    df, with_p, emb = _planted_with_confidence(1.6)
    info = audit_table(load_comparisons(with_p), emb, AuditConfig()).summary()["scorer_choice"]
    ll = info["log_loss"]
    # prior-ot's log loss is lower by 0.0015: within noise, so the evidence (p_chosen) stays
    assert ll["prior-ot"] < ll["evidence"] < ll["prior-ot"] + 0.005
    assert info["chosen"] == "evidence"
    assert info["reason"].startswith("evidence kept: it reads the judge's own probabilities")
    # without the judge's probabilities the rule does not apply: the lowest log loss decides
    plain = audit_table(load_comparisons(df), emb, AuditConfig()).summary()["scorer_choice"]
    assert plain["reason"].startswith("lowest cross-fitted")
    # texts that predict far better (stronger text signal) replace the evidence
    _, with_p2, emb2 = _planted_with_confidence(2.0)
    info2 = audit_table(load_comparisons(with_p2), emb2, AuditConfig()).summary()["scorer_choice"]
    assert info2["chosen"] == "knn" and info2["reason"].startswith("lowest cross-fitted")


def test_paired_gain_is_the_items_mean_log_loss_gain_over_its_standard_error():
    from puaudit.audit.scorers.calibration import paired_gain
    y = np.array([1, 1, 0, 1, 0, 1], float)
    q_ref = np.array([0.6, 0.7, 0.4, 0.5, 0.5, 0.6])
    q_new = np.array([0.8, 0.9, 0.3, 0.6, 0.2, 0.7])
    groups = np.array(["a", "a", "b", "c", "d", "e"])
    ll = lambda q: -(y * np.log(q) + (1 - y) * np.log(1 - q))  # noqa: E731
    d = ll(q_ref) - ll(q_new)
    per_item = np.array([d[0] + d[1], d[2], d[3], d[4], d[5]])
    want = per_item.mean() / (per_item.std(ddof=1) / np.sqrt(5))
    assert paired_gain(q_ref, q_new, y, groups) == pytest.approx(want)
    assert paired_gain(q_ref, q_ref, y, groups) == 0.0
