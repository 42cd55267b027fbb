"""Review: people check the rows the audit doubts; decisions persist and flow back as labels."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

import streamlit as st

from components import audit_runs, page_data, state
from components.review import (VERDICT_BUTTONS, VERDICT_SHORTCUTS, cascade_stage_for,
                               decision_log, decision_record, disagreements_frame,
                               empty_queue_text, export_frame, pending_queue, progress_counts,
                               reviewer_identity, row_view)
from components.safe_text import md
from puaudit.data.writers import table_to_bytes
from puaudit.errors import PUAuditError
from puaudit.review.feedback import latest_votes, merge_decisions
from puaudit.review.queue import CASCADE_TIER, review_queue
from puaudit.review.store import default_url, get_store

state.through_navigation()
st.title("Review")
st.caption("Check the rows where a human verdict is worth most: the rows a cascade of judges "
           "left for people (after one ran on the Audit page), the audit's uncertain rows, "
           "then its reversal candidates, then the rows closest to a coin flip. "
           "Decisions are saved in a database and survive restarts; "
           "they can be fed back into the audit as human labels.")

table, emb, result, params = audit_runs.audit_view()
ss = st.session_state
base, keys = page_data.review_rows(table)

# -- who reviews ---------------------------------------------------------------------------------
try:
    user = {k: st.user.get(k) for k in ("is_logged_in", "name", "email", "sub") if k in st.user}
except Exception:  # no user information in this context
    user = {}
if "w_review_name" not in ss:
    ss["w_review_name"] = ss.get("review_name", "")
name, shown, how = reviewer_identity(user, ss.get("w_review_name"))
if how == "login":  # decisions are keyed by the login's identity, shown by its display name
    st.caption(f"Reviewing as {md(shown)}" + (f" ({md(name)})" if shown != name else "")
               + " (signed in).")
elif how == "sign-in":  # the operator set up authentication: names come from the login only
    st.info("Sign in to review: your name comes from your login.")
    st.button("Sign in", key="review_login", on_click=st.login)
else:
    st.text_input("Your name (required to review)", key="w_review_name", max_chars=200)
    name, shown, _ = reviewer_identity(user, ss.get("w_review_name"))
    ss["review_name"] = name

flash = ss.pop("review_flash", None)
if flash:
    (st.success if flash[0] == "success" else st.error)(md(flash[1]))

# -- the store (created with the first decision: visiting this page writes nothing) --------------
store, decisions, seen, ss["review_pending"] = page_data.review_decisions(
    keys, ss.setdefault("review_pending", []))
read_only = store is not None and getattr(store, "read_only", False)
if read_only:  # a read-only file, folder or mount: its decisions are shown, nothing is saved
    st.warning(md(store.read_only_reason))

# -- the queue -----------------------------------------------------------------------------------
with st.expander("Queue order and filters", expanded=False):
    order = st.radio("Order", ["value", "random"], horizontal=True, key="w_review_order",
                     format_func=lambda o: {"value": "Value of a check (default)",
                                            "random": "Random (baseline)"}[o])
    types = sorted({str(t) for t in base.question_type})
    pick_types = st.multiselect("Question types", types, key="w_review_types")
    model_cols = [c for c in (base.columns.get("model_a"), base.columns.get("model_b")) if c]
    models = sorted({str(v) for c in model_cols for v in base.frame[c].dropna().tolist()})
    pick_models = st.multiselect("Models", models, key="w_review_models") if models else []
if result.certification is not None and order == "value":
    st.caption(f"Certified at target {result.params['target_agreement']:g} (Audit page): the "
               "escalated rows come first, those farthest below the trust threshold first.")
cascade = ss.get("review_cascade")  # run on the Audit page, on these data and this mapping
if cascade and cascade.get("data_version") != ss.get("data_version"):
    cascade = None
try:
    queue = review_queue(table, result, order=order, random_state=int(params["random_state"]),
                         question_types=pick_types or None, models=pick_models or None,
                         cascade_stage=cascade_stage_for(cascade, table))
except PUAuditError as exc:
    audit_runs.show_error(exc)
    st.stop()
n_cascade = int((queue["tier"] == CASCADE_TIER).sum())
if n_cascade and order == "value":
    by = (f"The cascade {' → '.join(md(j) for j in cascade['judges'])} (Audit page)" if cascade
          else "The table's cascade (`puaudit_cascade_stage`)")
    st.caption(f"{by} left {n_cascade:,} row(s) without a human verdict for people: no judge "
               f"is trusted on them, so they come first (tier “{CASCADE_TIER}”).")
todo = pending_queue(queue, seen, name)
counts = progress_counts(seen, len(todo), name)
c = st.columns(5)
c[0].metric("Left in your queue", f"{counts['n_left']:,}")
c[1].metric("Your decisions", f"{counts['n_mine']:,}")
c[2].metric("Decisions on this table", f"{counts['n_decisions']:,}")
c[3].metric("Reviewers", counts["n_reviewers"])
c[4].metric("Rows where reviewers disagree", counts["n_disagreements"])


def _decide(verdict: str, view: dict, who: str, shown: str) -> None:
    try:
        rec = decision_record(view, verdict, who, ss.get("w_review_note", ""),
                              state.audit_config(params).to_dict(), ss.get("source_name", ""),
                              shown=shown)
    except PUAuditError as exc:
        ss["review_flash"] = ("error", str(exc))
        return
    rec["uid"] = uuid.uuid4().hex  # set now: a retry after a failure never saves it twice
    rec["created_at"] = datetime.now(timezone.utc)
    try:
        get_store().add(**rec)
        ss["review_flash"] = ("success", f"Saved: {verdict} on row {view['row']} by {shown}.")
    except PUAuditError as exc:
        ss["review_pending"].append(rec)
        ss["review_flash"] = ("error", f"{exc} The decision is kept in this session and saved "
                                       "as soon as the database accepts it.")
    ss["w_review_note"] = ""


if todo.empty:
    st.success(empty_queue_text(result, queue, filtered=bool(pick_types or pick_models)))
else:
    labels = {int(r.row): f"#{r.rank} · row {r.row} · {r.tier} · P(judge right) "
                          f"{r.p_judge_right:.2f} · {r.question_type}"
                          + (f" · {r.others} other vote(s)" if r.others else "")
              for r in todo.head(200).itertuples()}
    row = st.selectbox("Row to review (the queue's first by default)", list(labels),
                       format_func=lambda r: labels[r], key="w_review_row")
    view = row_view(table, result, int(row))
    meta = " · ".join(x for x in (view["question_type"],
                                  f"{view['model_a']} vs {view['model_b']}"
                                  if view["model_a"] else "") if x)
    st.markdown(f"**Prompt** ({md(meta)})")  # data: text, never Markdown
    st.text(view["prompt"])
    a, b = st.columns(2)
    with a:
        st.markdown("**Response A**")
        st.text(view["response_a"])
    with b:
        st.markdown("**Response B**")
        st.text(view["response_b"])
    with st.expander("What the judge and the audit said"):
        st.write(f"Judge: {md(view['judge'])} · audit group: {md(view['group'])} · "
                 f"P(judge right) {view['p_judge_right']:.2f} · adjusted verdict: "
                 f"{md(view['adjusted'] or '—')}")
    st.text_input("Note (optional)", key="w_review_note", max_chars=2000)
    if not name and how == "typed":
        st.info("Enter your name above to record decisions.")
    cols = st.columns(len(VERDICT_BUTTONS))
    for col, (verdict, label) in zip(cols, VERDICT_BUTTONS):
        col.button(label, key=f"review_{verdict}", on_click=_decide,
                   args=(verdict, view, name, shown), disabled=not name or read_only,
                   type="primary" if verdict in ("A", "B") else "secondary",
                   width="stretch", shortcut=VERDICT_SHORTCUTS[verdict])

# -- decisions flow back -------------------------------------------------------------------------
st.subheader("Use the decisions in the audit")
votes = latest_votes(decisions)
merged = table is not base


def _apply() -> None:
    try:
        ss["table"] = merge_decisions(base, get_store().decisions(keys))
    except PUAuditError as exc:
        ss["review_flash"] = ("error", str(exc))


def _unapply() -> None:
    ss["table"] = base


if merged:
    st.info(f"The audit now counts {table.extra.get('review_n_votes', 0)} review vote(s) as human "
            f"labels (annotator = reviewer): {int((result.split == 'P').sum()):,} verified rows "
            f"in P, {int((result.split == 'validation').sum()):,} validation rows. The Audit, "
            "Annotators and Export pages use them.")
else:
    st.caption(f"{len(votes):,} review vote(s) (A, B or tie; the latest per reviewer and row) can "
               "become human labels; the audit then reruns with a larger P.")
b1, b2 = st.columns(2)
b1.button(f"Rerun the audit with the review votes ({len(votes):,})", on_click=_apply,
          disabled=len(votes) == 0, key="review_apply")
b2.button("Back to the file's own labels", on_click=_unapply, disabled=not merged,
          key="review_unapply")

dis = disagreements_frame(decisions, table)
if len(dis):
    st.subheader("Reviewers disagree")
    st.dataframe(dis, hide_index=True, width="stretch")

st.subheader("Decisions on this table")
st.dataframe(decision_log(decisions, table), hide_index=True, width="stretch", height=240)
name_src = ss.get("source_name") or "table"
stem = "demo" if name_src == state.DEMO_NAME else (Path(name_src).name.split(".")[0] or "table")
st.download_button("Download the audited table with review columns (CSV)",
                   table_to_bytes(export_frame(result, table, decisions), "csv"),
                   file_name=f"{stem}_puaudit_review.csv", mime="text/csv",
                   key="review_download", on_click="ignore")
where = store.location if store is not None else default_url().removeprefix("sqlite:///")
st.caption(f"Database: {md(where)}. Every input row and column, the puaudit_* columns, "
           "and puaudit_review_* (consensus, every vote, disagreement, notes). "
           "`puaudit review export` writes the decisions themselves.")
