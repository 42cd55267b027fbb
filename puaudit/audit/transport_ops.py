"""Array backends of the transport solvers: the handful of operations they need, on numpy or
on torch (CPU or CUDA), chosen from the inputs (:func:`make_ops`)."""

from __future__ import annotations

import sys

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["_NumpyOps", "_TorchOps", "_make_ops", "_is_torch", "_torch_available", "_rowmax", "_rowmin"]


# --------------------------------------------------------------------------------------------
# Array backends: the handful of operations the solvers need, on numpy or on torch.
# --------------------------------------------------------------------------------------------


class _NumpyOps:
    name = "numpy"
    device = "cpu"

    def asarray(self, x, dtype=np.float32):
        if _is_torch(x):
            x = x.detach().cpu().numpy()
        return np.ascontiguousarray(x, dtype=dtype)

    def to_numpy(self, x):
        return np.asarray(x)

    def scalar_vec(self, x):
        return np.asarray(x, dtype=np.float64)

    def sim(self, zu_blk, zp):
        return zu_blk.astype(np.float32, copy=False) @ zp.T

    def topk(self, v, k):
        """Row-wise indices and values of the k largest entries (unordered)."""
        if k >= v.shape[1]:
            idx = np.broadcast_to(np.arange(v.shape[1]), v.shape)
            return np.ascontiguousarray(idx, dtype=np.int64), v
        idx = np.argpartition(v, v.shape[1] - k, axis=1)[:, -k:]
        return idx.astype(np.int64), np.take_along_axis(v, idx, axis=1)

    def gather(self, f, idx):
        return f[idx]

    def lse_rows_noextra(self, s):
        mx = s.max(axis=1)
        e = np.exp(s - mx[:, None])
        tot = e.sum(axis=1)
        return mx + np.log(tot), e, mx, tot

    def scatter_add(self, idx, w, n):
        return np.bincount(idx.ravel(), weights=w.ravel(), minlength=n)

    def exp(self, x):
        return np.exp(x)

    def log(self, x):
        return np.log(x)

    def maximum(self, x, v):
        return np.maximum(x, v)

    def full(self, n, v):
        return np.full(n, v)

    def clamp_min(self, x, v):
        return np.maximum(x, v)

    def sum(self, x, axis=None):
        return x.sum(axis=axis)

    def zeros(self, n):
        return np.zeros(n)

    def cat(self, xs):
        return np.concatenate(xs)

    def f64(self, x):
        return x.astype(np.float64, copy=False)

    def f32(self, x):
        return x.astype(np.float32)


class _TorchOps:
    name = "torch"

    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = str(device)

    def asarray(self, x, dtype=None):
        torch = self.torch
        dt = torch.float32 if dtype in (None, np.float32) else torch.float64
        if not _is_torch(x):
            x = torch.from_numpy(np.ascontiguousarray(x))
        return x.to(device=self.device, dtype=dt)

    def to_numpy(self, x):
        return x.detach().cpu().numpy() if _is_torch(x) else np.asarray(x)

    def scalar_vec(self, x):
        return self.torch.as_tensor(np.asarray(x, dtype=np.float64), device=self.device)

    def sim(self, zu_blk, zp):
        return zu_blk.to(self.torch.float32) @ zp.T

    def topk(self, v, k):
        if k >= v.shape[1]:
            idx = self.torch.arange(v.shape[1], device=v.device).expand(v.shape[0], -1)
            return idx.contiguous(), v
        vals, idx = self.torch.topk(v, k, dim=1, sorted=False)
        return idx, vals

    def gather(self, f, idx):
        return f[idx]

    def lse_rows_noextra(self, s):
        mx = s.max(dim=1).values
        e = self.torch.exp(s - mx[:, None])
        tot = e.sum(dim=1)
        return mx + self.torch.log(tot), e, mx, tot

    def scatter_add(self, idx, w, n):
        out = self.torch.zeros(n, dtype=w.dtype, device=w.device)
        return out.index_add_(0, idx.reshape(-1), w.reshape(-1))

    def exp(self, x):
        return self.torch.exp(x)

    def log(self, x):
        return self.torch.log(x)

    def maximum(self, x, v):
        return x.clamp_min(v)

    def full(self, n, v):
        return self.torch.full((n,), v, dtype=self.torch.float64, device=self.device)

    def clamp_min(self, x, v):
        return x.clamp_min(v)

    def sum(self, x, axis=None):
        return x.sum() if axis is None else x.sum(dim=axis)

    def zeros(self, n):
        return self.torch.zeros(n, dtype=self.torch.float64, device=self.device)

    def cat(self, xs):
        return self.torch.cat(xs)

    def f64(self, x):
        return x.to(self.torch.float64)

    def f32(self, x):
        return x.to(self.torch.float32)


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _torch_available() -> bool:
    # Only look at torch when the caller already imported it (the encoder does): importing it
    # just to find there is no GPU cost ~2 s per process on these machines.
    return "torch" in sys.modules


def _make_ops(backend: str, device):
    if backend not in ("auto", "numpy", "torch"):
        raise PUAuditError(f"backend must be 'auto', 'numpy' or 'torch', got {backend!r}.")
    if backend == "numpy":
        return _NumpyOps()
    if backend == "torch" or (backend == "auto" and _torch_available()):
        import torch

        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if backend == "auto" and str(device) == "cpu":
            # Measured on 2 CPU cores (docs/transport.md): the numpy path is faster than torch
            # on CPU (small per-call overhead; torch's spinning worker threads slow the host
            # L-BFGS steps), so torch is only chosen by itself when it brings a GPU.
            return _NumpyOps()
        return _TorchOps(device)
    return _NumpyOps()


def _rowmax(ops, x):
    return x.max(dim=1).values if ops.name == "torch" else x.max(axis=1)


def _rowmin(ops, x):
    return x.min(dim=1).values if ops.name == "torch" else x.min(axis=1)
