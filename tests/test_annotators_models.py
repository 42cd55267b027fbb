"""puaudit.annotators: the EM ports against crowd-kit, statistics against known answers,
a planted population with spammers and biased voters, CROWDLAB against cleanlab, kappas against
statsmodels / scikit-learn, and the model-based human source of the audit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit.annotators.consensus import consensus_labels
from puaudit.annotators import (
    LABELS,
    annotator_model_report,
    annotator_stats,
    collect_votes,
    fit_truth_model,
    fleiss_kappa_items,
    item_pred_probs,
    model_consensus_labels,
    simulate_votes,
)
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError

CODE = {"A": 0, "B": 1, "tie": 2}


def _planted(seed=0, shuffle=True, n=500, **kw):
    df, info = simulate_votes(n, random_state=seed, shuffle_order=shuffle, **kw)
    table = load_comparisons(df)
    votes = collect_votes(table)
    truth = np.array([CODE[x] for x in df["true_winner"]])[votes.item_row]
    return df, info, table, votes, truth


@pytest.fixture(scope="module")
def planted_shuffled():
    return _planted(0, shuffle=True)


@pytest.fixture(scope="module")
def planted_fixed():
    return _planted(1, shuffle=False)


# ------------------------------------------------------------------------------------------
# votes
# ------------------------------------------------------------------------------------------

def test_votes_are_translated_into_each_items_reference_order(planted_shuffled):
    df, _, table, votes, truth = planted_shuffled
    people = votes.model_mask(False)
    assert people.sum() == len(df) and votes.judge == votes.n_workers - 1
    assert votes.workers[-1] == "LLM judge" and votes.n_items == 500
    # a vote on a row shown the other way round names the other letter of the reference order
    for k in np.flatnonzero(people)[:200]:
        r = votes.row[k]
        shown = CODE[df["human_winner"].iloc[r]]
        assert votes.shown[k] == shown
        assert votes.label[k] == (1 - shown if votes.flip[k] and shown < 2 else shown)
        assert (df["response_a"].iloc[r] == df["response_a"].iloc[votes.item_row[votes.item[k]]]) \
            != votes.flip[k]
    # the judge votes once per item
    assert np.bincount(votes.item[~people], minlength=500).max() == 1


def test_second_vote_of_one_person_on_one_item_is_dropped():
    df, _ = simulate_votes(40, random_state=3)
    dup = pd.concat([df, df.iloc[[0]].assign(human_winner="tie")], ignore_index=True)
    votes = collect_votes(load_comparisons(dup))
    assert votes.n_duplicates == 1 and votes.model_mask(False).sum() == len(df)


def test_errors_name_the_fix():
    df, _ = simulate_votes(30, random_state=0)
    with pytest.raises(PUAuditError, match="--annotator-col"):
        collect_votes(load_comparisons(df.rename(columns={"annotator": "who"})))
    with pytest.raises(PUAuditError, match="judge_name"):
        collect_votes(load_comparisons(df.assign(annotator="LLM judge")))
    votes = collect_votes(load_comparisons(df))
    with pytest.raises(PUAuditError, match="Unknown annotator model"):
        fit_truth_model(votes, model="glad")
    with pytest.raises(PUAuditError, match="probabilities"):
        fit_truth_model(votes, model="crowdlab")
    single = df.drop_duplicates("question_id")
    with pytest.raises(PUAuditError, match="two or more votes"):
        fit_truth_model(collect_votes(load_comparisons(single)), model="ds")


# ------------------------------------------------------------------------------------------
# the EM ports reproduce crowd-kit
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["ds", "mace"])
def test_port_reproduces_crowdkit(planted_fixed, model):
    *_, votes, _ = planted_fixed
    ck = fit_truth_model(votes, model=model, engine="crowdkit")
    port = fit_truth_model(votes, model=model, engine="numpy")
    np.testing.assert_allclose(port.posterior, ck.posterior, atol=1e-9)
    np.testing.assert_allclose(port.likelihood, ck.likelihood, atol=1e-9)
    assert (port.consensus == ck.consensus).all()
    if model == "mace":
        np.testing.assert_allclose(port.worker_info["competence"],
                                   ck.worker_info["competence"], atol=1e-9)


def test_ds_confusion_in_the_shown_order_equals_crowdkits_errors_when_orders_agree(planted_fixed):
    """The M-step in the shown orientation is crowd-kit's M-step when no row is flipped."""
    from crowdkit.aggregation import DawidSkene

    *_, votes, _ = planted_fixed
    assert not votes.flip[votes.model_mask(False)].any()
    fit = fit_truth_model(votes, model="ds")
    stats = annotator_stats(votes, fit.posterior, weights=fit.fit_items.astype(float))
    m = votes.model_mask(False) & fit.fit_items[votes.item]
    data = pd.DataFrame({"task": votes.item[m], "worker": votes.workers[votes.worker[m]],
                         "label": np.array(LABELS, dtype=object)[votes.label[m]]})
    probas = pd.DataFrame(fit.posterior[fit.fit_items], index=np.flatnonzero(fit.fit_items),
                          columns=list(LABELS))
    errors = DawidSkene._m_step(data, probas)                 # rows (worker, vote), cols truth
    for j, w in enumerate(votes.workers[:-1]):
        for v in LABELS:
            if (w, v) not in errors.index:
                continue
            for t in LABELS:
                assert stats["confusion"][j, CODE[t], CODE[v]] == pytest.approx(
                    errors.loc[(w, v), t], abs=1e-6)


def test_mace_fit_does_not_depend_on_row_order(planted_fixed):
    """crowd-kit's MACE pairs its sorted strategy counts with first-appearance codes; the wrapper
    feeds it votes in an order where both agree, so shuffling the file changes nothing."""
    df, *_ = planted_fixed
    a = fit_truth_model(collect_votes(load_comparisons(df)), model="mace")
    shuffled = df.sample(frac=1.0, random_state=7).reset_index(drop=True)
    vb = collect_votes(load_comparisons(shuffled))
    b = fit_truth_model(vb, model="mace")
    va = collect_votes(load_comparisons(df))
    pa = pd.DataFrame(a.posterior, index=va.items)
    pb = pd.DataFrame(b.posterior, index=vb.items).loc[pa.index]
    # the reference order of an item may differ: compare P(tie) and the strict max
    np.testing.assert_allclose(pa[2], pb[2], atol=1e-9)
    np.testing.assert_allclose(pa[[0, 1]].max(axis=1), pb[[0, 1]].max(axis=1), atol=1e-9)


# ------------------------------------------------------------------------------------------
# statistics against known answers
# ------------------------------------------------------------------------------------------

def test_statistics_on_the_true_posterior_are_plain_shares(planted_shuffled):
    """Given the truth itself as the posterior, every statistic is a share counted by pandas."""
    df, info, _, votes, truth = planted_shuffled
    s = annotator_stats(votes, np.eye(3)[truth])
    d = df.assign(v=df["human_winner"].map(CODE), t=df["true_winner"].map(CODE),
                  la=df["response_a"].str.len(), lb=df["response_b"].str.len())
    for j, w in enumerate(votes.workers[:-1]):
        g = d[(d["annotator"] == w) & (d["v"] < 2)]
        a_aa = (g[g["t"] == 0]["v"] == 0).mean()
        a_bb = (g[g["t"] == 1]["v"] == 1).mean()
        a_ba = (g[g["t"] == 1]["v"] == 0).mean()
        assert s["skill"][j] == pytest.approx((a_aa + a_bb) / 2)
        assert s["position_bias"][j] == pytest.approx((a_aa + a_ba) / 2)
        assert s["p_a_given_b"][j] == pytest.approx(a_ba)
        lv = np.where(g["la"] > g["lb"], 0, 1)                   # the longer one, as shown
        true_long = g["t"].to_numpy() == lv
        picks_long = g["v"].to_numpy() == lv
        expected = (picks_long[true_long].mean() + picks_long[~true_long & (g["t"] < 2)].mean()) / 2
        assert s["length_bias"][j] == pytest.approx(expected)
        ties = d[(d["annotator"] == w) & (d["t"] < 2)]
        assert s["tie_given_strict"][j] == pytest.approx((ties["v"] == 2).mean())
    roles = info["roles"]
    j = list(votes.workers).index(next(w for w, r in roles.items() if r == "always_a"))
    assert s["position_bias"][j] == 1.0 and s["skill"][j] == 0.5
    j = list(votes.workers).index(next(w for w, r in roles.items() if r == "longer"))
    assert s["length_bias"][j] == 1.0


def test_showing_every_pair_the_other_way_mirrors_only_position(planted_fixed):
    df, *_ = planted_fixed
    flip = {"A": "B", "B": "A"}
    swapped = df.assign(response_a=df["response_b"], response_b=df["response_a"],
                        human_winner=df["human_winner"].map(lambda v: flip.get(v, v)),
                        judge_winner=df["judge_winner"].map(lambda v: flip.get(v, v)))
    kw = dict(n_boot=0, engine="numpy")
    a = annotator_model_report(load_comparisons(df), **kw).annotators.set_index("annotator")
    b = annotator_model_report(load_comparisons(swapped), **kw).annotators.set_index("annotator")
    b = b.loc[a.index]
    for col in ("skill", "length_bias", "tie_given_strict", "tie_given_tie", "cohen_kappa"):
        np.testing.assert_allclose(a[col], b[col], atol=1e-9, err_msg=col)
    np.testing.assert_allclose(a["position_bias"], 1 - b["position_bias"], atol=1e-9)
    np.testing.assert_allclose(a["p_a_given_b"], b["p_b_given_a"], atol=1e-9)


def test_majority_vote_model_is_the_existing_consensus(planted_shuffled):
    _, _, table, votes, _ = planted_shuffled
    fit = fit_truth_model(votes, model="mv")
    rows = consensus_labels(table)[votes.item_row]
    assert [LABELS[c] for c in fit.consensus] == rows.tolist()


def test_leave_own_vote_out_posterior(planted_shuffled):
    *_, votes, _ = planted_shuffled
    fit = fit_truth_model(votes, model="ds", engine="numpy")
    loo, other = fit.loo_posterior(votes)
    k = int(np.flatnonzero(fit.in_model & other)[5])
    i, keep = votes.item[k], fit.in_model & (votes.item == votes.item[k])
    keep[k] = False
    ll = fit.log_prior + sum(np.log(fit.likelihood[votes.worker[q], :, votes.label[q]])
                             for q in np.flatnonzero(keep))
    expected = np.exp(ll - ll.max())
    np.testing.assert_allclose(loo[k], expected / expected.sum(), atol=1e-9)
    assert not other[np.flatnonzero(np.bincount(votes.item[fit.in_model])[votes.item] == 1)].any()
    mv = fit_truth_model(votes, model="mv")
    loo_mv, _ = mv.loo_posterior(votes)
    others = votes.label[keep]
    np.testing.assert_allclose(loo_mv[k], np.bincount(others, minlength=3) / len(others))
    assert i == votes.item[k]


def test_cohen_kappa_against_sklearn_and_fleiss_against_statsmodels(planted_shuffled):
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    _, _, table, votes, _ = planted_shuffled
    rep = annotator_model_report(table, n_boot=0, engine="numpy", votes=votes)
    loo, other = rep.fit.loo_posterior(votes)
    loo_shown = np.where(votes.flip[:, None], loo[:, [1, 0, 2]], loo)
    cons = loo_shown.argmax(1)
    for j in (1, 4, 10):
        sel = (votes.worker == j) & other
        expected = cohen_kappa_score(votes.shown[sel], cons[sel], labels=[0, 1, 2])
        assert rep.annotators["cohen_kappa"].iloc[j] == pytest.approx(expected, abs=1e-9)
        assert rep.annotators["n_kappa"].iloc[j] == sel.sum()
    people = votes.model_mask(False)
    per_item = pd.DataFrame({"i": votes.item[people], "l": votes.label[people]})
    sizes = per_item.groupby("i").size()
    k = int(sizes[sizes >= 2].value_counts().idxmax())
    rows = per_item[per_item["i"].isin(sizes[sizes == k].index)]
    wide = np.vstack([g["l"].to_numpy() for _, g in rows.groupby("i")])
    expected = fleiss_kappa(aggregate_raters(wide, n_cat=3)[0])
    got = fleiss_kappa_items(votes)
    assert got["fleiss_votes_per_item"] == k and got["fleiss_items"] == len(wide)
    assert got["fleiss_kappa"] == pytest.approx(expected)


# ------------------------------------------------------------------------------------------
# a planted population (simulate_votes) with a known truth
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed,shuffle", [(0, True), (1, False), (2, True)])
def test_planted_population_consensus_and_flags(seed, shuffle):
    """500 items, 3-5 votes, 2 random spammers, 1 always-A, 1 always-longer, 8 people 75-90%:
    model consensus beats majority vote by 0.02, every bad voter is flagged, no good one."""
    df, info, table, votes, truth = _planted(seed, shuffle)
    acc = {m: float((fit_truth_model(votes, model=m, engine="numpy").consensus == truth).mean())
           for m in ("mv", "ds", "mace")}
    assert acc["ds"] >= acc["mv"] + 0.02, acc
    assert acc["mace"] >= acc["mv"] + 0.02, acc
    for model in ("ds", "mace"):
        engine = "crowdkit" if (model, seed) == ("ds", 0) else "numpy"
        rep = annotator_model_report(table, model=model, n_boot=100, engine=engine, votes=votes,
                                     random_state=seed)
        a = rep.annotators.set_index("annotator")
        flagged = {w for w, f in a["model_flags"].items() if f}
        roles = info["roles"]
        bad = {w for w, r in roles.items() if r != "good"}
        good = {w for w, r in roles.items() if r == "good"}
        assert bad <= flagged, (model, bad - flagged)
        assert len(good & flagged) <= 1, (model, good & flagged)
        for w, r in roles.items():
            if r == "random":
                assert a.loc[w, "flag_spammer"]
            if r == "always_a":
                assert a.loc[w, "flag_position"] and a.loc[w, "position_bias_lo"] > 0.9
            if r == "longer":
                assert a.loc[w, "flag_length"] and a.loc[w, "length_bias_lo"] > 0.9
        assert a.loc["LLM judge", "skill"] == pytest.approx(0.8, abs=0.08)


def test_dawid_skene_recovers_the_planted_confusion_matrices(planted_shuffled):
    """Without seeing the truth, Dawid-Skene finds each voter's confusion matrix as counted
    against the truth, and its intervals cover the planted probabilities."""
    _, info, table, votes, truth = planted_shuffled
    rep = annotator_model_report(table, n_boot=100, engine="numpy", votes=votes)
    counted = annotator_stats(votes, np.eye(3)[truth])["confusion"]
    names = list(votes.workers)
    covered, cells = 0, 0
    for w, planted in info["confusion"].items():
        if planted is None:
            continue
        j = names.index(w)
        est, lo, hi = rep.confusion[j], rep.confusion_lo[j], rep.confusion_hi[j]
        # about 50 items have a tie truth: the point estimates are held to the strict rows,
        # the intervals to every cell
        assert np.abs(est[:2] - counted[j][:2]).max() < 0.1, (w, est, counted[j])
        covered += int(((lo <= planted + 1e-9) & (planted <= hi + 1e-9)).sum())
        cells += planted.size
    assert covered / cells >= 0.85, covered / cells
    # and skill is the planted accuracy's strict share for the careful ones
    for w, a in info["accuracy"].items():
        j = names.index(w)
        assert rep.annotators["skill"].iloc[j] == pytest.approx(a / (a + (1 - a) / 2), abs=0.08)
        assert rep.annotators["skill_lo"].iloc[j] <= rep.annotators["skill"].iloc[j] \
            <= rep.annotators["skill_hi"].iloc[j]


def test_intervals_never_collapse_on_a_perfect_record():
    """An annotator who never loses a disagreement: the bootstrap gives [1, 1]; the reported
    interval keeps the Jeffreys bound of the votes behind the estimate."""
    df, info = simulate_votes(120, random_state=5, n_good=4, accuracy=(0.999, 0.9999),
                              n_random=1, n_always_a=0, n_longer=0, votes_per_item=(3, 4))
    rep = annotator_model_report(load_comparisons(df), n_boot=50, engine="numpy")
    a = rep.annotators.set_index("annotator")
    good = [w for w, r in info["roles"].items() if r == "good"]
    assert (a.loc[good, "skill"] > 0.99).all()
    assert (a.loc[good, "skill_lo"] < 0.99).all() and (a.loc[good, "skill_lo"] > 0.85).all()


# ------------------------------------------------------------------------------------------
# CROWDLAB (cleanlab) with a model's probabilities
# ------------------------------------------------------------------------------------------

def _model_probs(truth, acc, rng):
    """A calibrated model that ranks the truth first with probability ``acc``."""
    probs = np.full((len(truth), 3), (1 - acc) / 2)
    probs[np.arange(len(truth)), truth] = acc
    return probs * rng.uniform(0.8, 1.2, probs.shape)


def test_crowdlab_posterior_is_cleanlabs(planted_shuffled):
    from cleanlab.multiannotator import get_label_quality_multiannotator

    *_, votes, truth = planted_shuffled
    pred = _model_probs(truth, 0.7, np.random.default_rng(0))
    pred /= pred.sum(1, keepdims=True)
    fit = fit_truth_model(votes, model="crowdlab", pred_probs=pred)
    m = fit.in_model
    wide = np.full((votes.n_items, votes.n_workers - 1), np.nan)
    wide[votes.item[m], votes.worker[m]] = votes.label[m]
    lq = get_label_quality_multiannotator(pd.DataFrame(wide), pred, verbose=False,
                                          return_annotator_stats=False,
                                          return_detailed_quality=False)["label_quality"]
    assert (fit.consensus == lq["consensus_label"].to_numpy()).all()
    # cleanlab's consensus quality is the rebuilt posterior's probability of the consensus
    np.testing.assert_allclose(fit.posterior[np.arange(votes.n_items), fit.consensus],
                               lq["consensus_quality_score"].to_numpy(), atol=1e-9)
    assert np.isfinite(fit.worker_info["weight"][:-1]).all()


def test_crowdlab_with_a_good_model_beats_majority_vote(planted_shuffled):
    *_, votes, truth = planted_shuffled
    pred = _model_probs(truth, 0.8, np.random.default_rng(1))
    pred /= pred.sum(1, keepdims=True)
    acc_mv = (fit_truth_model(votes, model="mv").consensus == truth).mean()
    fit = fit_truth_model(votes, model="crowdlab", pred_probs=pred)
    assert (fit.consensus == truth).mean() >= acc_mv + 0.02
    loo, other = fit.loo_posterior(votes)
    assert np.allclose(loo.sum(1), 1) and other.any()


def test_item_pred_probs_follow_each_rows_order():
    df, _ = simulate_votes(60, random_state=2, shuffle_order=True)
    table = load_comparisons(df)
    votes = collect_votes(table)
    p = np.full(len(df), 0.9)
    probs = item_pred_probs(table, votes, p)
    tau = np.mean(votes.label[votes.model_mask(False)] == 2)
    for i in range(5):
        rows = np.flatnonzero(table.item_id == votes.items[i])
        picks = []
        for r in rows:  # the judge's pick in the item's reference order
            same = df["response_a"].iloc[r] == df["response_a"].iloc[votes.item_row[i]]
            x = CODE[df["judge_winner"].iloc[r]]
            picks.append(x if same or x == 2 else 1 - x)
        if picks[0] == 2:
            assert np.allclose(probs[i], 1 / 3)
            continue
        assert probs[i][picks[0]] == pytest.approx((1 - tau) * 0.9, rel=1e-4)
        assert probs[i][2] == pytest.approx(tau, rel=1e-4)


def test_crowdlab_report_needs_probabilities():
    df, _ = simulate_votes(60, random_state=2)
    with pytest.raises(PUAuditError, match="puaudit_p_judge_right"):
        annotator_model_report(load_comparisons(df), model="crowdlab", n_boot=0)
    rep = annotator_model_report(load_comparisons(df), model="crowdlab", n_boot=20,
                                 p_judge_right=np.full(len(df), 0.8))
    assert rep.overall["model_weight"] > 0 and rep.annotators["weight"].notna().any()


# ------------------------------------------------------------------------------------------
# model-based consensus as the audit's human source
# ------------------------------------------------------------------------------------------

def test_model_consensus_labels_in_each_rows_order(planted_shuffled):
    df, _, table, votes, _ = planted_shuffled
    labels = model_consensus_labels(table, model="ds")
    fit = fit_truth_model(collect_votes(table, judge=False), model="ds")
    for r in range(0, len(df), 37):
        i = list(votes.items).index(table.item_id[r])
        c = LABELS[fit.consensus[i]]
        same = df["response_a"].iloc[r] == df["response_a"].iloc[votes.item_row[i]]
        assert labels[r] == (c if same or c == "tie" else {"A": "B", "B": "A"}[c])
    mv = model_consensus_labels(table, model="mv")
    assert (mv == consensus_labels(table)).all()


def test_audit_with_model_based_human_sources():
    from puaudit.audit.config import AuditConfig
    from puaudit.embed.pairs import PairEmbeddings
    from puaudit.audit.estimator import PUAudit
    from tests.conftest import planted_set

    df, e_a, e_b, _ = planted_set(n=600, annotated=0.6, seed=0)
    rng = np.random.default_rng(0)
    voted = df["human_winner"] != ""
    df["annotator"] = np.where(voted, rng.choice(["ann1", "ann2", "ann3", "ann4"], len(df)), "")
    # give 150 items a second, independent vote on a copy of their row
    extra = df[voted].iloc[:150].copy()
    extra["annotator"] = "ann5"
    e_a = np.vstack([e_a, e_a[extra.index]])
    e_b = np.vstack([e_b, e_b[extra.index]])
    df = pd.concat([df, extra], ignore_index=True)
    t = load_comparisons(df)
    for source in ("ds", "crowdlab"):
        est = PUAudit(human_source=source).fit(t, PairEmbeddings(e_a, e_b))
        assert est.result_.params["human_source"] == source
        assert est.metrics_["n"] > 0 and 0 <= est.metrics_["cons_orig"] <= 1
    with pytest.raises(PUAuditError, match="human source"):
        AuditConfig(human_source="glad")
