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
passed as an ``_underscore`` argument, so it is never hashed); audit results are ``st.cache_data``
keyed by that hash, the encoder label and every parameter. A slider move therefore reruns only
the audit, never the embedding.

Test hook: with ``PUAUDIT_TEST_ENCODER=hashing`` the only encoder offered is
:class:`tests.doubles.HashingEncoder`, a deterministic bag-of-words hashing encoder (no model, instant), so
AppTest tests run fast. ``PUAUDIT_UMAP_WARMUP=0`` skips the UMAP warm-up thread and
``PUAUDIT_ENCODER_WARMUP=0`` the encoder's (see :func:`start_encoder_warmup`).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from puaudit.audit.estimator import (PairEmbeddings, audit_table, embed_table, human_labels,
                                     prepare_split)
from puaudit.audit.config import RULES, AuditConfig
from puaudit.audit.config import SCORER_CHOICES as _SCORER_CHOICES
from puaudit.embed.choices import encoder_choices
from puaudit.errors import PUAuditError
from puaudit.data.folder_tables import SPLIT
from puaudit.data.schema import ComparisonTable, load_comparisons

__all__ = ["TEST_ENCODER_ENV", "DEMO_NAME", "SCORER_CHOICES", "RULE_CHOICES",
           "encoder_options", "load_encoder", "start_umap_warmup",
           "start_encoder_warmup",
           "set_source", "build_table", "ensure_data", "table_hash", "audit_params",
           "bind", "get_embeddings", "m_estimate", "run_audit", "current_audit", "audit_config",
           "m_curve", "compare_scorers", "spread_job", "with_progress",
           "export_bytes", "umap_job", "show_error", "sha256_bytes", "favicon"]

TEST_ENCODER_ENV = "PUAUDIT_TEST_ENCODER"
_HASHING_NAME = "hashing-test"  # tests.doubles.HashingEncoder.name
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
        from tests.doubles import HashingEncoder  # the test double lives with the tests

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
    st.session_state["audit"][name] = st.session_state[f"w_{name}"]


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


@st.cache_data(show_spinner=False, max_entries=64)
def _m_estimate(content_hash: str, encoder_label: str, p_ratio: float, seed: int, _table,
                _emb) -> float:
    cfg = AuditConfig(p_ratio=p_ratio, random_state=seed, evidence="none")  # m needs no evidence
    return float(prepare_split(_table, _emb, cfg).m_estimate)


def m_estimate(table: ComparisonTable, emb: PairEmbeddings, params: dict) -> float:
    """The default m: judge–human agreement on P for this split."""
    return _m_estimate(table_hash(table), params["encoder"], float(params["p_ratio"]),
                       int(params["random_state"]), table, emb)


def audit_config(params: dict) -> AuditConfig:
    """The :class:`AuditConfig` of this session's parameters (the audit caches' key)."""
    return AuditConfig(**{k: v for k, v in params.items() if k != "encoder"})


@st.cache_data(show_spinner=False, max_entries=16)
def _compare(content_hash: str, encoder_label: str, config: AuditConfig, seeds: int, _table,
             _emb, _progress=None):
    from puaudit.audit.evaluate import evaluate

    n = len(SCORER_CHOICES)

    def step(done: int, total: int) -> None:  # evaluate reports after each scorer x seed
        if _progress is not None and done < total:
            _progress(done, total, f"Comparing scorers: {SCORER_CHOICES[done % n]}, split "
                                   f"{done // n + 1} of {seeds}")

    step(0, seeds * n)
    res = evaluate(_table, _emb, seeds=seeds, scorers=SCORER_CHOICES, rules=RULE_CHOICES,
                   config=config, progress=step)
    return res["leaderboard"]


def compare_scorers(table: ComparisonTable, emb: PairEmbeddings, params: dict, *,
                    seeds: int = 3) -> list[dict]:
    """Leaderboard of every scorer × rule over ``seeds`` splits (cached like the audit)."""
    cfg = audit_config(params).replace(scorer=AuditConfig.scorer, rule=AuditConfig.rule,
                                       random_state=AuditConfig.random_state)
    key = table_hash(table)
    return with_progress(lambda report: _compare(key, params["encoder"], cfg, int(seeds), table,
                                                 emb, report), "Comparing scorers")


def with_progress(work, label: str, *, describe=None):
    """``work(report)`` run in a worker thread while this script thread draws a progress bar
    (from 0.3 s on) saying what is being done, how far it is and for how long;
    ``report(done, total, text=None)`` updates it. Errors are raised here. The bar lives
    outside the cached function ``work`` calls (Streamlit replays what a cached function
    draws). ``describe(done, total)``, when given, writes the bar's text instead (the
    embeddings' bar counts texts and the time left)."""
    now = {"done": 0, "total": 0, "text": label}
    box: dict = {}

    def report(done: int, total: int, text: str | None = None) -> None:
        now.update(done=done, total=total, **({"text": text} if text else {}))

    def run():
        try:
            box["value"] = work(report)
        except BaseException as exc:  # re-raised in the script thread
            box["error"] = exc

    th = threading.Thread(target=run, name="puaudit-work", daemon=True)
    add_script_run_ctx(th, get_script_run_ctx())
    th.start()
    th.join(0.3)
    if th.is_alive():
        t0 = time.monotonic()
        bar = st.progress(0.0, text=label)
        while th.is_alive():
            th.join(0.25)
            d, t = now["done"], now["total"]
            text = (describe(d, t) if describe is not None
                    else f"{now['text']} (step {min(d + 1, t)} of {t}, "
                         f"{time.monotonic() - t0:.0f} s)" if t else now["text"])
            bar.progress(min(d / t, 1.0) if t else 0.0, text=text)
        bar.empty()
    if "error" in box:
        raise box["error"]
    return box["value"]


@st.cache_data(show_spinner=False, max_entries=128)
def _audit(content_hash: str, encoder_label: str, config: AuditConfig, _table, _emb,
           _progress=None):
    report = _progress or (lambda *a, **k: None)
    report(0, 2, "Splitting the rows into P, validation and audited rows")
    prep = prepare_split(_table, _emb, config, human=human_labels(_table, config, _emb))
    report(1, 2, "Scoring " + ("every candidate scorer, cross-fitted on P, and choosing one"
                               if config.scorer == "auto" else f"with {config.scorer}, "
                               "cross-fitted on P") + "; then relabelling and measuring")
    return audit_table(_table, _emb, config, prep=prep)


def run_audit(table: ComparisonTable, emb: PairEmbeddings, params: dict):
    """The audit of ``table`` with ``params`` (cached by content hash + the whole config).

    Certified (``target_agreement`` set): the audit is cached at :data:`CERTIFY_TARGET` and
    certified again at the session's target and risk, so moving the target slider does not
    score the rows again."""
    cfg = audit_config(params)
    key = table_hash(table)
    if cfg.target_agreement is None:
        return with_progress(lambda report: _audit(key, params["encoder"], cfg, table, emb,
                                                   report), "Auditing")
    from puaudit.audit.certify import with_target

    cert = cfg.replace(target_agreement=CERTIFY_TARGET, risk=_CFG.risk)
    base = with_progress(lambda report: _audit(key, params["encoder"], cert, table, emb, report),
                         "Auditing")
    return with_target(base, cfg.target_agreement, cfg.risk)


def set_certify() -> None:
    """``on_change`` of the Audit page's certify checkbox (key ``w_certify``)."""
    ss = st.session_state
    ss["audit"]["target_agreement"] = CERTIFY_TARGET if ss["w_certify"] else None


@st.cache_data(show_spinner=False, max_entries=32)
def _m_curve(content_hash: str, encoder_label: str, config: AuditConfig, m_values: tuple,
             _table, _emb, _progress=None) -> list[dict]:
    from puaudit.audit.estimator import reversals_vs_m, score_split

    report = _progress or (lambda *a, **k: None)
    total = len(m_values) + 1
    report(0, total, "Reversals vs m: scoring the audited rows")
    # the same split (and human labels) as the audit, scored once; each m shifts its prior
    prep = prepare_split(_table, _emb, config, human=human_labels(_table, config, _emb))
    scored = score_split(prep, config)
    out = []
    for i, mv in enumerate(m_values):
        report(i + 1, total, f"Reversals vs m: m = {mv:.2f}")
        out += reversals_vs_m(prep, config, [mv], scored=scored)
    return out


def m_curve(table: ComparisonTable, emb: PairEmbeddings, params: dict,
            m_values: tuple) -> list[dict]:
    """Reversals and expected consistency over ``m_values`` (cached; a progress bar while it
    runs), on the audit's split and scores (``m`` left to the estimate)."""
    cfg = audit_config(params).replace(m=None, target_agreement=None)
    key = table_hash(table)
    return with_progress(lambda report: _m_curve(key, params["encoder"], cfg, tuple(m_values),
                                                 table, emb, report), "Reversals vs m")


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
    from components.metrics import spreadsheet_safe_copy
    from puaudit.data.io import table_to_bytes

    frame = _result.to_frame(_table)
    return table_to_bytes(spreadsheet_safe_copy(frame) if safe else frame, fmt)


def export_bytes(result, table, params: dict, fmt: str, *, safe: bool = False) -> bytes:
    """The audited ``table`` as ``fmt`` bytes with the audit's columns (cached per result and
    format)."""
    return _export_bytes(table_hash(table), repr(sorted(params.items())), fmt, safe, result,
                         table)


# --- the change over seeded splits, in the background -------------------------------------------
@st.cache_resource(show_spinner=False)
def _spread_pool() -> tuple[ThreadPoolExecutor, dict, threading.Lock]:
    return (ThreadPoolExecutor(max_workers=1, thread_name_prefix="puaudit-spread"), {},
            threading.Lock())


class SpreadSuperseded(RuntimeError):
    """A spread over seeds stopped between two splits because newer settings asked for one, or
    nobody asked for it for :data:`SPREAD_UNWATCHED_S` seconds."""


#: a spread nobody asked for this long (its visitor left or closed the tab) stops at its next
#: split: one worker serves every session, and an abandoned MT-Bench spread kept the next
#: visitor's audits waiting behind minutes of work nobody would read
SPREAD_UNWATCHED_S = 60.0


def spread_job(table: ComparisonTable, emb: PairEmbeddings, params: dict, result, *,
               n_seeds: int) -> tuple[Future, dict]:
    """The audit's change over ``n_seeds`` seeded splits (:func:`puaudit.audit.evaluate.
    delta_over_seeds`; the first split is ``result`` itself), computed in a background thread
    once per data + settings per server process.

    Returns the future and its progress, ``{"done", "total"}`` further splits audited.
    """
    from puaudit.audit.evaluate import delta_over_seeds

    cfg = audit_config(params).replace(target_agreement=None)  # certifying moves no verdict
    key = f"{table_hash(table)}|{params['encoder']}|{cfg!r}|{int(n_seeds)}"
    pool, jobs, lock = _spread_pool()
    with lock:
        job = jobs.get(key)
        if job is not None:
            job[1]["seen"] = time.monotonic()  # the Audit page polls this: someone is watching
        if job is None or job[0].cancelled() or (job[0].done() and job[0].exception() is not None):
            # a slider moved on: spreads of earlier settings that have not started yet are
            # dropped, so the one asked for now does not wait behind them
            for other, value in jobs.items():
                if other not in (key, "__latest__"):
                    value[0].cancel()
            prog = {"done": 0, "total": int(n_seeds) - 1, "seen": time.monotonic()}
            jobs["__latest__"] = key

            def report(done: int, total: int, key=key) -> None:
                prog.update(done=done, total=total)
                if jobs.get("__latest__") != key:  # one pool: newer settings go first
                    raise SpreadSuperseded("newer settings asked for their own spread")
                if time.monotonic() - prog["seen"] > SPREAD_UNWATCHED_S:
                    raise SpreadSuperseded("nobody has asked for this spread for "
                                           f"{SPREAD_UNWATCHED_S:.0f} s")

            fut = pool.submit(delta_over_seeds, table, emb, cfg, n_seeds=int(n_seeds),
                              first_delta=result.metrics.get("delta"), progress=report)
            jobs[key] = job = (fut, prog)
            while len(jobs) > 17:  # bounded memory: forget the oldest finished spreads
                old = next(k for k in jobs if k != "__latest__")
                if not jobs[old][0].done():
                    break
                jobs.pop(old)
    return job


# --- UMAP in the background -------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def _umap_pool() -> tuple[ThreadPoolExecutor, dict, threading.Lock]:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="puaudit-umap"), {}, threading.Lock()


def umap_job(key: str, z: np.ndarray, seed: int) -> Future:
    """A background UMAP projection of ``z`` (one per content key per server process)."""
    from puaudit.embed.projection import project_2d

    pool, jobs, lock = _umap_pool()
    with lock:
        fut = jobs.get(key)
        if fut is None or (fut.done() and fut.exception() is not None):
            fut = pool.submit(project_2d, z, method="umap", random_state=seed)
            jobs[key] = fut
            while len(jobs) > 16:  # keep memory bounded: forget the oldest finished layouts
                old = next(iter(jobs))
                if not jobs[old].done():
                    break
                jobs.pop(old)
    return fut


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
