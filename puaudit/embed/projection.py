"""Two-dimensional views of the difference embeddings (the dashboard's embedding map).

PCA is immediate. UMAP compiles its numba kernels on the first call in a process (about 30–40 s
on two CPU cores), so :func:`warm_umap` runs one tiny fit in the background at server start and
:func:`umap_ready` tells a page whether a UMAP call will now run at full speed.
:func:`project_2d` takes an optional ``checkpoint`` that can stop a UMAP midway; umap-learn has
no callback, so two of its module-level names are replaced, for threads projecting with a
checkpoint only, by the same computation with checkpoints (docs/dashboard.md, "checkpoints"):
an uninterrupted layout is umap-learn's own, to the bit (tested).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["METHODS", "oriented_differences", "project_2d", "warm_umap", "umap_ready",
           "umap_warmup_seconds"]

METHODS = ("pca", "umap")

_WARM = threading.Event()
_WARM_LOCK = threading.Lock()
_WARM_SECONDS: list[float] = []


def oriented_differences(e_a: np.ndarray, e_b: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """Unit difference vectors oriented by the judge's verdict.

    .. math:: z_i = s_i \\frac{e^A_i - e^B_i}{\\lVert e^A_i - e^B_i \\rVert}, \\quad
              s_i = +1 \\text{ (judge says A)}, -1 \\text{ (B)}, +1 \\text{ otherwise}

    so rows where the judge prefers similar kinds of answers land near each other whichever side
    the answer was shown on. Identical responses give the zero vector.
    """
    diff = np.asarray(e_a, dtype=np.float64) - np.asarray(e_b, dtype=np.float64)
    if diff.ndim != 2:
        raise PUAuditError(f"Embeddings must be (n, d) arrays; got shape {diff.shape}.")
    norms = np.linalg.norm(diff, axis=1, keepdims=True)
    unit = diff / np.maximum(norms, 1e-12)
    sign = np.where(np.asarray(judge, dtype=object) == "B", -1.0, 1.0)
    return unit * sign[:, None]


#: the checkpoint of the UMAP running in this thread (None: none)
_UMAP_CHECKPOINT = threading.local()
_INSTALL_LOCK = threading.Lock()


def _checked_epochs(epochs, checkpoint: Callable[[], None]):
    for epoch in epochs:
        checkpoint()
        yield epoch


def _install_checkpoints() -> None:
    """Install, once per process, the epoch and distance checkpoints below (other threads'
    UMAPs run as before)."""
    with _INSTALL_LOCK:
        for install in (_install_epoch_checkpoints, _install_distance_checkpoints):
            try:
                install()
            except (ImportError, AttributeError):
                # another umap-learn without these names: that part runs without checkpoints
                # (to its end, as before) rather than failing the projection
                pass


def _install_epoch_checkpoints() -> None:
    """Let a UMAP layout stop between its optimisation epochs.

    umap-learn's layout loops iterate ``tqdm(range(n_epochs), ...)`` over a module-level
    ``tqdm``: in a thread projecting with a checkpoint that name yields the same epochs with a
    checkpoint before each, elsewhere it is umap-learn's own. (Not through the bar's ``file``:
    tqdm keeps its global write lock when a write raises, and every later bar would hang.)
    """
    import umap.layouts as layouts

    if getattr(layouts.tqdm, "puaudit_epochs", False):
        return
    bar = layouts.tqdm

    def epochs(iterable=None, *args, **kwargs):
        checkpoint = getattr(_UMAP_CHECKPOINT, "fn", None)
        if checkpoint is None:
            return bar(iterable, *args, **kwargs)
        return _checked_epochs(iterable, checkpoint)

    epochs.puaudit_epochs = True
    layouts.tqdm = epochs


def _checked_pairwise(x: np.ndarray, metric: Callable, checkpoint: Callable[[], None],
                      kwds: dict) -> np.ndarray:
    """Every pairwise distance of the rows of ``x`` by ``metric``, as scikit-learn's
    ``pairwise_distances`` computes them for a callable metric on one dense array (upper
    triangle mirrored, diagonal computed, ``x``'s dtype), with ``checkpoint`` before each row."""
    n = len(x)
    out = np.zeros((n, n), dtype=x.dtype)
    for i in range(n):
        checkpoint()
        xi = x[i]
        for j in range(i + 1, n):
            out[i, j] = metric(xi, x[j], **kwds)
    out = out + out.T
    for i in range(n):
        out[i, i] = metric(x[i], x[i], **kwds)
    return out


def _install_distance_checkpoints() -> None:
    """Let UMAP stop during its neighbour pass on tables under 4,096 rows, where umap-learn
    calls ``pairwise_distances(X, metric=<its numba metric>)``: in a thread projecting with a
    checkpoint that name is :func:`_checked_pairwise`; any other call goes to scikit-learn."""
    import umap.umap_ as umap_module
    from scipy.sparse import issparse

    if getattr(umap_module.pairwise_distances, "puaudit_rows", False):
        return
    original = umap_module.pairwise_distances

    def pairwise_distances(X, Y=None, metric="euclidean", *args, **kwds):
        checkpoint = getattr(_UMAP_CHECKPOINT, "fn", None)
        # anything but umap-learn's own call (one dense finite array, its metric) goes to
        # scikit-learn, whose checks and errors stay as they were
        if (checkpoint is None or Y is not None or args or not callable(metric)
                or issparse(X) or getattr(X, "ndim", 0) != 2
                or getattr(X, "dtype", None) not in (np.float32, np.float64)
                or not np.isfinite(X).all() or {"n_jobs", "force_all_finite",
                                                "ensure_all_finite"} & set(kwds)):
            return original(X, Y, metric, *args, **kwds)
        return _checked_pairwise(np.asarray(X), metric, checkpoint, kwds)

    pairwise_distances.puaudit_rows = True
    umap_module.pairwise_distances = pairwise_distances


def project_2d(z: np.ndarray, *, method: str = "pca", random_state: int | None = 0,
               n_neighbors: int = 15, min_dist: float = 0.1,
               checkpoint: Callable[[], None] | None = None) -> np.ndarray:
    """Project rows of ``z`` to two dimensions.

    Parameters
    ----------
    z : ndarray (n, d)
    method : {"pca", "umap"}
        ``pca``: the top two principal components (exact SVD, deterministic up to sign, which is
        fixed so the largest loading of each component is positive). ``umap``: cosine UMAP.
    random_state : int or None
        Seed of UMAP's layout (ignored by PCA).
    n_neighbors, min_dist : UMAP parameters.
    checkpoint : callable or None
        Called with no argument before the projection, before each row of UMAP's pairwise
        distances (under 4,096 rows), between the optimisation epochs of its layout and after;
        an exception it raises stops the projection there. It leaves the layout unchanged.
        PCA is immediate and calls it once.

    Returns
    -------
    ndarray (n, 2), float64. Fewer than 3 rows are returned as zeros / a line (nothing to project).
    """
    if method not in METHODS:
        raise PUAuditError(f"Unknown projection '{method}': choose one of {list(METHODS)}.")
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2:
        raise PUAuditError(f"project_2d needs an (n, d) array; got shape {z.shape}.")
    n = len(z)
    if n < 3 or z.shape[1] < 2:
        out = np.zeros((n, 2))
        out[:, 0] = np.arange(n, dtype=float)
        return out
    if checkpoint is not None:
        checkpoint()
    if method == "pca":
        from sklearn.decomposition import PCA

        pca = PCA(n_components=2, svd_solver="full")
        out = pca.fit_transform(z)
        signs = np.sign(pca.components_[np.arange(2), np.abs(pca.components_).argmax(axis=1)])
        return out * np.where(signs == 0, 1.0, signs)
    import umap

    reducer = umap.UMAP(n_components=2, n_neighbors=min(n_neighbors, n - 1), min_dist=min_dist,
                        metric="cosine", random_state=random_state,
                        # a seeded layout is single-threaded in umap-learn; say so to skip its warning
                        n_jobs=1 if random_state is not None else -1)
    if checkpoint is None:
        return np.asarray(reducer.fit_transform(z), dtype=np.float64)
    _install_checkpoints()
    outer = getattr(_UMAP_CHECKPOINT, "fn", None)
    _UMAP_CHECKPOINT.fn = checkpoint
    try:
        out = np.asarray(reducer.fit_transform(z), dtype=np.float64)
    finally:
        _UMAP_CHECKPOINT.fn = outer
    checkpoint()
    return out


def warm_umap(*, n: int = 64, d: int = 8, random_state: int = 0) -> float:
    """Compile UMAP's numba kernels with one fit on a tiny random array; returns the seconds taken.

    Safe to call from several threads: only the first call does the work, the others wait for it.
    """
    with _WARM_LOCK:
        if _WARM.is_set():
            return 0.0
        t0 = time.perf_counter()
        rng = np.random.default_rng(random_state)
        project_2d(rng.normal(size=(n, d)), method="umap", random_state=random_state,
                   n_neighbors=10)
        _WARM_SECONDS.append(time.perf_counter() - t0)
        _WARM.set()
        return _WARM_SECONDS[-1]


def umap_ready() -> bool:
    """True once :func:`warm_umap` has finished in this process."""
    return _WARM.is_set()


def umap_warmup_seconds() -> float | None:
    """How long the warm-up took, or None while it has not finished."""
    return _WARM_SECONDS[-1] if _WARM_SECONDS else None
