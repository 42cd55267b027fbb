"""Scorers: how strongly each audited row looks like a verified positive.

Every scorer sees the verified positives P' as difference vectors oriented by the human
(winner minus loser) and the audited rows as difference vectors oriented by the judge, and
returns one score per audited row; higher means "the judge's decision looks human-consistent".

=========== ===================================================================================
``pot``     partial optimal transport (docs/method.md): ``s_j = (Γᵀ1)_j / b_j`` with total mass ``m``
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

from puaudit.audit.denoise import normalize_rows
from puaudit.errors import PUAuditError

__all__ = ["SCORERS", "score_targets"]

SCORERS = ("prior-ot", "pot", "full-ot", "centroid", "probe", "knn")


#: Rows of audited difference vectors built and scored at a time (about 100 MB of float64).
SCORE_BLOCK = 32_768
#: Largest reference set (P rows) a scorer is fitted on; a seeded sample above. Far above what
#: any labelled slice needs, it bounds time and memory on tables with hundreds of thousands of
#: labelled rows.
MAX_FIT_ROWS = {"prior-ot": 2_000, "probe": 20_000, "knn": 10_000}


def _blocks(zu, fn) -> np.ndarray:
    """``fn`` applied to ``zu`` block by block (``zu`` may be a lazy row view)."""
    out = np.empty(len(zu))
    for s in range(0, len(zu), SCORE_BLOCK):
        out[s:s + SCORE_BLOCK] = fn(np.asarray(zu[s:s + SCORE_BLOCK], dtype=np.float64))
    return out


def _cap(zp: np.ndarray, scorer: str, random_state) -> np.ndarray:
    cap = MAX_FIT_ROWS.get(scorer)
    if cap is None or len(zp) <= cap:
        return zp
    rng = np.random.default_rng(None if random_state is None else random_state + 104729)
    return zp[np.sort(rng.choice(len(zp), size=cap, replace=False))]


def score_targets(scorer: str, zp: np.ndarray, zu, *, m: float = 0.8,
                  ot_method: str = "auto", reg: float | None = None, n_neighbors: int = 15,
                  probe_C: float = 1.0, random_state: int | None = 0,
                  score_rows: np.ndarray | None = None, log: bool = False):
    """Score audited rows ``zu`` against verified positives ``zp``.

    Parameters
    ----------
    scorer : {"prior-ot", "pot", "full-ot", "centroid", "probe", "knn"}
    zp : (n_p, d) array
        Normalised difference vectors of P' (human winner minus loser). Above
        :data:`MAX_FIT_ROWS` rows a seeded sample is used (``prior-ot``, ``probe``, ``knn``).
    zu : (n_u, d) array, or a lazy row view (:class:`puaudit.audit.estimator.DiffRows`)
        Normalised difference vectors of the audited rows (judge winner minus loser). All
        scorers but ``pot`` and ``full-ot`` read it block by block.
    m : float in (0, 1]
        Transported mass (``pot``) / prior share of right verdicts (``prior-ot``).
    ot_method, reg
        Passed to :func:`puaudit.audit.transport.partial_ot_scores` / :func:`puaudit.audit.transport.ot_scores`;
        ``reg`` also to :func:`puaudit.audit.prior_transport.prior_ot_scores`.
    n_neighbors : int
        ``knn`` only.
    probe_C : float
        Inverse L2 strength of the ``probe`` logistic regression.
    score_rows : int array, optional
        Return scores for these rows of ``zu`` only. The transport scorers still use every row
        of ``zu`` as the target measure (their scores depend on it); the others score row by row.

    Returns
    -------
    scores : (n_u,) or (len(score_rows),) float array (higher = judge more likely right)
    """
    zp = np.asarray(zp, dtype=np.float64)
    if len(zp) == 0:
        raise PUAuditError("No verified positives to score against: the audit needs annotated rows "
                           "(human and judge both A or B) in P.")
    if scorer not in SCORERS:
        raise PUAuditError(f"Unknown scorer '{scorer}': choose one of {list(SCORERS)}.")
    n_out = len(zu) if score_rows is None else len(score_rows)
    if len(zu) == 0 or n_out == 0:
        out = np.zeros(0)
        return (out, {}) if log else out
    info: dict = {"scorer": scorer}
    zp = _cap(zp, scorer, random_state)
    if scorer not in ("pot", "full-ot", "prior-ot") and score_rows is not None:
        zu = zu[np.asarray(score_rows)]  # row-wise scorers: only the rows asked for
        score_rows = None
    if scorer in ("pot", "full-ot"):
        zu = np.asarray(zu, dtype=np.float64)
    if scorer == "prior-ot":
        from puaudit.audit.prior_transport import prior_ot_scores

        kw = {} if reg is None else {"reg": reg}
        res = prior_ot_scores(zp, zu, m, random_state=random_state, score_rows=score_rows,
                              log=log, **kw)
        scores, info["transport"] = res if log else (res, None)
        score_rows = None
    elif scorer == "pot":
        from puaudit.audit.transport import partial_ot_scores

        res = partial_ot_scores(zp, zu, m, method=ot_method, reg=reg, log=log)
        scores, info["transport"] = res if log else (res, None)
    elif scorer == "full-ot":
        from puaudit.audit.transport import ot_scores

        res = ot_scores(zp, zu, method="exact" if ot_method in ("auto", "exact", "fast") else ot_method,
                        reg=reg, log=log)
        scores, info["transport"] = res if log else (res, None)
    elif scorer == "centroid":
        d = normalize_rows(zp.mean(axis=0, keepdims=True))[0]
        scores = _blocks(zu, lambda z: normalize_rows(z) @ d)
    elif scorer == "probe":
        from sklearn.linear_model import LogisticRegression

        x = np.vstack([zp, -zp])
        y = np.r_[np.ones(len(zp)), np.zeros(len(zp))]
        # no intercept: a reversed pair must get the complementary probability (Bradley–Terry)
        clf = LogisticRegression(C=probe_C, fit_intercept=False, max_iter=1000)
        clf.fit(x, y)
        scores = _blocks(zu, lambda z: clf.predict_proba(z)[:, 1])
    else:  # knn
        from sklearn.neighbors import NearestNeighbors

        x = np.vstack([zp, -zp])
        lab = np.r_[np.ones(len(zp)), np.zeros(len(zp))]
        k = int(min(n_neighbors, len(x)))
        nn = NearestNeighbors(n_neighbors=k, metric="cosine").fit(x)

        def knn(z):
            # sklearn's distance chunks default to 1 GB of working memory; keep them small
            from sklearn import config_context

            with config_context(working_memory=64):
                dist, idx = nn.kneighbors(z)
            w = np.maximum(1.0 - dist, 1e-6)  # closer neighbours count more
            return (w * lab[idx]).sum(axis=1) / w.sum(axis=1)

        scores = _blocks(zu, knn)
    scores = np.asarray(scores, dtype=np.float64)
    if score_rows is not None:
        scores = scores[np.asarray(score_rows)]
    return (scores, info) if log else scores
