"""Conflict Ratio: how often a pair's relation disagrees with the candidates' single scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["expected_relation", "conflict_ratio", "attach_scores"]


def expected_relation(s_i: np.ndarray, s_j: np.ndarray, *, tol: float = 0.0) -> np.ndarray:
    """Relation implied by two scores: ``=`` when ``|s_i − s_j| ≤ tol``, else the sign of
    ``s_i − s_j`` (``>`` or ``<``)."""
    d = np.asarray(s_i, dtype=float) - np.asarray(s_j, dtype=float)
    out = np.where(d > 0, ">", "<").astype(object)
    out[np.abs(d) <= tol] = "="
    out[np.isnan(d)] = None
    return out


def conflict_ratio(relation: np.ndarray, s_i: np.ndarray, s_j: np.ndarray, *, tol: float = 0.0,
                   log: bool = False) -> float | None | tuple[float | None, dict]:
    """Conflict Ratio ``CR = #conflicts / #pairs``.

    A pair counts when it has a relation and both scores; it is a conflict when its relation
    differs from :func:`expected_relation` (so equal scores with a strict verdict conflict, and so
    does a tie between different scores).

    Returns
    -------
    cr : float or None
        ``None`` when no pair counts.
    log : dict, if ``log=True``
        ``n_pairs``, ``n_conflicts`` and the boolean ``conflict`` mask (False where not counted).
    """
    relation = np.asarray(relation, dtype=object)
    expected = expected_relation(s_i, s_j, tol=tol)
    counted = np.array([r is not None and e is not None for r, e in zip(relation, expected)], dtype=bool)
    conflict = counted & (relation != expected)
    n = int(counted.sum())
    cr = float(conflict.sum() / n) if n else None
    if not log:
        return cr
    return cr, {"n_pairs": n, "n_conflicts": int(conflict.sum()), "conflict": conflict}


def attach_scores(relations: pd.DataFrame, scores: pd.DataFrame, values: pd.Series) -> pd.DataFrame:
    """Add ``score_i`` and ``score_j`` to a relations table.

    ``scores`` is a table read by :func:`puaudit.trustjudge.io.read_scores` and ``values`` its
    score per row. Scores with a judge are matched on (judge, question, candidate); scores
    without one apply to every judge. Unmatched candidates get NaN (the pair is not counted).
    """
    s = scores.assign(_value=values.to_numpy())
    judged = s[s["judge"].notna()]
    shared = s[s["judge"].isna()]
    out = relations.copy()
    for side in ("i", "j"):
        col = f"candidate_{side}"
        vals = pd.Series(np.nan, index=out.index)
        if len(shared):
            m = shared.set_index(["question_id", "candidate"])["_value"]
            keys = pd.MultiIndex.from_arrays([out["question_id"], out[col]])
            vals = pd.Series(m.reindex(keys).to_numpy(), index=out.index)
        if len(judged):
            m = judged.set_index(["judge", "question_id", "candidate"])["_value"]
            keys = pd.MultiIndex.from_arrays([out["judge"], out["question_id"], out[col]])
            own = pd.Series(m.reindex(keys).to_numpy(), index=out.index)
            vals = own.where(own.notna(), vals)
        out[f"score_{side}"] = vals.to_numpy(dtype=float)
    return out
