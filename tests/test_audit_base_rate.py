"""When no scorer beats P's base rate, the default audit reverses nothing and says so."""

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.stages import audit_table
from puaudit.data.schema import load_comparisons


def _noise_table(n=1200, seed=0):
    """Judge and people both coin flips, independent of each other and of the (random) texts."""
    rng = np.random.default_rng(seed)
    human = rng.choice(["A", "B"], n).astype(object)
    human[rng.random(n) < 0.4] = ""
    df = pd.DataFrame({"prompt": [f"q{i}" for i in range(n)],
                       "response_a": [f"a {i}" for i in range(n)],
                       "response_b": [f"b {i}" for i in range(n)],
                       "category": rng.choice(["x", "y", "z"], n),
                       "judge_winner": rng.choice(["A", "B"], n), "human_winner": human})
    emb = PairEmbeddings(rng.normal(size=(n, 16)), rng.normal(size=(n, 16)))
    return load_comparisons(df), emb


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noise_reverses_nothing_and_says_why(seed):
    table, emb = _noise_table(seed=seed)
    res = audit_table(table, emb, AuditConfig(random_state=seed, calibration_bags=10))
    auto = res.diagnostics["auto"]
    verdict = res.summary()["verdict"]
    assert not auto["beats_base_rate"] and auto["gain_z"] < auto["gain_z_needed"]
    assert verdict.startswith("No scorer beats the base rate on P by more than noise")
    assert int((res.group == "negative").sum()) == 0, verdict
    assert "nothing is reversed" in verdict


def test_a_scorer_that_beats_the_base_rate_reverses(planted):
    df, e_a, e_b, _ = planted
    res = audit_table(load_comparisons(df), PairEmbeddings(e_a, e_b), AuditConfig())
    assert res.diagnostics["auto"]["beats_base_rate"]
    assert (res.group == "negative").sum() > 0
    assert res.summary()["verdict"].startswith("Reversals help on validation (+")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_m_curve_reverses_nothing_where_the_audit_found_noise(seed):
    from puaudit.audit.m_curve import audit_with_m_curve, m_grid

    table, emb = _noise_table(seed=seed)
    res, curve = audit_with_m_curve(table, emb, AuditConfig(random_state=seed,
                                                             calibration_bags=10))
    assert not res.diagnostics["auto"]["beats_base_rate"]
    assert [c["m"] for c in curve] == list(m_grid(res.m))
    # refits at other m (prior-ot, pot) keep the audit's finding: no point reverses
    assert [c["n_reversed"] for c in curve] == [0] * len(curve), (res.scorer, curve)
