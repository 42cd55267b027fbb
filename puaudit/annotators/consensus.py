"""Which response won, across rows that show a pair in either order, and the people's majority.

Votes are compared across rows as *which response won*, never as raw letters: two rows of the
same item may show the pair in opposite orders. A response is identified by its model name when
the table has distinct ``model_a`` / ``model_b`` names on that row, else by its text. A vote
``"A"`` on a row therefore becomes the identity of that row's response A, ``"B"`` the identity
of response B, and ``"tie"`` the tie key.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from puaudit.data.cells import is_missing
from puaudit.data.schema import COLUMN_ALIASES, ComparisonTable
from puaudit.errors import PUAuditError

__all__ = ["TIE_KEY", "winner_keys", "to_keys", "to_letters", "item_majority",
           "consensus_labels", "require_annotator_column"]

TIE_KEY = "=tie"


def winner_keys(table: ComparisonTable) -> tuple[np.ndarray, np.ndarray]:
    """Identity of response A and of response B on every row.

    ``"m:<model name>"`` when the table maps ``model_a`` and ``model_b`` columns and the two names
    on the row are non-empty and distinct; otherwise ``"t:<response text>"``.
    """
    n = len(table)
    cols = table.columns
    ma = mb = None
    if "model_a" in cols and "model_b" in cols:
        ma = table.frame[cols["model_a"]].tolist()
        mb = table.frame[cols["model_b"]].tolist()
    key_a = np.empty(n, dtype=object)
    key_b = np.empty(n, dtype=object)
    for i in range(n):
        a = "" if ma is None or is_missing(ma[i]) else str(ma[i]).strip()
        b = "" if mb is None or is_missing(mb[i]) else str(mb[i]).strip()
        if a and b and a != b:
            key_a[i], key_b[i] = "m:" + a, "m:" + b
        else:
            key_a[i], key_b[i] = "t:" + str(table.response_a[i]), "t:" + str(table.response_b[i])
    return key_a, key_b


def to_keys(votes: np.ndarray, key_a: np.ndarray, key_b: np.ndarray) -> np.ndarray:
    out = np.empty(len(votes), dtype=object)
    for i, v in enumerate(votes):
        out[i] = key_a[i] if v == "A" else key_b[i] if v == "B" else TIE_KEY if v == "tie" else None
    return out


def to_letters(keys: np.ndarray, key_a: np.ndarray, key_b: np.ndarray) -> np.ndarray:
    out = np.empty(len(keys), dtype=object)
    for i, k in enumerate(keys):
        out[i] = (None if k is None else "tie" if k == TIE_KEY else "A" if k == key_a[i]
                  else "B" if k == key_b[i] else None)
    return out


def _majority(keys) -> tuple[Any, int, int]:
    """Majority key of a list (``TIE_KEY`` when the top count is shared), its count, total."""
    counts = Counter(keys)
    if not counts:
        return None, 0, 0
    top = max(counts.values())
    winners = [k for k, c in counts.items() if c == top]
    key = winners[0] if len(winners) == 1 else TIE_KEY
    return key, counts.get(key, 0), sum(counts.values())


def item_majority(items: np.ndarray, keys: np.ndarray) -> dict:
    """item -> (majority key, its count, number of votes) over the non-missing keys."""
    return {it: _majority(ks) for it, ks in _by_item(items, keys).items()}


def _by_item(items: np.ndarray, keys: np.ndarray) -> dict:
    """item -> its non-missing keys, in row order."""
    by_item: dict = {}
    for it, k in zip(items, keys):
        if k is not None:
            by_item.setdefault(it, []).append(k)
    return by_item


def consensus_labels(table: ComparisonTable, *, log: bool = False):
    """Item-level consensus of the human votes, expressed in each row's own A/B order.

    For item :math:`i` with human votes :math:`v_1..v_m` (winner identities, ``tie`` a value of
    its own), the consensus is :math:`\\arg\\max_c \\#\\{j: v_j = c\\}`; when two or more values
    share the top count the consensus is ``tie``. Every row of the item receives the consensus as
    ``"A"`` (its response A won), ``"B"`` or ``"tie"``; rows of items without any human vote get
    None. All human votes count, with or without an annotator id.

    Parameters
    ----------
    table : ComparisonTable
    log : bool
        Also return a dict with ``n_items``, ``n_items_voted``, ``n_items_multi`` (≥ 2 votes) and
        ``n_items_split`` (top count shared, so the consensus is ``tie`` by the tie-break).

    Returns
    -------
    labels : ndarray of {"A", "B", "tie", None}, one per row
    log : dict, only when ``log=True``
    """
    key_a, key_b = winner_keys(table)
    keys = to_keys(table.human, key_a, key_b)
    maj = item_majority(table.item_id, keys)
    item_keys = np.array([maj[it][0] if it in maj else None for it in table.item_id], dtype=object)
    labels = to_letters(item_keys, key_a, key_b)
    if not log:
        return labels
    n_split = 0
    for ks in _by_item(table.item_id, keys).values():
        top = Counter(ks).most_common(2)
        n_split += len(top) == 2 and top[0][1] == top[1][1]
    return labels, {"n_items": int(len(set(table.item_id))), "n_items_voted": len(maj),
                    "n_items_multi": int(sum(v[2] >= 2 for v in maj.values())),
                    "n_items_split": n_split}


def require_annotator_column(table) -> None:
    """Raise a clear message when ``table`` has no annotator column."""
    if table.annotator is None:
        names = ", ".join(COLUMN_ALIASES["annotator"])
        raise PUAuditError(
            f"No annotator column found (looked for: {names}). Name the column holding the "
            "annotator ids: CLI --annotator-col COLUMN; Python columns={'annotator': 'COLUMN'}.",
            column=None)
