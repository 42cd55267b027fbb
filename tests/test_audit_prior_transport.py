"""The prior-ot scorer (docs/method.md, "Scorers"): POT's fixed point, graded scores, m."""

import numpy as np
import ot
import pytest

from puaudit.audit.scorers.prior_transport import prior_ot_scores
from puaudit.errors import PUAuditError


def _unit(rng, n, d):
    z = rng.standard_normal((n, d))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def _pot_reference(zp, zu, m, reg, reg_m):
    n = len(zp)
    src = np.vstack([zp, -zp])
    a = np.r_[np.full(n, m / n), np.full(n, (1 - m) / n)]
    b = np.full(len(zu), 1 / len(zu))
    plan = ot.unbalanced.sinkhorn_unbalanced(a, b, 1 - src @ zu.T, reg, reg_m,
                                             numItermax=20000, stopThr=1e-14)
    return plan[:n].sum(0) / plan.sum(0)


@pytest.mark.parametrize("m,reg,reg_m", [(0.7, 0.05, 0.1), (0.5, 0.12, 0.1), (0.9, 0.2, 1.0)])
def test_scores_are_the_share_of_mass_from_p_in_pots_unbalanced_plan(m, reg, reg_m):
    rng = np.random.default_rng(1)
    zp, zu = _unit(rng, 40, 6), _unit(rng, 70, 6)
    s = prior_ot_scores(zp, zu, m, reg=reg, reg_m=reg_m, tol=1e-13)
    np.testing.assert_allclose(s, _pot_reference(zp, zu, m, reg, reg_m), atol=1e-8)


def test_scores_are_graded_and_ordered_by_the_preferred_direction():
    rng = np.random.default_rng(0)
    d = 16
    v = np.eye(d)[0]
    zp = _unit(rng, 60, d) * 0.5 + v
    zp /= np.linalg.norm(zp, axis=1, keepdims=True)
    t = np.linspace(-1, 1, 300)
    zu = 0.5 * _unit(rng, 300, d) + t[:, None] * v
    zu /= np.linalg.norm(zu, axis=1, keepdims=True)
    s = prior_ot_scores(zp, zu, 0.7)
    assert len(np.unique(np.round(s, 8))) >= 280  # graded, not 0/1
    assert ((s > 0.05) & (s < 0.95)).sum() >= 20  # and not pushed to the ends
    assert np.corrcoef(s, t)[0, 1] > 0.8
    assert s[t > 0.5].mean() > 0.8 and s[t < -0.5].mean() < 0.2


def test_m_is_the_prior_more_mass_on_the_judge_right_side_raises_every_score():
    rng = np.random.default_rng(2)
    zp, zu = _unit(rng, 50, 8), _unit(rng, 200, 8)
    lo, mid, hi = (prior_ot_scores(zp, zu, m) for m in (0.3, 0.6, 0.9))
    assert np.all(mid > lo) and np.all(hi > mid)
    # with no preferred direction at all, the mean score follows the prior
    assert abs(prior_ot_scores(zp, zu, 0.8).mean() - 0.8) < abs(lo.mean() - 0.8)


def test_symmetry_reversing_every_target_swaps_the_roles_of_m_and_1_minus_m():
    rng = np.random.default_rng(3)
    zp, zu = _unit(rng, 30, 5), _unit(rng, 40, 5)
    s = prior_ot_scores(zp, zu, 0.7, tol=1e-12)
    s_rev = prior_ot_scores(zp, -zu, 0.3, tol=1e-12)
    np.testing.assert_allclose(s, 1 - s_rev, atol=1e-7)


def test_sampled_potentials_match_the_full_solve_and_memory_stays_blocked():
    rng = np.random.default_rng(4)
    zp, zu = _unit(rng, 80, 12), _unit(rng, 6000, 12)
    full = prior_ot_scores(zp, zu, 0.7)
    sampled, info = prior_ot_scores(zp, zu, 0.7, max_targets=1500, log=True)
    assert info["sampled"] == 1500
    assert np.abs(full - sampled).max() < 0.05
    assert np.corrcoef(full, sampled)[0, 1] > 0.995


def test_torch_and_float32_inputs_give_the_same_scores():
    import torch
    rng = np.random.default_rng(5)
    zp, zu = _unit(rng, 20, 6), _unit(rng, 30, 6)
    ref = prior_ot_scores(zp, zu, 0.6)
    got = prior_ot_scores(torch.from_numpy(zp), torch.from_numpy(zu.astype(np.float32)), 0.6)
    np.testing.assert_allclose(got, ref, atol=1e-5)


@pytest.mark.parametrize("kw, message", [
    ({"m": 0}, r"m must be in \(0, 1\], got 0"), ({"m": 1.5}, r"m must be in \(0, 1\], got 1.5"),
    ({"m": float("nan")}, r"m must be in \(0, 1\], got nan"),
    ({"reg": 0}, "reg and reg_m must be positive; got 0 and 0.1")])
def test_bad_parameters_are_refused(kw, message):
    rng = np.random.default_rng(6)
    args = {"m": 0.7, **kw}
    with pytest.raises(PUAuditError, match=message):
        prior_ot_scores(_unit(rng, 5, 3), _unit(rng, 5, 3), args.pop("m"), **args)
