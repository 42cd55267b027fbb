"""PUAudit dashboard: `streamlit run app.py` (opens on generated demo data; upload your own on
the Data page). Pages live in pages/, plot builders in components/, computation in puaudit/."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from components import encoder_state, page_icon, state
from components.shutdown import exit_cleanly_at_shutdown

ROOT = Path(__file__).resolve().parent

st.set_page_config(page_title="PUAudit", page_icon=page_icon.favicon(), layout="wide")
exit_cleanly_at_shutdown()  # SIGTERM mid-audit: exit 0, not a C++ abort (components/shutdown.py)

encoder_state.start_umap_warmup()
encoder_state.start_encoder_warmup()
state.ensure_data()

audit_pages = [
    st.Page("pages/data.py", title="Data", icon=":material/table_view:", default=True),
    st.Page("pages/audit.py", title="Audit", icon=":material/balance:"),
    st.Page("pages/scores.py", title="Scores", icon=":material/insights:"),
    st.Page("pages/embedding_map.py", title="Embedding map", icon=":material/scatter_plot:"),
    st.Page("pages/question_types.py", title="Question types", icon=":material/radar:"),
    st.Page("pages/export.py", title="Export", icon=":material/download:"),
]
# Pages written alongside this one: listed only when present, so the app starts without them.
people_pages = [st.Page(f"pages/{name}.py", title=title, icon=icon)
                for name, title, icon in (("consistency", "Consistency", ":material/sync_alt:"),
                                          ("annotators", "Annotators", ":material/groups:"),
                                          ("models", "Models", ":material/leaderboard:"),
                                          ("review", "Review", ":material/rate_review:"))
                if (ROOT / "pages" / f"{name}.py").is_file()]

sections = {"PUAudit": audit_pages}
if people_pages:
    sections["Judges & people"] = people_pages

st.navigation(sections).run()
