"""Per-session data and audit parameters for the Streamlit dashboard.

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
"""

from __future__ import annotations

import hashlib

import streamlit as st

from components.encoder_state import encoder_options
from puaudit.audit.config import RULES, AuditConfig
from puaudit.errors import DASHBOARD, PUAuditError
from puaudit.data.folders import SPLIT
from puaudit.data.schema import ComparisonTable, load_comparisons

__all__ = ["DEMO_NAME", "RULE_CHOICES", "CERTIFY_TARGET", "set_source",
           "build_table", "through_navigation", "ensure_data", "table_hash", "audit_params",
           "bind", "audit_config", "set_certify", "sha256_bytes"]

DEMO_NAME = "demo data (generated)"
RULE_CHOICES = RULES
#: the target a session's certification starts at (and its certified audit is cached at)
CERTIFY_TARGET = 0.9


@st.cache_data(show_spinner=False, max_entries=4)
def demo_frame(n_rows: int, random_state: int):
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
        ss["table_error"] = exc.advice(DASHBOARD)
        return None
    ss["table"] = table
    return table


def through_navigation() -> None:
    """Make sure a page runs inside ``app.py``'s navigation, not on its own: a deep link
    (``/review``) as the first visit after a start runs the page file alone, with the folder's
    file names as the menu for every later session, until ``st.navigation`` has run once. This
    clears that flag and reruns, so the entry script picks the page from the URL.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def ensure_data() -> None:
    """Load the generated demo data on first open, so every page has content."""
    if "raw_frame" not in st.session_state:
        set_source(demo_frame(600, 0), DEMO_NAME, None)


def table_hash(table: ComparisonTable) -> str:
    """``table.content_hash()``, computed once per table object."""
    if "content_hash" not in table.extra:
        table.extra["content_hash"] = table.content_hash()
    return table.extra["content_hash"]


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
    """Widget keyword arguments that keep parameter ``name`` across pages (in
    ``session_state["audit"]``, seeded back into the widget key on each run)."""
    params = audit_params()
    st.session_state[f"w_{name}"] = params[name] if value is None else value
    return {"key": f"w_{name}", "on_change": _save, "args": (name,)}


def audit_config(params: dict) -> AuditConfig:
    """The :class:`AuditConfig` of this session's parameters (the audit caches' key)."""
    return AuditConfig(**{k: v for k, v in params.items() if k != "encoder"})


def set_certify() -> None:
    """``on_change`` of the Audit page's certify checkbox (key ``w_certify``)."""
    ss = st.session_state
    ss["audit"]["target_agreement"] = CERTIFY_TARGET if ss["w_certify"] else None


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of uploaded ``data`` (``source_sha256``; the key of an unpacked upload)."""
    return hashlib.sha256(data).hexdigest()
