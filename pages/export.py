"""Export: the audited table (every input row and column + puaudit_* columns) and a run manifest."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from components import audit_jobs, audit_runs, exports, state
from puaudit.report.figures.metrics import formula_cells, spreadsheet_safe_copy
from puaudit.report.html import report_html
from components.review import review_export
from components.safe_text import md
from puaudit.audit.evaluate import default_spread_seeds
from puaudit.audit.manifest import run_manifest
from puaudit.data.writers import table_to_bytes
from puaudit.data.jsonsafe import dumps
from puaudit.errors import PUAuditError

state.through_navigation()
st.title("Export")
st.caption("Every input row and column, unchanged and in order, plus the puaudit_* columns "
           "(split, score, P(judge right), group, adjusted verdict, reason; trusted when "
           "certified; one puaudit_evidence_* per verdict-evidence signal; puaudit_review_* "
           "when rows were reviewed), each described in docs/audit.md, \"Export columns\".")

table, emb, result, params = audit_runs.audit_view()
ss = st.session_state
name = ss.get("source_name") or "table"
stem = "demo" if name == state.DEMO_NAME else (Path(name).name.split(".")[0] or "table")

frame = result.to_frame(table)
# Review decisions on these rows ride along as puaudit_review_* columns; a table with review votes
# merged in is exported as the rows that were loaded (docs/review.md).
reviewed = review_export(result, table)
if reviewed is not None:
    frame = reviewed
m = result.metrics
if m["n"]:
    verdict = (f"On {m['n']:,} held-out validation rows the exported `puaudit_adjusted` verdicts "
               f"agree with people {m['cons_adj']:.1%} of the time; the judge's own verdicts "
               f"{m['cons_orig']:.1%}.")
    if m["delta"] < 0:
        st.error(verdict + " The relabelled verdicts are worse here: keep the judge's column, or "
                 "switch the Audit page to the guarded rule (the default) before using them.")
    else:
        st.success(verdict)
else:
    st.info("No validation rows (p_ratio = 1 or no annotated rows left out): the effect of the "
            "relabelling on agreement with people cannot be measured for this export.")
st.write(f"{len(frame):,} rows × {len(frame.columns)} columns "
         f"({len(table.frame.columns)} input + {len(frame.columns) - len(table.frame.columns)} "
         "puaudit_*).")
added = [c for c in frame.columns if c not in set(table.frame.columns)]
st.caption("Added here: " + ", ".join(md(c) for c in added) + ".")
cols = st.columns(4)
for col, (fmt, mime) in zip(cols, (("csv", "text/csv"), ("parquet", "application/octet-stream"),
                                   ("jsonl", "application/x-ndjson"))):
    data = (exports.export_bytes(result, table, params, fmt) if reviewed is None
            else table_to_bytes(frame, fmt))
    col.download_button(f"Download {fmt.upper()}", data,
                        file_name=f"{stem}_puaudit.{fmt}", mime=mime, key=f"dl_{fmt}", on_click="ignore")
manifest = run_manifest(result, input_name=ss.get("source_name", ""),
                        input_sha256=ss.get("source_sha256"), split=ss.get("source_split"))
cols[3].download_button("Download run manifest (JSON)",
                        dumps(manifest, indent=2).encode("utf-8"),
                        file_name=f"{stem}_puaudit_manifest.json", mime="application/json",
                        key="dl_manifest", on_click="ignore")

st.subheader("Audit report")
st.caption("One HTML file to share: the verdict, agreement with people before and after the "
           "audit with intervals, how many verdicts are reversed as m varies, per-type "
           "results, score densities, the rankings, the "
           "annotators, the judge's consistency, every setting and the command that reproduces "
           "it. It opens offline: nothing in it links or loads from the internet.")
# the change over seeds joins the report once the Audit page's background spread has finished
spread, n_seeds = None, default_spread_seeds(len(table))
if n_seeds > 1 and result.metrics["n"]:
    fut, _ = audit_runs.spread_job(table, emb, params, result, n_seeds=n_seeds)
    if fut.done() and not fut.cancelled() and fut.exception() is None:
        spread = fut.result()
report_key = (state.table_hash(table), repr(sorted(params.items())))


def _build_report(key: tuple, *args, **kwargs) -> None:
    """The button's callback (run before the page, so the download appears in the same run)."""
    # the Audit page's reversals-vs-m curve (cached there, same arguments) joins the report;
    # computed on the click, so opening this page never waits for its refits
    try:
        m_curve = audit_jobs.m_curve(table, emb, params)
    except PUAuditError:
        m_curve = None
    ss["_report_html"] = (key, report_html(*args, m_curve=m_curve, **kwargs),
                          kwargs["spread"] is not None)


st.button("Build the audit report", key="build_report", on_click=_build_report,
          args=(report_key, table, result, state.audit_config(params)),
          kwargs={"spread": spread, "encoder": params["encoder"],
                  "source": {"name": ss.get("source_name", ""), "sha256": ss.get("source_sha256"),
                             "split": ss.get("source_split")}},
          help="Rankings with bootstrap intervals take a few seconds.")
built = ss.get("_report_html")
if built is not None and built[0] == report_key:
    st.download_button("Download report (HTML)", built[1], file_name=f"{stem}_puaudit_report.html",
                       mime="text/html", key="dl_report", on_click="ignore")
    if spread is not None and not built[2]:
        st.caption("The change over seeds has finished since this report was built: build it "
                   "again to include it.")

risky = formula_cells(table.frame)
if risky:
    # column names are data: shown as text, never Markdown
    where = md(", ".join(f"{c} ({n})" for c, n in risky.items()))
    st.warning(f"Some cells start with =, +, - or @ and a spreadsheet would run them as formulas: "
               f"{where}. The downloads above are byte-faithful; for opening in Excel or Sheets "
               "use the spreadsheet-safe copy (a leading apostrophe marks those cells as text).")
    safe = (exports.export_bytes(result, table, params, "csv", safe=True) if reviewed is None
            else table_to_bytes(spreadsheet_safe_copy(frame), "csv"))
    st.download_button("Download spreadsheet-safe CSV", safe,
                       file_name=f"{stem}_puaudit_spreadsheet_safe.csv", mime="text/csv",
                       key="dl_safe", on_click="ignore")

with st.expander("Run manifest"):
    st.json(manifest)
st.dataframe(frame.head(100), width="stretch", height=300)
