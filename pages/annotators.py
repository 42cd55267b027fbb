"""Annotators: every person's (and the LLM judge's) reliability, biases and disagreements."""

from __future__ import annotations

import numpy as np
import streamlit as st

from components import audit_runs, page_data, state
from puaudit.report.figures.annotators import (METRIC_LABELS, agreement_figure, annotator_table,
                                               bias_scatter, disagreements_table,
                                               no_annotator_note)
from components.safe_text import md, md_label
from puaudit.report.figures.annotator_models import (STAT_LABELS, confusion_figure,
                                                     consensus_changes, consensus_summary,
                                                     model_table, skill_figure)
from puaudit.annotators import MODEL_NAMES, MODELS
from puaudit.errors import PUAuditError
from puaudit.report.parts import JUDGE_NAME
from puaudit.data.writers import table_to_bytes
from puaudit.data.schema import COLUMN_ALIASES, load_comparisons


state.through_navigation()
st.title("Annotators")
st.caption("Each person who voted, and the LLM judge as one more annotator: agreement, position "
           "and length biases with 95% intervals, and flags when someone stands clearly apart.")


def _load_table():
    """The app's table, else an upload, else the demo; returns (table or None, source text)."""
    table = st.session_state.get("table")
    if table is not None:
        return table, "the table loaded on the Data page"
    upload = st.file_uploader("Comparison table with an annotator column",
                              type=["csv", "tsv", "parquet", "jsonl", "json", "gz"])
    if upload is not None:
        return page_data.read_page_upload(upload.getvalue(), upload.name), upload.name
    demo = page_data.annotator_demo_frame()
    return demo, "" if demo is None else "the demo data (upload a file to replace it)"


# Names, ids, labels and messages quoting cells are data: shown as text, never Markdown.
try:
    source, source_name = _load_table()
except PUAuditError as exc:
    audit_runs.show_error(exc)
    st.stop()
if source is None:
    st.info("Load a table on the Data page or upload one here.")
    st.stop()
st.caption(f"Data: {md(source_name)}.")

frame = source if not hasattr(source, "frame") else source.frame
with st.sidebar:
    st.subheader("Annotator audit")
    detected = getattr(source, "columns", {}).get("annotator") if hasattr(source, "frame") else None
    options = ["(auto-detect)"] + [str(c) for c in frame.columns]
    ann_col = st.selectbox("Annotator column", options,
                           index=options.index(detected) if detected in options else 0)
    min_votes = st.number_input("Strict votes needed to be flagged", min_value=1, value=30)
    judge_in_alpha = st.checkbox("Count the judge in Krippendorff's alpha", value=False)
    with st.expander("Flag margins"):
        peer_margin = st.number_input("Peer agreement margin", 0.0, 1.0, 0.05, 0.01)
        judge_margin = st.number_input("Judge agreement margin", 0.0, 1.0, 0.05, 0.01)
        position_margin = st.number_input("Position margin around 0.5", 0.0, 0.5, 0.05, 0.01)
        length_margin = st.number_input("Length margin above the median", 0.0, 1.0, 0.05, 0.01)

try:
    if hasattr(source, "frame"):
        table = source
        if ann_col != "(auto-detect)" and ann_col != detected:
            table = load_comparisons(frame, columns={**source.columns, "annotator": ann_col})
    else:
        cols = {} if ann_col == "(auto-detect)" else {"annotator": ann_col}
        table = load_comparisons(frame, columns=cols)
    if table.annotator is None:  # an optional column: a note on where to map it, not an error
        st.info(no_annotator_note(from_data_page=hasattr(source, "frame")))
        st.stop()
    params = dict(min_votes_flag=int(min_votes), judge_in_alpha=judge_in_alpha,
                  peer_margin=peer_margin, judge_margin=judge_margin,
                  position_margin=position_margin, length_margin=length_margin)
    report = page_data.annotator_report_for(table, judge_name=JUDGE_NAME, **params)
except PUAuditError as exc:
    audit_runs.show_error(exc)
    st.caption("Annotator column names looked for: " + ", ".join(COLUMN_ALIASES["annotator"]))
    st.stop()

ov = report.overall
c1, c2, c3, c4 = st.columns(4)
c1.metric("Annotators", ov["n_annotators"])
c2.metric("Items with 2+ votes", ov["n_items_multi"])
alpha = ov["krippendorff_alpha"]
c3.metric("Krippendorff's alpha", "n/a" if alpha != alpha else f"{alpha:.3f}",
          help=("nominal; people " + ("and the judge" if ov["alpha_includes_judge"] else "only")
                + f"; {ov['n_items_alpha']} items"))
c4.metric("Flagged", ov["n_flagged"])

st.subheader("Annotator table")
st.dataframe(annotator_table(report), hide_index=True)
st.download_button("Download the annotator report (CSV)", table_to_bytes(report.to_frame(), "csv"),
                   file_name="annotator_report.csv", mime="text/csv")

st.subheader("Agreement per annotator")
metric = st.radio("Statistic", ["agree_peers", "agree_judge"], horizontal=True,
                  format_func=lambda m: METRIC_LABELS[m])
min_n = st.slider("Hide annotators with fewer strict votes than", 0, 100, 0)
st.plotly_chart(agreement_figure(report, metric=metric, min_n=min_n,
                                 median=ov.get(f"median_{metric}")))

st.subheader("Position and length biases")
st.plotly_chart(bias_scatter(report, min_n=min_n))

# -- the latent-truth model: reliability from a model of the truth, not raw agreement ---------
st.subheader("Latent-truth model")
st.caption("Dawid-Skene, MACE or CROWDLAB estimate each annotator's reliability and each item's "
           "truth together, so a careless voter stops counting like a careful one. Skill, biases "
           "and confusion matrices are read off the model's truth, with 95% intervals from a "
           "bootstrap over items (the model refitted each time).")
m1, m2, m3 = st.columns(3)
model_choices = list(MODELS) if hasattr(source, "frame") else ["ds", "mace"]
model_name = m1.selectbox("Model", model_choices, format_func=lambda m: MODEL_NAMES[m],
                          help="CROWDLAB also uses the audit's probabilities (runs the audit of "
                               "the loaded table).")
judge_in_model = m2.checkbox("The judge votes in the model", value=False,
                             help="Off: the truth comes from people only and the judge is "
                                  "measured against it like an outsider.")
n_boot = int(m3.number_input("Bootstrap refits", min_value=0, max_value=1000, value=100,
                             step=50))
with st.sidebar.expander("Latent-truth model flags"):
    skill_bar = st.number_input("Low skill: skill interval below", 0.5, 1.0, 0.8, 0.05,
                                help="Flagged 'spammer' when the interval also holds chance "
                                     "(0.5), 'low skill' otherwise.")
    model_pos_margin = st.number_input("Position bias margin around 0.5", 0.0, 0.5, 0.1, 0.01)
    model_len_margin = st.number_input("Length bias margin above 0.5", 0.0, 0.5, 0.1, 0.01)
p_right = None
if model_name == "crowdlab":
    audited_table, _, audit_result, _ = audit_runs.audit_view()
    p_right = audit_result.p_judge_right
    if len(p_right) != len(table) or audited_table is not source:
        p_right = np.full(0, np.nan)  # a different table: reported below, the page goes on
mparams = dict(model=model_name, include_judge=judge_in_model, n_boot=n_boot,
               min_votes_flag=int(min_votes), skill_bar=skill_bar,
               position_margin=model_pos_margin, length_margin=model_len_margin)
try:
    if p_right is not None and len(p_right) != len(table):
        raise PUAuditError("CROWDLAB weighs the votes against the audit of the table loaded "
                           "on the Data page; load this table there to use it.")
    with st.spinner(f"Fitting {MODEL_NAMES[model_name]} and {n_boot} bootstrap refits..."):
        mreport = page_data.annotator_model_for(table, judge_name=JUDGE_NAME,
                                                p_judge_right=p_right, **mparams)
except PUAuditError as exc:  # e.g. every item has one vote: nothing to fit, not a failure
    st.info(md(exc))
    mreport = None
if mreport is not None:
    mov = mreport.overall
    k1, k2, k3, k4 = st.columns(4)
    fk = mov["fleiss_kappa"]
    k1.metric("Fleiss' kappa", "n/a" if fk != fk else f"{fk:.3f}",
              help=f"people's votes on the {mov['fleiss_items']} items with exactly "
                   f"{mov['fleiss_votes_per_item']} votes")
    k2.metric("Consensus differs from majority", mov["n_consensus_differs_majority"],
              help=f"of {mov['n_items']} items")
    agree_m, agree_v = mov["consensus_agree_judge_common"], mov["majority_agree_judge_common"]
    k3.metric("Consensus agrees with the judge",
              "n/a" if agree_m != agree_m else f"{agree_m:.3f}",
              delta=None if agree_m != agree_m or agree_v != agree_v
              else f"{agree_m - agree_v:+.3f} vs majority",
              help=f"over the {mov['n_judge_common']} items where both consensuses and the judge "
                   "are strict" + (" (the judge votes in the model)" if judge_in_model else ""))
    k4.metric("Flagged by the model", mov["n_model_flagged"])
    stat = st.radio("Model statistic", list(STAT_LABELS), horizontal=True,
                    format_func=lambda k: STAT_LABELS[k].split(":")[0])
    st.plotly_chart(skill_figure(mreport, stat=stat, min_n=min_n))
    st.dataframe(model_table(mreport), hide_index=True)
    st.download_button("Download the model report (CSV)",
                       table_to_bytes(mreport.to_frame(), "csv"),
                       file_name=f"annotator_model_{model_name}.csv", mime="text/csv")
    mnames = mreport.annotators["annotator"].astype(str).tolist()
    mwho = st.selectbox("Confusion matrix of", mnames, index=0)
    for reason in mreport.annotators.loc[
            mreport.annotators["annotator"].astype(str) == mwho, "model_flags"].iloc[0]:
        st.warning(md(reason))
    st.plotly_chart(confusion_figure(mreport, mwho))
    st.markdown("**Consensus: majority vote against the model**")
    st.dataframe(consensus_summary(mreport), hide_index=True)
    changes = consensus_changes(mreport, table)
    st.caption(f"{len(changes)} item(s) where the model's consensus differs from majority vote "
               "(labels in the A/B order of the item's first row).")
    st.dataframe(changes, hide_index=True)

st.subheader("Disagreements with the judge")
names = report.annotators["annotator"].astype(str).tolist()
who = st.selectbox("Annotator", names, index=1 if len(names) > 1 else 0)
flags = report.annotators.loc[report.annotators["annotator"].astype(str) == who, "flags"].iloc[0]
for reason in flags:
    st.warning(md(reason))
dis = disagreements_table(table, who, judge_name=JUDGE_NAME)
st.markdown(f"{len(dis)} row(s) where {'the people' if who == JUDGE_NAME else md(who)} and the "
            "judge gave different strict verdicts.")
st.dataframe(dis[["row", "question_type", "vote", "judge", "consensus", "prompt"]],
             hide_index=True)
for rec in dis.head(20).to_dict(orient="records"):
    with st.expander(md_label(f"Row {rec['row']} ({rec['question_type']}): vote {rec['vote']}, "
                              f"judge {rec['judge']}, consensus {rec['consensus']}")):
        st.markdown("**Prompt**")
        st.code(rec["prompt"], language=None, wrap_lines=True)
        left, right = st.columns(2)
        left.markdown("**Response A**")
        left.code(rec["response_a"], language=None, wrap_lines=True)
        right.markdown("**Response B**")
        right.code(rec["response_b"], language=None, wrap_lines=True)
if len(dis) > 20:
    st.caption("Showing the first 20 in full; the table above lists them all.")

st.subheader("Audit link")
st.caption("How often the audit's adjusted verdict contradicts each person's votes on the rows it "
           "audited (validation and unlabelled rows), with the Audit page's settings.")
if hasattr(source, "frame") and st.checkbox("Compare with the audit", value=False,
                                            help="Runs (or reuses) the audit of the loaded table."):
    from puaudit.annotators.audit_link import annotator_score_disagreement

    _, _, result, _ = audit_runs.audit_view()
    audited = np.isin(result.split, ["validation", "unlabelled"])
    score = np.where(audited, result.score, np.nan)
    adjusted = np.array([v if v in ("A", "B") else None for v in result.adjusted], dtype=object)
    try:
        link = annotator_score_disagreement(table, score, adjusted)
    except PUAuditError as exc:
        audit_runs.show_error(exc)
    else:
        st.dataframe(link, hide_index=True)
