"""The item-clustered bootstrap: items are drawn, each bringing all of its rows."""

from __future__ import annotations

import numpy as np

from puaudit.stats.bootstrap import cluster_bootstrap_indices, cluster_bootstrap_weights


def test_rows_of_one_item_always_enter_together():
    groups = np.array(["q1", "q1", "q2", "q3", "q3", "q3", 7])
    for w in cluster_bootstrap_weights(groups, 200, random_state=0):
        assert w[0] == w[1] and w[3] == w[4] == w[5]
        # as many items drawn as there are: 4 items
        assert w[[0, 2, 3, 6]].sum() == 4


def test_indices_are_the_weights_draws_in_row_order():
    groups = ["b", "a", "b", "c"]
    ws = list(cluster_bootstrap_weights(groups, 20, random_state=3))
    idxs = list(cluster_bootstrap_indices(groups, 20, random_state=3))
    for w, idx in zip(ws, idxs):
        assert np.array_equal(idx, np.repeat(np.arange(4), w))


def test_an_int_makes_each_row_its_own_item_and_a_generator_is_used_as_is():
    rng = np.random.default_rng(5)
    idx = next(cluster_bootstrap_indices(6, 1, random_state=rng))
    expect = np.sort(np.random.default_rng(5).integers(0, 6, 6))
    assert np.array_equal(idx, expect)
    # the generator advanced: the next draw differs from a fresh one
    again = next(cluster_bootstrap_indices(6, 1, random_state=rng))
    assert not np.array_equal(again, expect)


def test_seeded_and_reproducible_and_empty():
    a = [w.tolist() for w in cluster_bootstrap_weights([1, 1, 2], 5, random_state=9)]
    b = [w.tolist() for w in cluster_bootstrap_weights([1, 1, 2], 5, random_state=9)]
    assert a == b
    assert [len(i) for i in cluster_bootstrap_indices([], 3, random_state=0)] == [0, 0, 0]


def test_clustered_interval_is_wider_than_a_row_bootstrap_for_correlated_rows():
    # 40 items of 10 identical rows each: rows resampled alone would look like 400 draws
    rng = np.random.default_rng(1)
    y = np.repeat(rng.random(40) < 0.5, 10).astype(float)
    items = np.repeat(np.arange(40), 10)
    sd_items = np.std([y[i].mean() for i in cluster_bootstrap_indices(items, 400, random_state=0)])
    sd_rows = np.std([y[i].mean() for i in cluster_bootstrap_indices(len(y), 400, random_state=0)])
    assert sd_items > 2 * sd_rows
