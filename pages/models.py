"""Models: the leaderboard four ways (judge, audited, human, prediction-powered) with intervals."""

from __future__ import annotations

import streamlit as st

from components import page_data, state
from puaudit.report.figures.rankings import (HEATMAP_MODELS, SHORT_LABELS, STAT_LABELS,
                                             interval_figure, rank_figure, rank_table, shown_note,
                                             style_rank_table, win_probability_caption,
                                             win_probability_figure)
from puaudit.errors import PUAuditError
from puaudit.data.writers import table_to_bytes
from puaudit.rankings.result import SOURCE_LABELS
from puaudit.rankings.estimate import table_models
from puaudit.rankings.leaderboard_limits import TOP_MODELS
from puaudit.data.safety import spreadsheet_safe

state.through_navigation()
st.title("Models")
st.caption("Would the judge's leaderboard survive a human check? Win rates against the field and "
           "Bradley–Terry strengths with 95% intervals, from the judge's verdicts, the audited "
           "verdicts, the human votes alone, and prediction-powered estimates (PPI++) that "
           "correct the judge with the human votes.")

state.ensure_data()
# Messages that may quote the data are shown with st.text (never as Markdown).
table = st.session_state.get("table")
if table is None:
    st.error("No table to rank: fix the column mapping on the Data page.")
    st.text(st.session_state.get("table_error", "No table loaded."))
    st.stop()
try:
    table_models(table)
except PUAuditError as exc:  # a fixed message (no data in it)
    st.error(str(exc))
    st.stop()

with st.sidebar:
    st.subheader("Leaderboard")
    ties = st.radio("Ties", ["half", "exclude"], horizontal=True, key="models_ties",
                    format_func=lambda t: {"half": "half a win", "exclude": "left out"}[t],
                    help="A tie counts half a win for each side, or is not a comparison at all.")
    length_control = st.checkbox("Length-controlled win rate", value=False, key="models_lc",
                                 help="AlpacaEval-style: a Bradley–Terry model with the length "
                                      "difference as a covariate, read at equal lengths.")
    with_audit = st.checkbox("Include the audited verdicts", value=True, key="models_audited",
                             help="Runs (or reuses) the audit with the Audit page's settings.")
    n_resamples = st.select_slider("Bootstrap draws", [200, 500, 1000, 2000], value=500,
                                   key="models_draws")
    seed = st.number_input("Seed", min_value=0, value=0, step=1, key="models_seed")
    top = st.number_input("Models shown", min_value=1, max_value=500, value=TOP_MODELS, step=10,
                          key="models_top",
                          help="Tables and figures show the first N models of the leaderboard; "
                               "the CSV download has all of them.")

audited = None
if with_audit:
    try:
        audited = page_data.audited_verdicts(table)
    except PUAuditError as exc:  # e.g. too few human labels: rank without the audited source
        st.warning("The audit could not run on this table, so the audited columns stay empty:")
        st.text(str(exc))

try:
    rankings = page_data.model_rankings(table, audited, ties=ties, length_control=length_control,
                                        n_resamples=int(n_resamples), random_state=int(seed))
except PUAuditError as exc:
    st.error("The leaderboard could not be computed:")
    st.text(str(exc))
    st.stop()
diag = rankings.diagnostics

c1, c2, c3, c4 = st.columns(4)
c1.metric("Models", diag["n_models"])
c2.metric("Comparisons", f"{diag['n_rows_used']:,}",
          help=f"{diag['n_rows_dropped']} row(s) without two distinct model names left out")
c3.metric("Items with human votes", f"{diag.get('n_units_labelled', 0):,}")
c4.metric("Items with the judge only", f"{diag.get('n_units_unlabelled', 0):,}")
for note in rankings.notes + [rankings.top_note(int(top))]:
    if note:
        st.info(note)

st.subheader("Rankings side by side")
statistic = st.radio("Value shown", ["winrate", "bt"] + (["lc_winrate"] if length_control else []),
                     format_func=STAT_LABELS.get, horizontal=True)
st.dataframe(style_rank_table(rank_table(rankings, statistic=statistic, top=int(top))),
             hide_index=True)
st.caption("Ranks by Bradley–Terry strength (1 = strongest). '… vs judge': places gained (+) or "
           "lost (−) against the judge's ranking. 'Judge vs people': the judge's value lies "
           "outside the prediction-powered interval.")
dis = rankings.disagreements(statistic=statistic) if "ppi" in rankings.available() else None
if dis is not None:
    dis = dis[dis["model"].isin(set(rankings.frame["model"].head(int(top))))]
if dis is not None and len(dis):
    st.write(f"Where the judge and people disagree ({len(dis)} model(s)):")
    st.dataframe(dis.round(3), hide_index=True)

st.plotly_chart(interval_figure(rankings, statistic=statistic, top=int(top)))
st.plotly_chart(rank_figure(rankings, top=int(top)))
st.caption(f"Each line is one model, named with its rank at both ends; bold lines move away "
           f"from the judge's rank. Shown: {shown_note(rankings, int(top))} (set 'Models shown' "
           f"in the sidebar).")

st.subheader("Pairwise win probabilities")
avail = rankings.available()
left, right = st.columns([2, 1])
source = left.selectbox("Source", avail, index=avail.index("ppi") if "ppi" in avail else 0,
                        format_func=lambda s: SOURCE_LABELS[s])
n_models = len(rankings.frame)
heat_n = right.number_input("Models in the heatmap", min_value=1, max_value=n_models,
                            value=min(HEATMAP_MODELS, n_models), step=5, key="models_heat_n",
                            help="The first N models of the leaderboard; the heatmap grows "
                                 "with the square of N.")
st.plotly_chart(win_probability_figure(rankings, source=source, max_models=int(heat_n)))
st.caption(win_probability_caption(rankings, source=source, max_models=int(heat_n)))

st.download_button("Download the leaderboard (CSV)",
                   table_to_bytes(spreadsheet_safe(rankings.frame), "csv"),
                   file_name="model_rankings.csv", mime="text/csv")
with st.expander("How these are computed"):
    lam = {k[7:]: v for k, v in diag.items() if k.startswith("lambda_")}
    st.text("\n".join([
        "Win rate = (wins + 1/2 ties) / comparisons over the rows where the model appears "
        "(ties left out on request); each human vote is one comparison.",
        "Intervals: percentile bootstrap over items (votes on one item are drawn together); "
        "PPI: the prediction-powered bootstrap (ppi-python's ppboot) with the PPI++ weight "
        "lambda estimated from the data: " + (", ".join(f"{k} {v:.2f}" for k, v in lam.items())
                                              or "n/a") + ".",
        "PPI is valid whatever the judge's bias if the items people labelled are a uniform "
        "random sample; a selective choice of items voids that guarantee.",
        f"Sources: {', '.join(SHORT_LABELS[s] + ' = ' + SOURCE_LABELS[s] for s in avail)}.",
    ]))
