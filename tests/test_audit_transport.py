"""Partial OT scores: hand-solved problems, POT equality, solver agreement, invariants."""

from __future__ import annotations

import numpy as np
import ot
import pytest
from scipy.stats import spearmanr

import puaudit.audit.scorers.transport as tr
from puaudit.audit.scorers.transport import (
    ot_scores,
    partial_ot_scores,
    partial_wasserstein_plan,
)
from puaudit.errors import PUAuditError


def _unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _structured(n_p, n_u, d=32, pos=0.7, seed=0):
    """P' and the positive share of U along +u, the rest along -u, over a few topics."""
    rng = np.random.default_rng(seed)
    u = _unit(rng.standard_normal((1, d)))[0]
    centres = _unit(rng.standard_normal((4, d)))

    def rows(sign):
        n = len(sign)
        beta = rng.uniform(0.2, 1.2, size=(n, 1))
        z = sign[:, None] * beta * u + 0.8 * centres[rng.integers(0, 4, n)]
        return _unit(z + rng.standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)

    return rows(np.ones(n_p)), rows(np.where(rng.random(n_u) < pos, 1.0, -1.0))


def _top(s, k):
    return set(np.argsort(-s, kind="stable")[:k])


# ---- problems solved by hand ------------------------------------------------------------------


def test_plan_solved_by_hand():
    # a = (1/2, 1/2), b = (1/3, 1/3, 1/3), m = 1/2: fill the cheapest edge (0,0) up to target
    # capacity 1/3 at cost 0, then (1,2) at cost 0.5 for the remaining 1/6. Unique optimum.
    a = np.full(2, 0.5)
    b = np.full(3, 1 / 3)
    C = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]])
    G, lg = partial_wasserstein_plan(a, b, C, 0.5, log=True)
    np.testing.assert_allclose(G, [[1 / 3, 0, 0], [0, 0, 1 / 6]], atol=1e-12)
    assert lg["cost"] == pytest.approx(1 / 12)
    np.testing.assert_allclose(G.sum(0) / b, [1.0, 0.0, 0.5], atol=1e-12)
    Ge = partial_wasserstein_plan(a, b, C, 0.5, method="entropic", reg=1e-3)
    np.testing.assert_allclose(Ge, G, atol=2e-3)
    assert Ge.sum() == pytest.approx(0.5, abs=1e-3)


def test_scores_solved_by_hand():
    # C = 1 - cos = [[0, 1, 2], [1, 0, 1]]: with m = 2/3 the two zero-cost targets take all the mass.
    zp = np.array([[1.0, 0.0], [0.0, 1.0]])
    zu = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    for method in ("exact", "fast"):
        s, lg = partial_ot_scores(zp, zu, 2 / 3, method=method, log=True)
        np.testing.assert_allclose(s, [1.0, 1.0, 0.0], atol=1e-9)
        assert lg["cost"] == pytest.approx(0.0, abs=1e-3)
    s = partial_ot_scores(zp, zu, 2 / 3, method="entropic", reg=1e-3)
    np.testing.assert_allclose(s, [1.0, 1.0, 0.0], atol=1e-3)


def test_full_ot_scores_by_hand():
    # one source: balanced OT sends 1/2 to each target; score = -cost of what it receives
    zp = np.array([[1.0, 0.0]])
    zu = np.array([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(ot_scores(zp, zu), [0.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(ot_scores(zp, zu, method="entropic"), [0.0, -1.0], atol=1e-6)


def test_tiny_sizes_and_balanced_mass():
    zp = _unit([[1.0, 0.2]])
    zu = _unit([[0.3, 1.0]])
    for method in ("exact", "fast", "entropic"):
        np.testing.assert_allclose(partial_ot_scores(zp, zu, 0.4, method=method), [0.4], atol=1e-9)
        np.testing.assert_allclose(partial_ot_scores(zp, zu, 1.0, method=method), [1.0])


# ---- agreement with POT and between solvers ---------------------------------------------------


def test_exact_equals_pot():
    zp, zu = _structured(30, 120, seed=1)
    C = np.maximum(1 - zp.astype(np.float64) @ zu.astype(np.float64).T, 0)
    a, b = np.full(30, 1 / 30), np.full(120, 1 / 120)
    G = ot.partial.partial_wasserstein(a, b, C, m=0.6)
    s, lg = partial_ot_scores(zp, zu, 0.6, method="exact", log=True)
    np.testing.assert_allclose(s, G.sum(0) / b, atol=1e-9)
    assert lg["cost"] == pytest.approx((G * C).sum(), rel=1e-9)
    np.testing.assert_allclose(partial_wasserstein_plan(a, b, C, 0.6), G, atol=1e-12)


@pytest.fixture(scope="module")
def moderate():
    zp, zu = _structured(100, 1500, seed=2)
    s_ex, lg_ex = partial_ot_scores(zp, zu, 0.7, method="exact", log=True)
    return zp, zu, s_ex, lg_ex


def test_fast_matches_exact_selection_and_ties(moderate):
    zp, zu, s_ex, lg_ex = moderate
    s, lg = partial_ot_scores(zp, zu, 0.7, method="fast", log=True)
    k = int(0.7 * len(zu))
    assert len(_top(s, k) & _top(s_ex, k)) / k >= 0.95
    assert spearmanr(s, s_ex).statistic >= 0.95
    assert lg["cost"] == pytest.approx(lg_ex["cost"], rel=0.02)
    assert lg["uncertified"] == 0


def test_entropic_agrees_with_exact(moderate):
    zp, zu, s_ex, _ = moderate
    s = partial_ot_scores(zp, zu, 0.7, method="entropic", reg=3e-3)
    k = int(0.7 * len(zu))
    assert len(_top(s, k) & _top(s_ex, k)) / k >= 0.95


@pytest.mark.parametrize("method", ["exact", "fast", "entropic"])
def test_mass_and_range(method):
    zp, zu = _structured(40, 300, seed=3)
    for m in (0.1, 0.55, 0.9):
        s = partial_ot_scores(zp, zu, m, method=method)
        assert s.shape == (300,) and s.dtype == np.float64
        assert s.min() >= 0.0 and s.max() <= 1.0
        assert s.sum() / len(s) == pytest.approx(m, abs=1e-6)


def test_auto_picks_exact_for_small(moderate):
    zp, zu, s_ex, _ = moderate
    s, lg = partial_ot_scores(zp, zu, 0.7, log=True)
    assert lg["method"] == "exact"
    np.testing.assert_array_equal(s, s_ex)


def test_full_ot_entropic_close_to_exact():
    zp, zu = _structured(20, 200, seed=4)
    s_ex = ot_scores(zp, zu)
    s_en = ot_scores(zp, zu, method="entropic", reg=0.005)
    assert s_ex.max() <= 0 and s_ex.min() >= -2
    assert spearmanr(s_ex, s_en).statistic > 0.9


# ---- streaming and backends ------------------------------------------------------------------


def test_block_streaming_equals_unblocked(monkeypatch):
    zp, zu = _structured(30, 400, seed=5)
    s1 = partial_ot_scores(zp, zu, 0.6, method="fast")
    s2 = partial_ot_scores(zp, zu, 0.6, method="fast", block_size=37)
    np.testing.assert_allclose(s1, s2, atol=1e-9)
    e1 = partial_ot_scores(zp, zu, 0.6, method="entropic")
    monkeypatch.setattr(tr, "DENSE_CACHE_BYTES", 0)  # recompute C blocks at every evaluation
    e2 = partial_ot_scores(zp, zu, 0.6, method="entropic", block_size=53)
    np.testing.assert_allclose(e1, e2, atol=1e-4)  # same optimum up to solver tolerance


def test_torch_backend_equals_numpy():
    import torch
    zp, zu = _structured(30, 400, seed=6)
    for method in ("fast", "entropic"):
        sn = partial_ot_scores(zp, zu, 0.6, method=method, backend="numpy")
        st, lg = partial_ot_scores(torch.from_numpy(zp), torch.from_numpy(zu), 0.6,
                                   method=method, backend="torch", device="cpu", log=True)
        assert lg["backend"] == "torch"
        np.testing.assert_allclose(st, sn, atol=1e-4)


# ---- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "zp, zu, m, match",
    [
        (np.zeros((0, 2)), _unit([[1, 0]]), 0.5, "zp is empty"),
        (_unit([[1, 0]]), np.zeros((0, 2)), 0.5, "zu is empty"),
        (_unit([[1, 0]]), _unit([[1, 0]]), 0.0, r"outside \(0, 1\]"),
        (_unit([[1, 0]]), _unit([[1, 0]]), 1.5, r"outside \(0, 1\]"),
        (_unit([[1, 0]]), _unit([[1, 0]]), float("nan"), "m must be a number"),
        (_unit([[1, 0]]), _unit([[1, 0, 0]]), 0.5, "2 dimensions but zu has 3"),
        (_unit([[1, 0]]), np.array([[1.0, 0.0], [np.nan, 0.0]]), 0.5,
         r"Row 2 \(1-based\) of zu \(the rows to score, U\) contains NaN"),
        (np.array([[2.0, 0.0]]), _unit([[1, 0]]), 0.5, "L2 norm 2"),
        (np.ones(3), _unit([[1, 0]]), 0.5, "2-D array"),
    ],
)
def test_validation(zp, zu, m, match):
    with pytest.raises(PUAuditError, match=match):
        partial_ot_scores(zp, zu, m)


def test_validation_options():
    z = _unit([[1, 0]])
    with pytest.raises(PUAuditError, match="method must be"):
        partial_ot_scores(z, z, 0.5, method="sinkhorn")
    with pytest.raises(PUAuditError, match="backend must be"):
        partial_ot_scores(z, z, 0.5, method="fast", backend="jax")
    with pytest.raises(PUAuditError, match="method must be"):
        ot_scores(z, z, method="fast")
    with pytest.raises(PUAuditError, match="shape"):
        partial_wasserstein_plan(np.ones(2) / 2, np.ones(3) / 3, np.zeros((3, 2)), 0.5)
