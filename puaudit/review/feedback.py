"""Decisions flow back: reviewed rows become human labels, exports carry the review columns.

A reviewer's *vote* on a row is their latest decision on its content key; ``skip`` gives no
label (a later skip withdraws an earlier vote). :func:`merge_decisions` builds the table the
audit reruns on, :func:`review_columns` summarises the votes per row for exports
(docs/review.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.data.schema import ComparisonTable
from puaudit.review.keys import row_keys

__all__ = ["latest_votes", "merge_decisions", "review_summary", "review_columns",
           "with_review_columns", "base_table", "REVIEW_COLUMNS"]

REVIEW_COLUMNS = ["puaudit_review_verdict", "puaudit_review_n_votes", "puaudit_review_votes",
                  "puaudit_review_disagreement", "puaudit_review_notes",
                  "puaudit_review_last_at"]


def latest_votes(decisions: pd.DataFrame, *, include_skips: bool = False) -> pd.DataFrame:
    """The latest decision per (row key, reviewer), oldest first; skips dropped unless asked."""
    if decisions is None or len(decisions) == 0:
        return pd.DataFrame(columns=["row_key", "reviewer", "verdict", "note", "created_at"])
    d = decisions.copy()
    d["_order"] = np.arange(len(d))
    d = d.sort_values(["created_at", "_order"], kind="stable")
    last = d.drop_duplicates(["row_key", "reviewer"], keep="last")
    if not include_skips:
        last = last[last["verdict"] != "skip"]
    return last.drop(columns="_order").reset_index(drop=True)


def base_table(table: ComparisonTable) -> ComparisonTable:
    """The table as loaded, before any review votes were merged into it."""
    return table.extra.get("review_base", table)


def merge_decisions(table: ComparisonTable, decisions: pd.DataFrame) -> ComparisonTable:
    """``table`` with the review votes as human labels (``annotator`` = reviewer).

    The first ``len(table)`` rows are the table's rows in order (reviewed rows without a human
    verdict now carry the vote); rows added for further votes follow. ``extra`` holds
    ``review_base`` (the table given), ``review_n_votes``, ``review_filled``, ``review_added``
    and ``review_source`` (for each row, the index of the input row it comes from).
    """
    table = base_table(table)
    keys = row_keys(table)
    votes = latest_votes(decisions)
    votes = votes[votes["row_key"].isin(set(keys.tolist()))]
    n = len(table)
    human = np.asarray(table.human, dtype=object).copy()
    annot = (np.array([""] * n, dtype=object) if table.annotator is None
             else np.asarray(table.annotator, dtype=object).copy())
    rows_of: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        rows_of.setdefault(k, []).append(i)
    free = {k: [i for i in rs if human[i] is None] for k, rs in rows_of.items()}
    added: list[tuple] = []  # (source row, verdict, reviewer) of each added row
    filled = 0
    for k, verdict, who in zip(votes["row_key"], votes["verdict"], votes["reviewer"]):
        slots = free.get(k)
        if slots:
            i = slots.pop(0)
            human[i], annot[i] = verdict, who
            filled += 1
        else:
            added.append((rows_of[k][0], verdict, who))
    added_src, added_vote, added_who = (list(c) for c in zip(*added)) if added else ([], [], [])
    src = np.concatenate([np.arange(n), np.asarray(added_src, dtype=np.int64)]).astype(np.int64)

    def grow(arr):
        arr = np.asarray(arr, dtype=object)
        return np.concatenate([arr, arr[added_src]]) if added_src else arr.copy()

    frame = table.frame
    if added_src:
        frame = pd.concat([frame, frame.iloc[added_src]], ignore_index=True)
    merged = ComparisonTable(
        frame=frame, columns=dict(table.columns), prompt=grow(table.prompt),
        response_a=grow(table.response_a), response_b=grow(table.response_b),
        judge=grow(table.judge),
        human=np.concatenate([human, np.asarray(added_vote, dtype=object)]),
        question_type=grow(table.question_type), item_id=grow(table.item_id),
        annotator=np.concatenate([annot, np.asarray(added_who, dtype=object)]),
        judge_column=table.judge_column,
        extra={"review_base": table, "review_n_votes": int(len(votes)),
               "review_filled": filled, "review_added": len(added_src),
               "review_source": src, "review_keys": keys[src]})
    return merged


def review_summary(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per row key: the consensus verdict, every vote, disagreement, notes, last time.

    ``verdict`` is the majority of the reviewers' votes ("" when the votes are split evenly);
    ``disagreement`` is True when two reviewers voted differently.
    """
    votes = latest_votes(decisions)
    cols = ["row_key", "verdict", "n_votes", "votes", "disagreement", "notes", "last_at"]
    if len(votes) == 0:
        return pd.DataFrame(columns=cols)
    out = []
    for key, g in votes.groupby("row_key", sort=False):
        counts = g["verdict"].value_counts()
        top = counts[counts == counts.max()]
        notes = [f"{w}: {n}" for w, n in zip(g["reviewer"], g["note"]) if isinstance(n, str) and n]
        out.append({
            "row_key": key,
            "verdict": top.index[0] if len(top) == 1 else "",
            "n_votes": int(len(g)),
            "votes": "; ".join(f"{w}: {v}" for w, v in zip(g["reviewer"], g["verdict"])),
            "disagreement": bool(g["verdict"].nunique() > 1),
            "notes": " | ".join(notes),
            "last_at": pd.Timestamp(g["created_at"].max()).isoformat(),
        })
    return pd.DataFrame(out, columns=cols)


def review_columns(table: ComparisonTable, decisions: pd.DataFrame) -> pd.DataFrame:
    """The ``puaudit_review_*`` columns for the rows of the table as loaded (same order;
    empty where a row has no vote)."""
    table = base_table(table)
    keys = pd.Series(row_keys(table), name="row_key")
    summ = review_summary(decisions).set_index("row_key")
    j = summ.reindex(keys)
    has = j["n_votes"].notna().to_numpy()
    out = {f"puaudit_review_{c}": j[c].fillna("").astype(object).to_numpy()
           for c in ("verdict", "votes", "notes", "last_at")}
    out["puaudit_review_n_votes"] = j["n_votes"].fillna(0).astype(int).to_numpy()
    out["puaudit_review_disagreement"] = np.where(has, j["disagreement"].fillna(False),
                                                  False).astype(bool)
    return pd.DataFrame(out)[REVIEW_COLUMNS]


def with_review_columns(frame: pd.DataFrame, table: ComparisonTable,
                        decisions: pd.DataFrame) -> pd.DataFrame:
    """An export frame (``result.to_frame(table)``) restricted to the rows of the table as
    loaded, with the ``puaudit_review_*`` columns added (an input column of the same name is
    never overwritten: the new one gets ``_new``)."""
    base = base_table(table)
    out = frame.iloc[:len(base)].copy()
    cols = review_columns(base, decisions)
    for name in cols.columns:
        col = name
        while col in out.columns:
            col += "_new"
        out[col] = cols[name].to_numpy()
    return out
