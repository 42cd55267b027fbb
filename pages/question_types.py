"""Question types: Cons_orig vs Cons_adj per type, for one or more judge columns side by side."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import audit_runs, state
from components.data_summary import judge_candidates
from puaudit.audit.metrics import TOP_TYPES, TYPE_RULE, measured_types
from puaudit.report.figures.metrics import type_table, type_text
from puaudit.report.figures.radar import consistency_radar
from components.safe_text import md
from puaudit.errors import DASHBOARD, PUAuditError
from puaudit.data.schema import ROLES, load_comparisons

state.through_navigation()
st.title("Question types")
st.caption("Consistency with people per question type, before (Cons_orig) and after (Cons_adj) "
           "the audit. With several judge columns — several judges, or one judge before and "
           "after a presentation attack such as padded answers — compare them side by side. "
           + TYPE_RULE)

table, emb, result, params = audit_runs.audit_view()
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
            res = audit_runs.run_audit(alt, emb, params)
    except PUAuditError as exc:
        st.error(md(f"{col}: {exc.advice(DASHBOARD)}"))  # names and cells from the data: text
        continue
    per_type[col] = res.per_type

if per_type:
    n_measured = max(len(measured_types(pt)) for pt in per_type.values())
    top = TOP_TYPES
    if n_measured > TOP_TYPES:  # 50 types: the labels would overlap
        top = int(st.number_input("Types on the radar", min_value=3, max_value=n_measured,
                                  value=TOP_TYPES, step=1, key="qt_top",
                                  help="The radar draws the types with the most validation "
                                       "rows; the table below has all of them."))
    drawn = {col: measured_types(pt, top=top) for col, pt in per_type.items()}
    n_drawn = max(len(d) for d in drawn.values())
    if n_drawn:
        st.plotly_chart(consistency_radar(drawn), width="stretch")
    st.caption(f"The radar draws {n_drawn} type(s) with at least the minimum of validation rows"
               + (f" (the {top} with the most rows of {n_measured})" if n_measured > top else "")
               + "; the table lists every type.")
    tables = []
    for col, pt in per_type.items():
        t = type_text(type_table(pt))
        t.insert(0, "judge column", col)
        tables.append(t)
    st.dataframe(pd.concat(tables, ignore_index=True), hide_index=True, width="stretch")
