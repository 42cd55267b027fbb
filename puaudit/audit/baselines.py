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


def knn_scores(zp: np.ndarray, zu, *, n_neighbors: int = 15) -> np.ndarray:
    """Similarity-weighted share of the ``n_neighbors`` nearest labelled vectors (P and its
    reversals, cosine distance) that are P."""
    from sklearn import config_context
    from sklearn.neighbors import NearestNeighbors

    x = np.vstack([zp, -zp])
    lab = np.r_[np.ones(len(zp)), np.zeros(len(zp))]
    k = int(min(n_neighbors, len(x)))
    nn = NearestNeighbors(n_neighbors=k, metric="cosine").fit(x)

    def knn(z):
        # sklearn's distance chunks default to 1 GB of working memory; keep them small
        with config_context(working_memory=64):
            dist, idx = nn.kneighbors(z)
        w = np.maximum(1.0 - dist, 1e-6)  # closer neighbours count more
        return (w * lab[idx]).sum(axis=1) / w.sum(axis=1)

    return blocks(zu, knn)
