"""The data the Annotators, Consistency, Models, Review and Embedding map pages show: loaded,
computed and cached here, so that page files hold only widgets and layout.

Every cache is a ``st.cache_data`` keyed by content: a table by :func:`table_key`, an upload by
its bytes, an array by a digest of its values; unhashed objects travel as ``_underscore``
arguments. Nothing is keyed by ``id()``, which a new object may reuse.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import streamlit as st

from components import audit_runs, state
from components.split_picker import unpacked_zip
from components.uploads import read_upload
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError

__all__ = ["table_key", "array_key", "read_page_upload", "annotator_demo_frame",
           "annotator_report_for", "annotator_model_for", "audited_verdicts", "model_rankings",
           "consistency_pairs", "data_page_pairs", "consistency_scores", "consistency_analysis",
           "pca_layout", "review_rows", "review_decisions", "CONSISTENCY_K"]

#: the candidate-set sizes of NTR_k on the Consistency page
CONSISTENCY_K = (3, 4, 5)


# --- keys -------------------------------------------------------------------------------------
def _frame_digest(frame: pd.DataFrame) -> str:
    try:
        values = pd.util.hash_pandas_object(frame, index=True).to_numpy()
    except TypeError:  # unhashable cells (lists, dicts): hash their text
        values = pd.util.hash_pandas_object(frame.astype(str), index=True).to_numpy()
    h = hashlib.sha256(values.tobytes())
    h.update(repr([str(c) for c in frame.columns]).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def table_key(table: ComparisonTable) -> str:
    """A content key of everything in ``table``: what the audit reads
    (:func:`components.state.table_hash`), every cell of its frame (the annotator and model
    reports read columns the audit does not) and the column mapping; computed once per table.
    """
    key = table.extra.get("page_key")
    if key is None:
        h = hashlib.sha256(state.table_hash(table).encode())
        h.update(_frame_digest(table.frame).encode())
        h.update(repr(sorted((str(r), str(c)) for r, c in table.columns.items())).encode(
            "utf-8", "surrogatepass"))
        key = table.extra["page_key"] = h.hexdigest()
    return key


def array_key(values) -> str:
    """A content key of an array of numbers or labels (``""`` for ``None``)."""
    if values is None:
        return ""
    arr = np.asarray(values)
    if arr.dtype.kind in "biuf":
        return hashlib.sha1(np.ascontiguousarray(arr, dtype=float).tobytes()).hexdigest()
    return hashlib.sha1("\x1f".join(map(str, arr.tolist())).encode("utf-8",
                                                                    "surrogatepass")).hexdigest()


# --- uploads and the Annotators page -----------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=8)
def _read_upload(data: bytes, name: str, max_upload_mb: int) -> pd.DataFrame:
    # a zipped folder with no default split is read at its first split: from the same unpacking
    return read_upload(data, name, max_upload_mb=max_upload_mb, unpack_zip=unpacked_zip)


def read_page_upload(data: bytes, name: str) -> pd.DataFrame:
    """An uploaded table, read within the server's upload limits (as on the Data page) and
    cached by its bytes."""
    return _read_upload(data, name, int(st.get_option("server.maxUploadSize")))


@st.cache_data(show_spinner=False, max_entries=2)
def annotator_demo_frame() -> pd.DataFrame | None:
    """The Annotators page's demo table (1,200 generated rows), or None without the generator."""
    try:
        from puaudit.data.demo import generate_demo
    except ImportError:
        return None
    return generate_demo(n_rows=1200, random_state=0)


@st.cache_data(show_spinner=False, max_entries=16)
def _annotator_report(key: str, judge_name: str, params: tuple, _table):
    from puaudit.annotators.agreement import annotator_report

    return annotator_report(_table, judge_name=judge_name, **dict(params))


def annotator_report_for(table: ComparisonTable, *, judge_name: str, **params):
    """:func:`puaudit.annotators.agreement.annotator_report` of ``table`` (cached by
    :func:`table_key` and ``params``)."""
    return _annotator_report(table_key(table), judge_name, tuple(sorted(params.items())), table)


@st.cache_data(show_spinner=False, max_entries=16)
def _annotator_model(key: str, p_key: str, judge_name: str, params: tuple, _table, _p_right):
    from puaudit.annotators import annotator_model_report

    return annotator_model_report(_table, judge_name=judge_name, p_judge_right=_p_right,
                                  **dict(params))


def annotator_model_for(table: ComparisonTable, *, judge_name: str, p_judge_right=None,
                        **params):
    """:func:`puaudit.annotators.annotator_model_report` of ``table`` (cached by
    :func:`table_key`, the audit's probabilities' values and ``params``)."""
    return _annotator_model(table_key(table), array_key(p_judge_right), judge_name,
                            tuple(sorted(params.items())), table, p_judge_right)


# --- the Models page ---------------------------------------------------------------------------
def audited_verdicts(table: ComparisonTable) -> np.ndarray:
    """The audit's adjusted verdicts of ``table`` with this session's settings (runs or reuses
    the cached audit); raises :class:`PUAuditError` when the audit cannot run."""
    params = state.audit_params()
    emb = audit_runs.get_embeddings(table, params["encoder"])
    return audit_runs.run_audit(table, emb, params).adjusted


@st.cache_data(show_spinner="Fitting the four leaderboards…", max_entries=16)
def _rankings(key: str, audit_key: str, ties: str, length_control: bool, n_resamples: int,
              random_state: int, _table, _audited):
    from puaudit.rankings.estimate import table_rankings

    return table_rankings(_table, audited=_audited, ties=ties, length_control=length_control,
                          n_resamples=n_resamples, random_state=random_state)


def model_rankings(table: ComparisonTable, audited=None, *, ties: str, length_control: bool,
                   n_resamples: int, random_state: int):
    """:func:`puaudit.rankings.estimate.table_rankings` of ``table`` (cached by
    :func:`table_key`, the audited verdicts' values and every option)."""
    return _rankings(table_key(table), array_key(audited), ties, bool(length_control),
                     int(n_resamples), int(random_state), table, audited)


# --- the Consistency page ----------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=8)
def consistency_pairs(source: tuple):
    """The pairwise table of the generated demo, ``("demo",)``, or of an upload,
    ``("upload", bytes, name)``."""
    from puaudit.trustjudge import make_demo, read_pairwise

    if source[0] == "demo":
        return read_pairwise(make_demo()[0], name="demo")
    return read_pairwise(read_page_upload(source[1], source[2]), name=source[2])


@st.cache_data(show_spinner=False, max_entries=8)
def _data_page_pairs(key: tuple, _frame):
    from puaudit.report.figures.consistency import pairwise_fit

    return pairwise_fit(_frame, name=key[2])


def data_page_pairs() -> tuple[tuple | None, object, str | None, str]:
    """The Data page's table as a pairwise table: ``(key, pairs, reason, name)``, pairs None
    (and ``reason`` why) when it does not read as one, key None without a table; the key names
    the uploaded bytes' hash (or the demo) and the split read from them."""
    ss = st.session_state
    name = str(ss.get("source_name") or "")
    frame = ss.get("raw_frame")
    if frame is None:
        return None, None, None, name
    key = ("data", ss.get("source_sha256") or "generated", name, ss.get("source_split"),
           len(frame), tuple(map(str, frame.columns)))
    pairs, reason = _data_page_pairs(key, frame)
    return key, pairs, reason, name


@st.cache_data(show_spinner=False, max_entries=8)
def _load_scores(score_data: bytes, score_name: str):
    from puaudit.trustjudge import read_scores

    return read_scores(read_page_upload(score_data, score_name), name=score_name)


def consistency_scores(source: tuple, score_data: bytes | None, score_name: str):
    """The single scores: an uploaded scores file, else the demo's own (the demo's source
    only), else None."""
    from puaudit.trustjudge import make_demo

    if score_data is not None:
        return _load_scores(score_data, score_name)
    return make_demo()[1] if source[0] == "demo" else None


@st.cache_data(show_spinner="Counting cycles…", max_entries=16)
def _analyse(source: tuple, _pairs, score_data: bytes | None, score_name: str, method: str,
             delta: float, gamma: float, score_method: str | None,
             rescale: tuple[float, float] | None, tol: float):
    from puaudit.trustjudge import analyse

    # the demo brings its own scores; any other table is scored only by an uploaded scores file
    scores = consistency_scores(source, score_data, score_name)
    return analyse(_pairs, scores, method=method, delta=delta, k=CONSISTENCY_K, gamma=gamma,
                   score_method=score_method if scores is not None else None,
                   rescale_to=rescale if scores is not None else None, tol=tol)


def consistency_analysis(source: tuple, pairs, score_data: bytes | None, score_name: str, *,
                         method: str, delta: float, gamma: float, score_method: str | None,
                         rescale: tuple[float, float] | None, tol: float):
    """:func:`puaudit.trustjudge.analyse` of ``pairs`` (named by ``source``, the content key)
    with the scores of :func:`consistency_scores` (cached by the key and every option)."""
    return _analyse(source, pairs, score_data, score_name, method, float(delta), float(gamma),
                    score_method, rescale, float(tol))


# --- the Embedding map page --------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=8)
def _pca(content_key: str, _z):
    from puaudit.embed.projection import project_2d

    return project_2d(_z, method="pca")


def pca_layout(content_key: str, z: np.ndarray) -> np.ndarray:
    """The PCA layout of ``z`` (cached by ``content_key``: table hash, encoder and seed)."""
    return _pca(content_key, z)


# --- the Review page ---------------------------------------------------------------------------
def review_rows(table: ComparisonTable):
    """``(base, keys)``: the table as loaded, before review votes were merged (``base is table``
    when none were), and its rows' content keys (cached on the table)."""
    from puaudit.review.feedback import base_table
    from puaudit.review.keys import row_keys

    base = base_table(table)
    return base, row_keys(base)


def review_decisions(keys, pending: list) -> tuple:
    """``(store, decisions, seen, pending)`` for the rows ``keys``: the store None until a
    first decision creates it; decisions the database refused earlier (``pending``) retried on
    every run, never dropped; ``seen`` the stored ones plus those still pending. A store that
    cannot be read is an error box and a stopped page.
    """
    from puaudit.review.store import empty_decisions, get_store, store_exists
    from components.safe_text import md

    try:
        store = get_store() if store_exists() else None
    except PUAuditError as exc:
        audit_runs.show_error(exc)
        st.stop()
    if pending:
        try:
            store = get_store()
            store.add_many(pending)
            st.success(f"Saved {len(pending)} decision(s) that were waiting for the database.")
            pending = []
        except PUAuditError as exc:
            st.warning(f"{len(pending)} decision(s) are kept in this browser session until the "
                       f"database accepts them. {md(exc)}")
    try:
        decisions = store.decisions(keys) if store is not None else empty_decisions()
    except PUAuditError as exc:
        audit_runs.show_error(exc)
        st.stop()
    seen = decisions
    if pending:
        extra = pd.DataFrame(pending)
        extra["created_at"] = pd.to_datetime(extra["created_at"], utc=True)
        seen = pd.concat([decisions, extra[[c for c in decisions.columns if c in extra]]],
                         ignore_index=True)
    return store, decisions, seen, pending
