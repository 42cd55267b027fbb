"""People's and the judge's votes, one row a vote, in the form the latent-truth models take.

Rows of one item may show the pair in either order. A vote's ``label`` lives in the item's
*reference orientation* (its first row in file order): a vote on a row that shows the pair the
other way round is translated (A ↔ B); ``shown`` keeps the letter as the annotator saw it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from puaudit.annotators.consensus import require_annotator_column, winner_keys
from puaudit.data.cells import is_missing
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError

__all__ = ["LABELS", "VoteData", "collect_votes"]

#: Labels in the order used by every array here: 0 = A, 1 = B, 2 = tie.
LABELS = ("A", "B", "tie")
_CODE = {"A": 0, "B": 1, "tie": 2}
SWAP = np.array([1, 0, 2])      # A <-> B, tie stays: a label in the other orientation


@dataclass
class VoteData:
    """One row per vote: people's votes (first per item and person) and the judge's item votes.

    Attributes
    ----------
    items : ndarray of object
        Item ids (those with at least one person's vote), in order of first appearance.
    item_row : ndarray of int
        Each item's first row in the table: it fixes the item's reference orientation.
    workers : ndarray of object
        Annotator names; the judge (when present) is the last one.
    judge : int or None
        Index of the judge in ``workers``.
    item, worker : ndarray of int
        Per vote: its item and annotator.
    label : ndarray of int
        Per vote, 0/1/2 = A/B/tie in the item's reference orientation.
    shown : ndarray of int
        Per vote, 0/1/2 as the annotator saw it (the letter on the row).
    flip : ndarray of bool
        The vote's row shows the pair in the opposite order to the reference.
    longer : ndarray of int
        Per vote, 0 if response A (as shown) is longer, 1 if B is, -1 for equal lengths.
    row : ndarray of int
        The vote's row in the table.
    n_duplicates, n_unmatched : int
        Votes left out: a second vote of one person on one item; a row whose pair could not be
        matched to its item's first row.
    """

    items: np.ndarray
    item_row: np.ndarray
    workers: np.ndarray
    judge: int | None
    item: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    shown: np.ndarray
    flip: np.ndarray
    longer: np.ndarray
    row: np.ndarray
    n_duplicates: int = 0
    n_unmatched: int = 0

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    def model_mask(self, include_judge: bool) -> np.ndarray:
        """Votes that enter the model: the people's, plus the judge's when ``include_judge``."""
        if self.judge is None or include_judge:
            return np.ones(len(self.item), dtype=bool)
        return self.worker != self.judge


def _label_codes(values) -> np.ndarray:
    """0 / 1 / 2 for "A" / "B" / "tie", -1 for anything else."""
    return np.array([_CODE.get(v, -1) if isinstance(v, str) else -1 for v in values])


def _swap_strict(code: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """A strict label seen in the other orientation (tie and -1 unchanged)."""
    return np.where(flip & (code < 2) & (code >= 0), 1 - code, code)


@dataclass
class _Layout:
    """Each row's item, the item's reference row and how the row shows the pair."""

    item_codes: np.ndarray
    uniq: pd.Index
    first_row: np.ndarray
    flipped: np.ndarray
    matched: np.ndarray
    longer: np.ndarray


def _item_layout(table: ComparisonTable) -> _Layout:
    key_a, key_b = winner_keys(table)
    item_codes, uniq = pd.factorize(pd.Series(table.item_id, dtype=object))
    first_row = np.full(len(uniq), -1)
    for r in range(len(table) - 1, -1, -1):
        first_row[item_codes[r]] = r
    ref_a, ref_b = key_a[first_row[item_codes]], key_b[first_row[item_codes]]
    same = (key_a == ref_a) & (key_b == ref_b)
    flipped = (key_a == ref_b) & (key_b == ref_a) & ~same
    len_a = np.array([len(str(t)) for t in table.response_a])
    len_b = np.array([len(str(t)) for t in table.response_b])
    longer = np.where(len_a > len_b, 0, np.where(len_b > len_a, 1, -1))
    return _Layout(item_codes, uniq, first_row, flipped, same | flipped, longer)


def _check_people(table: ComparisonTable, annot: np.ndarray, person: np.ndarray, judge: bool,
                  judge_name: str) -> None:
    if not person.any():
        raise PUAuditError("No human votes with an annotator id: the latent-truth models need "
                           "votes (A, B or tie) and who cast them.",
                           column=table.columns.get("human"))
    if judge and judge_name in set(annot[person]):
        raise PUAuditError(f"An annotator is named '{judge_name}', the judge's name in the "
                           "report; choose another judge_name.",
                           column=table.columns.get("annotator"))


def _judge_votes(table: ComparisonTable, lay: _Layout, new_code: np.ndarray,
                 n_items: int) -> dict:
    """The judge's item votes: the majority of its verdicts over the item's rows (counted in
    the reference orientation; a shared top count gives tie), on the item's first row holding
    a judge verdict."""
    jcode = _label_codes(table.judge)
    jok = (jcode >= 0) & lay.matched & (new_code[lay.item_codes] >= 0)
    jref = _swap_strict(jcode, lay.flipped)
    counts = np.zeros((n_items, 3))
    np.add.at(counts, (new_code[lay.item_codes[jok]], jref[jok]), 1)
    has = counts.sum(1) > 0
    top = counts.max(1, keepdims=True)
    shared = (counts == top).sum(1) > 1
    jitem = np.where(shared, 2, counts.argmax(1))
    jfirst = np.full(n_items, -1)
    for r in np.flatnonzero(jok)[::-1]:
        jfirst[new_code[lay.item_codes[r]]] = r
    its = np.flatnonzero(has)
    jrows = jfirst[its]
    jflip = lay.flipped[jrows]
    return {"item": its, "shown": _swap_strict(jitem[its], jflip), "flip": jflip,
            "longer": lay.longer[jrows], "row": jrows}


def collect_votes(table: ComparisonTable, *, judge: bool = True,
                  judge_name: str = "LLM judge") -> VoteData:
    """The votes of a comparison table in the form the models take.

    People's votes are the rows with an annotator id and a human verdict in {A, B, tie}; a
    second vote of one person on one item is left out (``n_duplicates``). The judge votes once
    per item with a person's vote: the majority of its verdicts over the item's rows (a shared
    top count gives ``tie``, as in :func:`puaudit.annotators.agreement.annotator_report`),
    placed on the item's first row holding a judge verdict.

    Raises
    ------
    PUAuditError
        No annotator column, no person's vote, or a person named ``judge_name``.
    """
    require_annotator_column(table)
    annot = np.array(["" if is_missing(a) else str(a).strip() for a in table.annotator],
                     dtype=object)
    hcode = _label_codes(np.asarray(table.human, dtype=object))
    person = (annot != "") & (hcode >= 0)
    _check_people(table, annot, person, judge, judge_name)
    lay = _item_layout(table)
    rows = np.flatnonzero(person & lay.matched)
    n_unmatched = int((person & ~lay.matched).sum())
    d = pd.DataFrame({"row": rows, "item": lay.item_codes[rows], "who": annot[rows]})
    dup = d.duplicated(["item", "who"], keep="first").to_numpy()
    rows = rows[~dup]
    voted_items = np.unique(lay.item_codes[rows])
    # keep the items with a person's vote, in order of first appearance
    order = voted_items[np.argsort(lay.first_row[voted_items], kind="stable")]
    new_code = np.full(len(lay.uniq), -1)
    new_code[order] = np.arange(len(order))
    workers = np.array(sorted(set(annot[rows])), dtype=object)
    wcode = {w: j for j, w in enumerate(workers)}
    parts = {"item": new_code[lay.item_codes[rows]],
             "worker": np.array([wcode[a] for a in annot[rows]]), "shown": hcode[rows],
             "flip": lay.flipped[rows], "longer": lay.longer[rows], "row": rows}
    judge_idx = None
    if judge:
        jv = _judge_votes(table, lay, new_code, len(order))
        judge_idx = len(workers)
        workers = np.array([*workers, judge_name], dtype=object)
        jv["worker"] = np.full(len(jv["item"]), judge_idx)
        parts = {k: np.r_[v, jv[k]] for k, v in parts.items()}
    label = _swap_strict(parts["shown"], parts["flip"])
    return VoteData(items=np.asarray(lay.uniq, dtype=object)[order],
                    item_row=lay.first_row[order], workers=workers, judge=judge_idx,
                    item=parts["item"].astype(int), worker=parts["worker"].astype(int),
                    label=label.astype(int), shown=parts["shown"].astype(int),
                    flip=parts["flip"].astype(bool), longer=parts["longer"].astype(int),
                    row=parts["row"].astype(int), n_duplicates=int(dup.sum()),
                    n_unmatched=n_unmatched)
