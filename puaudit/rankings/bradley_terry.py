r"""Bradley–Terry strengths by penalised maximum likelihood, solved by sparse Newton steps.

Time and memory grow with the number of units (rows or groups of rows), not with the number of
models squared: products with the design are gathers and bincounts; each Newton step is solved
exactly on a dense Hessian for a handful of parameters (:data:`DIRECT_MAX`) and by
preconditioned conjugate gradients beyond.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.special import expit

from puaudit.errors import PUAuditError

__all__ = ["DIRECT_MAX", "bradley_terry"]

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
    line search. Stops when :math:`\lVert g\rVert_2 \le 10^{-8}`.

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
    design = _Design(i, j, wins, n, covariate, n_models=n_models, prior=prior)
    if design.size == 0:
        return np.zeros(n_models), (0.0 if design.has_cov else None)
    x = np.zeros(design.d) if init is None else np.asarray(init, dtype=float)[:design.d].copy()
    x = _newton(design, x, direct_max=DIRECT_MAX if direct_max is None else direct_max)
    theta = x[:n_models] - x[:n_models].mean()
    return theta, (float(x[n_models]) if design.has_cov else None)


class _Design:
    r"""The units of one fit, the design :math:`A` and the penalised objective.

    :math:`A` has one row :math:`e_{i_u} - e_{j_u}` (+ :math:`x_u e_\gamma`) per unit: products
    with :math:`A` are gathers and with :math:`A^\top` bincounts, O(units + models) with no BLAS
    (no thread contention in the bootstrap). Units without comparisons are left out.
    """

    def __init__(self, i, j, wins, n, covariate, *, n_models: int, prior: float):
        n = np.asarray(n, dtype=float)
        keep = n > 0
        self.i = np.asarray(i, dtype=np.int64)[keep]
        self.j = np.asarray(j, dtype=np.int64)[keep]
        self.wins = np.asarray(wins, dtype=float)[keep]
        self.n = n[keep]
        self.size = len(self.i)
        self.k = k = n_models
        self.has_cov = covariate is not None
        self.d = d = k + int(self.has_cov)
        self.cov = (np.asarray(covariate, dtype=float)[keep]
                    if self.has_cov and self.size else None)
        self.penalty = np.full(d, float(prior))
        if self.has_cov:
            self.penalty[k] = 1e-8  # γ is identified by the data; a whisper keeps H regular
        self.ones = np.zeros(d)
        self.ones[:k] = 1.0

    def a_dot(self, x):  # A x
        eta = x[self.i] - x[self.j]
        return eta + x[self.k] * self.cov if self.has_cov else eta

    def at_dot(self, r):  # Aᵀ r
        out = np.bincount(self.i, r, self.d) - np.bincount(self.j, r, self.d)
        if self.has_cov:
            out[self.k] = float(self.cov @ r)
        return out

    def fun(self, x):
        """Objective, linear predictor η and the sum of the strengths at ``x``."""
        eta = self.a_dot(x)
        wins, n = self.wins, self.n
        nll = float(np.sum(wins * np.logaddexp(0.0, -eta) + (n - wins) * np.logaddexp(0.0, eta)))
        s = float(x[:self.k].sum())
        return nll + 0.5 * float(self.penalty @ (x * x)) + 0.5 * s * s, eta, s

    def grad(self, x, eta, s):
        return self.at_dot(self.n * expit(eta) - self.wins) + self.penalty * x + s * self.ones

    def newton_step(self, eta, g, g_norm: float, *, direct_max: int) -> np.ndarray:
        r"""Solve :math:`H d = -g`: exactly up to ``direct_max`` parameters, else by PCG."""
        k, d, penalty, ones = self.k, self.d, self.penalty, self.ones
        p = expit(eta)
        c = self.n * p * (1.0 - p)
        diag = np.bincount(self.i, c, d) + np.bincount(self.j, c, d) + penalty + ones
        if self.has_cov:
            diag[k] = float(c @ (self.cov * self.cov)) + penalty[k]
        if d <= direct_max:
            return _direct_step(self.i, self.j, self.cov, c, diag, ones, g, k=k)

        def hess_dot(v, c=c):  # H v = Aᵀ C A v + prior v + 1 1ᵀ v
            return self.at_dot(c * self.a_dot(v)) + penalty * v + float(v[:k].sum()) * ones

        # Inexact Newton (forcing term ≤ √‖g‖): superlinear convergence, cheap early steps.
        inv_diag = 1.0 / np.where(diag > 0, diag, 1.0)  # Jacobi
        return _pcg(hess_dot, -g, lambda r, inv_diag=inv_diag: inv_diag * r,
                    rtol=min(0.1, np.sqrt(g_norm)), maxiter=max(100, 10 * d))

    def line_search(self, x, val: float, step, slope: float):
        """Armijo backtracking from ``x`` along ``step``: the step length and ``fun`` there."""
        # The slack of a few ulps of the objective lets the last Newton steps through, whose
        # decrease is below what the sum can resolve.
        slack = 1e-13 * abs(val)
        t = 1.0
        while True:
            val_new, eta_new, s_new = self.fun(x + t * step)
            if val_new <= val + 1e-4 * t * slope + slack or t < 1e-10:
                return t, val_new, eta_new, s_new
            t *= 0.5


def _newton(design: _Design, x: np.ndarray, *, direct_max: int) -> np.ndarray:
    r"""Damped Newton iterations from ``x`` until :math:`\lVert g\rVert_2 \le 10^{-8}`."""
    val, eta, s = design.fun(x)
    g = design.grad(x, eta, s)
    for _ in range(200):
        g_norm = float(np.sqrt(g @ g))
        if not g_norm > 1e-8:
            break
        step = design.newton_step(eta, g, g_norm, direct_max=direct_max)
        slope = float(g @ step)
        if not slope < 0:  # not a descent direction (rounding): fall back to the gradient
            step, slope = -g, -g_norm ** 2
        t, val_new, eta_new, s_new = design.line_search(x, val, step, slope)
        if t < 1e-10 and not val_new < val:
            break  # no progress left in floating point
        x = x + t * step
        val, eta, s = val_new, eta_new, s_new
        g = design.grad(x, eta, s)
    return x
