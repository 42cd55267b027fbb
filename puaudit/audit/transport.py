"""Partial optimal transport from verified positives P' to unlabelled rows U, and its scores.

The audit transports a total mass ``m`` from P' (weights ``a_i = 1/n_p``) to U (weights
``b_j = 1/n_u``) under the cosine cost ``C_ij = 1 - zp_i . zu_j``::

    min_Γ <Γ, C>   s.t.  Γ >= 0,  Γ 1 <= a,  Γᵀ 1 <= b,  1ᵀ Γ 1 = m

and scores each U row by the share of its mass that was matched, ``s_j = (Γᵀ1)_j / b_j``.

Three solvers share this module:

* ``exact``: POT's network-simplex based ``ot.partial.partial_wasserstein`` on the dense cost.
  Exact LP vertex, hence scores that are 0 or 1 except for a handful of split rows; cubic-ish
  time and a dense ``n_p x n_u`` float64 cost, so only for small problems.
* ``entropic``: entropic partial OT in the dummy-point reformulation (Chapel et al., 2020):
  P' gets a dummy point of mass ``Σb - m`` and U one of mass ``Σa - m``, every real-to-dummy
  cost is 0 and the dummy-dummy cost is infinite, which turns the problem into balanced OT.
  It is solved on the *semi-dual* (one potential per source, the target potentials are exact
  soft-c-transforms), log-domain, with L-BFGS and ε-scaling. The cost is streamed in blocks of U
  rows computed from ``zu_block @ zp.T``, so memory stays ``O(block * n_p)``. Scores are the
  soft, entropic responsibilities.
* ``fast``: the same semi-dual, but each U row only sees its ``k`` most attractive sources
  (largest ``f_i - C_ij``, recomputed from the current potentials until the set is stable, which
  certifies that no better source was left out), driven to a small ε, then rounded to an LP
  vertex: the ``⌊m n_u⌋`` rows with the largest matching margin get score 1, the next one the
  fractional remainder, the rest 0. The exact scores are themselves 0/1 almost everywhere, so
  this reproduces their selection *and* their ties (which matters for rank statistics).

Everything but the exact solver runs on numpy or on torch (CPU or CUDA) through the same code.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from puaudit.audit.transport_ops import _NumpyOps, _is_torch, _make_ops
from puaudit.audit.transport_semidual import (_Problem, _block_rows, _dense_blocks, _eps_schedule,
                                              _fast_solve, _fix_mass, _round_to_vertex,
                                              _semidual_eval, _solve_semidual)
from puaudit.errors import PUAuditError

__all__ = ["partial_ot_scores", "ot_scores", "partial_wasserstein_plan"]

#: ``n_p * n_u`` up to which ``method="auto"`` uses the exact LP solver.
EXACT_MAX_SIZE = 2_000_000
#: Memory, in bytes, a dense cost may take before the entropic solver recomputes blocks instead.
DENSE_CACHE_BYTES = 512 * 2**20


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


# What each validated argument holds, for messages ("row 3 of zu (the rows to score)").
_ROLES = {"zp": "(the verified positives P')", "zu": "(the rows to score, U)"}


def _check_matrix(z, name: str, block: int = 65536) -> tuple[int, int]:
    shape = tuple(z.shape)
    if len(shape) != 2:
        raise PUAuditError(
            f"{name} must be a 2-D array of embeddings (rows x dimensions), got shape {shape}."
        )
    if shape[0] == 0:
        what = "P' (the verified positives)" if name == "zp" else "U (the rows to score)"
        raise PUAuditError(
            f"{name} is empty: {what} has no rows. Check the split and the filters that built it."
        )
    # Blockwise so that a 1M-row float32 input is not copied for the checks.
    for start in range(0, shape[0], block):
        blk = z[start : start + block]
        blk = blk.detach().cpu().numpy() if _is_torch(blk) else np.asarray(blk)
        if not np.issubdtype(blk.dtype, np.number):
            raise PUAuditError(f"{name} must hold numbers, got dtype {blk.dtype}.")
        bad = ~np.isfinite(blk).all(axis=1)
        if bad.any():
            row = start + int(np.flatnonzero(bad)[0])
            raise PUAuditError(
                f"Row {row + 1} (1-based) of {name} {_ROLES.get(name, '')} contains NaN or "
                "infinite values; drop or re-embed that row.",
                row=row + 1,
            )
        norms = np.sqrt(np.einsum("ij,ij->i", blk, blk, dtype=np.float64))
        off = np.abs(norms - 1.0) > 1e-3
        if off.any():
            row = start + int(np.flatnonzero(off)[0])
            raise PUAuditError(
                f"Row {row + 1} (1-based) of {name} {_ROLES.get(name, '')} has L2 norm "
                f"{norms[off][0]:.4g}, but rows must be unit vectors "
                "(cost is 1 - cosine); normalise with z / ||z|| (a zero row cannot be scored).",
                row=row + 1,
            )
    return shape


def _validate(zp, zu, m: float | None, method: str, methods: tuple[str, ...]):
    if method not in methods:
        raise PUAuditError(f"method must be one of {', '.join(map(repr, methods))}, got {method!r}.")
    for name, z in (("zp", zp), ("zu", zu)):
        if not (isinstance(z, np.ndarray) or _is_torch(z)):
            raise PUAuditError(f"{name} must be a numpy array or a torch tensor, got {type(z).__name__}.")
    n_p, d_p = _check_matrix(zp, "zp")
    n_u, d_u = _check_matrix(zu, "zu")
    if d_p != d_u:
        raise PUAuditError(
            f"zp has {d_p} dimensions but zu has {d_u}: both must come from the same encoder."
        )
    if m is not None:
        if not isinstance(m, (int, float, np.floating, np.integer)) or not math.isfinite(m):
            raise PUAuditError(f"m must be a number in (0, 1], got {m!r}.")
        if not 0.0 < float(m) <= 1.0:
            raise PUAuditError(
                f"m = {m} is outside (0, 1]: m is the share of U mass to transport (the expected "
                "share of human-consistent judge decisions); pick a value such as 0.7."
            )
    return n_p, n_u


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def partial_ot_scores(zp, zu, m: float, *, method: str = "auto", reg: float | None = None,
                      backend: str = "auto", device=None, block_size: int | None = None,
                      random_state=None, log: bool = False):
    r"""Scores of U rows under partial optimal transport from P'.

    Solves

    .. math:: \min_{\Gamma \ge 0} \langle \Gamma, C \rangle \quad \text{s.t.}\quad
              \Gamma 1 \le a,\; \Gamma^\top 1 \le b,\; 1^\top \Gamma 1 = m

    with :math:`a = 1/n_p`, :math:`b = 1/n_u`, :math:`C_{ij} = 1 - z^P_i \cdot z^U_j`, and
    returns :math:`s_j = (\Gamma^\top 1)_j / b_j \in [0, 1]`, so that :math:`\sum_j b_j s_j = m`.

    Parameters
    ----------
    zp : array (n_p, d), numpy or torch
        L2-normalised embeddings of P' (source).
    zu : array (n_u, d), numpy or torch
        L2-normalised embeddings of U (target). float32 input is never copied whole.
    m : float in (0, 1]
        Transported mass (the expected positive share of U). ``m = 1`` is balanced OT.
    method : {'auto', 'exact', 'entropic', 'fast'}
        ``'exact'``: POT's LP solver (dense, small problems). ``'entropic'``: entropic partial
        OT with regularisation ``reg`` (default 0.01), soft scores. ``'fast'``: sparse
        ε-scaled semi-dual driven to ``reg`` (default 1e-3) and rounded to an LP vertex
        (matches the exact selection). ``'auto'``: exact when ``n_p * n_u <= 2e6``, else fast.
    reg : float, optional
        Final entropic regularisation ε (in cost units; costs lie in [0, 2]).
    backend : {'auto', 'numpy', 'torch'}
        ``'auto'``: torch on CUDA when torch is imported and a GPU is available, else numpy
        (measured several times faster than torch-CPU on 2 cores). Exact always uses POT.
    device : str or torch.device, optional
        Torch device; default CUDA when available.
    block_size : int, optional
        Number of U rows per cost block (default: ~64 MB of float64 per block).
    random_state : None, int or Generator
        'fast' with more than 20,000 U rows solves its large-ε warm-up stages on a uniform
        sample of that many rows; this seeds the sample (the final stages use every row).
    log : bool
        Also return a dict of diagnostics.

    Returns
    -------
    scores : ndarray (n_u,), float64 in [0, 1]
    log : dict, only when ``log=True``
        ``method``, ``backend``, ``device``, ``n_iter`` (objective evaluations), ``mass``
        (Σ b_j s_j), ``cost`` (⟨Γ, C⟩; for 'fast' the entropic plan's), ``time``,
        ``marginal_error`` (largest source over/under-use relative to a_i, entropic solvers),
        and for 'fast' ``margin`` (per-row margin of matching over the dummy, a continuous
        ranking behind the 0/1 scores), ``k`` and ``rounds``.
    """
    methods = ("auto", "exact", "entropic", "fast")
    n_p, n_u = _validate(zp, zu, m, method, methods)
    m = float(m)
    if method == "auto":
        method = "exact" if n_p * n_u <= EXACT_MAX_SIZE else "fast"
    t0 = time.perf_counter()
    if method == "exact":
        s, info = _exact_scores(zp, zu, m)
    else:
        s, info = _semidual_scores(zp, zu, m, method=method, reg=reg, backend=backend,
                                   device=device, block_size=block_size,
                                   random_state=random_state)
    s = np.clip(s, 0.0, 1.0)
    info["mass"] = float(s.sum() / n_u)
    info["time"] = time.perf_counter() - t0
    return (s, info) if log else s


def ot_scores(zp, zu, *, method: str = "exact", reg: float | None = None, backend: str = "auto",
              device=None, block_size: int | None = None, log: bool = False):
    r"""'Full OT' baseline: balanced OT from P' to U, scored by negative matched cost.

    Every U row receives its full mass under balanced OT, so the share matched is uninformative;
    instead :math:`s_j = -\sum_i \Gamma_{ij} C_{ij} / b_j`, the expected cost of the P' mass
    that row j receives (higher = closer to the verified positives). Values lie in [-2, 0].

    Parameters
    ----------
    method : {'exact', 'entropic'}
        ``'exact'``: ``ot.emd`` on the dense cost. ``'entropic'``: log-domain semi-dual with
        ε = ``reg`` (default 0.01), streamed in blocks of U.
    Other parameters as in :func:`partial_ot_scores`.

    Returns
    -------
    scores : ndarray (n_u,) float64, and a diagnostics dict when ``log=True``.
    """
    n_p, n_u = _validate(zp, zu, None, method, ("exact", "entropic"))
    t0 = time.perf_counter()
    if method == "exact":
        import ot

        a = np.full(n_p, 1.0 / n_p)
        b = np.full(n_u, 1.0 / n_u)
        C = _dense_cost(zp, zu)
        G, lg = ot.emd(a, b, C, log=True)
        s = -(G * C).sum(axis=0) / b
        info = {"method": "exact", "backend": "numpy", "device": "cpu", "n_iter": None,
                "cost": float(lg["cost"]), "warning": lg.get("warning")}
    else:
        s, info = _semidual_scores(zp, zu, 1.0, method="entropic", reg=reg, backend=backend,
                                   device=device, block_size=block_size, balanced_cost=True)
    info["time"] = time.perf_counter() - t0
    return (s, info) if log else s


def partial_wasserstein_plan(a, b, C, m: float, *, method: str = "exact", reg: float | None = None,
                             log: bool = False):
    r"""Dense partial OT plan Γ between weights ``a`` and ``b`` for cost ``C`` (small problems).

    ``method='exact'`` calls ``ot.partial.partial_wasserstein``; ``method='entropic'`` solves
    the entropic dummy-point problem (ε = ``reg``, default 0.01) on the semi-dual and returns
    :math:`\Gamma_{ij} = b_j \exp((f_i - C_{ij} - \ell_j)/ε)`, whose column sums are exact and
    whose row sums match ``a`` up to the solver tolerance. ``m >= min(Σa, Σb)`` is balanced.

    Returns
    -------
    G : ndarray (n, n') float64, and ``{'cost': <Γ, C>, ...}`` when ``log=True``.
    """
    if method not in ("exact", "entropic"):
        raise PUAuditError(f"method must be 'exact' or 'entropic', got {method!r}.")
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or C.shape != (a.size, b.size):
        raise PUAuditError(f"C must have shape (len(a), len(b)) = ({a.size}, {b.size}), got {C.shape}.")
    if a.size == 0 or b.size == 0:
        raise PUAuditError("a and b must be non-empty weight vectors.")
    if not (np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(C).all()):
        raise PUAuditError("a, b and C must be finite (no NaN or infinity).")
    if (a < 0).any() or (b < 0).any():
        raise PUAuditError("a and b must be non-negative masses.")
    total = min(a.sum(), b.sum())
    if not 0 < m:
        raise PUAuditError(f"m = {m} must be positive.")
    m = min(float(m), float(total))
    if method == "exact":
        import ot

        if m >= total * (1 - 1e-12) and abs(a.sum() - b.sum()) < 1e-12:
            G, lg = ot.emd(a, b, C, log=True)
        else:
            G, lg = ot.partial.partial_wasserstein(a, b, C, m=m, log=True)
        info = {"cost": float((G * C).sum())}
        return (G, info) if log else G
    eps = 0.01 if reg is None else float(reg)
    ops = _NumpyOps()
    partial = m < total * (1 - 1e-12) or abs(a.sum() - b.sum()) > 1e-12
    prob = _Problem(ops=ops, a=a, blocks=[(C.T.copy(), None, b)], make_blocks=None,
                    mass_ds=b.sum() - m, mass_dt=a.sum() - m, partial=partial)
    f, fd, n_eval = _solve_semidual(prob, np.zeros(a.size), 0.0, _eps_schedule(eps),
                                    tol=1e-9 * a.max(), maxiter=5000)
    s = (f[None, :] - C.T) / eps
    extra = np.full(b.size, fd / eps) if partial else np.full(b.size, -np.inf)
    lse = np.logaddexp(np.logaddexp.reduce(s, axis=1), extra)
    G = (b[:, None] * np.exp(s - lse[:, None])).T
    info = {"cost": float((G * C).sum()), "n_iter": n_eval, "f": f, "f_dummy": fd}
    return (G, info) if log else G


# --------------------------------------------------------------------------------------------
# Solver drivers
# --------------------------------------------------------------------------------------------


def _dense_cost(zp, zu) -> np.ndarray:
    zp_n = zp.detach().cpu().numpy() if _is_torch(zp) else np.asarray(zp)
    zu_n = zu.detach().cpu().numpy() if _is_torch(zu) else np.asarray(zu)
    C = 1.0 - zp_n.astype(np.float64) @ zu_n.astype(np.float64).T
    return np.maximum(C, 0.0)  # rounding can make 1 - cos slightly negative


def _exact_scores(zp, zu, m: float):
    import ot

    n_p, n_u = zp.shape[0], zu.shape[0]
    a = np.full(n_p, 1.0 / n_p)
    b = np.full(n_u, 1.0 / n_u)
    C = _dense_cost(zp, zu)
    # POT's default of 1e5 simplex iterations stops short of optimality from (1k, 10k) on.
    n_iter = max(100_000, 200 * (n_p + n_u))
    if m >= 1.0:
        G, lg = ot.emd(a, b, C, log=True, numItermax=n_iter)
    else:
        G, lg = ot.partial.partial_wasserstein(a, b, C, m=m, log=True, numItermax=n_iter)
    s = G.sum(axis=0) / b
    info = {"method": "exact", "backend": "numpy", "device": "cpu", "n_iter": None,
            "cost": float((G * C).sum()), "marginal_error": float(
                np.max(np.maximum(G.sum(axis=1) - a, 0.0)) / a[0])}
    return s, info


def _semidual_scores(zp, zu, m: float, *, method: str, reg, backend, device, block_size,
                     balanced_cost: bool = False, random_state=None):
    n_p, n_u = zp.shape[0], zu.shape[0]
    ops = _make_ops(backend, device)
    zp_t = ops.asarray(zp)
    if not _is_torch(zu) and ops.name == "torch":
        zu_src = zu  # converted block by block: no full copy of a large U
    else:
        zu_src = zu if ops.name == "numpy" else ops.asarray(zu)
    a = ops.scalar_vec(np.full(n_p, 1.0 / n_p))
    b_np = np.full(n_u, 1.0 / n_u)
    b_vec = ops.scalar_vec(b_np)
    partial = m < 1.0 - 1e-12
    # The dummy masses are Σb - m and Σa - m; with uniform unit-sum weights both are 1 - m.
    mass = 1.0 - m if partial else 0.0
    bs = _block_rows(n_p, block_size)
    info: dict[str, Any] = {"method": method, "backend": ops.name, "device": ops.device}
    # L-BFGS stops when every source's marginal is off by less than 1e-3 of its mass.
    tol = 1e-3 / n_p

    if method == "entropic":
        eps = 0.01 if reg is None else float(reg)
        blocks = None
        if n_p * n_u * 8 <= DENSE_CACHE_BYTES:
            blocks = list(_dense_blocks(ops, zp_t, zu_src, bs, b_vec))
        prob = _Problem(ops=ops, a=a, blocks=blocks,
                        make_blocks=lambda: _dense_blocks(ops, zp_t, zu_src, bs, b_vec),
                        mass_ds=mass, mass_dt=mass, partial=partial)
        f, fd, n_eval = _solve_semidual(prob, np.zeros(n_p), 0.0, _eps_schedule(eps), tol=tol,
                                        maxiter=1000)
    else:
        eps = 1e-3 if reg is None else float(reg)
        prob, f, fd, n_eval, cert = _fast_solve(ops, zp_t, zu_src, a, b_vec, mass, partial,
                                                eps, bs, tol, random_state=random_state)
        info.update(cert)
    r = _semidual_eval(prob, ops.scalar_vec(f), fd, eps, want_rows=True)
    info["n_iter"] = n_eval
    info["reg"] = eps
    info["marginal_error"] = float(np.abs(ops.to_numpy(r["grad"])).max() * n_p)
    lr = ops.to_numpy(r["rows_lr"]).astype(np.float64)
    if balanced_cost:
        s = -ops.to_numpy(r["rows_cost"]).astype(np.float64)
        info["cost"] = r["cost"]
        return s, info
    if not partial:
        info["cost"] = r["cost"]
        return np.ones(n_u), info
    soft, fd_fixed = _fix_mass(lr, b_np, fd, eps, m)
    info["cost"] = float((ops.to_numpy(r["rows_cost"]) * soft * b_np).sum())
    info["f"] = f
    info["f_dummy"] = fd_fixed
    if method == "entropic":
        return soft, info
    margin = eps * lr - fd_fixed
    info["margin"] = margin
    return _round_to_vertex(margin, b_np, m), info

