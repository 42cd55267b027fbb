"""The semi-dual solver of entropic partial transport (docs/transport.md): the problem, its
log-domain evaluation, L-BFGS with ε-scaling, the mass fix, the rounding to an LP vertex, and
the ``fast`` solver's top-k candidate sets. Used by :mod:`puaudit.audit.transport`."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from puaudit.audit.transport_ops import _is_torch, _rowmax, _rowmin
from puaudit.errors import PUAuditError

#: Bytes of one block of the streamed cost (rows of U per block follow from n_p).
_DEFAULT_BLOCK_BYTES = 64 * 2**20


# --------------------------------------------------------------------------------------------
# The semi-dual solver
# --------------------------------------------------------------------------------------------


@dataclass
class _Problem:
    """Partial OT in the dummy-point form, seen from the target side.

    Sources: n_p real points with masses ``a`` (+ a dummy of mass ``mass_ds = Σb - m`` when the
    problem is partial). Targets: U rows with masses ``b`` (+ a dummy of mass ``mass_dt = Σa - m``).
    Target rows are visited in blocks; a block is ``(C, idx, b)`` where ``C`` holds the costs to
    the sources listed in ``idx`` (``idx is None`` means all sources, in order).
    """

    ops: Any
    a: Any  # (n_p,) float64 on the backend
    blocks: list | None  # cached blocks, or None to recompute with `make_blocks`
    make_blocks: Any  # callable returning an iterator over blocks
    mass_ds: float
    mass_dt: float
    partial: bool

    def iter_blocks(self):
        return iter(self.blocks) if self.blocks is not None else self.make_blocks()


def _semidual_eval(prob: _Problem, f, fd: float, eps: float, *, want_rows: bool = False):
    """Value and gradient of the (concave) entropic semi-dual, in the source potentials.

    With target potentials ``g_j = -ε log(Σ_i exp((f_i - C_ij)/ε) + exp(f_d/ε))`` (the dummy
    source at zero cost) and the dummy target's ``g_D = -ε log Σ_i exp(f_i/ε)``::

        F(f, f_d) = Σ a_i f_i + (Σb - m) f_d + Σ b_j g_j + (Σa - m) g_D
        ∂F/∂f_i  = a_i - Σ_j b_j π_{i|j} - (Σa - m) π_{i|D}
        ∂F/∂f_d  = (Σb - m) - Σ_j b_j π_{d|j}

    so the gradient is the violation of the source marginals.
    """
    ops = prob.ops
    n_p = prob.a.shape[0]
    inv = 1.0 / eps
    demand = ops.zeros(n_p)
    dummy_demand = 0.0
    val_g = 0.0
    cost = 0.0
    rows_lr, rows_cost = [], []
    for C, idx, b in prob.iter_blocks():
        C = ops.f64(C)
        s = (f if idx is None else ops.gather(f, idx)) - C  # f_i - C_ij
        mx = _rowmax(ops, s)
        if prob.partial:
            mx = ops.maximum(mx, fd)
        # exp in float32 (2-4x faster): arguments are <= 0 after the shift, relative error 1e-7.
        e = ops.exp(ops.f32((s - mx[:, None]) * inv))
        real = ops.f64(ops.sum(e, 1))
        tot = real + ops.exp((fd - mx) * inv) if prob.partial else real
        w = b / tot
        pb = e * w[:, None]  # b_j π_{i|j} on the candidates
        demand = demand + (ops.scatter_add(idx, pb, n_p) if idx is not None else ops.sum(pb, 0))
        if prob.partial:
            dummy_demand += float(ops.sum(w * ops.exp((fd - mx) * inv)))
        val_g += float(ops.sum(b * (mx * inv + ops.log(tot))))
        if want_rows:
            cost += float(ops.sum(pb * C))
            # log of the real-source part of the row's partition function, in units of ε, in
            # float64 and shifted by the real maximum so that it never underflows to -inf
            mr = _rowmax(ops, s)
            er = ops.exp((s - mr[:, None]) * inv)
            rows_lr.append(mr * inv + ops.log(ops.sum(er, 1)))
            rows_cost.append(ops.sum(er * C, 1) / ops.sum(er, 1))
    a = prob.a
    value = float(ops.sum(a * f)) - eps * val_g
    grad = a - demand
    if prob.mass_dt > 0:
        sf = f / eps
        lse_d, e_d, _, tot_d = ops.lse_rows_noextra(sf[None, :])
        value -= prob.mass_dt * eps * float(lse_d[0])
        grad = grad - prob.mass_dt * (e_d[0] / tot_d[0])
    grad_d = 0.0
    if prob.partial:
        value += prob.mass_ds * fd
        grad_d = prob.mass_ds - dummy_demand
    out = {"value": value, "grad": grad, "grad_d": grad_d, "cost": cost}
    if want_rows:
        out["rows_lr"] = ops.cat(rows_lr)
        out["rows_cost"] = ops.cat(rows_cost)
    return out


def _solve_semidual(prob: _Problem, f0: np.ndarray, fd0: float, eps_list, *, tol: float,
                    maxiter: int):
    """Maximise the semi-dual for each ε in turn (warm-started), with L-BFGS on the host."""
    ops = prob.ops
    n_p = int(prob.a.shape[0])
    x = np.concatenate([f0, [fd0]]) if prob.partial else f0.copy()
    n_eval = 0
    last = {}
    for stage, eps in enumerate(eps_list):
        # intermediate ε only warm-start the next: a 10x looser tolerance is enough there
        gtol = tol if stage == len(eps_list) - 1 else 10 * tol

        def fun(x, eps=eps):
            nonlocal n_eval, last
            n_eval += 1
            f = ops.scalar_vec(x[:n_p])
            fd = float(x[n_p]) if prob.partial else 0.0
            r = _semidual_eval(prob, f, fd, eps)
            g = ops.to_numpy(r["grad"]).astype(np.float64)
            if prob.partial:
                g = np.concatenate([g, [r["grad_d"]]])
            last = r
            return -r["value"], -g

        # gtol bounds the largest source-marginal violation. One BLAS thread: L-BFGS works on
        # n_p-vectors, and a multi-threaded BLAS spinning beside torch's or numpy's own
        # threads made every step several times slower on 2 cores (measured).
        with _single_blas_thread():
            res = minimize(fun, x, jac=True, method="L-BFGS-B",
                           options={"maxiter": maxiter, "gtol": gtol, "ftol": 1e-15, "maxcor": 20})
        x = res.x
    f = x[:n_p]
    fd = float(x[n_p]) if prob.partial else 0.0
    return f, fd, n_eval


def _single_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _fix_mass(lr: np.ndarray, b: np.ndarray, fd: float, eps: float, m: float) -> tuple[np.ndarray, float]:
    """Shift the dummy potential so the entropic scores carry exactly mass m.

    With ``ℓ_j`` the log real-source partition function, ``s_j(f_d) = 1 / (1 + exp(f_d/ε - ℓ_j))``
    is decreasing in ``f_d``; Σ b_j s_j = m is a monotone 1-D root, found by bisection.
    """
    def scores(t):
        return 0.5 * (1.0 - np.tanh(0.5 * (t - lr)))  # logistic(lr - t), overflow-free

    t = fd / eps
    lo, hi = t - 1.0, t + 1.0
    while (scores(lo) * b).sum() < m:
        lo -= 2 * (hi - lo)
    while (scores(hi) * b).sum() > m:
        hi += 2 * (hi - lo)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if (scores(mid) * b).sum() > m:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, abs(mid)):
            break
    t = 0.5 * (lo + hi)
    return scores(t), t * eps


def _round_to_vertex(margin: np.ndarray, b: np.ndarray, m: float) -> np.ndarray:
    """Scores of the LP vertex that matches rows in order of decreasing margin until mass m."""
    order = np.argsort(-margin, kind="stable")
    cum = np.cumsum(b[order])
    s_sorted = np.clip((m - (cum - b[order])) / b[order], 0.0, 1.0)
    s = np.empty_like(s_sorted)
    s[order] = s_sorted
    return s


# --------------------------------------------------------------------------------------------
# Block producers
# --------------------------------------------------------------------------------------------


def _block_rows(n_p: int, block_size: int | None) -> int:
    if block_size is not None:
        if int(block_size) < 1:
            raise PUAuditError(f"block_size must be a positive number of rows, got {block_size}.")
        return int(block_size)
    return max(256, _DEFAULT_BLOCK_BYTES // (8 * max(n_p, 1)))


def _dense_blocks(ops, zp_t, zu, bs: int, b_vec):
    """Yield (C, None, b) for consecutive blocks of U rows, C computed on the fly."""
    n_u = zu.shape[0]
    for start in range(0, n_u, bs):
        zb = ops.asarray(zu[start : start + bs])
        yield 1.0 - ops.sim(zb, zp_t), None, b_vec[start : start + bs]


def _topk_rows(ops, zp_t, zu, rows, k: int, bias, bs: int):
    """For the U rows ``rows`` (a slice or an index array), the k sources with the largest
    ``bias_i - C_ij``, their costs, and the k-th largest value ``t_j`` (an upper bound on
    ``bias_i + sim_ij`` for every source left out)."""
    n = len(range(*rows.indices(zu.shape[0]))) if isinstance(rows, slice) else len(rows)
    costs, idxs, thr = [], [], []
    for start in range(0, n, bs):
        if isinstance(rows, slice):
            r0 = rows.start or 0
            zb = zu[r0 + start : r0 + min(start + bs, n)]
        else:
            zb = zu[ops.to_numpy(rows[start : start + bs]) if not _is_torch(zu) else rows[start : start + bs]]
        v = ops.sim(ops.asarray(zb), zp_t)  # = 1 - C
        if bias is not None:
            v = v + bias[None, :]
        idx, val = ops.topk(v, k)
        val = ops.f64(val)
        thr.append(_rowmin(ops, val))
        c = 1.0 - (val if bias is None else val - ops.gather(bias, idx))
        costs.append(c)
        idxs.append(idx)
    return ops.cat(costs), ops.cat(idxs), ops.cat(thr)


def _fast_solve(ops, zp_t, zu, a, b_vec, mass, partial, eps, bs, tol, *, k=None, max_rounds=6,
                random_state=None, coarse_rows=20_000):
    """Sparse semi-dual with certified candidate sets (see the module docstring).

    Each U row keeps its k most attractive sources. After a solve, row j is certified when its
    best candidate beats every source left out by at least 5ε; the bound on those uses the
    threshold ``t_j`` stored when the set was chosen under potentials ``f_old``:
    ``f_i - C_ij <= t_j - 1 + max_i (f_i - f_old_i)``. Rows that fail get fresh candidates
    under the current potentials, and the problem is solved again, warm-started.
    """
    n_p, n_u = zp_t.shape[0], zu.shape[0]
    k = min(n_p, 32 if k is None else k)
    C, idx, thr = _topk_rows(ops, zp_t, zu, slice(0, n_u), k, None, bs)
    f_olds = [np.zeros(n_p)]
    rid = np.zeros(n_u, dtype=np.int64)
    f, fd, n_eval = np.zeros(n_p), 0.0, 0
    eps_list = _eps_schedule(eps)
    uncert = 0
    if n_u > coarse_rows:
        # Coarse-to-fine: the large-ε stages only need the potentials roughly, and a uniform
        # sample of U (reweighted to unit mass) gives them at a fraction of the cost.
        rng = np.random.default_rng(random_state)
        sub = np.sort(rng.choice(n_u, coarse_rows, replace=False))
        sub_t = sub if ops.name == "numpy" else ops.torch.as_tensor(sub, device=ops.device)
        bsub = ops.scalar_vec(np.full(coarse_rows, 1.0 / coarse_rows))
        Cs, Is = C[sub_t], idx[sub_t]
        blocks = [(Cs[s : s + bs], Is[s : s + bs], bsub[s : s + bs])
                  for s in range(0, coarse_rows, bs)]
        prob = _Problem(ops=ops, a=a, blocks=blocks, make_blocks=None, mass_ds=mass,
                        mass_dt=mass, partial=partial)
        f, fd, n_eval = _solve_semidual(prob, f, fd, eps_list[:-1], tol=tol, maxiter=1000)
        eps_list = eps_list[-2:]
    for rounds in range(1, max_rounds + 1):
        blocks = [(C[s : s + bs], idx[s : s + bs], b_vec[s : s + bs]) for s in range(0, n_u, bs)]
        prob = _Problem(ops=ops, a=a, blocks=blocks, make_blocks=None, mass_ds=mass,
                        mass_dt=mass, partial=partial)
        f, fd, ne = _solve_semidual(prob, f, fd, eps_list, tol=tol, maxiter=1000)
        n_eval += ne
        if k >= n_p:
            break
        fo = ops.scalar_vec(f)
        best = ops.cat([_rowmax(ops, ops.gather(fo, i) - ops.f64(c)) for c, i, _ in blocks])
        shift = np.array([np.max(f - fo_) for fo_ in f_olds])
        bound = ops.to_numpy(thr) - 1.0 + shift[rid]
        bad = np.flatnonzero(ops.to_numpy(best) < bound + 5 * eps)
        uncert = len(bad)
        if uncert == 0:
            break
        if rounds == max_rounds:
            break
        rows = bad if ops.name == "numpy" else ops.torch.as_tensor(bad, device=ops.device)
        c_new, i_new, t_new = _topk_rows(ops, zp_t, zu, rows, k, fo.to(ops.torch.float32)
                                         if ops.name == "torch" else fo.astype(np.float32), bs)
        C[rows] = c_new
        idx[rows] = i_new
        thr[rows] = t_new
        f_olds.append(f.astype(np.float32).astype(np.float64))
        rid[bad] = len(f_olds) - 1
        # The potentials are already near the optimum: only the last ε stages are needed.
        eps_list = eps_list[-2:]
    return prob, f, fd, n_eval, {"k": k, "rounds": rounds, "uncertified": uncert}


def _eps_schedule(eps_final: float, eps_start: float = 0.1, factor: float = 0.3) -> list[float]:
    eps, out = eps_start, []
    while eps > eps_final * (1 + 1e-9):
        out.append(eps)
        eps *= factor
    out.append(eps_final)
    return out
