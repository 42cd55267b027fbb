"""Pure builders for the Review page: who reviews, what the queue shows, one row's texts, the
decision record, progress, disagreements and the export with review columns (no Streamlit)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError
from puaudit.review.feedback import (base_table, latest_votes, review_summary,
                                     with_review_columns)
from puaudit.review.keys import row_keys

__all__ = ["reviewer_identity", "pending_queue", "row_view", "decision_record",
           "progress_counts", "disagreements_frame", "decision_log", "shown_names", "export_frame",
           "review_export", "VERDICT_BUTTONS", "VERDICT_SHORTCUTS",
           "empty_queue_text", "cascade_for_review", "cascade_stage_for"]

#: (verdict, button label) in the order shown
VERDICT_BUTTONS = (("A", "A is better"), ("B", "B is better"), ("tie", "Tie"), ("skip", "Skip"))
#: keyboard shortcut of each verdict button (Streamlit ignores them while a text field has the
#: focus, so typing a note never decides; "C" and "R" are Streamlit's own keys)
VERDICT_SHORTCUTS = {"A": "A", "B": "B", "tie": "T", "skip": "S"}


def reviewer_identity(user: dict | None, typed: str | None) -> tuple[str, str, str]:
    """(reviewer, shown name, how).

    ``how`` is ``"login"`` for a signed-in user (Streamlit authentication): the reviewer is
    the login's identity as the provider gives it (its email, else its subject ``sub``), so two
    people who share a display name stay two reviewers, and the shown name is the display
    name (else that identity). ``"sign-in"`` when the operator configured authentication and
    nobody is signed in (no name may be typed: the reviewer is ""). Else ``"typed"``: the typed
    name is both ("" when none was typed; the page asks for one).

    ``user`` is ``st.user`` as a dict: it has ``is_logged_in`` only when authentication is
    configured."""
    user = dict(user or {})
    if "is_logged_in" in user:
        if user.get("is_logged_in"):
            def field(k):
                v = user.get(k)
                return "" if v is None else str(v).strip()
            ident = field("email") or field("sub") or field("name")
            if ident:
                return ident[:200], (field("name") or ident)[:200], "login"
        return "", "", "sign-in"
    name = ("" if typed is None else str(typed).strip())[:200]
    return name, name, "typed"


def pending_queue(queue: pd.DataFrame, decisions: pd.DataFrame, reviewer: str) -> pd.DataFrame:
    """The queue without the rows this reviewer already decided (a skip counts as decided),
    with ``others``: how many other reviewers voted on each row."""
    q = queue.copy()
    if decisions is None or len(decisions) == 0:
        q["others"] = 0
        return q
    mine = set(decisions.loc[decisions["reviewer"] == reviewer, "row_key"])
    votes = latest_votes(decisions)
    others = votes[votes["reviewer"] != reviewer].groupby("row_key").size()
    q = q[~q["key"].isin(mine)].copy()
    q["others"] = q["key"].map(others).fillna(0).astype(int).to_numpy()
    return q


def row_view(table, result, row: int) -> dict:
    """The texts and audit facts of one row, for reading side by side."""
    p = float(result.p_judge_right[row]) if result.p_judge_right is not None else float("nan")
    cols = table.columns
    frame = table.frame

    def cell(role):
        c = cols.get(role)
        if c is None or c not in frame.columns:
            return ""
        v = frame[c].iloc[row]
        return "" if v is None or (isinstance(v, float) and v != v) else str(v)

    return {"row": int(row), "key": str(row_keys(table)[row]), "prompt": str(table.prompt[row]),
            "response_a": str(table.response_a[row]), "response_b": str(table.response_b[row]),
            "judge": table.judge[row], "question_type": str(table.question_type[row]),
            "model_a": cell("model_a"), "model_b": cell("model_b"),
            "p_judge_right": p, "group": str(result.group[row]),
            "adjusted": result.adjusted[row]}


def decision_record(view: dict, verdict: str, reviewer: str, note: str, settings: dict,
                    dataset: str, *, shown: str | None = None) -> dict:
    """What the store keeps for one click: the row key, the verdict, who (``reviewer``, and
    ``shown``, the display name, when it differs), the note, and the audit settings and facts
    the decision was made under."""
    if not reviewer:
        raise PUAuditError("A reviewer name is required: enter your name above before deciding.",
                           column="reviewer")
    p = view.get("p_judge_right")
    return {"row_key": view["key"], "verdict": verdict, "reviewer": reviewer,
            "reviewer_name": shown if shown and shown != reviewer else None,
            "note": (note or "").strip(), "settings": dict(settings), "dataset": dataset,
            "judge_verdict": view.get("judge"),
            "p_judge_right": None if p is None or p != p else float(p),
            "audit_group": view.get("group")}


def progress_counts(decisions: pd.DataFrame, queue_len: int, reviewer: str) -> dict:
    """Numbers for the progress line: decisions on this table, reviewers, yours, disagreements,
    rows still in your queue."""
    if decisions is None or len(decisions) == 0:
        return {"n_decisions": 0, "n_rows": 0, "n_reviewers": 0, "n_mine": 0,
                "n_disagreements": 0, "n_left": int(queue_len)}
    summ = review_summary(decisions)
    return {"n_decisions": int(len(decisions)), "n_rows": int(decisions["row_key"].nunique()),
            "n_reviewers": int(decisions["reviewer"].nunique()),
            "n_mine": int((decisions["reviewer"] == reviewer).sum()),
            "n_disagreements": int(summ["disagreement"].sum()) if len(summ) else 0,
            "n_left": int(queue_len)}


def disagreements_frame(decisions: pd.DataFrame, table) -> pd.DataFrame:
    """Rows where reviewers voted differently: first table row, prompt excerpt, every vote."""
    summ = review_summary(decisions)
    cols = ["row", "question_type", "prompt", "votes", "notes"]
    if len(summ) == 0:
        return pd.DataFrame(columns=cols)
    summ = summ[summ["disagreement"]]
    base = base_table(table)
    first = _first_rows(base)
    out = []
    for r in summ.itertuples():
        i = first.get(r.row_key)
        if i is None:
            continue
        out.append({"row": int(i), "question_type": str(base.question_type[i]),
                    "prompt": _excerpt(base.prompt[i]), "votes": r.votes, "notes": r.notes})
    return pd.DataFrame(out, columns=cols)


def _first_rows(base) -> pd.Series:
    """Content key -> the first row of ``base`` holding it."""
    first = pd.Series(np.arange(len(base)), index=row_keys(base))
    return first[~first.index.duplicated()]


def shown_names(decisions: pd.DataFrame) -> pd.Series:
    """Each decision's reviewer as shown: the display name it was saved with, else the
    reviewer itself (a typed name)."""
    if "reviewer_name" not in decisions.columns:
        return decisions["reviewer"].astype(str)
    named = decisions["reviewer_name"].where(decisions["reviewer_name"].notna()
                                             & decisions["reviewer_name"].astype(str).ne(""))
    return named.fillna(decisions["reviewer"]).astype(str)


def decision_log(decisions: pd.DataFrame, table, *, limit: int = 200) -> pd.DataFrame:
    """The latest decisions on this table, newest first, with the first table row they match;
    ``reviewer`` is the name shown, ``reviewer_id`` the login identity when it differs."""
    cols = ["when", "reviewer", "verdict", "row", "judge", "note", "reviewer_id"]
    if decisions is None or len(decisions) == 0:
        return pd.DataFrame(columns=cols)
    first = _first_rows(base_table(table))
    d = decisions.iloc[::-1].head(limit)
    shown = shown_names(d)
    return pd.DataFrame({
        "when": d["created_at"].dt.strftime("%Y-%m-%d %H:%M:%S UTC").to_numpy(),
        "reviewer": shown.to_numpy(), "verdict": d["verdict"].to_numpy(),
        "row": [int(first[k]) if k in first.index else -1 for k in d["row_key"]],
        "judge": d["judge_verdict"].fillna("").to_numpy(), "note": d["note"].to_numpy(),
        "reviewer_id": np.where(shown.to_numpy() == d["reviewer"].astype(str).to_numpy(), "",
                                d["reviewer"].astype(str).to_numpy())},
        columns=cols)


def export_frame(result, table, decisions: pd.DataFrame) -> pd.DataFrame:
    """The audited export of the table as loaded (every input row and column, in order), the
    ``puaudit_*`` columns, then the ``puaudit_review_*`` columns."""
    return with_review_columns(result.to_frame(table), table, decisions)


def _excerpt(text, n: int = 120) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def review_export(result, table) -> pd.DataFrame | None:
    """The Export page's frame when review decisions concern this table: the rows as loaded,
    the ``puaudit_*`` and the ``puaudit_review_*`` columns. ``None`` when no decision touches the
    table (and no votes are merged into it), or when the store cannot be read (the export then
    goes on without review columns)."""
    from puaudit.review.store import get_store, store_exists

    base = base_table(table)
    if base is table and not store_exists():
        return None  # no database yet: no decisions (and none is created here)
    try:
        decisions = get_store().decisions(row_keys(base))
    except PUAuditError:
        decisions = None
    if (decisions is None or len(decisions) == 0) and base is table:
        return None
    return export_frame(result, table, decisions)


def empty_queue_text(result, queue: pd.DataFrame, *, filtered: bool) -> str:
    """Why the reviewer's queue is empty: no row lacks a human label, the filters leave none,
    or this reviewer has decided every row in it."""
    split = np.asarray(result.split, dtype=object)
    n_unlabelled = int((split == "unlabelled").sum())
    if n_unlabelled == 0:
        n_ann = int(((split == "P") | (split == "validation")).sum())
        return (f"Nothing to review: every row the judge decided already has a human verdict "
                f"({n_ann:,} annotated rows; {int((split == 'excluded').sum()):,} left out as "
                "ties or without a judge verdict). The queue holds rows without one — the Audit "
                "page shows how the judge did on these.")
    if queue.empty and filtered:
        return (f"None of the {n_unlabelled:,} rows without a human verdict matches these "
                "filters: widen the question types or models under Queue order and filters.")
    return (f"You have decided every row in your queue ({len(queue):,} rows"
            + (" with these filters" if filtered else "") + "). Thank you.")


def cascade_for_review(table, export: pd.DataFrame, judges) -> dict:
    """What the session keeps of a cascade for the Review page: each row's
    ``puaudit_cascade_stage`` by content key (so it still finds its rows once review votes are
    merged into the table), and the judges in order."""
    from puaudit.review.queue import STAGE_COLUMN

    stage = pd.Series(export[STAGE_COLUMN].to_numpy(dtype=object), index=row_keys(table))
    return {"stage": stage[~stage.index.duplicated()], "judges": [str(j) for j in judges]}


def cascade_stage_for(saved: dict | None, table) -> np.ndarray | None:
    """The saved cascade's stage of each row of ``table`` (None where the cascade did not see
    the row's content), or None without a saved cascade."""
    if not saved:
        return None
    return saved["stage"].reindex(row_keys(table)).to_numpy(dtype=object)
