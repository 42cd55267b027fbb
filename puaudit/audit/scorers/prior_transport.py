r"""Prior-aware two-sided transport (``prior-ot``): graded scores in which ``m`` is the prior
share of right verdicts (docs/method.md, "Scorers").

Sources: the verified positives :math:`z_i` with mass :math:`m / n_p` each and their reversals
:math:`-z_i` with :math:`(1 - m) / n_p`; targets: the audited rows, :math:`b_j = 1/n_u`; cost
:math:`C_{ij} = 1 - \langle s_i, z_j \rangle`. Entropic unbalanced OT (Chizat et al. 2018; POT
``ot.unbalanced.sinkhorn_unbalanced``, ``reg_type="kl"``):

.. math:: \min_{\Gamma \ge 0} \langle \Gamma, C\rangle + \varepsilon\,\mathrm{KL}(\Gamma\,|\,a b^\top)
          + \rho\,\mathrm{KL}(\Gamma 1\,|\,a) + \rho\,\mathrm{KL}(\Gamma^\top 1\,|\,b),

and the score of row :math:`j` is the share of its received mass from the judge-right side,
:math:`s_j = \sum_{i \le n_p} \Gamma_{ij} / \sum_i \Gamma_{ij}`. The target scaling cancels
there, so only the source potentials are solved (on a seeded sample of ``max_targets`` rows
when there are more), and every row is scored in one streamed pass over blocks of targets.
"""

from __future__ import annotations

import math
import time

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["prior_ot_scores", "PRIOR_OT_REG", "PRIOR_OT_REG_M", "PRIOR_OT_MAX_TARGETS"]

#: Entropic regularisation ε (cost units; costs lie in [0, 2]).
PRIOR_OT_REG = 0.12
#: Marginal relaxation ρ of the KL penalties.
PRIOR_OT_REG_M = 0.1
#: Audited rows up to which the source potentials are solved on every row.
PRIOR_OT_MAX_TARGETS = 20_000
_BLOCK_ENTRIES = 8_000_000  # n_p x block entries per streamed block (32 MB of float32)
_SOLVE_ENTRIES = 8_000_000  # (2 n_p) x n_t entries of the dense problem handed to POT


def _torch_device(device):
    import torch

    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _as_tensor(x, device, dtype):
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device=device, dtype=dtype)
    return torch.as_tensor(np.asarray(x), device=device).to(dtype)


def _source_weights(zp, zs, m, *, reg, reg_m, max_iter, tol):
    """Solve the unbalanced problem on targets ``zs`` with POT; return ``log(a_i u_i)`` per side.

    The arrays stay in their backend (numpy, or torch on the caller's device), so POT runs on
    the GPU when the inputs are CUDA tensors.
    """
    import ot

    nx = ot.backend.get_backend(zp)
    n_p, n_t = zp.shape[0], zs.shape[0]
    src = nx.concatenate([zp, -zp], axis=0)
    a = nx.concatenate([nx.full((n_p,), m / n_p, type_as=zp),
                        nx.full((n_p,), (1 - m) / n_p, type_as=zp)])
    b = nx.full((n_t,), 1.0 / n_t, type_as=zp)
    cost = 1.0 - nx.dot(src, zs.T)
    _, info = ot.unbalanced.sinkhorn_unbalanced(a, b, cost, reg, reg_m, reg_type="kl",
                                                numItermax=max_iter, stopThr=tol, log=True)
    del cost
    h = nx.log(a) + info["logu"]
    return h[:n_p], h[n_p:], len(info["err"])


def _scores_from_potentials(zp, zu, hp, hn, *, reg, block, device, dtype, rows=None):
    """One streamed pass: softmax share of the judge-right sources for every target row."""
    import torch

    n = zu.shape[0] if rows is None else len(rows)
    out = np.empty(n, dtype=np.float64)
    for s in range(0, n, block):
        part = zu[s:s + block] if rows is None else zu[rows[s:s + block]]
        blk = _as_tensor(part, device, dtype)
        sim = zp @ blk.T
        lp = torch.logsumexp((sim - 1.0) / reg + hp[:, None], dim=0)
        ln = torch.logsumexp((-sim - 1.0) / reg + hn[:, None], dim=0)
        out[s:s + block] = torch.sigmoid(lp - ln).double().cpu().numpy()
    return out


def _torch_dtype(dtype: str, size: int, reg: float):
    import torch

    if dtype == "auto":
        # float32 holds exp(-2/ε) without underflow down to ε = 0.025 and halves the memory
        return torch.float64 if (size <= 4_000_000 or reg < 0.025) else torch.float32
    return {"float32": torch.float32, "float64": torch.float64}[dtype]


def _potentials(zp_t, zs_t, m: float, *, reg, reg_m, max_iter, tol):
    """The source weights (log scalings) solved against the target sample ``zs_t``."""
    import torch

    # POT's numpy backend is faster than its torch one on CPU; on CUDA stay on the GPU
    if zp_t.device.type == "cpu":
        hp, hn, n_iter = _source_weights(zp_t.numpy(), zs_t.numpy(), m, reg=reg, reg_m=reg_m,
                                         max_iter=max_iter, tol=tol)
        return torch.from_numpy(np.asarray(hp)), torch.from_numpy(np.asarray(hn)), n_iter
    return _source_weights(zp_t, zs_t, m, reg=reg, reg_m=reg_m, max_iter=max_iter, tol=tol)


def _check(zp, zu, m, reg, reg_m) -> float:
    """``m`` clipped below 1, after checking the arguments (a clear message otherwise)."""
    if not (0 < float(m) <= 1) or math.isnan(float(m)):
        raise PUAuditError(f"m must be in (0, 1], got {m}.")
    if reg <= 0 or reg_m <= 0:
        raise PUAuditError(f"reg and reg_m must be positive; got {reg} and {reg_m}.")
    if int(zp.shape[0]) == 0:
        raise PUAuditError("No verified positives to transport from.")
    if int(zu.shape[0]) and zp.shape[1] != zu.shape[1]:
        raise PUAuditError(f"Dimension mismatch: P' has {zp.shape[1]}, U has {zu.shape[1]}.")
    return min(float(m), 1.0 - 1e-6)


def prior_ot_scores(zp, zu, m: float, *, reg: float = PRIOR_OT_REG,
                    reg_m: float = PRIOR_OT_REG_M, max_targets: int = PRIOR_OT_MAX_TARGETS,
                    max_iter: int = 1000, tol: float = 1e-6, device=None, dtype: str = "auto",
                    random_state: int | None = 0, score_rows=None, log: bool = False):
    r"""Graded scores of audited rows from prior-aware two-sided unbalanced transport.

    Parameters
    ----------
    zp : array (n_p, d), numpy or torch
        L2-normalised difference vectors of the verified positives (human winner minus loser).
    zu : array (n_u, d), numpy or torch
        L2-normalised difference vectors of the audited rows (judge winner minus loser).
    m : float in (0, 1)
        Prior share of audited verdicts that are right: the mass of the judge-right sources;
        the reversed sources carry ``1 - m``. ``m = 1`` is clipped to ``1 - 1e-6``.
    reg : float, default 0.12 (:data:`PRIOR_OT_REG`)
        Entropic regularisation ε (costs lie in [0, 2]).
    reg_m : float, default 0.1
        KL relaxation ρ of both marginals.
    max_targets : int, default 20,000
        Above this many audited rows, the source potentials are solved on a seeded sample of
        ``max_targets`` rows and every row is scored in one streamed pass.
    max_iter, tol
        POT's scaling iterations and its stopping threshold (relative change of the scalings).
    device : str or torch.device, optional
        Default: CUDA when available, else CPU.
    dtype : {'auto', 'float32', 'float64'}
        ``'auto'``: float64 for small problems (``n_p * n_u`` up to 4e6), float32 above.
    random_state : int or None
        Seeds the sample of targets (only used above ``max_targets``).
    score_rows : int array, optional
        Score only these rows of ``zu``; every row of ``zu`` is still part of the target measure
        (cross-fitting scores held-out rows against potentials solved with the audited rows).
    log : bool
        Also return a dict of diagnostics.

    Returns
    -------
    scores : ndarray (n_u,), float64 in (0, 1)
    log : dict, only with ``log=True``: ``n_iter`` (POT's iterations), ``sampled`` (rows the
        potentials were solved on), ``time``, ``device``, ``dtype``, ``reg``, ``reg_m``.
    """
    import torch

    t0 = time.perf_counter()
    m = _check(zp, zu, m, reg, reg_m)
    n_p, n_u = int(zp.shape[0]), int(zu.shape[0])
    if n_u == 0:
        out = np.zeros(0)
        return (out, {"n_iter": 0}) if log else out
    dev = _torch_device(device)
    tdt = _torch_dtype(dtype, n_p * n_u, reg)
    zp_t = _as_tensor(zp, dev, tdt)
    # Enough targets that every source's sums are well estimated, few enough that POT's dense
    # (2 n_p) x n_t cost and kernel stay within a few hundred MB.
    cap = int(max(1000, min(max_targets, _SOLVE_ENTRIES // (2 * n_p))))
    sampled = min(n_u, cap)
    idx = None
    if sampled < n_u:
        idx = np.sort(np.random.default_rng(random_state).choice(n_u, size=sampled, replace=False))
    zs = zu[:] if idx is None else (zu[torch.as_tensor(idx)] if isinstance(zu, torch.Tensor)
                                    else zu[idx])
    with torch.no_grad():
        hp, hn, n_iter = _potentials(zp_t, _as_tensor(zs, dev, tdt), m, reg=reg, reg_m=reg_m,
                                     max_iter=max_iter, tol=tol)
        block = max(1024, _BLOCK_ENTRIES // max(n_p, 1))
        rows = None if score_rows is None else np.asarray(score_rows)
        scores = _scores_from_potentials(zp_t, zu, hp, hn, reg=reg, block=block, device=dev,
                                         dtype=tdt, rows=rows)
    if not log:
        return scores
    info = {"n_iter": int(n_iter), "sampled": int(sampled), "time": time.perf_counter() - t0,
            "device": str(dev), "dtype": str(tdt).replace("torch.", ""), "reg": reg,
            "reg_m": reg_m}
    return scores, info
