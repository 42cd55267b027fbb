"""Two-dimensional views of the difference embeddings (the dashboard's embedding map).

PCA is immediate. UMAP gives a better picture of local structure but compiles its numba kernels on
the first call in a process (about 30–40 s on two CPU cores), so :func:`warm_umap` runs one tiny
fit in the background at server start and :func:`umap_ready` tells a page whether a UMAP call
will now run at full speed.

A UMAP layout takes seconds to minutes, so :func:`project_2d` takes an optional ``checkpoint``
callable (the dashboard's job runner passes one that pauses or cancels background work): it is
called before the neighbour graph, after it, and between the layout's optimisation epochs, and
whatever it raises stops the projection there. The checkpoint observes the run without entering
it, so a layout that nothing interrupts is the one umap-learn computes without it.
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


#: the checkpoint of the UMAP layout running in this thread (None: none)
_EPOCH_CHECKPOINT = threading.local()
_EPOCHS_LOCK = threading.Lock()


def _checked_epochs(epochs, checkpoint: Callable[[], None]):
    for epoch in epochs:
        checkpoint()
        yield epoch


def _install_epoch_checkpoints() -> None:
    """Let a UMAP layout stop between its optimisation epochs.

    umap-learn has no per-epoch callback; its layout loops (``umap.layouts``) iterate
    ``tqdm(range(n_epochs), **tqdm_kwds)`` over a module-level ``tqdm``. That name becomes a
    function which, in a thread projecting with a checkpoint, yields the same epochs and calls
    the checkpoint before each (an exception leaves the loop between two epochs, holding no
    lock), and elsewhere is umap-learn's own ``tqdm`` with the same arguments. The epochs, the
    learning-rate schedule and the random state are untouched, so the layout is unchanged.
    (The bar's ``file`` would also see each epoch, but tqdm writes under its global write lock
    and keeps it when the write raises: the next bar in any thread would wait forever.)
    """
    import umap.layouts as layouts

    with _EPOCHS_LOCK:
        if getattr(layouts.tqdm, "puaudit_epochs", False):
            return
        bar = layouts.tqdm

        def epochs(iterable=None, *args, **kwargs):
            checkpoint = getattr(_EPOCH_CHECKPOINT, "fn", None)
            if checkpoint is None:
                return bar(iterable, *args, **kwargs)
            return _checked_epochs(iterable, checkpoint)

        epochs.puaudit_epochs = True
        layouts.tqdm = epochs


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
        Called with no argument before UMAP builds its neighbour graph and between the
        optimisation epochs of its layout (200 epochs above 10,000 rows, 500 below); an
        exception it raises (a cancelled or paused job) propagates and stops the projection
        there. The layout is unchanged by it: with the same ``random_state``, an uninterrupted
        run equals one without a checkpoint. PCA is immediate and calls it once.

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
    _install_epoch_checkpoints()
    outer = getattr(_EPOCH_CHECKPOINT, "fn", None)
    _EPOCH_CHECKPOINT.fn = checkpoint
    try:
        out = np.asarray(reducer.fit_transform(z), dtype=np.float64)
    finally:
        _EPOCH_CHECKPOINT.fn = outer
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
