"""Percentile bootstrap intervals over units (items), reproducible and capped.

The judge's, audited and human intervals resample units with
:func:`puaudit.stats.bootstrap.cluster_bootstrap_indices`, seeded from ``random_state``;
``ppi_py.ppboot`` (the prediction-powered interval) draws from numpy's global generator, so it
runs under a seed taken from ``random_state`` (:func:`_global_seed`). The number of draws per
statistic family is capped by draws × models (:mod:`puaudit.rankings.leaderboard_limits`), and a note says
when it is.
"""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from puaudit.rankings.bradley_terry import bradley_terry
from puaudit.rankings.leaderboard_limits import MIN_DRAWS, WINRATE_WORK
from puaudit.rankings.result import SOURCE_LABELS
from puaudit.rankings.units import _I, _J, _N, _W, _X, _estimators, _Units
from puaudit.stats.bootstrap import cluster_bootstrap_indices

# ppi_py's bootstrap draws from numpy's global generator: seed it under a lock (and put the
# previous state back) so that results are reproducible with ``random_state`` even when several
# dashboard sessions compute at once.
_GLOBAL_RNG_LOCK = threading.Lock()


@contextmanager
def _global_seed(seed: int):
    with _GLOBAL_RNG_LOCK:
        state = np.random.get_state()
        np.random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(state)


def _ppi_py():
    """Import ``ppi_py`` without its import-time ``warnings.simplefilter("ignore")`` leaking out."""
    with warnings.catch_warnings():
        import ppi_py
    return ppi_py


def _draws(n_resamples: int, n_models: int, max_work: int) -> dict[str, int]:
    """Bootstrap draws per statistic family: ``n_resamples``, fewer under the caps, 0 = none."""
    def capped(work):
        got = min(n_resamples, work // n_models)
        return got if got >= MIN_DRAWS else 0

    bt = capped(max_work)
    return {"winrate": capped(max(WINRATE_WORK, max_work)), "bt": bt, "lc_winrate": bt}


def _draw_notes(draws: dict, n_resamples: int, n_models: int, max_work: int,
                length_control: bool) -> list[str]:
    notes = []
    for fam, what, work in (
            ("winrate", "Win-rate", max(WINRATE_WORK, max_work)),
            ("bt", "Bradley–Terry" + (" and length-controlled" if length_control else ""),
             max_work)):
        if draws[fam] == 0:
            notes.append(f"{what} intervals are left out: with {n_models:,} models even "
                         f"{MIN_DRAWS} bootstrap draws exceed the cap of {work:,} draws × models. "
                         "Point estimates and ranks are complete"
                         + ("; the prediction-powered strengths use the win rate's PPI++ weight"
                            if fam == "bt" else "; the prediction-powered estimates use "
                            "λ = 0 (the human votes alone)")
                         + ". Rank a subset of the models, or raise the cap (max_work, "
                         "--max-work), for these intervals.")
        elif draws[fam] < n_resamples:
            notes.append(f"{what} intervals use {draws[fam]:,} bootstrap draws, not "
                         f"{n_resamples:,}: with {n_models:,} models the cap is {work:,} draws × "
                         "models (max_work, --max-work); their ends are rougher.")
    return notes


@dataclass
class _Plan:
    """What every interval of one leaderboard shares: the statistics, their warm starts, the
    draws per statistic family, the seeds and the level."""

    ests: dict
    warm: dict
    draws: dict
    seeds: np.ndarray
    alpha: float
    n_models: int
    prior: float
    length_control: bool

    def nan(self) -> np.ndarray:
        return np.full(self.n_models, np.nan)

    def warm_start(self, s: np.ndarray) -> None:
        """Fit the point estimates of ``s`` as starting points for its bootstrap refits."""
        self.warm.clear()
        self.warm["bt"] = self.ests["bt"](s)
        if self.length_control:
            st = s[s[:, _N] > 0]
            theta, gamma = bradley_terry(st[:, _I].astype(int), st[:, _J].astype(int), st[:, _W],
                                         st[:, _N], n_models=self.n_models, covariate=st[:, _X],
                                         prior=self.prior)
            self.warm["lc"] = np.append(theta, gamma)


def _plan(units: _Units, *, n_models: int, prior: float, length_control: bool, n_resamples: int,
          max_work: int, alpha: float, random_state) -> _Plan:
    warm: dict = {}
    return _Plan(ests=_estimators(n_models, prior, length_control, warm, units), warm=warm,
                 draws=_draws(n_resamples, n_models, max_work),
                 seeds=np.random.SeedSequence(random_state).generate_state(16), alpha=alpha,
                 n_models=n_models, prior=prior, length_control=length_control)


def _percentile_interval(est, s: np.ndarray, *, n_resamples: int, alpha: float,
                         random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of ``est`` over the units (rows) of ``s``.

    Each unit gathers every row of one item (:mod:`puaudit.rankings.units`), so resampling
    units with :func:`puaudit.stats.bootstrap.cluster_bootstrap_indices`, each unit its own
    item, resamples items. A coordinate undefined in some draw (NaN) has no interval, as in
    ``ppi_py.classical_bootstrap_ci``, which this replaces.
    """
    dist = np.array([est(s[idx]) for idx in cluster_bootstrap_indices(
        len(s), n_resamples, random_state=random_state)])
    return np.quantile(dist, alpha / 2, axis=0), np.quantile(dist, 1 - alpha / 2, axis=0)


def _classical_intervals(s: np.ndarray, plan: _Plan, *, seed_offset: int) -> dict:
    """Point estimate and percentile bootstrap interval of every statistic on one stats matrix."""
    out = {}
    plan.warm_start(s)
    for f_i, (name, est) in enumerate(plan.ests.items()):
        point = est(s)
        if not plan.draws[name]:
            out[name] = (point, plan.nan(), plan.nan())
            continue
        lo_, hi_ = _percentile_interval(est, s, n_resamples=plan.draws[name], alpha=plan.alpha,
                                        random_state=int(plan.seeds[seed_offset + f_i]))
        out[name] = (point, np.asarray(lo_, float), np.asarray(hi_, float))
    return out


def _classical_sources(stats: dict, plan: _Plan, notes: list) -> dict[str, dict[str, tuple]]:
    """Estimates with intervals of the ``judge``, ``audited`` and ``human`` sources (NaN for a
    source missing or with fewer than two usable units); caveats go to ``notes``."""
    results: dict[str, dict[str, tuple]] = {}
    for s_i, source in enumerate(("judge", "audited", "human")):
        st = stats[source]
        if st is None:
            results[source] = {name: (plan.nan(),) * 3 for name in plan.ests}
            continue
        st = st[st[:, _N] > 0]
        if len(st) < 2:
            results[source] = {name: (plan.nan(),) * 3 for name in plan.ests}
            if len(st) == 1:  # none at all is said once, elsewhere
                notes.append(f"{SOURCE_LABELS[source]}: only one item with a usable comparison.")
            continue
        results[source] = _classical_intervals(st, plan, seed_offset=3 * s_i)
    if stats["audited"] is None:
        notes.append("No audited verdicts: run the audit (Audit page, or `puaudit audit` and "
                     "--audit-export) to fill the audited columns.")
    return results
