"""The first look: while the texts are embedded, the evidence-only audit (docs/encoders.md).

The Audit page asks :func:`embeddings_or_first_look` for the embeddings, a foreground job once
per table and encoder per server process through the cached function every page reads. Not
ready within :data:`WAIT_S`: the page shows the evidence-only audit (``texts=False``) labelled
":data:`PRELIMINARY` (N s left)", and a timed fragment reruns the page when they are done.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from components import audit_runs, encoder_state, state
from components.jobs import Job
from puaudit.report.figures.metrics import (expected_text, headline_metrics, per_type_table,
                                            verdict_text)
from components.safe_text import md
from puaudit.audit.config import AuditConfig
from puaudit.audit.stages import audit_table
from puaudit.audit.scorers.evidence import PRELIMINARY
from puaudit.errors import PUAuditError

__all__ = ["embeddings_or_first_look", "embedding_job", "preliminary_config", "preliminary_label",
           "ready_text", "show_headline", "WAIT_S", "POLL_S"]

#: embeddings ready within this many seconds (cached, or a small table): no first look, which
#: would only flash before the full audit
WAIT_S = 2.0
#: how often the first look checks whether the embeddings are done (and redraws the time left)
POLL_S = 1.0


@st.cache_resource(show_spinner=False)
def _jobs() -> tuple[dict, threading.Lock]:
    return {}, threading.Lock()


def embedding_job(table, encoder_label: str) -> tuple[Job, dict]:
    """The embeddings of ``table`` as a foreground job (one per table content and encoder per
    server process; a failed one is started again), and their progress ``{"done", "total",
    "start"}`` (``start``: texts done and the time at the first report)."""
    key = f"{state.table_hash(table)}|{encoder_label}"
    jobs, lock = _jobs()
    with lock:
        job = jobs.get(key)
        if job is not None and not (job[0].done() and job[0].exception() is not None):
            return job
        encoder = encoder_state.load_encoder(encoder_label)
        prog: dict = {"done": 0, "total": 0, "start": None}

        def work(run: Job) -> object:
            def report(done: int, total: int) -> None:
                if prog["start"] is None:  # the first report counts the cached texts
                    prog["start"] = (done, time.monotonic())
                prog.update(done=done, total=total)
                run.report(done, total)
            return audit_runs.cached_embeddings(state.table_hash(table), encoder_label, table,
                                                encoder, report)

        ctx = get_script_run_ctx()
        jobs[key] = (audit_runs.runner().start(
            work, text=f"Embedding with {encoder_label}…",
            thread_hook=lambda th: add_script_run_ctx(th, ctx)), prog)
        while len(jobs) > 8:  # bounded memory: forget the oldest finished jobs
            old = next(k for k in jobs)
            if not jobs[old][0].done():
                break
            jobs.pop(old)
        return jobs[key]


def preliminary_config(params: dict) -> AuditConfig | None:
    """The evidence-only configuration of this session's settings (a text scorer named in
    Advanced becomes ``auto``), or None when the verdict evidence is turned off."""
    cfg = state.audit_config(params)
    if cfg.evidence == "none":
        return None
    return cfg.replace(texts=False, scorer=cfg.scorer if cfg.scorer in ("auto", "evidence")
                       else "auto")


def preliminary_label(prog: dict, *, now: float | None = None) -> str:
    """":data:`PRELIMINARY` (N s left)": the texts left at the embedding rate since the first
    report, rounded up to a second (``now`` defaults to ``time.monotonic()``)."""
    done, total, start = prog.get("done", 0), prog.get("total", 0), prog.get("start")
    if start is None or done <= start[0]:
        return f"{PRELIMINARY} (estimating the time left)"
    now = time.monotonic() if now is None else now
    left = max(total - done, 0)
    eta = int(-(-left * (now - start[1]) / (done - start[0]) // 1))
    when = f"{eta // 60} min {eta % 60} s" if eta >= 60 else f"{eta} s"
    return f"{PRELIMINARY} ({when} left)"


@st.cache_data(show_spinner=False, max_entries=16, ttl=60)
def _ready(content_hash: str, encoder_label: str, _table) -> str:
    from puaudit.embed.ready_time import estimate_ready

    return estimate_ready(_table, encoder_state.load_encoder(encoder_label)).text()


def ready_text(table, encoder_label: str) -> str:
    """When the first numbers and the full audit of ``table`` will be ready (the Data page's
    estimate; :func:`puaudit.embed.ready_time.estimate_ready`, cached for a minute)."""
    return _ready(state.table_hash(table), encoder_label, table)


@st.cache_data(show_spinner=False, max_entries=32)
def _preliminary(content_hash: str, config: AuditConfig, _table):
    return audit_table(_table, None, config)


def show_headline(result) -> str | None:
    """An audit's four headline metrics, what they were measured on and its verdict, as the
    Audit page and the first look show them; returns the verdict text."""
    cols = st.columns(4)
    for col, m in zip(cols, headline_metrics(result)):
        col.metric(m["label"], m["value"], delta=m["delta"], help=m["help"])
    n_reversed = int((result.group == "negative").sum())
    st.caption(f"Measured on {result.metrics['n']:,} validation rows (annotated, held out) · "
               f"m = {result.m:.3f} · {n_reversed:,} audited rows reversed in all.")
    verdict = verdict_text(result)
    if verdict:
        st.markdown(f"**Verdict:** {md(verdict)}")
    return verdict


def _show(result) -> None:
    """The evidence-only audit's numbers, as the Audit page shows the full audit's."""
    show_headline(result)
    st.info(expected_text(result))
    if result.certification is not None:
        from puaudit.report.figures.certify import certification_text

        cert = result.summary()["certification"]
        (st.warning if cert["message"] else st.success)(certification_text(cert))
    st.dataframe(per_type_table(result), hide_index=True, width="stretch")


def embeddings_or_first_look(table, params: dict):
    """The embeddings of ``table`` when they are ready; else the evidence-only audit drawn
    with its label, a fragment that reruns the page when they are, and None (the page stops)."""
    fut, prog = embedding_job(table, params["encoder"])
    try:
        return fut.result(timeout=WAIT_S)
    except FutureTimeout:
        pass
    cfg = preliminary_config(params)
    result = None
    if cfg is not None:
        try:
            result = _preliminary(state.table_hash(table), cfg, table)
        except PUAuditError:
            result = None  # nothing to learn from without the texts: wait for them
    if result is None:
        with st.spinner("Embedding the texts…"):
            return fut.result()

    def poll() -> None:
        if fut.done():
            st.rerun()  # the whole page: the full audit replaces this one
        st.info(preliminary_label(prog))

    st.fragment(poll, run_every=POLL_S)()
    _show(result)
    return None
