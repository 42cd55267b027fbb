"""Scores: where audited rows fall relative to the verified positives and the thresholds."""

from __future__ import annotations

import streamlit as st

from components import audit_runs, state
from components.safe_text import md
from puaudit.report.figures.scores import (nearest_threshold_rows, score_density,
                                           sorted_scores_figure)

state.through_navigation()
st.title("Scores")
st.caption("Each audited row's score says how well its judge-ordered difference embedding is "
           "matched by verified human preferences. Low scores are the reversal candidates.")

table, emb, result, params = audit_runs.audit_view()
_used = result.params.get("scorer_used", params["scorer"])
st.caption(f"Scorer **{params['scorer']}**" + (f" (chose **{_used}**)" if _used != params["scorer"]
                                               else "")
           + f", rule **{params['rule']}**, m = {result.m:.3f}.")

st.subheader("Score densities")
st.plotly_chart(score_density(result, table), width="stretch")

st.subheader("Rows sorted by score")
types = sorted(set(table.question_type.tolist()))
pick = st.selectbox("Question type", ["All types"] + types)
qtype = None if pick == "All types" else pick
st.plotly_chart(sorted_scores_figure(result, table, question_type=qtype), width="stretch")

st.subheader("Rows nearest each threshold")
near = nearest_threshold_rows(result, table, k=5)
if qtype is not None:
    near = near[near["question_type"] == qtype]
if near.empty:
    st.info("No finite threshold to show at these settings (nothing is reversed or kept by a "
            "score cut-off).")
    st.stop()
st.dataframe(near.drop(columns=["prompt", "response_a", "response_b"]), hide_index=True,
             width="stretch",
             column_config={**{c: st.column_config.NumberColumn(format="%.3f")
                               for c in near.columns if c.startswith("evidence: ")},
                            "score": st.column_config.NumberColumn(format="%.4f"),
                            "distance": st.column_config.NumberColumn(format="%+.4f"),
                            "p_judge_right": st.column_config.NumberColumn(format="%.2f")})
labels = [f"row {r.row} · {r.threshold} · score {r.score:.3f}" for r in near.itertuples()]
chosen = st.selectbox("Read a row", range(len(labels)), format_func=lambda i: labels[i])
row = near.iloc[chosen]
st.markdown(f"**Prompt** ({md(row['question_type'])})")  # data: shown as text, not Markdown
st.text(row["prompt"])
a, b = st.columns(2)
with a:
    st.markdown(f"**Response A**{' — judge' if row['judge'] == 'A' else ''}"
                f"{' — human' if row['human'] == 'A' else ''}")
    st.text(row["response_a"])
with b:
    st.markdown(f"**Response B**{' — judge' if row['judge'] == 'B' else ''}"
                f"{' — human' if row['human'] == 'B' else ''}")
    st.text(row["response_b"])
st.caption(f"Judge: {md(row['judge'])} · human: {md(row['human'] or '—')} · after the audit: "
           f"{md(row['adjusted'] or '—')} ({md(row['group'])}).")
