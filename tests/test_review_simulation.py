"""The small version of the review simulation on MT-Bench: a simulated reviewer answers with the
held-back human verdict; the queue's order raises the consistency of the final labels on the
validation rows more than random order does (hashing test encoder, 'longer answer wins' judge)."""

from __future__ import annotations

import numpy as np
import pytest

from puaudit.embed.pairs import embed_table
from puaudit.data.io import read_table
from puaudit.data.schema import apply_judge_rule, load_comparisons
from puaudit.review.simulate import simulate_review, summarise_simulation
from puaudit.embed.hashing import HashingEncoder


def test_queue_beats_random_on_mtbench(mtbench_path):
    table = apply_judge_rule(load_comparisons(read_table(mtbench_path)), "longer")
    emb = embed_table(table, HashingEncoder())
    sim = simulate_review(table, emb, budgets=(50, 100), seeds=(0,))
    s = summarise_simulation(sim).set_index("budget")
    base = s.loc[0, "value_cons_final"]
    assert base == pytest.approx(s.loc[0, "random_cons_final"])
    for k in (50, 100):
        assert s.loc[k, "value_cons_final"] > s.loc[k, "random_cons_final"], s
        assert s.loc[k, "value_cons_final"] > base
        # the queue finds more judge errors per review than random order
        assert s.loc[k, "value_fixed"] > s.loc[k, "random_fixed"]
    # invariants: the same validation rows for every order; reviews counted per item
    assert sim["n_validation"].nunique() == 1
    assert (sim.loc[sim["budget"] > 0, "n_reviewed"] == sim.loc[sim["budget"] > 0, "budget"]).all()
    assert np.all(sim["n_remaining"] <= sim["n_validation"] - sim["n_reviewed"])
