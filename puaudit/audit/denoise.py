"""P-group denoising (docs/method.md, "Denoising P")."""

from __future__ import annotations

import numpy as np

__all__ = ["normalize_rows", "denoise_positives", "denoise_by_type"]


def normalize_rows(x: np.ndarray, *, eps: float = 1e-12) -> np.ndarray:
    """Rows divided by their Euclidean norm (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, eps)


def denoise_positives(e_w: np.ndarray, e_l: np.ndarray, z: np.ndarray, *, alpha1: float,
                      alpha2: float, min_group: int = 5, log: bool = False):
    """Keep the verified positives that sit in the group's core and point its way.

    1. P-core: with :math:`u_i = \\mathrm{normalise}(F(x,o_w) + F(x,o_l))` and the centre
       :math:`c = \\mathrm{normalise}(\\mathrm{mean}\\ u)`, keep the :math:`\\lfloor \\alpha_1 n \\rfloor`
       rows with the highest :math:`\\cos(u_i, c)`.
    2. Improvement alignment: among those, with :math:`d = \\mathrm{normalise}(\\mathrm{mean}\\ z)`,
       keep the :math:`\\lfloor \\alpha_2 n' \\rfloor` rows with the highest :math:`\\cos(z_i, d)`.

    A group with fewer than ``min_group`` rows is kept whole; at least one row is always kept.

    Parameters
    ----------
    e_w, e_l : (n, d) arrays
        Embeddings of the human-preferred and the other response (one question type's P rows).
    z : (n, d) array
        Normalised difference embeddings ``normalise(e_w - e_l)``.
    alpha1, alpha2 : float in (0, 1]

    Returns
    -------
    keep : (n,) bool array
    """
    n = len(z)
    keep = np.ones(n, dtype=bool)
    info = {"n": n, "n_core": n, "n_kept": n}
    if n < min_group:
        return (keep, info) if log else keep
    u = normalize_rows(np.asarray(e_w, float) + np.asarray(e_l, float))
    c = normalize_rows(u.mean(axis=0, keepdims=True))[0]
    n_core = max(1, int(np.floor(alpha1 * n)))
    core = np.argsort(-(u @ c), kind="stable")[:n_core]
    zc = np.asarray(z, float)[core]
    d = normalize_rows(zc.mean(axis=0, keepdims=True))[0]
    n_keep = max(1, int(np.floor(alpha2 * n_core)))
    kept = core[np.argsort(-(zc @ d), kind="stable")[:n_keep]]
    keep[:] = False
    keep[kept] = True
    info.update(n_core=n_core, n_kept=n_keep)
    return (keep, info) if log else keep


def denoise_by_type(prep, rows: np.ndarray, config, *,
                    enabled: bool = True) -> np.ndarray:
    """Subset of ``rows`` (P rows of the :class:`~puaudit.audit.splits.PreparedSplit` ``prep``)
    kept after denoising each question type on its own, with the keep ratios ``config.alpha1``
    and ``config.alpha2`` of the :class:`~puaudit.audit.config.AuditConfig` (``enabled=False``:
    all of them)."""
    if not enabled:
        return np.asarray(rows)
    kept = []
    qt = prep.question_type
    for t in sorted(set(qt[rows].tolist())):
        r = rows[qt[rows] == t]
        e_win, e_lose = prep.win_lose(r)
        keep = denoise_positives(e_win, e_lose, prep.z_human(r)[:], alpha1=config.alpha1,
                                  alpha2=config.alpha2)
        kept.append(r[keep])
    return np.concatenate(kept) if kept else np.zeros(0, dtype=int)
