"""Data: upload a table or use the demo, map columns, see a summary."""

from __future__ import annotations

import streamlit as st

from components import first_look, state
from components.data_summary import (ROLE_LABELS, excluded_rows, excluded_text,
                                     judge_candidates, mapping_warnings)
from puaudit.report.figures.data_summary import question_type_frame, summary_metrics
from puaudit.report.figures.metrics import spreadsheet_safe_copy
from components.safe_text import md
from components.split_picker import picker_key, read_split, unpacked_zip
from components.uploads import limits_text, offered_splits, read_note_caption, read_upload
from puaudit.data.limits import upload_limits
from puaudit.errors import PUAuditError
from puaudit.data.schema import REQUIRED_ROLES, ROLES

NONE = "(none)"
MAX_MB = int(st.get_option("server.maxUploadSize"))

state.through_navigation()
st.title("Data")
st.caption("One row per pairwise comparison: a prompt, two responses, the LLM judge's verdict "
           "and, on some rows, a person's verdict. Nothing leaves this server.")

state.ensure_data()
ss = st.session_state

up_col, demo_col = st.columns([3, 1])
with up_col:
    # a fixed key: the help text names the operator's limits, which must not reset the widget
    upload = st.file_uploader(
        "Upload a comparison table",
        type=["csv", "tsv", "parquet", "jsonl", "json", "gz", "zip"], key="data_upload",
        help=f"CSV, TSV, Parquet or JSONL (optionally gzip-compressed), or a zipped dataset "
             f"folder (Hugging Face save_to_disk, Parquet shards), up to {MAX_MB} MB as "
             f"sent and {limits_text(upload_limits())}. Larger files: use the command line "
             "(puaudit audit). Columns are detected from their names; you can change the mapping "
             "below.")
with demo_col:
    st.write("")
    if st.button("Load demo data", help="600 generated comparisons with a biased judge, a "
                 "padding-attacked copy of its verdicts and selective human labels."):
        state.set_source(state.demo_frame(600, 0), state.DEMO_NAME, None)
        ss.pop("source_upload_id", None)
        ss["upload_id"] = upload.file_id if upload is not None else None

if upload is not None and ss.get("upload_id") != upload.file_id:
    ss["upload_id"] = upload.file_id
    data = upload.getvalue()
    try:
        # size, decompressed size, rows and columns: checked while reading (components.uploads)
        frame = read_upload(data, upload.name, max_upload_mb=MAX_MB,
                            unpack_zip=unpacked_zip)
    except PUAuditError as exc:
        ss["upload_error"] = str(exc)
    else:
        ss.pop("upload_error", None)
        # a zipped dataset folder: which split and how many files were read
        ss["read_note"] = (upload.name, frame.attrs.get("read_note"))
        # the Split picker reads these bytes at another split (from the folder unpacked for
        # this read): only while the table shown came from them
        ss["source_upload_id"] = upload.file_id
        state.set_source(frame, upload.name, state.sha256_bytes(data))
if upload is None:
    ss.pop("upload_error", None)
# File names, column names and messages quoting cells are data: shown as text, never Markdown.
if ss.get("upload_error"):
    st.error(md(ss["upload_error"]))
    st.caption(f"Still showing: {md(ss['source_name'])}.")

frame = ss["raw_frame"]
splits = (offered_splits(frame) if upload is not None
          and ss.get("source_upload_id") == upload.file_id else [])
st.subheader(f"{md(ss['source_name'])} · {len(frame):,} rows × {len(frame.columns)} columns")
note = ss.get("read_note") or (None, None)
if note[1] and note[0] == ss["source_name"]:
    st.caption(md(read_note_caption(note[1], picker=bool(splits))))
if splits:
    # split names are data: the selectbox shows them as plain text
    st.selectbox("Split", splits, index=splits.index(frame.attrs["split"]),
                 key=picker_key(upload.file_id), on_change=read_split,
                 args=(upload, picker_key(upload.file_id)), kwargs={"max_upload_mb": MAX_MB},
                 help="The uploaded folder holds several splits; the table, the mapping and "
                      "every page use the one chosen here.")

for warning in mapping_warnings(ss["columns"]):
    st.warning(warning)  # our own text: it names controls, never data

with st.expander("Column mapping", expanded="table_error" in ss or bool(mapping_warnings(ss["columns"]))):
    cols = [str(c) for c in frame.columns]
    mapping = dict(ss["columns"])
    candidates = judge_candidates(frame, mapping)
    grid = st.columns(4)
    for i, role in enumerate(ROLES):
        options = [NONE] + cols
        if role == "judge" and candidates:
            options = candidates + [NONE] + [c for c in cols if c not in candidates]
        current = mapping.get(role)
        index = options.index(current) if current in options else 0
        label = ROLE_LABELS[role] + (" *" if role in REQUIRED_ROLES else "")
        with grid[i % 4]:
            choice = st.selectbox(label, options, index=index,
                                  key=f"map_{role}_{ss['data_version']}")
        mapping[role] = None if choice == NONE else choice
    if len(candidates) > 1:
        st.caption(f"Several columns look like judge verdicts: {md(', '.join(candidates))}. "
                   "The audit uses the one chosen above; the Question types page compares them.")
    if mapping != {r: ss["columns"].get(r) for r in ROLES}:
        ss["columns"] = {r: c for r, c in mapping.items() if c}
        state.build_table()
    if "table" in ss and "table_error" not in ss:  # issue 42: judges named as columns
        from components.judges import other_judge_picker
        other_judge_picker(frame, ss["table"], mapping, ss["data_version"])

if "table_error" in ss:
    st.error(md(ss["table_error"]))
    st.stop()

table = ss["table"]
summary = table.summary()
metric_cols = st.columns(6)
METRIC_HELP = {"Agreement": "Judge–human agreement: the share of rows where both chose A or B "
                             "and chose the same."}
for col, (label, value) in zip(metric_cols, summary_metrics(summary)):
    col.metric(label, value, help=METRIC_HELP.get(label))
st.caption(first_look.ready_text(table, state.audit_params()["encoder"]))

excluded = excluded_rows(table, frame)
note = excluded_text(excluded, len(frame))
if note:
    ex_text, ex_button = st.columns([4, 1])
    ex_text.info(note)
    ex_button.download_button("Download them", spreadsheet_safe_copy(excluded).to_csv(index=False).encode("utf-8"),
                              file_name="excluded_rows.csv", mime="text/csv",
                              help="The rows left out, as uploaded, with the reason first.")

left, right = st.columns([1, 2])
with left:
    st.markdown("**Rows per question type**")
    st.dataframe(question_type_frame(summary), hide_index=True, width="stretch")
with right:
    st.markdown("**First rows**")
    st.dataframe(frame.head(50), width="stretch", height=320)
