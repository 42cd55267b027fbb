import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from puaudit.audit.scorers.calibration import MonotoneCalibrator
from puaudit.audit.config import AuditConfig
from puaudit.audit.result import EXPORT_COLUMNS
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.estimator import PUAudit
from puaudit.audit.splits import prepare_split
from puaudit.audit.scorers.scoring import score_split
from puaudit.audit.metrics import consistency
from puaudit.audit.relabel import adjust_verdicts, relabel_guarded, relabel_paper
from puaudit.data.io import read_table
from puaudit.data.writers import write_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from tests.conftest import planted_set


def _fit(planted, **kw):
    df, e_a, e_b, right = planted
    est = PUAudit(**kw).fit(load_comparisons(df), PairEmbeddings(e_a, e_b, "planted"))
    return est, right


def test_pot_recovers_planted_positives(planted):
    est, right = _fit(planted, rule="paper")
    r = est.result_
    audited = np.isin(r.split, ["unlabelled", "validation"])
    assert audited.sum() > 500
    assert roc_auc_score(right[audited], r.score[audited]) >= 0.9
    # scores are responsibilities in [0, 1]
    assert np.nanmin(r.score[audited]) >= -1e-9 and np.nanmax(r.score[audited]) <= 1 + 1e-9


@pytest.mark.parametrize("scorer", ["pot", "full-ot", "centroid", "probe", "knn"])
def test_every_scorer_improves_a_weak_judge_on_planted_data(planted, scorer):
    est, right = _fit(planted, scorer=scorer)
    m = est.metrics_
    assert m["cons_orig"] == pytest.approx(0.70, abs=0.05)
    assert m["cons_adj"] > m["cons_orig"] + 0.1
    assert m["reversal_precision"] > 0.8


def test_default_m_is_agreement_on_p(planted):
    est, _ = _fit(planted)
    r = est.result_
    p = r.split == "P"
    assert est.m_ == pytest.approx(np.mean(est.table_.judge[p] == est.table_.human[p]))
    est2, _ = _fit(planted, m=0.5)
    assert est2.m_ == 0.5 and est2.m_estimate_ == est.m_estimate_


def test_paper_rule_keeps_floor_m_share_per_type(planted):
    est, _ = _fit(planted, rule="paper", m=0.6)
    r = est.result_
    audited = np.isin(r.split, ["unlabelled", "validation"])
    for t in set(est.table_.question_type):
        rows = audited & (est.table_.question_type == t)
        assert (r.group[rows] == "positive").sum() == int(np.floor(0.6 * rows.sum()))
    neg = r.group == "negative"
    assert (r.adjusted[neg] != est.table_.judge[neg]).all()
    pos = r.group == "positive"
    assert (r.adjusted[pos] == est.table_.judge[pos]).all()


def test_guarded_reverses_nothing_when_scores_are_noise():
    df, e_a, e_b, _ = planted_set(signal=0.0, seed=3)
    est = PUAudit(rule="guarded").fit(load_comparisons(df), PairEmbeddings(e_a, e_b))
    assert (est.groups_ == "negative").sum() == 0
    assert est.metrics_["cons_adj"] == est.metrics_["cons_orig"]
    # the paper rule, by contrast, reverses ~(1-m) of rows and loses consistency
    est_p = PUAudit(rule="paper").fit(load_comparisons(df), PairEmbeddings(e_a, e_b))
    assert est_p.metrics_["cons_adj"] < est_p.metrics_["cons_orig"] - 0.1


def test_export_keeps_every_row_and_column_in_order(planted, tmp_path):
    df, e_a, e_b, _ = planted
    est = PUAudit().fit(load_comparisons(df), PairEmbeddings(e_a, e_b))
    out = est.to_frame()
    assert list(out.columns) == (list(df.columns) + list(EXPORT_COLUMNS)
                                 + ["puaudit_evidence_position_first"])
    pd.testing.assert_frame_equal(out[df.columns], df)
    for ext in ("csv", "parquet", "jsonl"):
        path = write_table(out, tmp_path / f"out.{ext}")
        back = read_table(path)
        assert len(back) == len(df) and list(back.columns) == list(out.columns)
        assert back["prompt"].astype(str).tolist() == df["prompt"].tolist()
        assert back["puaudit_split"].tolist() == out["puaudit_split"].tolist()


def test_reauditing_an_export_does_not_overwrite_columns(planted):
    df, e_a, e_b, _ = planted
    out = PUAudit().fit(load_comparisons(df), PairEmbeddings(e_a, e_b)).to_frame()
    again = PUAudit().fit(load_comparisons(out), PairEmbeddings(e_a, e_b)).to_frame()
    assert "puaudit_score_new" in again.columns
    pd.testing.assert_series_equal(again["puaudit_score"], out["puaudit_score"])


def test_excluded_rows_marked_with_reason(planted):
    df, e_a, e_b, _ = planted
    df = df.copy()
    df.loc[0, "judge_winner"] = "tie"
    df.loc[1, "human_winner"] = "tie (bothbad)"
    df.loc[2, "response_b"] = df.loc[2, "response_a"] + " "  # identical responses (stripped)
    e_b = e_b.copy()
    e_b[2] = e_a[2]
    e_b[3] = e_a[3]  # embeds alike, but the texts differ: audited, not dropped
    r = PUAudit().fit(load_comparisons(df), PairEmbeddings(e_a, e_b)).result_
    assert r.reason[:3].tolist() == ["judge tie", "human tie", "identical responses"]
    assert (r.split[:3] == "excluded").all() and np.isnan(r.score[:3]).all()
    assert r.split[3] != "excluded" and r.reason[3] == ""
    s = r.summary()
    assert s["excluded_reasons"] == {"human tie": 1, "identical responses": 1, "judge tie": 1}
    assert s["excluded_rows"] == {"identical responses": [3]}  # 1-based, as in the export


def test_too_few_annotations_says_how_many():
    df, e_a, e_b, _ = planted_set(n=200, annotated=0.0)
    with pytest.raises(PUAuditError, match="at least 10 annotated rows"):
        PUAudit().fit(load_comparisons(df), PairEmbeddings(e_a, e_b))


def test_all_rows_annotated_p_ratio_one_gives_na_metrics(planted):
    df, e_a, e_b, _ = planted_set(n=300, annotated=1.0)
    r = PUAudit(p_ratio=1.0).fit(load_comparisons(df), PairEmbeddings(e_a, e_b)).result_
    assert (r.split == "P").sum() > 0 and np.isnan(r.metrics["cons_orig"])
    assert r.summary()["cons_orig"] is None


@pytest.mark.parametrize("kw, message", [
    ({"m": 1.5}, r"m must be in \(0, 1.0\], got 1.5"),
    ({"p_ratio": 0}, r"p_ratio must be in \(0, 1.0\], got 0.0"),
    ({"alpha1": 0}, r"alpha1 must be in \(0, 1.0\], got 0.0"),
    ({"scorer": "magic"}, r"Unknown scorer 'magic'"),
    ({"rule": "x"}, r"Unknown rule 'x'"),
])
def test_bad_parameters_raise_our_error(planted, kw, message):
    df, e_a, e_b, _ = planted
    with pytest.raises(PUAuditError, match=message):
        PUAudit(**kw).fit(load_comparisons(df), PairEmbeddings(e_a, e_b))


def test_calibration_is_monotone_and_correct_on_planted_probabilities():
    rng = np.random.default_rng(0)
    s = rng.random(4000)
    y = rng.random(4000) < s  # P(right | s) = s
    for method in ("isotonic", "platt"):
        cal = MonotoneCalibrator(method).fit(s, y)
        grid = np.linspace(0, 1, 101)
        p = cal.predict(grid)
        assert (np.diff(p) >= -1e-12).all()
        assert np.abs(p[10:91] - grid[10:91]).max() < 0.08


def test_cross_fitted_scores_cover_p_rows(planted):
    df, e_a, e_b, _ = planted
    prep = prepare_split(load_comparisons(df), PairEmbeddings(e_a, e_b), AuditConfig(p_ratio=0.3))
    sc = score_split(prep, AuditConfig(scorer="centroid"))
    p = prep.split == "P"
    assert np.isfinite(sc.score[p]).all() and np.isfinite(sc.p_judge_right[p]).all()
    assert len(sc.cv_scores) == p.sum()


def test_relabel_rules_by_hand():
    g = relabel_paper(np.array([0.9, 0.1, 0.5, 0.7]), np.array(["t"] * 4), 0.5)
    assert g.tolist() == ["positive", "negative", "negative", "positive"]
    g = relabel_guarded(np.array([0.2, 0.47, 0.5, 0.56, 0.9]), margin=0.05)
    assert g.tolist() == ["negative", "uncertain", "uncertain", "positive", "positive"]
    assert adjust_verdicts(np.array(["A", "B"], dtype=object),
                           np.array(["negative", "negative"])).tolist() == ["B", "A"]


def test_consistency_by_hand():
    h = np.array(["A", "A", "B", "B"], dtype=object)
    j = np.array(["A", "B", "B", "A"], dtype=object)
    a = np.array(["A", "A", "A", "A"], dtype=object)
    m = consistency(h, j, a)
    assert m["cons_orig"] == 0.5 and m["cons_adj"] == 0.5 and m["delta"] == 0
    assert m["n_reversed"] == 2 and m["reversal_precision"] == 0.5


def test_prior_shift_moves_probabilities_to_m_and_is_the_identity_at_the_base_rate():
    from puaudit.audit.scorers.calibration import prior_shift

    p = np.array([0.1, 0.5, 0.8, np.nan])
    np.testing.assert_allclose(prior_shift(p, base_rate=0.7, target=None), p)
    np.testing.assert_allclose(prior_shift(p, base_rate=0.7, target=0.7), p)
    # odds x m(1-pi)/(pi(1-m)): base 0.5 -> target 0.8 multiplies the odds by 4
    np.testing.assert_allclose(prior_shift(p, base_rate=0.5, target=0.8)[:3],
                               [4 / 13, 0.8, 16 / 17])
    assert np.isnan(prior_shift(p, base_rate=0.5, target=0.8)[3])


def test_m_moves_every_scorers_reversals(planted):
    df, e_a, e_b, _ = planted
    table = load_comparisons(df)
    counts = {}
    for scorer in ("centroid", "prior-ot"):
        counts[scorer] = [int((PUAudit(scorer=scorer, m=m).fit(
            table, PairEmbeddings(e_a, e_b)).groups_ == "negative").sum()) for m in (0.4, 0.7, 0.95)]
        assert counts[scorer][0] > counts[scorer][1] > counts[scorer][2], counts


def test_auto_chooses_from_p_only_and_reports_the_comparison(planted):
    df, e_a, e_b, _ = planted
    table = load_comparisons(df)
    res = PUAudit().fit(table, PairEmbeddings(e_a, e_b)).result_
    info = res.diagnostics["auto"]
    assert info["chosen"] in (*info["candidates"], "stacked")
    assert info["log_loss"][info["chosen"]] == min(info["log_loss"].values())
    assert res.params["scorer"] == "auto" and res.params["scorer_used"] == info["chosen"]
    assert res.summary()["scorer_choice"]["chosen"] == info["chosen"]
    # validation labels are never seen: scrambling them changes neither choice nor scores
    val = res.split == "validation"
    df2 = df.copy()
    flip = {"A": "B", "B": "A"}
    df2.loc[val, "human_winner"] = df2.loc[val, "human_winner"].map(flip)
    res2 = PUAudit().fit(load_comparisons(df2), PairEmbeddings(e_a, e_b)).result_
    assert res2.diagnostics["auto"]["log_loss"] == pytest.approx(info["log_loss"])
    np.testing.assert_array_equal(res2.group, res.group)
    assert res2.metrics["cons_orig"] != res.metrics["cons_orig"]


def test_result_does_not_carry_the_table_and_checks_the_one_it_gets(planted):
    df, e_a, e_b, _ = planted
    table = load_comparisons(df)
    est = PUAudit().fit(table, PairEmbeddings(e_a, e_b, "planted"))
    r = est.result_
    assert not any(isinstance(v, (pd.DataFrame, type(table))) for v in vars(r).values())
    assert r.input.n_rows == len(df) and r.input.content_hash == table.content_hash()
    out = r.to_frame(table)
    assert list(out.columns[: len(df.columns)]) == list(df.columns) and len(out) == len(df)
    pd.testing.assert_frame_equal(out, est.to_frame())
    with pytest.raises(PUAuditError, match="rows"):
        r.to_frame(df.iloc[:-1])
    other = df.copy()
    other.loc[0, "prompt"] = "changed"
    with pytest.raises(PUAuditError, match="differ"):
        r.to_frame(load_comparisons(other))
    with pytest.warns(DeprecationWarning):
        old = r.to_frame()  # the fitted table is still alive (est.table_): deprecated path works
    pd.testing.assert_frame_equal(old, out)
    back = pickle.loads(pickle.dumps(r))  # caches and worker processes pickle results
    pd.testing.assert_frame_equal(back.to_frame(table), out)


def test_clone_gives_the_same_parameters_and_an_unfitted_copy(planted):
    from sklearn.base import clone

    est, _ = _fit(planted, scorer="probe", m=0.7)
    copy = clone(est)
    assert copy.get_params() == est.get_params() and copy is not est
    assert not hasattr(copy, "result_") and not hasattr(copy, "stages_")
    assert [k for k in vars(est) if k not in est.get_params()] == [
        k for k in vars(est) if k.endswith("_") and k not in est.get_params()]


def test_set_params_config_is_what_fit_runs(planted):
    df, e_a, e_b, _ = planted
    table, emb = load_comparisons(df), PairEmbeddings(e_a, e_b, "planted")
    est = PUAudit(scorer="probe").fit(table, emb)
    assert est.result_.params["scorer_used"] == "probe" and est.m_ == est.m_estimate_
    est.set_params(config=AuditConfig(scorer="centroid", m=0.6)).fit(table, emb)
    assert est.config_ == AuditConfig(scorer="centroid", m=0.6)
    assert est.result_.params["scorer_used"] == "centroid" and est.m_ == 0.6
    # a field passed by name beside config wins over the config's
    est.set_params(config=AuditConfig(scorer="centroid"), scorer="knn").fit(table, emb)
    assert est.result_.params["scorer_used"] == "knn"


def test_stages_are_reused_only_through_the_object_given_to_fit(planted):
    df, e_a, e_b, _ = planted
    table, emb = load_comparisons(df), PairEmbeddings(e_a, e_b, "planted")
    est = PUAudit(scorer="probe").fit(table, emb)
    first = est.stages_
    est.fit(table, emb)  # no stages given: a cache of its own, nothing reused
    assert est.stages_ is not first and est.stages_.calls["fit"] == 1
    est.set_params(m=0.8).fit(table, emb, stages=first)
    assert est.stages_ is first and first.calls["fit"] == 1 and first.calls["relabel"] == 2
    other = load_comparisons(df.iloc[::-1].reset_index(drop=True))
    with pytest.raises(PUAuditError, match="another table"):
        est.fit(other, stages=first)
    with pytest.raises(PUAuditError, match="other embeddings"):
        est.fit(table, PairEmbeddings(e_a, e_b, "planted"), stages=first)
