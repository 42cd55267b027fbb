r"""Model leaderboards from pairwise verdicts: win rates and Bradley–Terry strengths, four ways.

One leaderboard per source of verdicts: ``judge`` (the LLM judge on every row), ``audited``
(:attr:`puaudit.audit.estimator.AuditResult.adjusted`), ``human`` (the labelled rows only) and
``ppi`` (PPI++: the judge on every row rectified by the human labels, valid whatever the judge's
bias if the labelled rows are a uniform random sample). Rows of one item and model pair form a
**unit**: several votes count as several comparisons but one bootstrap draw. Intervals are
percentile bootstrap intervals over units, ``ppi_py.ppboot``'s for ``ppi``; the method is in
docs/method.md ("Rankings and PPI").
"""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from scipy.special import expit

from puaudit.data.cells import id_text
from puaudit.errors import PUAuditError
from puaudit.rankings.bradley_terry import bradley_terry
from puaudit.rankings.leaderboard_limits import BOOTSTRAP_WORK, MIN_DRAWS, WINRATE_WORK
from puaudit.rankings.result import SOURCE_LABELS, SOURCES, ModelRankings
from puaudit.rankings.winrates import TIES, length_covariate, verdict_scores, win_rates
from puaudit.stats.bootstrap import cluster_bootstrap_indices

__all__ = ["model_rankings", "table_models", "table_rankings"]

MODEL_COLUMNS_HINT = ("Model rankings need the names of the two models compared in each row: "
                      "columns model_a and model_b (or model_1 / model_2). Map them on the Data "
                      "page, or with --model-a-col / --model-b-col on the command line.")


def model_rankings(model_a, model_b, judge, human=None, audited=None, *, groups=None,
                   length_a=None, length_b=None, ties: str = "half", alpha: float = 0.05,
                   n_resamples: int = 1000, length_control: bool = False, prior: float = 0.1,
                   max_work: int = BOOTSTRAP_WORK,
                   random_state: int | None = 0) -> ModelRankings:
    r"""Per-model win rates and Bradley–Terry strengths with intervals, four ways.

    Parameters
    ----------
    model_a, model_b : sequence of str
        The models compared in each row (response A is ``model_a``'s). Rows with a missing name
        or the same model on both sides are left out (counted in ``diagnostics``).
    judge : sequence of {"A", "B", "tie", None}
        The LLM judge's verdicts.
    human : sequence of {"A", "B", "tie", None}, optional
        Human verdicts (None where nobody labelled the row). Several votes on one item are
        several rows: each vote is a comparison.
    audited : sequence of {"A", "B", "tie", None}, optional
        Audited verdicts (``AuditResult.adjusted``); the ``audited`` columns are NaN without.
    groups : sequence, optional
        Item of each row (e.g. ``ComparisonTable.item_id``): rows of one item and model pair
        are resampled together. Default: every row on its own.
    length_a, length_b : sequence of float, optional
        Response lengths, needed for ``length_control``.
    ties : {"half", "exclude"}, default "half"
        A tie is half a win for each side, or not a comparison at all.
    alpha : float, default 0.05
        Intervals have nominal coverage ``1 − alpha``.
    n_resamples : int, default 1000
        Bootstrap draws per interval.
    length_control : bool, default False
        Also fit :math:`\sigma(\theta_i - \theta_j + \gamma x)` with the AlpacaEval length
        feature :math:`x` (:func:`length_covariate`) and report the length-controlled win rate
        :math:`\mathrm{lc}_k = \text{mean over } k\text{'s comparisons of } \sigma(\theta_k -
        \theta_{\text{opponent}})` (the covariate set to zero), with intervals, and each
        source's length coefficient γ in ``diagnostics``.
    prior : float, default 0.1
        Gaussian prior precision of the Bradley–Terry fits (:func:`bradley_terry`).
    max_work : int, default :data:`BOOTSTRAP_WORK`
        Cap on bootstrap draws × models for each Bradley–Terry interval (strengths and, with
        length control, the length-controlled win rate; every draw is a refit over all models).
        Fewer draws are used when ``n_resamples`` × models exceeds it; when even
        :data:`MIN_DRAWS` draws would, those intervals are left out (NaN) and the PPI strengths
        use the win rate's PPI++ weight. Both are said in ``notes``; the draws used are in
        ``diagnostics`` (``n_draws_bt``, ``n_draws_winrate``). Win-rate draws (bincounts) are
        capped likewise at ``max(max_work,`` :data:`WINRATE_WORK` ``)``.
    random_state : int or None, default 0

    Returns
    -------
    ModelRankings

    Notes
    -----
    The prediction-powered estimate, its interval and when it is valid: :func:`_ppi_source`.
    """
    _check_arguments(judge, model_a=model_a, model_b=model_b, human=human, audited=audited,
                     groups=groups, length_a=length_a, length_b=length_b, ties=ties, alpha=alpha,
                     n_resamples=n_resamples, max_work=max_work, length_control=length_control)
    data = _rows(model_a, model_b, n_rows=len(judge), groups=groups, length_a=length_a,
                 length_b=length_b, length_control=length_control)
    k = len(data.models)
    scores = data.scores(ties=ties, judge=judge, audited=audited, human=human)
    stats = {s: (None if v is None else _stats(data.units, v)) for s, v in scores.items()}
    plan = _plan(data.units, n_models=k, prior=prior, length_control=length_control,
                 n_resamples=int(n_resamples), max_work=int(max_work), alpha=alpha,
                 random_state=random_state)
    diag = {**data.counts(), "n_draws_winrate": plan.draws["winrate"],
            "n_draws_bt": plan.draws["bt"]}
    notes = _draw_notes(plan.draws, int(n_resamples), k, int(max_work), length_control)
    results = _classical_sources(stats, plan, notes)
    results["ppi"] = _ppi_source(stats, results, plan, diag=diag, notes=notes)
    if length_control:
        diag.update(_length_coefficients(stats, n_models=k, prior=prior))
    frame, strengths = _leaderboard_frame(data.models, data.lo, data.hi, scores["human"], results,
                                          length_control=length_control, diag=diag)
    params = {"ties": ties, "alpha": alpha, "n_resamples": int(n_resamples),
              "length_control": bool(length_control), "prior": prior, "max_work": int(max_work),
              "random_state": random_state}
    return ModelRankings(frame=frame, models=data.models, strengths=strengths, params=params,
                         diagnostics=diag, notes=notes)


def _check_arguments(judge, *, ties, alpha, n_resamples, max_work, length_control,
                     **columns) -> None:
    """Options in range, every column as long as ``judge``, lengths when length control is on."""
    for bad, why in ((ties not in TIES, f"ties must be one of {list(TIES)}, got {ties!r}."),
                     (not 0 < alpha < 1, f"alpha must be in (0, 1), got {alpha}."),
                     (int(n_resamples) < MIN_DRAWS,
                      f"n_resamples must be at least {MIN_DRAWS}, got {n_resamples}."),
                     (int(max_work) < 1, f"max_work must be at least 1, got {max_work}.")):
        if bad:
            raise PUAuditError(why)
    n_rows = len(judge)
    for name, arr in columns.items():
        if arr is not None and len(arr) != n_rows:
            raise PUAuditError(f"{name} has {len(arr)} entries but judge has {n_rows}.")
    if length_control and (columns["length_a"] is None or columns["length_b"] is None):
        raise PUAuditError("Length control needs the response lengths (length_a, length_b).")


def _model_index(model_a, model_b) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    def names(values):
        return np.array([id_text(v) for v in values], dtype=object)

    a, b = names(list(model_a)), names(list(model_b))
    valid = (a != "") & (b != "") & (a != b)
    models = sorted(set(a[valid]) | set(b[valid]))
    pos = {m: k for k, m in enumerate(models)}
    ia = np.array([pos.get(v, -1) for v in a], dtype=np.int64)
    ib = np.array([pos.get(v, -1) for v in b], dtype=np.int64)
    return models, ia, ib, valid


@dataclass
class _Rows:
    """The rows with two distinct models, oriented from the lower model index, and their units."""

    models: list
    n_rows: int  # all rows, used or not
    rows: np.ndarray  # positions of the rows used
    lo: np.ndarray  # lower model index of each row used
    hi: np.ndarray
    flip: np.ndarray  # model A is the higher index: A's score is 1 − the unit's
    units: _Units

    def counts(self) -> dict[str, int]:
        return {"n_rows": self.n_rows, "n_rows_used": len(self.rows),
                "n_rows_dropped": self.n_rows - len(self.rows), "n_units": self.units.size,
                "n_models": len(self.models)}

    def scores(self, *, ties: str, **verdicts) -> dict:
        """Source → :meth:`oriented` scores, for the sources given as keyword arguments."""
        return {source: self.oriented(v, ties=ties) for source, v in verdicts.items()}

    def oriented(self, verdicts, *, ties: str):
        """Scores of the lower-index model on the rows used (None without verdicts)."""
        if verdicts is None:
            return None
        s = verdict_scores(np.asarray(verdicts, dtype=object)[self.rows], ties=ties)
        return np.where(self.flip, 1.0 - s, s)


def _rows(model_a, model_b, *, n_rows: int, groups, length_a, length_b,
          length_control: bool) -> _Rows:
    """Index the models, keep the rows with two distinct ones and group them into units."""
    models, ia, ib, valid = _model_index(model_a, model_b)
    k = len(models)
    if k < 2:
        # the models named at all, not only those of usable rows: a file of one model (rows
        # comparing it with itself) has one, not none
        named = sorted({str(v).strip() for v in (*model_a, *model_b)
                        if not (v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)))
                        and str(v).strip()})
        shown = f" ({', '.join(named[:3])})" if named else ""
        same = " and no row compares two different ones" if named else ""
        raise PUAuditError("Model rankings need at least two distinct models in model_a / "
                           f"model_b; found {len(named)}{shown}{same}. " + MODEL_COLUMNS_HINT)
    rows = np.flatnonzero(valid)
    lo, hi = np.minimum(ia[rows], ib[rows]), np.maximum(ia[rows], ib[rows])
    # Units are oriented from the lower model index: its score is 1 − A's when A is the higher.
    flip = ia[rows] > ib[rows]

    x_row = np.zeros(len(rows))
    if length_control:
        x_a = length_covariate(np.asarray(length_a, dtype=float)[rows],
                               np.asarray(length_b, dtype=float)[rows])
        x_row = np.where(flip, -x_a, x_a)
    grp = (np.arange(n_rows) if groups is None else np.asarray(groups, dtype=object))[rows]
    key = pd.Series(grp).astype(str).to_numpy() + "\x1f" + lo.astype(str) + "\x1f" + hi.astype(str)
    code, uniq = pd.factorize(key)
    first = np.full(len(uniq), -1)
    first[code[::-1]] = np.arange(len(code))[::-1]
    x_unit = np.bincount(code, x_row, len(uniq)) / np.bincount(code, minlength=len(uniq))
    units = _Units(code, lo[first].astype(float), hi[first].astype(float), x_unit, n_models=k)
    return _Rows(models=models, n_rows=n_rows, rows=rows, lo=lo, hi=hi, flip=flip, units=units)


def _length_coefficients(stats: dict, *, n_models: int, prior: float) -> dict[str, float]:
    """The length coefficient γ of each classical source (NaN without comparisons)."""
    out = {}
    for source in ("judge", "audited", "human"):
        st = stats[source]
        if st is None or not (st[:, _N] > 0).any():
            out[f"gamma_{source}"] = np.nan
            continue
        out[f"gamma_{source}"] = _length_fit(st, n_models=n_models, prior=prior)[1]
    return out


def _length_fit(s: np.ndarray, *, n_models: int, prior: float) -> tuple[np.ndarray, float]:
    """Bradley–Terry strengths and length coefficient γ of the units with comparisons in ``s``."""
    s = s[s[:, _N] > 0]
    return bradley_terry(s[:, _I].astype(int), s[:, _J].astype(int), s[:, _W], s[:, _N],
                         n_models=n_models, covariate=s[:, _X], prior=prior)


# --- units: rows of one item and model pair ----------
# A "stats" matrix has one row per unit and the columns below; the bootstrap resamples its rows.
_I, _J, _W, _N, _X, _P = range(6)


def _stats(units, score_i: np.ndarray) -> np.ndarray:
    """Per-unit [i, j, score of i, comparisons, covariate, model pair] for one source."""
    ok = np.isfinite(score_i)
    w = np.bincount(units.code[ok], score_i[ok], units.size)
    n = np.bincount(units.code[ok], minlength=units.size).astype(float)
    return np.column_stack([units.i, units.j, w, n, units.x, units.pair])


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


# --- percentile bootstrap intervals ----------
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
            self.warm["lc"] = np.append(*_length_fit(s, n_models=self.n_models, prior=self.prior))


def _plan(units: _Units, *, n_models: int, prior: float, length_control: bool, n_resamples: int,
          max_work: int, alpha: float, random_state) -> _Plan:
    warm: dict = {}
    return _Plan(ests=_estimators(n_models, prior, length_control, warm, units), warm=warm,
                 draws=_draws(n_resamples, n_models, max_work),
                 seeds=np.random.SeedSequence(random_state).generate_state(16), alpha=alpha,
                 n_models=n_models, prior=prior, length_control=length_control)


def _percentile_interval(est, s: np.ndarray, *, n_resamples: int, alpha: float,
                         random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of ``est`` over the units (rows) of ``s``: a unit gathers
    every row of one item (:func:`_rows`), so resampling units resamples items. A coordinate
    undefined in some draw (NaN) has no interval, as in ``ppi_py.classical_bootstrap_ci``."""
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
        st = None if st is None else st[st[:, _N] > 0]
        if st is None or len(st) < 2:
            results[source] = {name: (plan.nan(),) * 3 for name in plan.ests}
            if st is not None and len(st) == 1:  # none at all is said once, elsewhere
                notes.append(f"{SOURCE_LABELS[source]}: only one item with a usable comparison.")
            continue
        results[source] = _classical_intervals(st, plan, seed_offset=3 * s_i)
    if stats["audited"] is None:
        notes.append("No audited verdicts: run the audit (Audit page, or `puaudit audit` and "
                     "--audit-export) to fill the audited columns.")
    return results


# --- prediction-powered intervals (PPI++) ----------
def _power_tuning(est, y, yhat, yhat_u, *, n_resamples: int, rng) -> float:
    r"""PPI++ weight :math:`\lambda = \sum_k \mathrm{Cov}(\hat\theta_k(Y), \hat\theta_k(\hat Y)) /
    \sum_k [\mathrm{Var}\,\hat\theta_k(\hat Y) + \mathrm{Var}\,\hat\theta_k(\hat Y^u)]` over
    bootstrap draws (the rule of ``ppi_py.ppboot``), clipped to [0, 1]; coordinates undefined in a
    draw are left out of that draw. The labelled and unlabelled units (items, :func:`_rows`) are
    resampled separately, as ``ppboot`` does."""
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
    r"""The ``ppi`` source (PPI++, arXiv:2311.01453): labelled units carry human verdicts, the
    rest only the judge's. A functional :math:`\theta` of the human verdicts is estimated as

    .. math:: \hat\theta^{PP} = \lambda\,\hat\theta(\hat Y^{u}) + \hat\theta(Y) -
              \lambda\,\hat\theta(\hat Y)

    with :math:`Y` the human verdicts on the labelled units, :math:`\hat Y` the judge's on them
    and :math:`\hat Y^u` the judge's on the unlabelled units; the interval is
    ``ppi_py.ppboot``'s. Valid whatever the judge's bias **if the labelled units are a uniform
    random sample of all units**. Every unit labelled: ``ppi`` is ``human``. Counts and λ go to
    ``diag``, caveats to ``notes``."""
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


# --- the leaderboard frame ----------
def _leaderboard_frame(models: list, lo: np.ndarray, hi: np.ndarray, human_scores, results: dict,
                       *, length_control: bool, diag: dict) -> tuple[pd.DataFrame, dict]:
    """The :attr:`ModelRankings.frame` from each source's ``(point, lo, hi)`` per statistic, and
    the strengths per source; ``diag["sorted_by"]`` names the source whose rank sorts the frame
    (unset when no rank is complete).

    ``lo`` / ``hi`` are the two models of each row used; ``human_scores`` are the rows' human
    scores (NaN without a vote), or None.
    """
    k = len(models)
    n_model = (np.bincount(lo, minlength=k) + np.bincount(hi, minlength=k)).astype(int)
    ok = np.zeros(len(lo), dtype=bool) if human_scores is None else np.isfinite(human_scores)
    n_human = (np.bincount(lo[ok], minlength=k) + np.bincount(hi[ok], minlength=k)).astype(int)
    frame = pd.DataFrame({"model": models, "n": n_model, "n_human": n_human})
    strengths = {}
    for source in SOURCES:
        res = results[source]
        for name in ("winrate", "bt"):
            _put_interval(frame, f"{name}_{source}", res[name])
        theta = np.asarray(res["bt"][0], dtype=float)
        strengths[source] = theta
        frame[f"rank_{source}"] = (pd.Series(-theta).rank(method="min").to_numpy()
                                   if np.isfinite(theta).all() else np.nan)
        if length_control:
            _put_interval(frame, f"lc_winrate_{source}", res["lc_winrate"])
    for source in ("ppi", "human", "judge"):
        if frame[f"rank_{source}"].notna().all():
            frame = frame.sort_values([f"rank_{source}", "model"], kind="stable")
            diag["sorted_by"] = source
            break
    return frame.reset_index(drop=True), strengths


def _put_interval(frame: pd.DataFrame, column: str, estimate: tuple) -> None:
    point, lo_, hi_ = estimate
    frame[column] = point
    frame[f"{column}_lo"] = lo_
    frame[f"{column}_hi"] = hi_


# --- tables -------------------------------------------------------------------------------------
def table_models(table) -> tuple[list, list]:
    """The ``model_a`` / ``model_b`` columns of a :class:`~puaudit.data.schema.ComparisonTable`.

    Raises
    ------
    PUAuditError
        When either column is not mapped, with what to do about it.
    """
    cols = getattr(table, "columns", {}) or {}
    missing = [r for r in ("model_a", "model_b") if not cols.get(r)]
    if missing:
        raise PUAuditError(f"No {' / '.join(missing)} column found. " + MODEL_COLUMNS_HINT)
    frame = table.frame
    return frame[cols["model_a"]].tolist(), frame[cols["model_b"]].tolist()


def table_rankings(table, audited=None, **kwargs) -> ModelRankings:
    """:func:`model_rankings` of a :class:`~puaudit.data.schema.ComparisonTable`.

    Uses the table's model columns, judge and human verdicts, item ids as groups and the
    responses' lengths in characters; ``audited`` is ``AuditResult.adjusted`` (or the export's
    ``puaudit_adjusted`` column, normalised). Other keyword arguments go to
    :func:`model_rankings`.
    """
    model_a, model_b = table_models(table)
    length_a = [len(str(t)) for t in table.response_a]
    length_b = [len(str(t)) for t in table.response_b]
    return model_rankings(model_a, model_b, table.judge, table.human, audited,
                          groups=table.item_id, length_a=length_a, length_b=length_b, **kwargs)
