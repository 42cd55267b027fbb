r"""Prediction-powered estimates (PPI++): the judge on every unit, rectified by the human labels.

PPI (Angelopoulos et al., Science 2023; PPI++, arXiv:2311.01453) estimates a functional
:math:`\theta` of the human verdicts as

.. math:: \hat\theta^{PP} = \lambda\,\hat\theta(\hat Y^{u}) + \hat\theta(Y) -
          \lambda\,\hat\theta(\hat Y)

with :math:`Y` the human verdicts on the labelled units, :math:`\hat Y` the judge's on the same
units and :math:`\hat Y^u` the judge's on the unlabelled units; the interval is
``ppi_py.ppboot``'s. It is valid whatever the judge's bias **if the labelled units are a
uniform random sample of all units**; selectively chosen labels void that. Every row
labelled leaves nothing to add: ``ppi`` is then ``human``.
"""

from __future__ import annotations

import numpy as np

from puaudit.rankings.bootstrap import _global_seed, _Plan, _ppi_py
from puaudit.rankings.leaderboard_limits import MIN_DRAWS
from puaudit.rankings.units import _N
from puaudit.stats.bootstrap import cluster_bootstrap_indices

def _power_tuning(est, y, yhat, yhat_u, *, n_resamples: int, rng) -> float:
    r"""PPI++ weight :math:`\lambda = \sum_k \mathrm{Cov}(\hat\theta_k(Y), \hat\theta_k(\hat Y)) /
    \sum_k [\mathrm{Var}\,\hat\theta_k(\hat Y) + \mathrm{Var}\,\hat\theta_k(\hat Y^u)]` over
    bootstrap draws (the rule of ``ppi_py.ppboot``), clipped to [0, 1]; coordinates undefined in a
    draw are left out of that draw.

    The labelled and unlabelled units are resampled separately (as ``ppboot`` does), each by
    :func:`puaudit.stats.bootstrap.cluster_bootstrap_indices` with every unit its own item: a
    unit already gathers all rows of one item (:mod:`puaudit.rankings.units`)."""
    a, b, c = [], [], []
    # one generator, the labelled and the unlabelled draw alternating
    draws = zip(cluster_bootstrap_indices(len(y), n_resamples, random_state=rng),
                cluster_bootstrap_indices(len(yhat_u), n_resamples, random_state=rng))
    for idx, idu in draws:
        a.append(est(y[idx]))
        b.append(est(yhat[idx]))
        c.append(est(yhat_u[idu]))
    a, b, c = np.array(a), np.array(b), np.array(c)
    # Column by column, over the draws where the coordinate is defined (vectorised: one pass
    # for any number of models). Covariance with n − 1, variances with n, as np.cov / np.var.
    ok = np.isfinite(a) & np.isfinite(b)
    cnt = ok.sum(axis=0)
    use = cnt > 2
    a0, b0 = np.where(ok, a, 0.0), np.where(ok, b, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ma, mb = a0.sum(axis=0) / cnt, b0.sum(axis=0) / cnt
        da, db = np.where(ok, a0 - ma, 0.0), np.where(ok, b0 - mb, 0.0)
        num = float(((da * db).sum(axis=0) / (cnt - 1))[use].sum())
        den = float(((db * db).sum(axis=0) / cnt)[use].sum())
        okc = np.isfinite(c)
        cntc = okc.sum(axis=0)
        c0 = np.where(okc, c, 0.0)
        dc = np.where(okc, c0 - c0.sum(axis=0) / cntc, 0.0)
        den += float(((dc * dc).sum(axis=0) / cntc)[cntc > 2].sum())
    return float(np.clip(num / den, 0.0, 1.0)) if den > 0 else 0.0


def _ppi_intervals(y, yhat, yhat_u, plan: _Plan, diag: dict) -> dict:
    """PPI++ point estimates and ``ppboot`` intervals of every statistic; the weights λ go to
    ``diag`` (``lambda_<statistic>``)."""
    ppi = _ppi_py()
    rng = np.random.default_rng(plan.seeds[12])
    plan.warm_start(y)
    out = {}
    for f_i, (name, est) in enumerate(plan.ests.items()):
        draws = plan.draws[name]
        if draws:
            # 100 draws for λ (ppboot's rule), half the interval's when those are capped
            lam = _power_tuning(est, y, yhat, yhat_u, rng=rng,
                                n_resamples=min(100, max(MIN_DRAWS, draws // 2)))
        else:  # any fixed λ in [0, 1] keeps the estimate valid; only its variance moves
            lam = diag.get("lambda_winrate", 0.0)
        point = lam * est(yhat_u) + est(y) - lam * est(yhat)
        if draws:
            with _global_seed(int(plan.seeds[13 + f_i])):
                lo_, hi_ = ppi.ppboot(est, y, yhat, yhat_u, lam=lam, n_resamples=draws,
                                      alpha=plan.alpha)
            out[name] = (point, np.asarray(lo_, float), np.asarray(hi_, float))
        else:
            out[name] = (point, plan.nan(), plan.nan())
        diag[f"lambda_{name}"] = lam
    return out


def _ppi_source(stats: dict, results: dict, plan: _Plan, *, diag: dict,
                notes: list) -> dict[str, tuple]:
    """The ``ppi`` source: labelled units carry human verdicts, the rest only the judge's.
    Counts and λ go to ``diag``, caveats to ``notes``."""
    if stats["human"] is None or not (stats["human"][:, _N] > 0).any():
        notes.append("No human verdicts: the human and prediction-powered columns are empty.")
        diag.update(n_units_labelled=0, n_units_unlabelled=int((stats["judge"][:, _N] > 0).sum()))
        return {name: (plan.nan(),) * 3 for name in plan.ests}
    labelled = stats["human"][:, _N] > 0
    y = stats["human"][labelled]
    yhat = stats["judge"][labelled]
    yhat_u = stats["judge"][~labelled & (stats["judge"][:, _N] > 0)]
    diag.update(n_units_labelled=int(labelled.sum()), n_units_unlabelled=len(yhat_u))
    if len(yhat_u) < 2:
        out = results["human"]
        for name in plan.ests:
            diag[f"lambda_{name}"] = 0.0
        notes.append("Every item has a human verdict: there is nothing for the judge to add, "
                     "so the prediction-powered columns equal the human ones.")
    else:
        out = _ppi_intervals(y, yhat, yhat_u, plan, diag)
    if labelled.sum() < 30:
        notes.append(f"Only {int(labelled.sum())} labelled items: human and prediction-powered "
                     "intervals are rough.")
    return out
