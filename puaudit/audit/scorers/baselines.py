"""The baseline scorers: centroid, probe and k nearest neighbours (docs/method.md, "Scorers").

Each takes the verified positives ``zp`` (human-oriented, normalised difference vectors) and the
audited rows ``zu`` (judge-oriented; an array or a lazy row view read block by block) and returns
one score per audited row, higher when the judge's verdict looks like a human preference.
"""

from __future__ import annotations

import numpy as np

from puaudit.audit.denoise import normalize_rows

__all__ = ["centroid_scores", "probe_scores", "knn_scores", "SCORE_BLOCK"]

#: Rows of audited difference vectors built and scored at a time (about 100 MB of float64).
SCORE_BLOCK = 32_768


def blocks(zu, fn) -> np.ndarray:
    """``fn`` applied to ``zu`` block by block (``zu`` may be a lazy row view)."""
    out = np.empty(len(zu))
    for s in range(0, len(zu), SCORE_BLOCK):
        out[s:s + SCORE_BLOCK] = fn(np.asarray(zu[s:s + SCORE_BLOCK], dtype=np.float64))
    return out


def centroid_scores(zp: np.ndarray, zu) -> np.ndarray:
    """``cos(z_j, d)`` with ``d = normalise(mean z_P)``."""
    d = normalize_rows(zp.mean(axis=0, keepdims=True))[0]
    return blocks(zu, lambda z: normalize_rows(z) @ d)


def probe_scores(zp: np.ndarray, zu, *, C: float = 1.0) -> np.ndarray:
    """A logistic Bradley–Terry probe fitted on P (label 1) and its reversals (label 0)."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([zp, -zp])
    y = np.r_[np.ones(len(zp)), np.zeros(len(zp))]
    # no intercept: a reversed pair must get the complementary probability (Bradley–Terry)
    clf = LogisticRegression(C=C, fit_intercept=False, max_iter=1000)
    clf.fit(x, y)
    return blocks(zu, lambda z: clf.predict_proba(z)[:, 1])


def knn_scores(zp: np.ndarray, zu, *, n_neighbors: int = 15, tie_tol: float = 1e-6) -> np.ndarray:
    r"""Similarity-weighted share of the ``n_neighbors`` nearest labelled vectors (P and its
    reversals, cosine distance) that are P; neighbours tied for the last place share it.

    With :math:`d_k` the k-th smallest distance of row j, the neighbours strictly closer
    (:math:`d_i < d_k - \tau`) count once each and the :math:`t` tied at :math:`d_k`
    (:math:`|d_i - d_k| \le \tau`) count :math:`(k - n_{closer}) / t` each:

    .. math:: s_j = \frac{\sum_i c_i w_i y_i}{\sum_i c_i w_i},\quad w_i = \max(1 - d_i, 10^{-6})

    Several people judging one pair put identical vectors in P, so the k-th place is often
    shared; picking some of the tied neighbours (as a plain k-nearest query does) makes the score
    depend on how the search happened to order them, and a change of the vectors far below
    float32 precision moved a score by 4/15 and the audit's reversals by 10% (llmfao).
    """
    from sklearn import config_context
    from sklearn.neighbors import NearestNeighbors

    x = np.vstack([zp, -zp])
    lab = np.r_[np.ones(len(zp)), np.zeros(len(zp))]
    k = int(min(n_neighbors, len(x)))
    # room for ties at the k-th place; rows whose ties fill it are asked again with four times
    # as many neighbours (in chunks of at most ~8M distances) until every tie is seen
    k_ext = int(min(len(x), 2 * k))
    nn = NearestNeighbors(n_neighbors=k_ext, metric="cosine").fit(x)

    def knn(z):
        out = np.empty(len(z))
        todo, n_q = np.arange(len(z)), k_ext
        while len(todo):
            step = max(1, 8_000_000 // n_q)
            again = []
            for s in range(0, len(todo), step):
                rows = todo[s:s + step]
                # sklearn's distance chunks default to 1 GB of working memory; keep them small
                with config_context(working_memory=64):
                    dist, idx = nn.kneighbors(z[rows], n_neighbors=n_q)
                d_k = dist[:, k - 1]
                over = (dist[:, -1] <= d_k + tie_tol) if n_q < len(x) else np.zeros(len(rows), bool)
                out[rows[~over]] = _tie_shared(dist[~over], lab[idx[~over]], d_k[~over], k,
                                               tie_tol)
                again.append(rows[over])
            todo, n_q = np.concatenate(again), int(min(len(x), 4 * n_q))
        return out

    return blocks(zu, knn)


def _tie_shared(dist: np.ndarray, lab: np.ndarray, d_k: np.ndarray, k: int,
                tol: float) -> np.ndarray:
    """Weighted P share of each row's neighbours (``dist`` sorted per row), the neighbours tied
    at the k-th distance ``d_k`` sharing the places left by those strictly closer."""
    d_k = d_k[:, None]
    closer = dist < d_k - tol
    tied = np.abs(dist - d_k) <= tol
    share = (k - closer.sum(axis=1, keepdims=True)) / np.maximum(tied.sum(axis=1, keepdims=True), 1)
    c = np.where(closer, 1.0, np.where(tied, share, 0.0))
    w = c * np.maximum(1.0 - dist, 1e-6)  # closer neighbours count more
    return (w * lab).sum(axis=1) / w.sum(axis=1)
