"""Seeded P / validation / unlabelled splits (docs/method.md, "Splits")."""

from __future__ import annotations

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["SPLIT_P", "SPLIT_VAL", "SPLIT_U", "SPLIT_EXCLUDED", "split_rows", "MIN_ANNOTATED"]

SPLIT_P = "P"
SPLIT_VAL = "validation"
SPLIT_U = "unlabelled"
SPLIT_EXCLUDED = "excluded"

#: fewest annotated strict rows (judge and human both A/B) the audit needs to learn anything.
MIN_ANNOTATED = 10


def split_rows(judge: np.ndarray, human: np.ndarray, question_type: np.ndarray,
               item_id: np.ndarray, *, p_ratio: float = 0.3, random_state: int | None = 0,
               identical: np.ndarray | None = None, log: bool = False):
    """Assign each row to P, validation, unlabelled or excluded.

    Annotated rows (judge and human both strict) are split per question type, by item: a share
    ``p_ratio`` of each type's items (at least one when ``p_ratio > 0``) goes to **P**, the rest to
    **validation**; all rows of one item land on the same side. Rows with a strict judge verdict
    and no human verdict are **unlabelled**. Ties (either label), missing judge verdicts and
    identical responses are **excluded**, with the reason.

    Parameters
    ----------
    judge, human : arrays of {"A", "B", "tie", None}
    question_type, item_id : arrays of str
    p_ratio : float in (0, 1]
        Share of annotated items that become verified positives. ``1`` leaves no validation.
    random_state : int or None
    identical : bool array, optional
        Rows whose two responses embed identically (cannot be audited).
    log : bool
        Also return a dict with per-type counts.

    Returns
    -------
    split : ndarray of str
    reason : ndarray of str ("" where not excluded)
    """
    if not (0 < p_ratio <= 1):
        raise PUAuditError(f"p_ratio must be in (0, 1], got {p_ratio}.")
    n = len(judge)
    split = np.full(n, SPLIT_U, dtype=object)
    reason = np.full(n, "", dtype=object)
    judge_strict = np.array([j in ("A", "B") for j in judge], dtype=bool)
    human_strict = np.array([h in ("A", "B") for h in human], dtype=bool)
    human_any = np.array([h is not None for h in human], dtype=bool)
    for i in range(n):
        if judge[i] is None:
            split[i], reason[i] = SPLIT_EXCLUDED, "no judge verdict"
        elif judge[i] == "tie":
            split[i], reason[i] = SPLIT_EXCLUDED, "judge tie"
        elif human[i] == "tie":
            split[i], reason[i] = SPLIT_EXCLUDED, "human tie"
    if identical is not None:
        for i in np.flatnonzero(identical):
            if split[i] != SPLIT_EXCLUDED:
                split[i], reason[i] = SPLIT_EXCLUDED, "identical responses"
    annotated = judge_strict & human_strict & (split != SPLIT_EXCLUDED)
    unlabelled = judge_strict & ~human_any & (split != SPLIT_EXCLUDED)
    split[unlabelled] = SPLIT_U
    rng = np.random.default_rng(random_state)
    counts = {}
    qt = np.asarray(question_type, dtype=object)
    # An item belongs to one type (its most frequent among annotated rows) so that an item whose
    # rows carry different types still lands on one side.
    ann_rows = np.flatnonzero(annotated)
    item_type: dict = {}
    for r in ann_rows:
        item_type.setdefault(item_id[r], {}).setdefault(qt[r], 0)
        item_type[item_id[r]][qt[r]] += 1
    item_type = {k: max(sorted(v), key=lambda t: v[t]) for k, v in item_type.items()}
    for t in sorted(set(item_type.values())):
        items = np.array(sorted(k for k, v in item_type.items() if v == t), dtype=object)
        rows = np.array([r for r in ann_rows if item_type[item_id[r]] == t], dtype=int)
        order = rng.permutation(len(items))
        n_p = len(items) if p_ratio >= 1 else max(1, int(round(p_ratio * len(items))))
        p_items = set(items[order[:n_p]].tolist())
        in_p = np.array([item_id[r] in p_items for r in rows], dtype=bool)
        split[rows[in_p]] = SPLIT_P
        split[rows[~in_p]] = SPLIT_VAL
        counts[t] = {"items": len(items), "p_items": n_p, "P": int(in_p.sum()),
                     "validation": int((~in_p).sum())}
    if log:
        return split, reason, {"per_type": counts}
    return split, reason
