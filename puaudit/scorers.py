"""Scorers: how strongly each audited row looks like a verified positive.

Every scorer sees the verified positives P' as difference vectors oriented by the human
(winner minus loser) and the audited rows as difference vectors oriented by the judge, and
returns one score per audited row; higher means "the judge's decision looks human-consistent".

=========== ===================================================================================
``pot``     partial optimal transport (METHOD.md 1): ``s_j = (Γᵀ1)_j / b_j`` with total mass ``m``
``prior-ot`` prior-aware two-sided unbalanced transport (graded): P' with mass ``m``, reversed P'
            with ``1 - m``; score = share of row j's received mass that comes from P'
``full-ot`` balanced OT: minus the expected cost of the positives matched to row j
``centroid`` ``cos(z_j, d)`` with ``d = normalise(mean z_P')``
``probe``   logistic Bradley–Terry probe fitted on P' (label 1) and their reversals (label 0)
``knn``     share of the k nearest labelled vectors, among P' and their reversals, that are P'
=========== ===================================================================================
"""

from __future__ import annotations

import numpy as np

from puaudit.denoise import normalize_rows
from puaudit.errors import PUAuditError

__all__ = ["SCORERS", "score_targets"]

SCORERS = ("prior-ot", "pot", "full-ot", "centroid", "probe", "knn")


def score_targets(scorer: str, zp: np.ndarray, zu: np.ndarray, *, m: float = 0.8,
                  ot_method: str = "auto", reg: float | None = None, n_neighbors: int = 15,
                  probe_C: float = 1.0, random_state: int | None = 0, log: bool = False):
    """Score audited rows ``zu`` against verified positives ``zp``.

    Parameters
    ----------
    scorer : {"pot", "full-ot", "centroid", "probe", "knn"}
    zp : (n_p, d) array
        Normalised difference vectors of P' (human winner minus loser).
    zu : (n_u, d) array
        Normalised difference vectors of the audited rows (judge winner minus loser).
    m : float in (0, 1]
        Transported mass (``pot`` only).
    ot_method, reg
        Passed to :func:`puaudit.transport.partial_ot_scores` / :func:`puaudit.transport.ot_scores`.
    n_neighbors : int
        ``knn`` only.
    probe_C : float
        Inverse L2 strength of the ``probe`` logistic regression.

    Returns
    -------
    scores : (n_u,) float array (higher = judge more likely right)
    """
    zp = np.asarray(zp, dtype=np.float64)
    zu = np.asarray(zu, dtype=np.float64)
    if len(zp) == 0:
        raise PUAuditError("No verified positives to score against: the audit needs annotated rows "
                           "(human and judge both A or B) in P.")
    if len(zu) == 0:
        out = np.zeros(0)
        return (out, {}) if log else out
    info: dict = {"scorer": scorer}
    if scorer == "pot":
        from puaudit.transport import partial_ot_scores

        res = partial_ot_scores(zp, zu, m, method=ot_method, reg=reg, log=log)
        if log:
            scores, info["transport"] = res
        else:
            scores = res
    elif scorer == "prior-ot":
        from puaudit.prior_transport import prior_ot_scores

        kw = {} if reg is None else {"reg": reg}
        res = prior_ot_scores(zp, zu, m, random_state=random_state, log=log, **kw)
        if log:
            scores, info["transport"] = res
        else:
            scores = res
    elif scorer == "full-ot":
        from puaudit.transport import ot_scores

        res = ot_scores(zp, zu, method="exact" if ot_method in ("auto", "exact", "fast") else ot_method,
                        reg=reg, log=log)
        if log:
            scores, info["transport"] = res
        else:
            scores = res
    elif scorer == "centroid":
        d = normalize_rows(zp.mean(axis=0, keepdims=True))[0]
        scores = normalize_rows(zu) @ d
    elif scorer == "probe":
        from sklearn.linear_model import LogisticRegression

        x = np.vstack([zp, -zp])
        y = np.r_[np.ones(len(zp)), np.zeros(len(zp))]
        # no intercept: a reversed pair must get the complementary probability (Bradley–Terry)
        clf = LogisticRegression(C=probe_C, fit_intercept=False, max_iter=1000)
        clf.fit(x, y)
        scores = clf.predict_proba(zu)[:, 1]
    elif scorer == "knn":
        from sklearn.neighbors import NearestNeighbors

        x = np.vstack([zp, -zp])
        lab = np.r_[np.ones(len(zp)), np.zeros(len(zp))]
        k = int(min(n_neighbors, len(x)))
        nn = NearestNeighbors(n_neighbors=k, metric="cosine").fit(x)
        dist, idx = nn.kneighbors(zu)
        w = np.maximum(1.0 - dist, 1e-6)  # closer neighbours count more
        scores = (w * lab[idx]).sum(axis=1) / w.sum(axis=1)
    else:
        raise PUAuditError(f"Unknown scorer '{scorer}': choose one of {list(SCORERS)}.")
    scores = np.asarray(scores, dtype=np.float64)
    return (scores, info) if log else scores
