"""Per-session state and cached computation for the Streamlit dashboard.

State: everything a visitor loads or chooses lives in ``st.session_state`` (one per browser
session); nothing user-specific is kept in module globals. Keys other pages may read:

``table``          the :class:`~puaudit.data.schema.ComparisonTable` being audited
``raw_frame``      the table as read (every row and column)
``source_name``    file name or "demo data (generated)"
``source_sha256``  sha256 of the uploaded bytes (None for the demo)
``source_split``   the split read from an uploaded dataset folder (None for a table file)
``columns``        role -> column mapping in use
``audit``          every :class:`AuditConfig` field by its name, plus ``encoder`` (the
                   widgets' values; :func:`audit_config` makes the config); ``m`` None = the
                   estimate

Caching (shared by sessions, keyed by content, so two sessions only share entries when their
data are identical): the encoder is a ``st.cache_resource`` keyed by its label; embeddings are
``st.cache_data`` keyed by ``ComparisonTable.content_hash()`` + encoder label (the table itself is
passed as an ``_underscore`` argument, so it is never hashed); audits come from one
:class:`~puaudit.audit.stages.StageCache` per table + encoder, which keys each stage by the
fields it reads. A slider move therefore recomputes only the stages that read it (an ``m``
step: the prior shift, the relabelling, certification and the transport scorer).

Work: one :class:`~components.jobs.JobRunner` per server process (:func:`runner`) runs every
long computation with progress and cancellation: the embeddings and audits as foreground jobs
(a bar on the page), and as background jobs, most urgent first, the m curve, the idle-time
precompute of neighbouring slider values, the spread over seeds and UMAP, then scorer
comparisons; they give way to any slider answer (docs/dashboard.md).

Test hook: with ``PUAUDIT_TEST_ENCODER=hashing`` the only encoder offered is
:class:`puaudit.embed.hashing.HashingEncoder`, a deterministic bag-of-words hashing encoder
(no model, instant), so
AppTest tests run fast. ``PUAUDIT_UMAP_WARMUP=0`` skips the UMAP warm-up thread and
``PUAUDIT_ENCODER_WARMUP=0`` the encoder's (see :func:`start_encoder_warmup`).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from components.jobs import Cancelled, Job, JobRunner, Preempted
from puaudit.embed.pairs import PairEmbeddings, embed_table
from puaudit.audit.stages import StageCache
from puaudit.audit.config import RULES, AuditConfig
from puaudit.audit.config import SCORER_CHOICES as _SCORER_CHOICES
from puaudit.embed.encoder_menu import encoder_choices
from puaudit.errors import PUAuditError
from puaudit.data.folder_tables import SPLIT
from puaudit.data.schema import ComparisonTable, load_comparisons

__all__ = ["TEST_ENCODER_ENV", "DEMO_NAME", "SCORER_CHOICES", "RULE_CHOICES",
           "encoder_options", "load_encoder", "start_umap_warmup",
           "start_encoder_warmup",
           "set_source", "build_table", "ensure_data", "table_hash", "audit_params",
           "bind", "get_embeddings", "m_estimate", "run_audit", "current_audit", "audit_config",
           "spread_job", "with_progress", "wait_for", "runner", "stage_cache", "export_bytes", "umap_job", "show_error", "sha256_bytes", "favicon"]

TEST_ENCODER_ENV = "PUAUDIT_TEST_ENCODER"
_HASHING_NAME = "hashing-test"  # puaudit.embed.hashing.HashingEncoder.name
DEMO_NAME = "demo data (generated)"
SCORER_CHOICES = _SCORER_CHOICES
RULE_CHOICES = RULES
_CFG = AuditConfig()
#: the target a session's certification starts at (and its certified audit is cached at)
CERTIFY_TARGET = 0.9
_TOKEN = re.compile(r"\w+")


def encoder_options() -> list[str]:
    """Encoder labels a visitor may choose (never free text; paths come from the deployment)."""
    if os.environ.get(TEST_ENCODER_ENV) == "hashing":
        return [_HASHING_NAME]
    return list(encoder_choices())


@st.cache_resource(show_spinner="Loading the encoder…")
def load_encoder(label: str):
    """The encoder for ``label``, loaded once per server process."""
    if label == _HASHING_NAME and os.environ.get(TEST_ENCODER_ENV) == "hashing":
        from puaudit.embed.hashing import HashingEncoder  # the test mode's encoder

        return HashingEncoder()
    choices = encoder_choices()
    if label not in choices:
        raise PUAuditError(f"Encoder '{label}' is not offered here; choose one of {list(choices)}.")
    from puaudit.embed.encoders import shared_encoder

    # trust_remote_code stays at its default (off): a dashboard never runs model-supplied code.
    # The instance is shared with start_encoder_warmup, which may have loaded it already.
    encoder = shared_encoder(choices[label])
    _note_encoder_load(label)
    return encoder


def favicon():
    """The page icon, drawn here: a ``:material/...:`` or emoji icon makes every visitor's browser
    fetch it from Google's font servers, and nothing should leave this server (docs/safety.md).

    A 32 x 32 RGBA disc in the theme colour with a white balance beam, as a PIL image (served
    by Streamlit from this server).
    """
    from PIL import Image

    yy, xx = np.mgrid[:32, :32]
    disc = (yy - 15.5) ** 2 + (xx - 15.5) ** 2 <= 15.5**2
    img = np.zeros((32, 32, 4), dtype=np.uint8)
    img[disc] = (0x4C, 0x78, 0xA8, 255)
    beam = (np.abs(yy - 11) <= 1) & (np.abs(xx - 15.5) <= 10)
    post = (np.abs(xx - 15.5) <= 1) & (yy >= 11) & (yy <= 24)
    base = (np.abs(yy - 24) <= 1) & (np.abs(xx - 15.5) <= 6)
    img[(beam | post | base) & disc] = (255, 255, 255, 255)
    return Image.fromarray(img)  # (32, 32, 4) uint8: RGBA


def _note_encoder_load(label: str) -> None:
    """Append a line to ``$PUAUDIT_ENCODER_LOG`` (if set) each time an encoder is loaded: lets an
    operator (and the browser test) check that concurrent sessions share one encoder."""
    path = os.environ.get("PUAUDIT_ENCODER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.time():.3f}\t{os.getpid()}\t{label}\n")


@st.cache_resource(show_spinner=False)
def start_umap_warmup() -> threading.Thread | None:
    """Compile UMAP in a background thread, once per server process."""
    if os.environ.get("PUAUDIT_UMAP_WARMUP", "1") == "0":
        return None
    from puaudit.embed.projection import warm_umap

    th = threading.Thread(target=warm_umap, name="puaudit-umap-warmup", daemon=True)
    th.start()
    return th


@st.cache_resource(show_spinner=False)
def start_encoder_warmup() -> threading.Thread | None:
    """Load the first offered encoder in a background thread, once per server process: no page
    view waits for torch and the weights, and the first embedding finds the model loaded."""
    if os.environ.get("PUAUDIT_ENCODER_WARMUP", "1") == "0" or os.environ.get(TEST_ENCODER_ENV) == "hashing":
        return None
    from puaudit.embed.encoders import warm_up_encoder

    return warm_up_encoder(next(iter(encoder_choices().values())))


# --- data -------------------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=4)
def _demo_frame(n_rows: int, random_state: int):
    from puaudit.data.demo import generate_demo

    return generate_demo(n_rows=n_rows, random_state=random_state)


def set_source(frame, name: str, sha256: str | None, *, columns: dict | None = None) -> None:
    """Make ``frame`` this session's data: detected column mapping (``columns`` instead when
    every column it names is in ``frame``), a fresh table, fresh widgets."""
    from components.data_summary import mapping_defaults

    ss = st.session_state
    ss["raw_frame"] = frame
    ss["source_name"] = name
    ss["source_sha256"] = sha256
    # the same bytes hold one table per split: the split is part of what the data are
    ss["source_split"] = frame.attrs.get(SPLIT)
    held = {str(c) for c in frame.columns}
    if columns and all(str(c) in held for c in columns.values()):
        ss["columns"] = dict(columns)
    else:
        ss["columns"] = {r: c for r, c in mapping_defaults(frame).items() if c}
    ss["data_version"] = ss.get("data_version", 0) + 1
    ss.pop("table", None)
    # New data, default settings; the encoder choice is kept (it is the visitor's, not the data's).
    ss["audit"] = {**AuditConfig.defaults(), "encoder": ss.get("audit", {}).get("encoder")}
    build_table()


def build_table() -> ComparisonTable | None:
    """Build ``table`` from ``raw_frame`` and ``columns``; on bad input keep the message in
    ``table_error`` and leave no table (pages then say what to fix)."""
    ss = st.session_state
    ss.pop("table", None)
    ss.pop("table_error", None)
    cols = dict(ss.get("columns", {}))
    from puaudit.data.schema import ROLES

    explicit = {r: cols.get(r) for r in ROLES}  # None = "no such column": no silent re-detection
    try:
        table = load_comparisons(ss["raw_frame"], columns=explicit, name=ss.get("source_name", ""))
    except PUAuditError as exc:
        from components.messages import for_dashboard

        ss["table_error"] = for_dashboard(exc)
        return None
    ss["table"] = table
    return table


def through_navigation() -> None:
    """Make sure a page runs inside ``app.py``'s navigation, not on its own.

    Streamlit treats an app that has a ``pages/`` folder as an old-style multipage app until
    the entry script has called ``st.navigation`` once in the server process. If the first visit
    after a start is a deep link (``/review``), it runs that page file alone: no page set-up, no
    warm-ups, and the folder's file names as the menu, for every later session too. This clears
    that flag and reruns, so the entry script runs and picks the page from the URL.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def ensure_data() -> None:
    """Load the generated demo data on first open, so every page has content."""
    if "raw_frame" not in st.session_state:
        set_source(_demo_frame(600, 0), DEMO_NAME, None)


def table_hash(table: ComparisonTable) -> str:
    """``table.content_hash()``, computed once per table object."""
    h = table.extra.get("content_hash")
    if h is None:
        h = table.content_hash()
        table.extra["content_hash"] = h
    return h


# --- parameters -------------------------------------------------------------------------------
def audit_params() -> dict:
    """This session's audit parameters (defaults filled in; encoder defaults to the first offered)."""
    ss = st.session_state
    params = {**AuditConfig.defaults(), "encoder": None, **ss.get("audit", {})}
    if params["encoder"] not in encoder_options():
        params["encoder"] = encoder_options()[0]
    ss["audit"] = params
    return params


def _save(name: str) -> None:
    value = st.session_state[f"w_{name}"]
    if isinstance(value, float):  # a slider's 0.6900000000000001 is the 0.69 it shows (and the
        value = round(value, 6)   # key of the audit precomputed for it)
    st.session_state["audit"][name] = value


def bind(name: str, value=None) -> dict:
    """Widget keyword arguments that keep parameter ``name`` across pages.

    Streamlit forgets a widget's value when its page is left; the value is kept in
    ``session_state["audit"]`` and seeded back into the widget key on each run.
    """
    params = audit_params()
    st.session_state[f"w_{name}"] = params[name] if value is None else value
    return {"key": f"w_{name}", "on_change": _save, "args": (name,)}


# --- computation ------------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=8)
def _embeddings(content_hash: str, encoder_label: str, _table, _encoder, _progress=None) -> PairEmbeddings:
    return embed_table(_table, _encoder, progress=_progress)


def get_embeddings(table: ComparisonTable, encoder_label: str) -> PairEmbeddings:
    """Embeddings of ``table`` (cached by content hash + encoder), with a progress bar while the
    encoder runs. The cached function runs in a worker thread so that this script thread can
    draw the bar: Streamlit replays elements drawn *inside* a cached function, which a progress
    bar created outside it cannot be."""
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
        return _embeddings(key, encoder_label, table, encoder, on_batch)

    def describe(d: int, t: int) -> str:
        d0, t0 = start.get("at", (d, time.monotonic()))
        return (f"Embedding with {encoder_label}: {d:,} of {t:,} distinct texts"
                f"{time_left_text(d - d0, t - d, time.monotonic() - t0, damp=damped)}")

    return with_progress(work, f"Embedding with {encoder_label}…", describe=describe)


def time_left_text(embedded: int, left: int, seconds: float, *, damp=None) -> str:
    """``", about 1 min 20 s left"`` after ``embedded`` texts took ``seconds`` (the rate so far,
    ``left * seconds / embedded``, rounded up to 5 s); ``", estimating time left"`` before the
    first batch is done; ``""`` when nothing is left. The encoder runs the longest texts first,
    so the estimate errs long and shrinks as it goes. ``damp``
    (:class:`components.time_left.TimeLeft`) damps the estimate across calls."""
    if left <= 0:
        return ""
    if embedded <= 0 or seconds <= 0:
        return ", estimating time left"
    raw = left * seconds / embedded if damp is None else damp.update(embedded, left, seconds)
    eta = int(-(-raw // 5) * 5)
    return f", about {eta // 60} min {eta % 60} s left" if eta >= 60 else f", about {eta} s left"


def m_estimate(table: ComparisonTable, emb: PairEmbeddings, params: dict) -> float:
    """The default m: judge–human agreement on P for this split (the audit's own split, from
    the stage cache)."""
    cfg = audit_config(params)
    with runner().foreground():
        return float(stage_cache(table, emb).split(cfg).m_estimate)


def audit_config(params: dict) -> AuditConfig:
    """The :class:`AuditConfig` of this session's parameters (the audit caches' key)."""
    return AuditConfig(**{k: v for k, v in params.items() if k != "encoder"})


# --- the one job runner and the stage cache ----------------------------------------------------
@st.cache_resource(show_spinner=False)
def runner() -> JobRunner:
    """The server process's job runner (:mod:`components.jobs`): every long computation of
    every session runs on it, background work one job at a time and giving way to any
    slider answer."""
    return JobRunner(unwatched_s=SPREAD_UNWATCHED_S)


@st.cache_resource(show_spinner=False, max_entries=4)
def _stage_cache(content_hash: str, encoder_label: str, _table, _emb) -> StageCache:
    # stage results hold a few row-aligned arrays: fewer of them for long tables
    keep = int(np.clip(4e8 / (80 * max(len(_table), 1)), 24, 200))
    return StageCache(_table, _emb, max_entries=keep)


def stage_cache(table: ComparisonTable, emb: PairEmbeddings) -> StageCache:
    """The stages of every audit of ``table`` with ``emb`` (:mod:`puaudit.audit.stages`),
    shared by sessions and the background jobs: a slider step recomputes only the stages that
    read the field it moved."""
    # by content: the cached embeddings come back as a new copy on every run
    step = max(1, len(emb.vectors) // 256)
    sample = hashlib.sha256(np.ascontiguousarray(emb.vectors[::step]).tobytes()).hexdigest()
    return _stage_cache(table_hash(table), f"{emb.encoder}|{emb.vectors.shape}|{sample}", table,
                        emb)


def wait_for(get_job, label: str):
    """The result of the background job ``get_job()`` returns, with a progress bar while it
    runs (asked again when a slider answer preempted it)."""
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
        d, t, text = job.progress["done"], job.progress["total"], job.progress["text"] or label
        bar = bar or st.progress(0.0, text=label)
        bar.progress(min(d / t, 1.0) if t else 0.0,
                     text=f"{text} (step {min(d + 1, t)} of {t}, "
                          f"{time.monotonic() - t0:.0f} s)" if t else text)


def with_progress(work, label: str, *, describe=None):
    """``work(report)`` run as a foreground job of :func:`runner` while this script thread
    draws a progress bar (from 0.3 s on) saying what is being done, how far it is and for how
    long; ``report(done, total, text=None)`` updates it. Errors are raised here. The bar lives
    outside the cached function ``work`` calls (Streamlit replays what a cached function
    draws). ``describe(done, total)``, when given, writes the bar's text instead (the
    embeddings' bar counts texts and the time left). Background jobs give way until it ends."""
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
            d, t, text = job.progress["done"], job.progress["total"], job.progress["text"]
            text = (describe(d, t) if describe is not None
                    else f"{text} (step {min(d + 1, t)} of {t}, "
                         f"{time.monotonic() - t0:.0f} s)" if t else text)
            bar.progress(min(d / t, 1.0) if t else 0.0, text=text)
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


def run_audit(table: ComparisonTable, emb: PairEmbeddings, params: dict):
    """The audit of ``table`` with ``params``, from the stage cache: only the stages whose
    fields changed are computed. An audit whose scores are cached is answered in this thread
    (no bar); otherwise a bar names each stage. Background jobs give way meanwhile.

    Certified (``target_agreement`` set): certification is its own stage (the scores are
    reused), so moving the target slider or ticking Certify scores nothing again."""
    cfg = audit_config(params)
    target = cfg.target_agreement
    if target is not None:  # certified at one target, moved to the session's (no refit)
        cfg = cfg.replace(target_agreement=CERTIFY_TARGET, risk=_CFG.risk)
    cache = stage_cache(table, emb)
    runner().cancel_group("precompute")  # the visitor acted: idle-time work stops
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
    from puaudit.audit.certify import with_target

    return with_target(result, target, audit_config(params).risk)


#: background work stays paused this long after an audit is answered: the Audit page draws it
DRAW_S = 0.5


def set_certify() -> None:
    """``on_change`` of the Audit page's certify checkbox (key ``w_certify``)."""
    ss = st.session_state
    ss["audit"]["target_agreement"] = CERTIFY_TARGET if ss["w_certify"] else None


def show_error(exc: BaseException) -> None:
    """An error box whose text is shown literally: messages quote cells, labels and column
    names from the data, which must never render as Markdown (images would be fetched)."""
    from components.messages import for_dashboard
    from components.safe_text import md

    st.error(md(for_dashboard(exc)))


def current_audit():
    """(table, embeddings, result) for this session, or an error box and a stopped page."""
    ensure_data()
    table = st.session_state.get("table")
    if table is None:
        show_error(st.session_state.get("table_error", "No table loaded.") +
                   " Fix the column mapping on the Data page.")
        st.stop()
    params = audit_params()
    try:
        emb = get_embeddings(table, params["encoder"])
        result = run_audit(table, emb, params)
    except PUAuditError as exc:
        show_error(exc)
        st.stop()
    return table, emb, result


def audit_view():
    """(table, embeddings, result, params) of this session's audit, for a page that shows it
    (an error box and a stopped page when there is none: :func:`current_audit`)."""
    table, emb, result = current_audit()
    return table, emb, result, audit_params()


@st.cache_data(show_spinner=False, max_entries=32)
def _export_bytes(content_hash: str, params_key: str, fmt: str, safe: bool, _result,
                  _table) -> bytes:
    from puaudit.report.figures.metrics import spreadsheet_safe_copy
    from puaudit.data.writers import table_to_bytes

    frame = _result.to_frame(_table)
    return table_to_bytes(spreadsheet_safe_copy(frame) if safe else frame, fmt)


def export_bytes(result, table, params: dict, fmt: str, *, safe: bool = False) -> bytes:
    """The audited ``table`` as ``fmt`` bytes with the audit's columns (cached per result and
    format)."""
    return _export_bytes(table_hash(table), repr(sorted(params.items())), fmt, safe, result,
                         table)


# --- the change over seeded splits, in the background -------------------------------------------
#: the name the Audit page and its tests know a stopped spread by
SpreadSuperseded = Cancelled

#: a background job nobody asked for this long (its visitor left or closed the tab) stops at
#: its next checkpoint: one worker serves every session, and an abandoned MT-Bench spread kept
#: the next visitor's audits waiting behind minutes of work nobody would read
SPREAD_UNWATCHED_S = 60.0


def spread_job(table: ComparisonTable, emb: PairEmbeddings, params: dict, result, *,
               n_seeds: int) -> tuple[Job, dict]:
    """The audit's change over ``n_seeds`` seeded splits (:func:`puaudit.audit.evaluate.
    delta_over_seeds`; the first split is ``result`` itself), a background job once per data +
    settings per server process; each seed's audit goes through the stage cache.

    Returns the job (Future-like: ``done``, ``result``, ``exception``, ``cancelled``) and its
    progress, ``{"done", "total"}`` further splits audited.
    """
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


# --- UMAP in the background -------------------------------------------------------------------
def umap_job(key: str, z: np.ndarray, seed: int) -> Job:
    """A background UMAP projection of ``z`` (one per content key per server process)."""
    from puaudit.embed.projection import project_2d

    return runner().submit(("umap", key, int(seed)),
                           lambda job: project_2d(z, method="umap", random_state=seed),
                           unwatched_s=0, priority=2)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
