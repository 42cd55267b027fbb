r"""Model leaderboards from pairwise verdicts: win rates and Bradley–Terry strengths, four ways.

People audit a judge because they rank models with it. This module turns a table of pairwise
comparisons (``model_a``, ``model_b`` and a verdict per row) into one leaderboard per source of
verdicts, side by side:

``judge``    the LLM judge's verdicts on every row;
``audited``  the audited verdicts (:attr:`puaudit.audit.estimator.AuditResult.adjusted`, the export's
             ``puaudit_adjusted``);
``human``    the human verdicts only, on the rows people labelled;
``ppi``      prediction-powered estimates (PPI++, Angelopoulos et al. 2023): the judge on every
             row, rectified by the human labels on the labelled rows. They stay valid when the
             judge is biased, provided the labelled rows are a uniform random sample of the rows.

For each model: the **win rate against the field**, :math:`(\text{wins} + \tfrac12
\text{ties}) / \text{comparisons}` over the rows where it appears (``ties="exclude"``:
wins / decisive comparisons), and the **Bradley–Terry strength** :math:`\theta_k` with
:math:`P(k \text{ beats } l) = \sigma(\theta_k - \theta_l)` (log-odds scale, mean zero), each with
a 95% interval. Optionally the **length-controlled win rate** (AlpacaEval 2.0 style): a
Bradley–Terry model with the length difference as a covariate, read with the covariate at zero.

Inference. Rows are grouped into **units**: rows of one item (``groups``, e.g. the table's item
id: question, turn and model pair) share a unit, so several votes on one item count as several
comparisons in the estimate but as one draw in the bootstrap. Intervals are percentile bootstrap
intervals over units (``ppi_py.classical_bootstrap_ci``) for ``judge``, ``audited`` and
``human``, and the prediction-powered bootstrap (``ppi_py.ppboot``, Zrnic 2024) for ``ppi``, whose
power-tuning weight :math:`\lambda` (PPI++) is estimated from bootstrap draws as in ``ppboot`` and
clipped to [0, 1]. ``judge`` and ``audited`` intervals describe sampling noise only: a biased judge
gets a narrow interval around the wrong value (that is what the comparison shows).
"""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.special import expit

from puaudit.errors import PUAuditError
from puaudit.rankings.limits import BOOTSTRAP_WORK, MIN_DRAWS, TOP_MODELS, WINRATE_WORK

__all__ = ["SOURCES", "SOURCE_LABELS", "TIES", "TOP_MODELS", "BOOTSTRAP_WORK", "ModelRankings",
           "verdict_scores", "win_rates", "bradley_terry", "model_rankings", "table_models",
           "table_rankings", "length_covariate", "simulate_comparisons"]

SOURCES = ("judge", "audited", "human", "ppi")
SOURCE_LABELS = {"judge": "Judge (all rows)", "audited": "Audited verdicts",
                 "human": "Human votes only", "ppi": "Prediction-powered (judge + humans)"}
TIES = ("half", "exclude")
MODEL_COLUMNS_HINT = ("Model rankings need the names of the two models compared in each row: "
                      "columns model_a and model_b (or model_1 / model_2). Map them on the Data "
                      "page, or with --model-a-col / --model-b-col on the command line.")

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


# --- building blocks ----------------------------------------------------------------------------
def verdict_scores(verdicts: Sequence, *, ties: str = "half") -> np.ndarray:
    """Score of the row's model A: ``A`` → 1, ``B`` → 0, ``tie`` → ½ (NaN with ``ties="exclude"``).

    Missing verdicts (``None``) are NaN: the row is not a comparison for that source.
    """
    if ties not in TIES:
        raise PUAuditError(f"ties must be one of {list(TIES)}, got {ties!r}.")
    v = np.asarray(verdicts, dtype=object)
    out = np.full(len(v), np.nan)
    out[v == "A"] = 1.0
    out[v == "B"] = 0.0
    if ties == "half":
        out[v == "tie"] = 0.5
    return out


def win_rates(i, j, wins, n, *, n_models: int) -> np.ndarray:
    r"""Win rate of every model against the field from (fractional) pairwise results.

    .. math:: \mathrm{wr}_k = \frac{\sum_{u: i_u = k} w_u + \sum_{u: j_u = k} (n_u - w_u)}
                                   {\sum_{u: i_u = k \lor j_u = k} n_u}

    Parameters
    ----------
    i, j : array of int
        The two models of each unit (row or group of rows).
    wins : array of float
        Score of model ``i`` summed over the unit's comparisons (a tie counts ½).
    n : array of float
        Number of comparisons in the unit.
    n_models : int

    Returns
    -------
    ndarray of shape (n_models,), NaN for a model without comparisons.
    """
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    wins = np.asarray(wins, dtype=float)
    n = np.asarray(n, dtype=float)
    won = np.bincount(i, wins, n_models) + np.bincount(j, n - wins, n_models)
    played = np.bincount(i, n, n_models) + np.bincount(j, n, n_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(played > 0, won / np.where(played > 0, played, 1.0), np.nan)


# Up to this many parameters a Newton step is solved exactly on a dense d × d Hessian (at most
# 4,096 entries): on a handful of models conjugate gradients cost more in Python overhead than
# they save. Beyond it, only O(units + models) operations.
DIRECT_MAX = 64


def _direct_step(i, j, cov, c, diag, ones, g, *, k: int) -> np.ndarray:
    """Exact Newton step :math:`-H^{-1} g` for a small problem (``len(g)`` ≤ :data:`DIRECT_MAX`)."""
    d = len(g)
    h = -np.bincount(i * d + j, c, d * d).reshape(d, d)
    h += h.T
    if cov is not None:
        col = np.bincount(i, c * cov, d) - np.bincount(j, c * cov, d)
        h[:, k] += col
        h[k, :] += col
    h[np.diag_indices(d)] = diag
    h += np.outer(ones, ones) - np.diag(ones)  # the 1 1ᵀ term (its diagonal is in ``diag``)
    try:
        return np.linalg.solve(h, -g)
    except np.linalg.LinAlgError:  # singular (prior 0, disconnected models): least squares
        return np.linalg.lstsq(h, -g, rcond=None)[0]


def _pcg(matvec: Callable, b: np.ndarray, precond: Callable, *, rtol: float,
         maxiter: int) -> np.ndarray:
    r"""Preconditioned conjugate gradients for :math:`H x = b` (:math:`H` symmetric positive
    semi-definite, given by ``matvec``; ``precond`` applies :math:`M^{-1}`), from :math:`x = 0`
    until :math:`\lVert b - Hx\rVert \le \text{rtol}\,\lVert b\rVert`."""
    x = np.zeros_like(b)
    r = b.copy()
    z = precond(r)
    p = z.copy()
    rz = float(r @ z)
    stop = rtol * float(np.sqrt(b @ b))
    for _ in range(maxiter):
        hp = matvec(p)
        php = float(p @ hp)
        if not php > 0:  # a flat direction (a model without comparisons, prior 0)
            break
        step = rz / php
        x += step * p
        r -= step * hp
        if float(np.sqrt(r @ r)) <= stop:
            break
        z = precond(r)
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x


def bradley_terry(i, j, wins, n, *, n_models: int, covariate=None, prior: float = 0.1,
                  init: np.ndarray | None = None,
                  direct_max: int | None = None) -> tuple[np.ndarray, float | None]:
    r"""Bradley–Terry strengths by penalised maximum likelihood (fractional outcomes allowed).

    Model, for unit ``u`` comparing ``i_u`` with ``j_u``, with optional covariate :math:`x_u`:

    .. math:: P(i_u \text{ beats } j_u) = \sigma(\eta_u),\qquad
              \eta_u = \theta_{i_u} - \theta_{j_u} + \gamma x_u

    minimising the negative log-likelihood with a Gaussian prior on the strengths

    .. math:: -\sum_u \big[w_u \log\sigma(\eta_u) + (n_u - w_u)\log\sigma(-\eta_u)\big]
              + \tfrac{\text{prior}}{2}\lVert\theta\rVert^2 + \tfrac12\big(\textstyle\sum_k
              \theta_k\big)^2 .

    A tie is half a win for each side (Chatbot Arena's convention), i.e. :math:`w_u` may be
    fractional. The last term fixes the free shift of :math:`\theta` (it is zero at the optimum and
    changes nothing else), so ``prior=0`` gives the plain maximum-likelihood estimate with mean
    zero when it exists. ``prior > 0`` keeps estimates finite when a model wins (or loses) all its
    comparisons; it weighs like ``prior`` × 4 comparisons against an even opponent.

    Solved by Newton's method on sparse operations only, so that time and memory grow with the
    number of units, not the number of models squared: with the design :math:`A` (one sparse
    row :math:`e_{i_u} - e_{j_u} + x_u e_\gamma` per unit), the gradient is :math:`A^\top r +
    \text{prior}\,\theta + \mathbf 1 \mathbf 1^\top\theta` with :math:`r_u = n_u\sigma(\eta_u) -
    w_u`, and each Newton step solves :math:`H d = -g`, :math:`H = A^\top \mathrm{diag}(c) A +
    \mathrm{diag}(\text{prior}) + \mathbf 1 \mathbf 1^\top`, :math:`c_u = n_u\sigma(\eta_u)
    \sigma(-\eta_u)`, by conjugate gradients with Hessian-vector products (Jacobi
    preconditioner; exactly for at most ``direct_max`` parameters), followed by a backtracking
    line search. Stops when
    :math:`\lVert g\rVert_2 \le 10^{-8}` (the tolerance of the former dense ``trust-exact`` fit,
    whose estimates it reproduces).

    Parameters
    ----------
    i, j : array of int
    wins, n : array of float
        Score of ``i`` and number of comparisons per unit (see :func:`win_rates`).
    n_models : int
    covariate : array of float, optional
        :math:`x_u`, oriented from ``i`` to ``j`` (e.g. the length difference ``len_i − len_j``).
    prior : float, default 0.1
        Precision of the Gaussian prior on each strength (0 = none).
    init : array, optional
        Starting point (strengths, then γ): warm starts for bootstrap refits.
    direct_max : int, optional
        Default :data:`DIRECT_MAX`. Up to this many parameters (models, + 1 with a covariate)
        each Newton step is solved exactly; beyond, by conjugate gradients. Both stop at the same
        gradient norm.

    Returns
    -------
    theta : ndarray of shape (n_models,), mean zero
    gamma : float, or None without a covariate
    """
    if prior < 0:
        raise PUAuditError(f"prior must be >= 0, got {prior}.")
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    wins = np.asarray(wins, dtype=float)
    n = np.asarray(n, dtype=float)
    keep = n > 0
    i, j, wins, n = i[keep], j[keep], wins[keep], n[keep]
    k = n_models
    has_cov = covariate is not None
    d = k + int(has_cov)
    direct_max = DIRECT_MAX if direct_max is None else direct_max
    if len(i) == 0:
        return np.zeros(k), (0.0 if has_cov else None)
    cov = np.asarray(covariate, dtype=float)[keep] if has_cov else None
    # The design A has one row e_i − e_j (+ x e_γ) per unit: products with A are gathers and with
    # Aᵀ bincounts, O(units + models) with no BLAS (no thread contention in the bootstrap).
    penalty = np.full(d, float(prior))
    if has_cov:
        penalty[k] = 1e-8  # γ is identified by the data; a whisper keeps the Hessian regular
    ones = np.zeros(d)
    ones[:k] = 1.0

    def a_dot(x):  # A x
        eta = x[i] - x[j]
        return eta + x[k] * cov if has_cov else eta

    def at_dot(r):  # Aᵀ r
        out = np.bincount(i, r, d) - np.bincount(j, r, d)
        if has_cov:
            out[k] = float(cov @ r)
        return out

    def fun(x):
        eta = a_dot(x)
        nll = float(np.sum(wins * np.logaddexp(0.0, -eta) + (n - wins) * np.logaddexp(0.0, eta)))
        s = float(x[:k].sum())
        return nll + 0.5 * float(penalty @ (x * x)) + 0.5 * s * s, eta, s

    x = np.zeros(d) if init is None else np.asarray(init, dtype=float)[:d].copy()
    val, eta, s = fun(x)
    g = at_dot(n * expit(eta) - wins) + penalty * x + s * ones
    for _ in range(200):
        g_norm = float(np.sqrt(g @ g))
        if not g_norm > 1e-8:
            break
        p = expit(eta)
        c = n * p * (1.0 - p)
        diag = np.bincount(i, c, d) + np.bincount(j, c, d) + penalty + ones
        if has_cov:
            diag[k] = float(c @ (cov * cov)) + penalty[k]

        if d <= direct_max:
            step = _direct_step(i, j, cov, c, diag, ones, g, k=k)
        else:
            def hess_dot(v, c=c):  # H v = Aᵀ C A v + prior v + 1 1ᵀ v
                return at_dot(c * a_dot(v)) + penalty * v + float(v[:k].sum()) * ones

            # Inexact Newton (forcing term ≤ √‖g‖): superlinear convergence, cheap early steps.
            inv_diag = 1.0 / np.where(diag > 0, diag, 1.0)  # Jacobi
            step = _pcg(hess_dot, -g, lambda r, inv_diag=inv_diag: inv_diag * r,
                        rtol=min(0.1, np.sqrt(g_norm)), maxiter=max(100, 10 * d))
        slope = float(g @ step)
        if not slope < 0:  # not a descent direction (rounding): fall back to the gradient
            step, slope = -g, -g_norm ** 2
        # Armijo backtracking; the slack of a few ulps of the objective lets the last Newton
        # steps through, whose decrease is below what the sum can resolve.
        slack = 1e-13 * abs(val)
        t = 1.0
        while True:
            val_new, eta_new, s_new = fun(x + t * step)
            if val_new <= val + 1e-4 * t * slope + slack or t < 1e-10:
                break
            t *= 0.5
        if t < 1e-10 and not val_new < val:
            break  # no progress left in floating point
        x = x + t * step
        val, eta, s = val_new, eta_new, s_new
        g = at_dot(n * expit(eta) - wins) + penalty * x + s * ones
    theta = x[:k] - x[:k].mean()
    return theta, (float(x[k]) if has_cov else None)


def length_covariate(length_a, length_b) -> np.ndarray:
    r"""AlpacaEval 2.0's length feature: :math:`\tanh\big((\ell_A - \ell_B) / \mathrm{sd}(\ell_A -
    \ell_B)\big)`, bounded in (−1, 1) so that very long answers cannot dominate the fit.

    Lengths are in characters; the standard deviation is over the rows given (0 when constant).
    """
    diff = np.asarray(length_a, dtype=float) - np.asarray(length_b, dtype=float)
    finite = np.isfinite(diff)
    sd = float(np.std(diff[finite])) if finite.any() else 0.0
    if not sd > 0:
        return np.zeros(len(diff))
    return np.where(finite, np.tanh(diff / sd), 0.0)


# --- the four-way leaderboard ---------------------------------------------------------------
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


def _power_tuning(est, y, yhat, yhat_u, *, n_resamples: int, rng) -> float:
    r"""PPI++ weight :math:`\lambda = \sum_k \mathrm{Cov}(\hat\theta_k(Y), \hat\theta_k(\hat Y)) /
    \sum_k [\mathrm{Var}\,\hat\theta_k(\hat Y) + \mathrm{Var}\,\hat\theta_k(\hat Y^u)]` over
    bootstrap draws (the rule of ``ppi_py.ppboot``), clipped to [0, 1]; coordinates undefined in a
    draw are left out of that draw."""
    a, b, c = [], [], []
    n, m = len(y), len(yhat_u)
    for _ in range(n_resamples):
        idx = rng.integers(0, n, n)
        idu = rng.integers(0, m, m)
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


@dataclass
class ModelRankings:
    """Per-model results, four ways.

    Attributes
    ----------
    frame : DataFrame
        One row per model: ``model``, ``n`` (rows where it appears), ``n_human`` (of those, rows
        with a human verdict), then for each source ``s`` in :data:`SOURCES`: ``winrate_s``,
        ``winrate_s_lo``, ``winrate_s_hi``, ``bt_s``, ``bt_s_lo``, ``bt_s_hi``, ``rank_s`` (1 =
        strongest by Bradley–Terry), and with length control ``lc_winrate_s`` (+ ``_lo``, ``_hi``).
        Sorted by the ``ppi`` rank (the ``human`` or ``judge`` rank when that is missing).
    models : list of str
    strengths : dict
        Source → Bradley–Terry strengths aligned with ``models`` (NaN when unavailable).
    params : dict
        The options used.
    diagnostics : dict
        Counts (rows, units, labelled / unlabelled units), the PPI++ weights ``lambda_*`` and,
        with length control, the length coefficient ``gamma_s`` of each source.
    notes : list of str
        Plain-language caveats (a source missing, PPI equal to human-only, ...).
    """

    frame: pd.DataFrame
    models: list
    strengths: dict
    params: dict
    diagnostics: dict
    notes: list = field(default_factory=list)

    def available(self) -> list[str]:
        """Sources with at least one finite strength."""
        return [s for s in SOURCES if np.isfinite(self.strengths.get(s, np.array([np.nan]))).any()]

    def win_probability(self, source: str = "ppi", *, top: int = TOP_MODELS) -> pd.DataFrame:
        r"""Bradley–Terry win probabilities :math:`P(\text{row beats column}) =
        \sigma(\theta_r - \theta_c)` for one source (a tie counts half), in leaderboard order,
        among the first ``top`` models of the leaderboard (a top × top matrix: the full one
        grows with the square of the number of models)."""
        if source not in SOURCES:
            raise PUAuditError(f"source must be one of {list(SOURCES)}, got {source!r}.")
        if int(top) < 1:
            raise PUAuditError(f"top must be at least 1, got {top}.")
        order = self.frame["model"].tolist()[:int(top)]
        pos = {m: k for k, m in enumerate(self.models)}
        theta = np.asarray(self.strengths[source])[[pos[m] for m in order]]
        p = expit(theta[:, None] - theta[None, :])
        np.fill_diagonal(p, np.nan)
        return pd.DataFrame(p, index=order, columns=order)

    def disagreements(self, *, against: str = "ppi", statistic: str = "winrate") -> pd.DataFrame:
        """Models whose judge estimate lies outside the ``against`` interval.

        One row per such model: ``model``, ``judge`` (the judge's estimate), ``estimate``, ``lo``,
        ``hi`` (the ``against`` source's), ``direction`` (``"judge higher"`` / ``"judge lower"``);
        in leaderboard order. Empty when the source is unavailable.
        """
        if against not in SOURCES or against == "judge":
            raise PUAuditError(f"against must be one of {list(SOURCES[1:])}, got {against!r}.")
        f = self.frame
        col = f"{statistic}_{against}"
        if col not in f.columns:
            raise PUAuditError(f"No {statistic} columns here (length control off?).")
        judge, est = f[f"{statistic}_judge"], f[col]
        lo, hi = f[f"{col}_lo"], f[f"{col}_hi"]
        out = pd.DataFrame({"model": f["model"], "judge": judge, "estimate": est, "lo": lo,
                            "hi": hi})
        out["direction"] = np.where(judge > hi, "judge higher",
                                    np.where(judge < lo, "judge lower", ""))
        return out[out["direction"] != ""].reset_index(drop=True)

    def to_dict(self, *, top: int | None = None) -> dict:
        """JSON-ready: ``models`` (one object per model, the frame's columns; the first ``top``
        of the leaderboard when given), ``n_models`` (all of them), ``params``,
        ``diagnostics``, ``notes`` (with one saying how many models were left out); NaN becomes
        None."""
        def clean(v):
            if isinstance(v, (float, np.floating)):
                return None if not np.isfinite(v) else float(v)
            if isinstance(v, np.integer):
                return int(v)
            return v

        def cell(key, v):
            v = clean(v)
            return int(v) if key.startswith("rank_") and v is not None else v

        shown = self.frame if top is None else self.frame.head(int(top))
        records = [{k: cell(k, v) for k, v in r.items()}
                   for r in shown.to_dict(orient="records")]
        notes = list(self.notes)
        if len(shown) < len(self.frame):
            notes.append(self.top_note(len(shown)))
        return {"models": records, "n_models": len(self.frame), "params": dict(self.params),
                "diagnostics": {k: clean(v) for k, v in self.diagnostics.items()},
                "notes": notes}

    def top_note(self, top: int) -> str:
        """What a view of the first ``top`` models leaves out ("" when nothing)."""
        more = len(self.frame) - int(top)
        if more <= 0:
            return ""
        by = self.diagnostics.get("sorted_by", "ppi")
        return (f"Showing the top {int(top):,} of {len(self.frame):,} models (by the {by} "
                f"ranking); {more:,} more are in the full table (the CSV download, or -o).")


def _model_index(model_a, model_b) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    def names(values):
        out = np.empty(len(values), dtype=object)
        for r, v in enumerate(values):
            if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
                out[r] = ""
            else:
                out[r] = str(v).strip()
        return out

    a, b = names(list(model_a)), names(list(model_b))
    valid = (a != "") & (b != "") & (a != b)
    models = sorted(set(a[valid]) | set(b[valid]))
    pos = {m: k for k, m in enumerate(models)}
    ia = np.array([pos.get(v, -1) for v in a], dtype=np.int64)
    ib = np.array([pos.get(v, -1) for v in b], dtype=np.int64)
    return models, ia, ib, valid


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
    for bad, why in ((ties not in TIES, f"ties must be one of {list(TIES)}, got {ties!r}."),
                     (not 0 < alpha < 1, f"alpha must be in (0, 1), got {alpha}."),
                     (int(n_resamples) < MIN_DRAWS,
                      f"n_resamples must be at least {MIN_DRAWS}, got {n_resamples}."),
                     (int(max_work) < 1, f"max_work must be at least 1, got {max_work}.")):
        if bad:
            raise PUAuditError(why)
    n_rows = len(judge)
    for name, arr in (("model_a", model_a), ("model_b", model_b), ("human", human),
                      ("audited", audited), ("groups", groups), ("length_a", length_a),
                      ("length_b", length_b)):
        if arr is not None and len(arr) != n_rows:
            raise PUAuditError(f"{name} has {len(arr)} entries but judge has {n_rows}.")
    if length_control and (length_a is None or length_b is None):
        raise PUAuditError("Length control needs the response lengths (length_a, length_b).")

    models, ia, ib, valid = _model_index(model_a, model_b)
    k = len(models)
    if k < 2:
        raise PUAuditError("Model rankings need at least two distinct models in model_a / "
                           f"model_b; found {k}. " + MODEL_COLUMNS_HINT)
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

    def oriented(verdicts):
        if verdicts is None:
            return None
        s = verdict_scores(np.asarray(verdicts, dtype=object)[rows], ties=ties)
        return np.where(flip, 1.0 - s, s)

    scores = {"judge": oriented(judge), "audited": oriented(audited), "human": oriented(human)}
    stats = {s: (None if v is None else _stats(units, v)) for s, v in scores.items()}
    warm: dict = {}
    ests = _estimators(k, prior, length_control, warm, units)
    seeds = np.random.SeedSequence(random_state).generate_state(16)
    ppi = _ppi_py()

    results: dict[str, dict[str, tuple]] = {}
    notes: list[str] = []
    diag: dict = {"n_rows": n_rows, "n_rows_used": len(rows), "n_rows_dropped": n_rows - len(rows),
                  "n_units": units.size, "n_models": k}
    nan_k = np.full(k, np.nan)

    def set_warm(s):
        warm.clear()
        warm["bt"] = ests["bt"](s)
        if length_control:
            st = s[s[:, _N] > 0]
            theta, gamma = bradley_terry(st[:, _I].astype(int), st[:, _J].astype(int), st[:, _W],
                                         st[:, _N], n_models=k, covariate=st[:, _X], prior=prior)
            warm["lc"] = np.append(theta, gamma)

    draws = _draws(int(n_resamples), k, int(max_work))
    diag.update(n_draws_winrate=draws["winrate"], n_draws_bt=draws["bt"])
    notes.extend(_draw_notes(draws, int(n_resamples), k, int(max_work), length_control))

    def classical(s, seed_offset):
        out = {}
        set_warm(s)
        for f_i, (name, est) in enumerate(ests.items()):
            point = est(s)
            if not draws[name]:
                out[name] = (point, nan_k, nan_k)
                continue
            with _global_seed(int(seeds[seed_offset + f_i])):
                lo_, hi_ = ppi.classical_bootstrap_ci(est, s, n_resamples=draws[name],
                                                      alpha=alpha)
            out[name] = (point, np.asarray(lo_, float), np.asarray(hi_, float))
        return out

    for s_i, source in enumerate(("judge", "audited", "human")):
        st = stats[source]
        if st is None:
            results[source] = {name: (nan_k, nan_k, nan_k) for name in ests}
            continue
        st = st[st[:, _N] > 0]
        if len(st) < 2:
            results[source] = {name: (nan_k, nan_k, nan_k) for name in ests}
            if len(st) == 1:  # none at all is said once, below
                notes.append(f"{SOURCE_LABELS[source]}: only one item with a usable comparison.")
            continue
        results[source] = classical(st, 3 * s_i)
    if stats["audited"] is None:
        notes.append("No audited verdicts: run the audit (Audit page, or `puaudit audit` and "
                     "--audit-export) to fill the audited columns.")

    # Prediction-powered: labelled units carry human verdicts; the rest only the judge's.
    if stats["human"] is None or not (stats["human"][:, _N] > 0).any():
        results["ppi"] = {name: (nan_k, nan_k, nan_k) for name in ests}
        notes.append("No human verdicts: the human and prediction-powered columns are empty.")
        diag.update(n_units_labelled=0, n_units_unlabelled=int((stats["judge"][:, _N] > 0).sum()))
    else:
        labelled = stats["human"][:, _N] > 0
        y = stats["human"][labelled]
        yhat = stats["judge"][labelled]
        yhat_u = stats["judge"][~labelled & (stats["judge"][:, _N] > 0)]
        diag.update(n_units_labelled=int(labelled.sum()), n_units_unlabelled=len(yhat_u))
        if len(yhat_u) < 2:
            results["ppi"] = results["human"]
            for name in ests:
                diag[f"lambda_{name}"] = 0.0
            notes.append("Every item has a human verdict: there is nothing for the judge to add, "
                         "so the prediction-powered columns equal the human ones.")
        else:
            rng = np.random.default_rng(seeds[12])
            set_warm(y)
            out = {}
            for f_i, (name, est) in enumerate(ests.items()):
                if draws[name]:
                    # 100 draws for λ (ppboot's rule), half the interval's when those are capped
                    lam = _power_tuning(est, y, yhat, yhat_u, rng=rng,
                                        n_resamples=min(100, max(MIN_DRAWS, draws[name] // 2)))
                else:  # any fixed λ in [0, 1] keeps the estimate valid; only its variance moves
                    lam = diag.get("lambda_winrate", 0.0)
                point = lam * est(yhat_u) + est(y) - lam * est(yhat)
                if draws[name]:
                    with _global_seed(int(seeds[13 + f_i])):
                        lo_, hi_ = ppi.ppboot(est, y, yhat, yhat_u, lam=lam,
                                              n_resamples=draws[name], alpha=alpha)
                    out[name] = (point, np.asarray(lo_, float), np.asarray(hi_, float))
                else:
                    out[name] = (point, nan_k, nan_k)
                diag[f"lambda_{name}"] = lam
            results["ppi"] = out
        if labelled.sum() < 30:
            notes.append(f"Only {int(labelled.sum())} labelled items: human and prediction-powered "
                         "intervals are rough.")

    if length_control:
        for source in ("judge", "audited", "human"):
            st = stats[source]
            if st is None or not (st[:, _N] > 0).any():
                diag[f"gamma_{source}"] = np.nan
                continue
            st = st[st[:, _N] > 0]
            _, g = bradley_terry(st[:, _I].astype(int), st[:, _J].astype(int), st[:, _W],
                                 st[:, _N], n_models=k, covariate=st[:, _X], prior=prior)
            diag[f"gamma_{source}"] = g

    # --- the frame ---
    n_model = (np.bincount(lo, minlength=k) + np.bincount(hi, minlength=k)).astype(int)
    h = scores["human"]
    if h is None:
        n_human = np.zeros(k, dtype=int)
    else:
        ok = np.isfinite(h)
        n_human = (np.bincount(lo[ok], minlength=k) + np.bincount(hi[ok], minlength=k)).astype(int)
    frame = pd.DataFrame({"model": models, "n": n_model, "n_human": n_human})
    strengths = {}
    for source in SOURCES:
        res = results[source]
        for name, (point, lo_, hi_) in (("winrate", res["winrate"]), ("bt", res["bt"])):
            frame[f"{name}_{source}"] = point
            frame[f"{name}_{source}_lo"] = lo_
            frame[f"{name}_{source}_hi"] = hi_
        theta = np.asarray(res["bt"][0], dtype=float)
        strengths[source] = theta
        frame[f"rank_{source}"] = (pd.Series(-theta).rank(method="min").to_numpy()
                                   if np.isfinite(theta).all() else np.nan)
        if length_control:
            point, lo_, hi_ = res["lc_winrate"]
            frame[f"lc_winrate_{source}"] = point
            frame[f"lc_winrate_{source}_lo"] = lo_
            frame[f"lc_winrate_{source}_hi"] = hi_
    for source in ("ppi", "human", "judge"):
        if frame[f"rank_{source}"].notna().all():
            frame = frame.sort_values([f"rank_{source}", "model"], kind="stable")
            diag["sorted_by"] = source
            break
    frame = frame.reset_index(drop=True)
    params = {"ties": ties, "alpha": alpha, "n_resamples": int(n_resamples),
              "length_control": bool(length_control), "prior": prior,
              "max_work": int(max_work),
              "random_state": random_state}
    return ModelRankings(frame=frame, models=models, strengths=strengths, params=params,
                         diagnostics=diag, notes=notes)


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


# --- simulation with known truth ------------------------------------------------------------
def simulate_comparisons(n_comparisons: int = 5000, *, n_models: int = 8,
                         label_share: float = 0.1, length_bias: float = 1.5,
                         quality_sd: float = 0.8, sharpness: float = 3.0,
                         human_tie: float = 0.1, judge_tie: float = 0.03,
                         random_state: int | None = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    r"""Pairwise comparisons with planted strengths, a length-biased judge and scarce labels.

    Model ``k`` has mean answer quality :math:`\beta_k` (evenly spaced in [−1.2, 1.2]) and a
    typical answer length :math:`e^{\mu_k}` characters, unrelated to its quality. Each row draws
    an ordered pair uniformly, one answer per side with quality :math:`q = \beta + s\,\varepsilon`
    (:math:`s` = ``quality_sd``) and length :math:`e^{\mu + 0.3\varepsilon'}`, and

    * a human verdict: ``tie`` with probability ``human_tie``, else A wins with probability
      :math:`\sigma(\kappa (q_A - q_B))` (:math:`\kappa` = ``sharpness``; people ignore
      length), kept on a uniform random ``label_share`` of the rows (None elsewhere);
    * a judge verdict on the same answers: ``tie`` with probability ``judge_tie``, else A wins
      with probability :math:`\sigma(\kappa (q_A - q_B) + \gamma \tanh\log(\ell_A /
      \ell_B))`, :math:`\gamma` = ``length_bias`` (the judge likes long answers).

    Judge and people see the same answers, so they agree on most rows (about 0.85 on strict rows
    with the defaults), as real judges do; only the length term sets them apart.

    Returns
    -------
    frame : DataFrame
        ``model_a, model_b, length_a, length_b, judge_winner, human_winner``.
    truth : DataFrame
        Per model: ``model``, ``quality`` (:math:`\beta`), ``winrate_true`` — the expected human
        score against a uniformly drawn opponent, :math:`\frac{1}{K-1}\sum_{l\ne k}
        \big[(1 - t)\,E\,\sigma(\kappa(\beta_k - \beta_l + \sqrt2 s Z)) + t/2\big]`
        (:math:`t` = ``human_tie``, :math:`Z` standard normal, by Gauss–Hermite quadrature) — and
        ``bt_true``, the Bradley–Terry strengths those expected outcomes imply (the population
        value the ``human`` and ``ppi`` strengths estimate).
    """
    rng = np.random.default_rng(random_state)
    k = int(n_models)
    beta = np.linspace(-1.2, 1.2, k)
    mu = np.log(300.0) + rng.permutation(np.linspace(-0.8, 0.8, k))
    names = np.array([f"model-{c:02d}" for c in range(k)])
    pairs = np.array([(a, b) for a in range(k) for b in range(k) if a != b])
    draw = pairs[rng.integers(0, len(pairs), n_comparisons)]
    a, b = draw[:, 0], draw[:, 1]
    q_a = beta[a] + quality_sd * rng.normal(size=n_comparisons)
    q_b = beta[b] + quality_sd * rng.normal(size=n_comparisons)
    len_a = np.round(np.exp(mu[a] + 0.3 * rng.normal(size=n_comparisons)))
    len_b = np.round(np.exp(mu[b] + 0.3 * rng.normal(size=n_comparisons)))

    def verdicts(logit, p_tie):
        win_a = rng.random(n_comparisons) < expit(logit)
        tie = rng.random(n_comparisons) < p_tie
        return np.where(tie, "tie", np.where(win_a, "A", "B")).astype(object)

    human = verdicts(sharpness * (q_a - q_b), human_tie)
    judge = verdicts(sharpness * (q_a - q_b) + length_bias * np.tanh(np.log(len_a / len_b)),
                     judge_tie)
    human[rng.random(n_comparisons) >= label_share] = None
    frame = pd.DataFrame({"model_a": names[a], "model_b": names[b], "length_a": len_a,
                          "length_b": len_b, "judge_winner": judge, "human_winner": human})
    nodes, weights = np.polynomial.hermite_e.hermegauss(64)  # E f(Z), Z ~ N(0, 1)
    weights = weights / weights.sum()
    diff = beta[:, None, None] - beta[None, :, None] + np.sqrt(2.0) * quality_sd * nodes
    expected = (1 - human_tie) * (expit(sharpness * diff) @ weights) + human_tie / 2
    np.fill_diagonal(expected, np.nan)
    iu, ju = np.triu_indices(k, 1)
    bt_true, _ = bradley_terry(iu, ju, expected[iu, ju], np.ones(len(iu)), n_models=k, prior=0.0)
    truth = pd.DataFrame({"model": names, "quality": beta,
                          "winrate_true": np.nanmean(expected, axis=1), "bt_true": bt_true})
    return frame, truth
