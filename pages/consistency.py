"""Consistency (TrustJudge): conflict ratio, non-transitivity, and a cycle inspector."""

from __future__ import annotations

import streamlit as st

from components import audit_runs, page_data, state
from puaudit.report.figures.consistency import (candidate_scores, cycle_graph, default_score_method,
                                                method_options, metrics_bar_chart, metrics_table,
                                                question_violations, score_options,
                                                unavailable_metrics, weakest_edges)
from components.safe_text import md, md_label
from components.state import DEMO_NAME
from puaudit.errors import PUAuditError
from puaudit.percents import percent, points_between
from puaudit.data.writers import table_to_bytes
from puaudit.trustjudge import KIND_LABELS

FILE_TYPES = ["csv", "tsv", "parquet", "jsonl", "json", "gz"]
K = page_data.CONSISTENCY_K

state.through_navigation()
st.title("Consistency")
st.caption("Does the judge contradict itself? Conflict Ratio (single scores vs pairwise verdicts) "
           "and NTR_k (share of k-candidate sets whose verdicts admit no ranking), before and "
           "after likelihood-aware aggregation of both answer orders (TrustJudge).")


with st.sidebar:
    st.subheader("Consistency")
    pair_file = st.file_uploader("Pairwise verdicts (both orders)", type=FILE_TYPES,
                                 key="consistency_pairs",
                                 help="Columns question_id, candidate_i, candidate_j, verdict_1 "
                                      "(i shown first), verdict_2 (j shown first); optional "
                                      "judge, category, p1_A … p2_tie, ppl_1, ppl_2 (or "
                                      "token_logprobs_1, token_logprobs_2), rationales. "
                                      "Without an upload the Data page's table is used when it "
                                      "has these columns.")
    score_file = st.file_uploader("Single scores (optional)", type=FILE_TYPES,
                                  key="consistency_scores",
                                  help="Columns question_id, candidate, and score or p_1 … p_K.")

score_bytes = score_file.getvalue() if score_file is not None else None
score_name = score_file.name if score_file is not None else ""

# The Data page's table, when it reads as a pairwise table (e.g. the output of puaudit judge).
data_key, data_pairs, data_reason, data_name = page_data.data_page_pairs()

# messages quote names and cells from the files: shown as text, never Markdown
if pair_file is not None:
    source = ("upload", pair_file.getvalue(), pair_file.name)
    label = f"uploaded file {pair_file.name}"
else:
    options = (["data"] if data_pairs is not None else []) + ["demo"]
    # the generated audit demo has one order and no probabilities: the TrustJudge demo shows more
    prefer_data = data_pairs is not None and data_name != DEMO_NAME
    choice = "demo"
    if len(options) > 1:
        with st.sidebar:
            choice = st.radio("Pairwise table", options, index=0 if prefer_data else 1,
                              key="consistency_source",
                              format_func=lambda o: (f"Data page: {md_label(data_name)}"
                                                     if o == "data" else "Generated TrustJudge demo"))
    source = ("data", data_key) if choice == "data" else ("demo",)
    label = f"Data page: {data_name}" if choice == "data" else "generated TrustJudge demo"

try:
    pairs = data_pairs if source[0] == "data" else page_data.consistency_pairs(source)
    scores_in = page_data.consistency_scores(source, score_bytes, score_name)
except PUAuditError as exc:
    audit_runs.show_error(exc)
    st.stop()

has_scores = scores_in is not None
has_dist = bool(has_scores and scores_in.attrs.get("has_distribution"))
methods = method_options(has_probabilities=pairs.attrs["has_probabilities"],
                         has_perplexity=pairs.attrs["has_perplexity"])
with st.sidebar:
    method = st.selectbox("Aggregation (after)", methods, key="consistency_method",
                          help="bidirectional: sum both orders' probabilities; weighted: average "
                               "both orders, each weighted by exp(−γ·PPL) of its judgment; ppl: "
                               "trust the order whose judgment has the lower perplexity; "
                               "baseline: both orders must agree, else tie.")
    delta = st.number_input("Tie tolerance δ", min_value=0.0, max_value=5.0, value=0.0, step=0.01,
                            key="consistency_delta",
                            help="Probability margin (bidirectional, weighted) or perplexity gap "
                                 "(ppl) under which a pair counts as a tie.")
    gamma = 1.0
    if method == "weighted":
        gamma = st.number_input("Confidence γ", min_value=0.0, max_value=100.0, value=1.0,
                                step=0.1, key="consistency_gamma",
                                help="Each order weighs exp(−γ·PPL): 0 averages both orders, a "
                                     "large γ trusts the less perplexed one.")
    score_method, rescale, tol = None, None, 0.0
    if has_scores:
        rules = score_options(has_dist)
        score_method = st.selectbox(
            "Score rule (after)", rules, index=rules.index(default_score_method(method, has_dist)),
            key="consistency_score_method",
            help="distribution: Σ s·p(s)/Σ p (TrustJudge); geval: Σ s·p(s); baseline: the score "
                 "given, or the most likely token. Before always uses baseline.")
        if score_method == "distribution" and st.checkbox(
                "Rescale distribution scores", key="consistency_rescale",
                help="Map the judge's fine scale (e.g. 1–100) linearly onto another range; the "
                     "score tolerance is then in those units."):
            lo_col, hi_col = st.columns(2)
            lo = lo_col.number_input("to low", value=1.0, step=1.0, key="consistency_rescale_lo")
            hi = hi_col.number_input("to high", value=5.0, step=1.0, key="consistency_rescale_hi")
            if hi > lo:
                rescale = (float(lo), float(hi))
            else:
                st.warning("The high end must exceed the low end; not rescaled.")
        tol = st.number_input("Score tolerance", min_value=0.0, max_value=100.0, value=0.0,
                              step=0.05, key="consistency_tol",
                              help="Scores this close count as equal in the Conflict Ratio.")

st.caption(f"Pairwise table: {md(label)} · {len(pairs):,} pairs"
           + (f" · scores: {md(score_name or 'generated demo')}" if has_scores else " · no scores"))
if source[0] == "demo":
    st.info("Showing generated demo data (two judges, 24 questions, 6 candidates, both orders "
            "with probabilities). Upload a pairwise table in the sidebar, or load one on the Data "
            "page (for example the output of puaudit judge), to audit your own.")
elif methods == ["baseline"]:
    st.info("This table has no probabilities or perplexities, so only the baseline relation is "
            "available: before and after are the same.")
if data_reason and source[0] != "data" and data_name != DEMO_NAME:
    st.caption("The Data page's table is not used here: " + md(data_reason))
if pairs.attrs.get("ppl_from_logprobs"):
    st.caption("Perplexities computed from the judge's token log-probabilities.")

try:
    before = page_data.consistency_analysis(source, pairs, score_bytes, score_name,
                                            method="baseline", delta=0.0, gamma=1.0,
                                            score_method="baseline", rescale=None, tol=tol)
    after = page_data.consistency_analysis(source, pairs, score_bytes, score_name, method=method,
                                           delta=delta, gamma=gamma, score_method=score_method,
                                           rescale=rescale, tol=tol)
except PUAuditError as exc:
    audit_runs.show_error(exc)
    st.stop()


cols = st.columns(1 + len(K))
cols[0].metric("Conflict Ratio", percent(after.cr), points_between(before.cr, after.cr),
               delta_color="inverse", help="Before: baseline relation and scores; after: the "
                                           "chosen aggregation and score rule.")
for col, k in zip(cols[1:], K):
    col.metric(f"NTR_{k}", percent(after.ntr[k]), points_between(before.ntr[k], after.ntr[k]),
               delta_color="inverse")
missing = unavailable_metrics(after, pairs, has_scores=has_scores)
if missing:  # say why each n/a is one, and what input would fill it
    st.info("\n".join(f"* **{name}**: {why}" for name, why in missing.items()))
st.caption("Violating triples after aggregation: "
           + ", ".join(f"{KIND_LABELS[kind]} {n}" for kind, n in after.triples.items())
           + f" (before: {', '.join(str(n) for n in before.triples.values())}).")

tab_judge, tab_type = st.tabs(["Per judge", "Per question type"])
for tab, by in ((tab_judge, "judge"), (tab_type, "type")):
    with tab:
        table_by = metrics_table(before, after, by=by)
        if table_by["value"].notna().any():
            st.plotly_chart(metrics_bar_chart(table_by, by=by), width="stretch")
        else:  # an empty chart says nothing: the note above says why every metric is n/a
            st.caption("No metric is defined on this table, so there is nothing to chart "
                       "(see the note above).")
if has_scores:
    with st.expander(f"Single scores: {before.score_method} before, {after.score_method} after"
                     + (f", rescaled to {rescale[0]:g}–{rescale[1]:g}" if rescale else "")):
        st.dataframe(candidate_scores(before, after), hide_index=True, width="stretch")

st.subheader("Cycle inspector")
view = st.radio("Relations", [f"after ({after.method})", "before (baseline)"], horizontal=True,
                key="consistency_view")
rep = after if view.startswith("after") else before
judges = sorted(rep.per_question["judge"].unique())
judge = st.selectbox("Judge", judges, key="consistency_judge")
pq = rep.per_question[rep.per_question["judge"] == judge].copy()
pq["n_bad"] = pq[list(KIND_LABELS)].sum(axis=1)
pq = pq.sort_values(["n_bad", "question_id"], ascending=[False, True])
labels = {q: f"{q} · {c} · {n} violating triple(s)"
          for q, c, n in zip(pq["question_id"], pq["category"], pq["n_bad"])}
question = st.selectbox("Question (most violations first)", list(labels), format_func=labels.get,
                        key="consistency_question")
st.plotly_chart(cycle_graph(rep.relations, rep.violations, judge=judge, question_id=question,
                            rankings=rep.rankings), width="stretch")
triples = question_violations(rep.violations, judge=judge, question_id=question)
if triples.empty:
    st.success("No violating triple for this question: its verdicts admit a ranking.")
else:
    st.dataframe(triples, hide_index=True, width="stretch")
    worst = weakest_edges(rep.violations, judge=judge, question_id=question).iloc[0]
    st.markdown(f"**Suggested weakest edge:** {md(worst['edge'])} — in {worst['n_triples']} "
                f"violating triple(s), probability margin {worst['margin']:.2f}. Reversing it "
                "breaks those cycles: the likeliest judge error to send to a person.")

st.subheader("Export")
c1, c2 = st.columns(2)
c1.download_button(f"Violations after ({after.method}), CSV",
                   table_to_bytes(after.violations, "csv"),
                   file_name=f"trustjudge_violations_{after.method}.csv", mime="text/csv")
c2.download_button("Violations before (baseline), CSV", table_to_bytes(before.violations, "csv"),
                   file_name="trustjudge_violations_baseline.csv", mime="text/csv")
