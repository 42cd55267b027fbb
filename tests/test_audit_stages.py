"""The stage cache: a configuration change recomputes only the stages that read the changed
fields, and a cached audit equals a fresh one exactly (groups, probabilities, metrics)."""

import json
import pickle

import numpy as np
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.estimator import PUAudit
from puaudit.audit.stages import audit_table
from puaudit.audit.stages import StageCache, scoring_uses_m, stage_key
from puaudit.data.schema import load_comparisons


@pytest.fixture(scope="module")
def small(planted):
    df, e_a, e_b, _ = planted
    # 600 rows: every stage runs, fast enough to audit a dozen times
    return load_comparisons(df.iloc[:600]), PairEmbeddings(e_a[:600], e_b[:600], "planted")


def assert_same_audit(a, b):
    """Two audits are equal: every row's group, verdict, score, probability, and every number
    of the summary (metrics, per type, expected consistency, the automatic choice)."""
    assert np.array_equal(a.group, b.group)
    assert np.array_equal(a.adjusted, b.adjusted)
    assert np.array_equal(a.split, b.split)
    np.testing.assert_array_equal(a.score, b.score)
    np.testing.assert_array_equal(a.p_judge_right, b.p_judge_right)
    assert json.dumps(a.summary(), sort_keys=True) == json.dumps(b.summary(), sort_keys=True)
    if a.certification is not None:
        np.testing.assert_array_equal(a.certification.trusted, b.certification.trusted)


@pytest.mark.parametrize("scorer", ["auto", "probe", "pot"])
def test_m_step_equals_a_fresh_audit_and_refits_only_what_reads_m(small, scorer):
    table, emb = small
    cache = StageCache(table, emb)
    first = AuditConfig(scorer=scorer, m=0.7)
    cache.audit(first)
    before = dict(cache.calls)
    for m in (0.75, 0.62, None):  # None: back to the estimate from P
        cfg = first.replace(m=m)
        assert_same_audit(cache.audit(cfg), audit_table(table, emb, cfg))
    calls = cache.calls
    assert calls["split"] == before["split"] == 1
    assert calls["evidence"] == before["evidence"] == 1
    assert calls["relabel"] == before["relabel"] + 3
    if scorer == "pot":
        # pot transports m as its mass: it is fitted again at each new m
        assert scoring_uses_m(first)
        assert before["fit"] == 1 and calls["fit"] == 1 + 3
        assert calls["choice"] == before["choice"] + 3
    else:
        # auto compares prior-ot, probe, knn and centroid: none reads m (prior-ot transports P's
        # agreement rate), so an m step only shifts the prior of the chosen scores and relabels
        assert not scoring_uses_m(first)
        n_fits = 4 if scorer == "auto" else 1
        assert calls["fit"] == before["fit"] == n_fits
        assert calls["choice"] == before["choice"] == 1


def test_p_ratio_step_reuses_the_evidence_and_a_second_visit_reuses_everything(small):
    table, emb = small
    cache = StageCache(table, emb)
    cfg = AuditConfig(scorer="probe")
    cache.audit(cfg)
    moved = cfg.replace(p_ratio=0.5)
    assert not cache.has_scores(moved)
    assert_same_audit(cache.audit(moved), audit_table(table, emb, moved))
    assert cache.calls["evidence"] == 1 and cache.calls["split"] == 2
    assert cache.calls["fit"] == 2
    assert cache.has_scores(cfg)
    cache.audit(cfg)  # back to the first setting: nothing is fitted again
    assert cache.calls["split"] == 2 and cache.calls["fit"] == 2


def test_certify_and_rule_changes_fit_nothing(small):
    table, emb = small
    cache = StageCache(table, emb)
    cfg = AuditConfig(m=0.7)
    cache.audit(cfg)
    fits, relabels = cache.calls["fit"], cache.calls["relabel"]
    for target in (0.8, 0.85):  # Certify and its target slider: certification only
        certified = cfg.replace(target_agreement=target)
        assert_same_audit(cache.audit(certified), audit_table(table, emb, certified))
    assert cache.calls["relabel"] == relabels and cache.calls["audit"] == 3
    for changed in (cfg.replace(rule="paper"), cfg.replace(margin=0.1)):
        assert_same_audit(cache.audit(changed), audit_table(table, emb, changed))
    assert cache.calls["fit"] == fits and cache.calls["split"] == 1
    assert cache.calls["relabel"] == relabels + 2


def test_a_seed_change_refits_and_matches(small):
    table, emb = small
    cache = StageCache(table, emb)
    cache.audit(AuditConfig(scorer="centroid"))
    cfg = AuditConfig(scorer="centroid", random_state=3)
    assert_same_audit(cache.audit(cfg), audit_table(table, emb, cfg))
    assert cache.calls["split"] == 2 and cache.calls["fit"] == 2


def test_stage_keys_name_only_their_fields():
    a, b = AuditConfig(m=0.7), AuditConfig(m=0.8, rule="paper")
    for stage in ("human", "evidence", "split", "fit", "choice", "certify"):
        assert stage_key(a, stage) == stage_key(b, stage)
    assert stage_key(a, "relabel") != stage_key(b, "relabel")
    assert stage_key(a, "split") != stage_key(a.replace(p_ratio=0.5), "split")


def test_puaudit_refit_after_set_params_reuses_its_stages(small):
    table, emb = small
    est = PUAudit(m=0.7, scorer="probe").fit(table, emb)
    stages = est.stages_
    est.set_params(m=0.8).fit(table, emb, stages=stages)
    assert est.stages_ is stages and stages.calls["fit"] == 1 and stages.calls["split"] == 1
    fresh = PUAudit(m=0.8, scorer="probe").fit(table, emb)
    assert_same_audit(est.result_, fresh.result_)
    # other embeddings (same content, another object): nothing is reused
    other = PairEmbeddings(emb.vectors[emb.idx_a], emb.vectors[emb.idx_b], "planted")
    est.fit(table, other)
    assert est.stages_ is not stages
    # a fitted estimator still pickles (the cache leaves its locks and stages behind)
    back = pickle.loads(pickle.dumps(est))
    assert_same_audit(back.result_, est.result_)


def test_evaluate_through_the_stage_cache_equals_evaluate(small):
    from puaudit.audit.evaluate import evaluate

    table, emb = small
    kw = dict(seeds=2, scorers=("probe", "centroid"), rules=("guarded", "paper"),
              config=AuditConfig(m=0.7))
    cache = StageCache(table, emb)
    cached = evaluate(table, emb, stages=cache, **kw)
    assert json.dumps(cached["leaderboard"], sort_keys=True) == json.dumps(
        evaluate(table, emb, **kw)["leaderboard"], sort_keys=True)
    assert cache.calls["split"] == 2 and cache.calls["fit"] == 4


def test_prior_ot_transports_p_rate_and_m_moves_only_its_prior(small):
    """prior-ot's mass is P's agreement rate whatever m is: the scores at m = 0.6 are those at
    the estimate, and the probabilities are those moved by the Bayes prior shift alone."""
    from puaudit.audit.scorers.calibration import prior_shift
    from puaudit.audit.scorers import TRANSPORT_PRIOR_FLOOR, transport_prior

    table, emb = small
    est = audit_table(table, emb, AuditConfig(scorer="prior-ot"))
    moved = audit_table(table, emb, AuditConfig(scorer="prior-ot", m=0.6))
    np.testing.assert_array_equal(moved.score, est.score)
    u = np.isfinite(est.p_judge_right) & (est.split != 0) & np.isfinite(moved.p_judge_right)
    base = est.m
    np.testing.assert_allclose(moved.p_judge_right[u],
                               prior_shift(est.p_judge_right[u], base_rate=base, target=0.6),
                               rtol=1e-12, atol=1e-12)
    assert transport_prior("prior-ot", m=0.6, base_rate=0.83) == 0.83
    assert transport_prior("pot", m=0.6, base_rate=0.83) == 0.6
    assert transport_prior("prior-ot", m=0.6, base_rate=0.0) == TRANSPORT_PRIOR_FLOOR
