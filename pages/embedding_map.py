"""Embedding map: the judge-oriented difference embeddings in 2-D, coloured by score."""

from __future__ import annotations

import streamlit as st

from components import audit_runs, encoder_state, page_data, state
from puaudit.report.figures.embedding_map import embedding_scatter
from components.safe_text import md
from puaudit.embed.projection import oriented_differences, umap_ready

state.through_navigation()
st.title("Embedding map")
st.caption("Each point is one comparison: the difference between the embeddings of the two "
           "responses, turned so the judge's choice points the same way. Stars are verified "
           "positives (P), diamonds validation rows, dots unlabelled rows.")

encoder_state.start_umap_warmup()
table, emb, result, params = audit_runs.audit_view()
key = f"{state.table_hash(table)}|{params['encoder']}|{params['random_state']}"


z = oriented_differences(emb.e_a, emb.e_b, table.judge)
method = st.radio("Layout", ["UMAP", "PCA"], horizontal=True,
                  help="PCA is instant. UMAP shows local neighbourhoods better; it is computed in "
                       "the background and replaces PCA when ready.")


def _draw():
    xy, shown = None, "pca"
    if method == "UMAP":
        if not umap_ready():
            st.info("UMAP is still compiling in the background (once per server start); showing "
                    "PCA meanwhile. This view updates by itself.")
        else:
            fut = audit_runs.umap_job(key, z, int(params["random_state"]))
            if fut.done() and fut.exception() is None:
                xy, shown = fut.result(), "umap"
            elif fut.done():
                st.warning(f"UMAP failed ({md(fut.exception())}); showing PCA.")
            else:
                st.info("Computing the UMAP layout in the background; showing PCA meanwhile.")
    if xy is None:
        xy = page_data.pca_layout(key, z)
    st.plotly_chart(embedding_scatter(xy, result, table, method=shown), width="stretch")
    if shown == "umap" and pending:
        st.rerun()  # the layout arrived during a timed fragment run: redraw once, stop polling


pending = method == "UMAP" and not (
    umap_ready() and audit_runs.umap_job(key, z, int(params["random_state"])).done())
st.fragment(_draw, run_every=2.0 if pending else None)()
