"""Question types: Cons_orig vs Cons_adj per type, for one or more judge columns side by side."""

from __future__ import annotations


import streamlit as st


from components import state
from components.data_summary import judge_candidates
from puaudit.report.figures.radar import consistency_radar, radar_frame
from components.messages import for_dashboard
from components.safe_text import md
from puaudit.errors import PUAuditError
from puaudit.data.schema import ROLES, load_comparisons

state.through_navigation()
st.title("Question types")
st.caption("Consistency with people per question type, before (Cons_orig) and after (Cons_adj) "
           "the audit. With several judge columns — several judges, or one judge before and "
           "after a presentation attack such as padded answers — compare them side by side.")

table, emb, result, params = state.audit_view()
ss = st.session_state
frame = ss["raw_frame"]
candidates = judge_candidates(frame, ss["columns"]) or [table.judge_column]
picked = st.multiselect("Judge columns to audit", candidates, default=candidates[:2],
                        key=f"qt_judges_{ss['data_version']}",
                        help="Each column is audited with the same embeddings and settings.")
if not picked:
    st.info("Pick at least one judge column.")
    st.stop()

per_type = {}
for col in picked:
    try:
        if col == table.judge_column:
            res = result
        else:
            # Same texts, other verdicts: the embeddings are shared, only the audit reruns.
            cols = {**{r: None for r in ROLES}, **ss["columns"], "judge": col}
            memo = ss.setdefault("_qt_tables", {})
            key = (ss["data_version"], tuple(sorted(cols.items(), key=str)))
            if key not in memo:  # keep the table so its content hash is computed once
                for old in [k for k in memo if k[0] != ss["data_version"]]:
                    memo.pop(old)
                memo[key] = load_comparisons(frame, columns=cols)
            alt = memo[key]
            res = state.run_audit(alt, emb, params)
    except PUAuditError as exc:
        st.error(md(f"{col}: {for_dashboard(exc)}"))  # names and cells from the data: text, not Markdown
        continue
    per_type[col] = res.per_type

if per_type:
    st.plotly_chart(consistency_radar(per_type), width="stretch")
    st.dataframe(radar_frame(per_type), hide_index=True, width="stretch",
                 column_config={
                     "cons_orig_pct": st.column_config.NumberColumn("Cons_orig", format="%.1f%%"),
                     "cons_adj_pct": st.column_config.NumberColumn("Cons_adj", format="%.1f%%"),
                     "delta_pts": st.column_config.NumberColumn("change (pts)", format="%+.1f"),
                 })
