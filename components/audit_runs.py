"""The audit runs of a session, and the background jobs the pages start (docs/dashboard.md).

One :class:`~components.jobs.JobRunner` per server process (:func:`runner`) runs every long
computation: embeddings and audits in the foreground (a bar on the page), the m curve, the
precompute, the spread over seeds, UMAP and scorer comparisons in the background. Caches are
shared by sessions and keyed by content (the table travels as an ``_underscore`` argument);
audits come from one :class:`~puaudit.audit.stages.StageCache` per table and encoder.
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from components.encoder_state import load_encoder
from components.jobs import Cancelled, Job, JobRunner, Preempted
from components.state import (CERTIFY_TARGET, audit_config, audit_params, ensure_data,
                              table_hash)
from components.time_left import time_left_text
from puaudit.audit.config import AuditConfig
from puaudit.audit.stages import StageCache
from puaudit.data.schema import ComparisonTable
from puaudit.embed.pairs import PairEmbeddings, embed_table
from puaudit.errors import DASHBOARD, PUAuditError

__all__ = ["get_embeddings", "m_estimate", "runner", "stage_cache", "wait_for", "with_progress",
           "run_audit", "precompute_key", "DRAW_S", "show_error", "loaded_table", "audit_view", "SpreadSuperseded",
           "SPREAD_UNWATCHED_S", "spread_job", "umap_job"]

_CFG = AuditConfig()


@st.cache_data(show_spinner=False, max_entries=8)
def cached_embeddings(content_hash: str, encoder_label: str, _table, _encoder,
                      _progress=None) -> PairEmbeddings:
    return embed_table(_table, _encoder, progress=_progress)


def get_embeddings(table: ComparisonTable, encoder_label: str) -> PairEmbeddings:
    """Embeddings of ``table`` (cached by content hash + encoder), with a progress bar drawn by
    this script thread while the cached function runs in a worker (:func:`with_progress`)."""
    from components.time_left import TimeLeft

    encoder = load_encoder(encoder_label)
    key = table_hash(table)
    start: dict = {}
    damped = TimeLeft()  # the shown estimate counts down, and follows the rate only gradually

    def work(report):
        def on_batch(d: int, t: int) -> None:
            # the first report counts the cached texts: the rate is measured from there
            start.setdefault("at", (d, time.monotonic()))
            report(d, t)
        return cached_embeddings(key, encoder_label, table, encoder, on_batch)

    def describe(d: int, t: int) -> str:
        d0, t0 = start.get("at", (d, time.monotonic()))
        return (f"Embedding with {encoder_label}: {d:,} of {t:,} distinct texts"
                f"{time_left_text(d - d0, t - d, time.monotonic() - t0, damp=damped)}")

    return with_progress(work, f"Embedding with {encoder_label}…", describe=describe)


def m_estimate(table: ComparisonTable, emb: PairEmbeddings, params: dict) -> float:
    """The default m: judge–human agreement on P for this split (the audit's own split, from
    the stage cache)."""
    cfg = audit_config(params)
    with runner().foreground():
        return float(stage_cache(table, emb).split(cfg).m_estimate)


@st.cache_resource(show_spinner=False)
def runner() -> JobRunner:
    """The server process's job runner (:mod:`components.jobs`): every long computation of
    every session runs on it (a job's own unwatched limit is passed on submission)."""
    return JobRunner()


@st.cache_resource(show_spinner=False, max_entries=4)
def _stage_cache(content_hash: str, encoder_label: str, _table, _emb) -> StageCache:
    # stage results hold a few row-aligned arrays: fewer of them for long tables
    keep = int(np.clip(4e8 / (80 * max(len(_table), 1)), 24, 200))
    return StageCache(_table, _emb, max_entries=keep)


def stage_cache(table: ComparisonTable, emb: PairEmbeddings) -> StageCache:
    """The stages of every audit of ``table`` with ``emb`` (:mod:`puaudit.audit.stages`),
    shared by sessions and the background jobs."""
    # by content (the cached embeddings come back as a new copy on every run), the label kept
    # on that copy as the content hash is on the table: one page run asks several times
    label = emb.__dict__.get("_puaudit_label")
    if label is None:
        step = max(1, len(emb.vectors) // 256)
        sample = hashlib.sha256(np.ascontiguousarray(emb.vectors[::step]).tobytes()).hexdigest()
        label = emb.__dict__["_puaudit_label"] = f"{emb.encoder}|{emb.vectors.shape}|{sample}"
    return _stage_cache(table_hash(table), label, table, emb)


def wait_for(get_job, label: str):
    """The result of the background job ``get_job()`` returns, with a progress bar meanwhile."""
    bar, t0 = None, time.monotonic()
    while True:
        job = get_job()
        try:
            value = job.result(timeout=0.25)
        except Preempted:
            continue
        except FutureTimeout:
            pass
        else:
            if bar is not None:
                bar.empty()
            return value
        bar = bar or st.progress(0.0, text=label)
        _show(bar, job, t0, label)


def _show(bar, job: Job, t0: float, label: str, describe=None) -> None:
    """Draw ``job``'s progress on ``bar``: ``describe(done, total)``, or its text, the step and
    the seconds since ``t0``."""
    d, t, text = job.progress["done"], job.progress["total"], job.progress["text"] or label
    text = (describe(d, t) if describe is not None
            else f"{text} (step {min(d + 1, t)} of {t}, {time.monotonic() - t0:.0f} s)" if t
            else text)
    bar.progress(min(d / t, 1.0) if t else 0.0, text=text)


def with_progress(work, label: str, *, describe=None):
    """``work(report)`` run as a foreground job of :func:`runner` while this script thread
    draws a progress bar (from 0.3 s on; ``report(done, total, text=None)`` updates it,
    ``describe(done, total)`` writes its text). Errors are raised here. The bar lives outside
    the cached function ``work`` calls: Streamlit replays what a cached function draws."""
    ctx = get_script_run_ctx()
    job = runner().start(lambda j: work(j.report), text=label,
                         thread_hook=lambda th: add_script_run_ctx(th, ctx))
    th = job.thread
    th.join(0.3)
    if th.is_alive():
        t0 = time.monotonic()
        bar = st.progress(0.0, text=label)
        while th.is_alive():
            th.join(0.25)
            _show(bar, job, t0, label, describe)
        bar.empty()
    th.join()
    return job.result()


def _audit(content_hash: str, encoder_label: str, config: AuditConfig, _table, _emb,
           _progress=None):
    """The audit of ``config`` from the stage cache (``_progress`` hears of each stage)."""
    cache = stage_cache(_table, _emb)
    report = _progress or (lambda *a, **k: None)
    report(0, 2, "Splitting the rows into P, validation and audited rows")
    cache.split(config)
    report(1, 2, "Scoring " + ("every candidate scorer, cross-fitted on P, and choosing one"
                               if config.scorer == "auto" else f"with {config.scorer}, "
                               "cross-fitted on P") + "; then relabelling and measuring")
    return cache.audit(config)


def precompute_key(table: ComparisonTable, params: dict) -> tuple:
    """The key of the idle-time precompute job around these settings
    (:func:`components.audit_jobs.precompute_neighbours`)."""
    return ("precompute", table_hash(table), params["encoder"], audit_config(params))


def run_audit(table: ComparisonTable, emb: PairEmbeddings, params: dict):
    """The audit of ``table`` with ``params`` from the stage cache (a bar names each stage
    unless the scores are cached). Certification is its own stage: moving the target slider
    or ticking Certify scores nothing again."""
    cfg = audit_config(params)
    target = cfg.target_agreement
    if target is not None:  # certified at one target, moved to the session's (no refit)
        cfg = cfg.replace(target_agreement=CERTIFY_TARGET, risk=_CFG.risk)
    cache = stage_cache(table, emb)
    # the visitor acted: idle-time work for other settings stops. The precompute of these very
    # settings goes on: a redraw (a background result arriving, a page switch) is no new step
    runner().cancel_group("precompute", keep=precompute_key(table, params))
    with runner().foreground():
        if cache.has_scores(cfg):
            result = cache.audit(cfg)
        else:
            key = table_hash(table)
            result = with_progress(lambda report: _audit(key, params["encoder"], cfg, table,
                                                         emb, report), "Auditing")
    runner().quiet(DRAW_S)  # the page draws the answer before background work resumes
    if target is None:
        return result
    from puaudit.audit.certify.judge import with_target

    return with_target(result, target, audit_config(params).risk)


#: background work stays paused this long after an audit is answered: the Audit page draws it
DRAW_S = 0.5


def show_error(exc: BaseException) -> None:
    """An error box whose text is shown literally (messages quote the data): a library error
    with the dashboard's fix (:meth:`puaudit.errors.PUAuditError.advice`)."""
    from components.safe_text import md

    st.error(md(exc.advice(DASHBOARD) if isinstance(exc, PUAuditError) else str(exc)))


def loaded_table() -> ComparisonTable:
    """This session's table, or an error box and a stopped page."""
    ensure_data()
    table = st.session_state.get("table")
    if table is None:
        show_error(st.session_state.get("table_error", "No table loaded.") +
                   " Fix the column mapping on the Data page.")
        st.stop()
    return table


def audit_view():
    """(table, embeddings, result, params) of this session's audit, for a page that shows it,
    or an error box and a stopped page."""
    table, params = loaded_table(), audit_params()
    try:
        emb = get_embeddings(table, params["encoder"])
        result = run_audit(table, emb, params)
    except PUAuditError as exc:
        show_error(exc)
        st.stop()
    return table, emb, result, params


#: the name the Audit page and its tests know a stopped spread by
SpreadSuperseded = Cancelled


#: a background job nobody asked for this long (its visitor left) stops at its next checkpoint:
#: one worker serves every session
SPREAD_UNWATCHED_S = 60.0


def spread_job(table: ComparisonTable, emb: PairEmbeddings, params: dict, result, *,
               n_seeds: int) -> tuple[Job, dict]:
    """The audit's change over ``n_seeds`` seeded splits (:func:`puaudit.audit.evaluate.
    delta_over_seeds`; the first split is ``result`` itself), a background job once per data +
    settings; returns the job and its progress ``{"done", "total"}`` (further splits)."""
    from puaudit.audit import evaluate

    cfg = audit_config(params).replace(target_agreement=None)  # certifying moves no verdict
    key = ("spread", table_hash(table), params["encoder"], cfg, int(n_seeds))
    cache = stage_cache(table, emb) if emb is not None else None

    def work(job: Job):
        job.progress.update(done=0, total=int(n_seeds) - 1)

        def through_stages(c):  # each seed's audit, its stages kept for the next m step
            return cache.audit(c, checkpoint=job.checkpoint).metrics["delta"]

        run_seed = None if cache is None else through_stages
        return evaluate.delta_over_seeds(table, emb, cfg, n_seeds=int(n_seeds),
                                         first_delta=result.metrics.get("delta"),
                                         progress=job.report, run_seed=run_seed)

    job = runner().submit(key, work, group="spread", unwatched_s=SPREAD_UNWATCHED_S,
                          priority=2)
    job.progress["total"] = job.progress["total"] or int(n_seeds) - 1  # known before it starts
    return job, job.progress


def umap_job(key: str, z: np.ndarray, seed: int) -> Job:
    """A background UMAP projection of ``z`` (one per content key per server process), stopped
    at the job's checkpoints (docs/dashboard.md). Its group is the session's: two visitors'
    maps must not cancel each other at every poll (a UMAP restarts from scratch)."""
    from puaudit.embed.projection import project_2d

    ctx = get_script_run_ctx()
    group = "umap" if ctx is None else f"umap|{ctx.session_id}"
    return runner().submit(("umap", key, int(seed)),
                           lambda job: project_2d(z, method="umap", random_state=seed,
                                                  checkpoint=job.checkpoint),
                           group=group, unwatched_s=0, priority=2)
