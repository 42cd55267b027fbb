"""Consistency with people, measured on validation rows only (docs/method.md, "Metrics")."""

from __future__ import annotations

import numpy as np

from puaudit.stats.proportions import wilson_interval

#: fewest validation rows for a question type's percentages: below it one row more or less moves
#: them by five points or more (1/20), so the Audit page, the Question types page and the report
#: show such a type's counts and no percentage
MIN_TYPE_ROWS = 20
#: question types a radar draws by default, those with the most validation rows (more, and
#: their labels overlap)
TOP_TYPES = 12
#: the rule in words, stated beside every per-type table and radar
TYPE_RULE = (f"Types with fewer than {MIN_TYPE_ROWS} validation rows show their counts and no "
             "percentage: one row more or less would move it by five points or more.")

__all__ = ["consistency", "consistency_by_type", "MIN_TYPE_ROWS", "TOP_TYPES", "TYPE_RULE",
           "measured_types"]


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


def measured_types(per_type: dict, *, min_rows: int = MIN_TYPE_ROWS,
                   top: int | None = None) -> dict:
    """The question types of ``per_type`` (``AuditResult.per_type``) with at least ``min_rows``
    validation rows (``n``), and of those the ``top`` with the most rows (ties by name), in
    their original order: what a per-type figure draws under :data:`TYPE_RULE`."""
    keep = [t for t, m in per_type.items() if (m.get("n") or 0) >= min_rows]
    if top is not None:
        keep = sorted(keep, key=lambda t: (-per_type[t]["n"], str(t)))[:top]
    chosen = set(keep)
    return {t: m for t, m in per_type.items() if t in chosen}
