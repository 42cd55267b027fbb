"""Rows grouped into units (one item and one model pair), their per-unit "stats" matrices and
the statistics a bootstrap recomputes on them (win rates, Bradley–Terry strengths, the
length-controlled win rate)."""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.special import expit

from puaudit.rankings.bradley_terry import bradley_terry
from puaudit.rankings.winrates import win_rates

# A "stats" matrix has one row per unit and the columns below; the bootstrap resamples its rows.
_I, _J, _W, _N, _X, _P = range(6)


def _stats(units, score_i: np.ndarray) -> np.ndarray:
    """Per-unit [i, j, score of i, comparisons, covariate, model pair] for one source."""
    ok = np.isfinite(score_i)
    w = np.bincount(units.code[ok], score_i[ok], units.size)
    n = np.bincount(units.code[ok], minlength=units.size).astype(float)
    s = np.column_stack([units.i, units.j, w, n, units.x, units.pair])
    return s


class _Units:
    """Rows grouped by (group, unordered model pair); ``pair`` numbers the model pairs that occur
    (in the order of ``pair_i * n_models + pair_j``), so that per-pair totals are bincounts over
    the pairs present rather than over all n_models² pairs."""

    def __init__(self, code, i, j, x, *, n_models: int):
        self.code, self.i, self.j, self.x = code, i, j, x
        self.size = len(i)
        uniq, self.pair = np.unique(i.astype(np.int64) * n_models + j.astype(np.int64),
                                    return_inverse=True)
        self.pair_i, self.pair_j = uniq // n_models, uniq % n_models


def _estimators(n_models: int, prior: float, length_control: bool, warm: dict,
                units: _Units) -> dict[str, Callable]:
    """Statistics of a stats matrix; ``warm`` holds starting points for the fits (bootstrap refits
    start from the point estimate: same answer, fewer Newton steps)."""
    def winrate(s):
        return win_rates(s[:, _I], s[:, _J], s[:, _W], s[:, _N], n_models=n_models)

    def bt(s):
        # Units of one model pair are summed first: the plain model only sees pair totals.
        pair = s[:, _P].astype(np.int64)
        w = np.bincount(pair, s[:, _W], len(units.pair_i))
        n = np.bincount(pair, s[:, _N], len(units.pair_i))
        nz = np.flatnonzero(n)
        return bradley_terry(units.pair_i[nz], units.pair_j[nz], w[nz], n[nz],
                             n_models=n_models, prior=prior, init=warm.get("bt"))[0]

    out = {"winrate": winrate, "bt": bt}
    if length_control:
        def lc(s):
            i = s[:, _I].astype(np.int64)
            j = s[:, _J].astype(np.int64)
            theta, gamma = bradley_terry(i, j, s[:, _W], s[:, _N], n_models=n_models,
                                         covariate=s[:, _X], prior=prior, init=warm.get("lc"))
            p = expit(theta[i] - theta[j])  # the covariate at zero: equal lengths
            return win_rates(i, j, p * s[:, _N], s[:, _N], n_models=n_models)

        out["lc_winrate"] = lc
    return out
