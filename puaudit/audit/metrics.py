"""Consistency with people, measured on validation rows only (docs/method.md, "Metrics")."""

from __future__ import annotations

import numpy as np

from puaudit.stats.proportions import wilson_interval

__all__ = ["consistency", "consistency_by_type"]


def consistency(human: np.ndarray, judge: np.ndarray, adjusted: np.ndarray) -> dict:
    """Cons_orig, Cons_adj, their difference, reversal counts and precision.

    All arrays are restricted by the caller to validation rows. ``reversal_precision`` is the share
    of reversed rows where the judge was in fact wrong (``nan`` when nothing was reversed).
    """
    human = np.asarray(human, dtype=object)
    judge = np.asarray(judge, dtype=object)
    adjusted = np.asarray(adjusted, dtype=object)
    n = len(human)
    if n == 0:
        nan = float("nan")
        return {"n": 0, "cons_orig": nan, "cons_adj": nan, "delta": nan, "n_reversed": 0,
                "reversed_share": nan, "reversal_precision": nan,
                "cons_orig_ci": (nan, nan), "cons_adj_ci": (nan, nan)}
    orig_ok = judge == human
    adj_ok = adjusted == human
    rev = adjusted != judge
    k_o, k_a = int(orig_ok.sum()), int(adj_ok.sum())
    n_rev = int(rev.sum())
    return {
        "n": n,
        "cons_orig": k_o / n,
        "cons_adj": k_a / n,
        "delta": (k_a - k_o) / n,
        "n_reversed": n_rev,
        "reversed_share": n_rev / n,
        "reversal_precision": float((~orig_ok[rev]).mean()) if n_rev else float("nan"),
        "cons_orig_ci": tuple(map(float, wilson_interval(k_o, n))),
        "cons_adj_ci": tuple(map(float, wilson_interval(k_a, n))),
    }


def consistency_by_type(human, judge, adjusted, types) -> dict:
    """:func:`consistency` per question type (keys sorted)."""
    types = np.asarray(types, dtype=object)
    return {str(t): consistency(np.asarray(human)[types == t], np.asarray(judge)[types == t],
                                np.asarray(adjusted)[types == t])
            for t in sorted(set(types.tolist()))}
