"""The k-nearest-neighbour scorer: plain k-NN when distances are distinct, tied neighbours
sharing the last place otherwise (so the score does not depend on the search's order)."""

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from puaudit.audit.scorers import baselines
from puaudit.audit.scorers.baselines import knn_scores
from puaudit.audit.denoise import normalize_rows


def _unit(deg):
    a = np.deg2rad(np.asarray(deg, dtype=float))
    return np.column_stack([np.cos(a), np.sin(a)])


def test_without_ties_it_is_the_similarity_weighted_k_nearest_share():
    rng = np.random.default_rng(0)
    zp, zu = normalize_rows(rng.normal(size=(60, 8))), normalize_rows(rng.normal(size=(25, 8)))
    x, lab = np.vstack([zp, -zp]), np.r_[np.ones(60), np.zeros(60)]
    dist, idx = NearestNeighbors(n_neighbors=15, metric="cosine").fit(x).kneighbors(zu)
    w = np.maximum(1 - dist, 1e-6)
    np.testing.assert_allclose(knn_scores(zp, zu), (w * lab[idx]).sum(1) / w.sum(1), atol=1e-12)


def test_neighbours_tied_for_the_last_place_share_it():
    # P at 0, 60, 120, 240 degrees; reversals at 180, 240, 300, 60. From the query at 0 degrees:
    # one P at distance 0, then three at distance 0.5 (P at 60, reversals at 60 and 300) for the
    # two places left of k = 3: each counts 2/3, weight 1 - 0.5
    zp = _unit([0, 60, 120, 240])
    s = knn_scores(zp, _unit([0]), n_neighbors=3)
    assert s[0] == pytest.approx((1 + 2 / 3 * 0.5) / (1 + 2 / 3 * 0.5 * 3))


def test_the_score_does_not_depend_on_the_order_of_duplicated_positives():
    # several people judging one pair: the same vector many times in P, with both orientations
    rng = np.random.default_rng(1)
    base = normalize_rows(rng.normal(size=(6, 16)))
    zp = np.vstack([base] * 8 + [-base[:2]] * 5)
    zu = normalize_rows(base + 0.05 * rng.normal(size=base.shape))
    ref = knn_scores(zp, zu)
    for seed in range(5):
        perm = np.random.default_rng(seed).permutation(len(zp))
        np.testing.assert_allclose(knn_scores(zp[perm], zu), ref, atol=1e-12)


def test_ties_beyond_the_first_query_are_all_counted(monkeypatch):
    # 40 copies of one P vector and 40 of its reversal at the same distance: more ties than the
    # 2k neighbours asked for first, so wider queries follow; half are P
    v = _unit([0])
    zp = np.vstack([np.repeat(v, 40, axis=0), np.repeat(-_unit([90]), 40, axis=0)])
    q = _unit([45])  # equidistant from the P vector (0) and the reversal of the second (270 -> 90)
    s = knn_scores(zp, q, n_neighbors=5)
    assert s[0] == pytest.approx(0.5)
    calls = []
    real = baselines._tie_shared
    monkeypatch.setattr(baselines, "_tie_shared", lambda *a: calls.append(a[0].shape) or real(*a))
    knn_scores(zp, q, n_neighbors=5)
    # asked for 2k = 10 first, then 40, then all 160: the last call saw every tied neighbour
    assert [c[1] for c in calls] == [10, 40, 160]


def test_noise_far_below_float32_precision_leaves_the_score_where_it_was():
    # every distinct vector moved by 1e-7, each duplicated as before: a plain k-nearest query
    # re-orders the tied copies and the score jumps; shared ties keep it
    rng = np.random.default_rng(2)
    base = normalize_rows(rng.normal(size=(30, 16)))
    moved = normalize_rows(base + 1e-7 * rng.normal(size=base.shape))
    idx_p, idx_n, idx_u = (rng.integers(0, 30, n) for n in (200, 80, 100))
    a = knn_scores(np.vstack([base[idx_p], -base[idx_n]]), base[idx_u])
    b = knn_scores(np.vstack([moved[idx_p], -moved[idx_n]]), moved[idx_u])
    assert np.abs(a - b).max() < 1e-6
