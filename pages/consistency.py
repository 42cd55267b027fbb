"""Consistency (TrustJudge): conflict ratio, non-transitivity, and a cycle inspector."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from components.consistency import (cycle_graph, metrics_bar_chart, metrics_table,  # noqa: E402
                                    question_violations, weakest_edges)
from components.safe_text import md  # noqa: E402
from components.uploads import read_upload  # noqa: E402
from puaudit.errors import PUAuditError  # noqa: E402
from puaudit.io import table_to_bytes  # noqa: E402
from puaudit.trustjudge import (KIND_LABELS, analyse, make_demo, read_pairwise,  # noqa: E402
                                read_scores)

FILE_TYPES = ["csv", "tsv", "parquet", "jsonl", "json", "gz"]
K = (3, 4, 5)

st.title("Consistency")
st.caption("Does the judge contradict itself? Conflict Ratio (single scores vs pairwise verdicts) "
           "and NTR_k (share of k-candidate sets whose verdicts admit no ranking), before and "
           "after likelihood-aware aggregation of both answer orders (TrustJudge).")


def _upload_table(data: bytes, name: str):
    """An uploaded table, read within the server's upload limits (as on the Data page)."""
    return read_upload(data, name, max_upload_mb=int(st.get_option("server.maxUploadSize")))


@st.cache_data(show_spinner=False)
def _pair_info(data: bytes | None, name: str) -> dict:
    df = read_pairwise(make_demo()[0] if data is None else _upload_table(data, name), name=name)
    return {"has_probabilities": df.attrs["has_probabilities"],
            "has_perplexity": df.attrs["has_perplexity"]}


@st.cache_data(show_spinner="Counting cycles…")
def _analyse(pair_data: bytes | None, pair_name: str, score_data: bytes | None, score_name: str,
             method: str, delta: float):
    # the demo brings its own scores; an uploaded table is scored only by an uploaded scores file
    pairs, scores = make_demo() if pair_data is None else (
        read_pairwise(_upload_table(pair_data, pair_name), name=pair_name), None)
    if score_data is not None:
        scores = read_scores(_upload_table(score_data, score_name), name=score_name)
    return analyse(pairs, scores, method=method, delta=delta, k=K)


with st.sidebar:
    st.subheader("Consistency")
    pair_file = st.file_uploader("Pairwise verdicts (both orders)", type=FILE_TYPES,
                                 key="consistency_pairs",
                                 help="Columns question_id, candidate_i, candidate_j, verdict_1 "
                                      "(i shown first), verdict_2 (j shown first); optional "
                                      "judge, category, p1_A … p2_tie, ppl_1, ppl_2, rationales.")
    score_file = st.file_uploader("Single scores (optional)", type=FILE_TYPES,
                                  key="consistency_scores",
                                  help="Columns question_id, candidate, and score or p_1 … p_K.")

pair_bytes = pair_file.getvalue() if pair_file is not None else None
pair_name = pair_file.name if pair_file is not None else "demo"
score_bytes = score_file.getvalue() if score_file is not None else None
score_name = score_file.name if score_file is not None else ""

# messages quote names and cells from the files: shown as text, never Markdown
try:
    info = _pair_info(pair_bytes, pair_name)
except PUAuditError as exc:
    st.error(md(exc))
    st.stop()

methods = ["baseline"]
if info["has_probabilities"]:
    methods.insert(0, "bidirectional")
if info["has_perplexity"]:
    methods.insert(1 if info["has_probabilities"] else 0, "ppl")
with st.sidebar:
    method = st.selectbox("Aggregation (after)", methods, key="consistency_method",
                          help="bidirectional: sum both orders' probabilities; ppl: trust the "
                               "order whose judgment has the lower perplexity; baseline: both "
                               "orders must agree, else tie.")
    delta = st.number_input("Tie tolerance δ", min_value=0.0, max_value=5.0, value=0.0, step=0.01,
                            key="consistency_delta",
                            help="Probability margin (bidirectional) or perplexity gap (ppl) "
                                 "under which a pair counts as a tie.")

if pair_bytes is None:
    st.info("Showing generated demo data (two judges, 24 questions, 6 candidates, both orders "
            "with probabilities). Upload a pairwise table in the sidebar to audit your own.")
elif method == "baseline":
    st.info("This table has no probabilities or perplexities, so only the baseline relation is "
            "available: before and after are the same.")

try:
    before = _analyse(pair_bytes, pair_name, score_bytes, score_name, "baseline", 0.0)
    after = _analyse(pair_bytes, pair_name, score_bytes, score_name, method, float(delta))
except PUAuditError as exc:
    st.error(md(exc))
    st.stop()


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


cols = st.columns(1 + len(K))
cols[0].metric("Conflict Ratio", _pct(after.cr),
               None if after.cr is None or before.cr is None else f"{100 * (after.cr - before.cr):+.1f} pts",
               delta_color="inverse", help="Before: baseline; after: the chosen aggregation.")
for col, k in zip(cols[1:], K):
    a, b = after.ntr[k], before.ntr[k]
    col.metric(f"NTR_{k}", _pct(a), None if a is None or b is None else f"{100 * (a - b):+.1f} pts",
               delta_color="inverse")
st.caption("Violating triples after aggregation: "
           + ", ".join(f"{KIND_LABELS[kind]} {n}" for kind, n in after.triples.items())
           + f" (before: {', '.join(str(n) for n in before.triples.values())}).")

tab_judge, tab_type = st.tabs(["Per judge", "Per question type"])
with tab_judge:
    st.plotly_chart(metrics_bar_chart(metrics_table(before, after, by="judge"), by="judge"),
                    width="stretch")
with tab_type:
    st.plotly_chart(metrics_bar_chart(metrics_table(before, after, by="type"), by="type"),
                    width="stretch")

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
