"""What the Audit page draws that an ``m`` step does not change, kept across its steps.

The verdict-evidence weights (their figure and table) and *How auto chose the scorer* come from
the scoring choice, which reads the split and the scorer settings but not ``m`` (only ``pot``,
by name, refits at each ``m``) nor certification. They are built once per choice and reused, so
an ``m`` or Certify step draws only what it changed (docs/dashboard.md, "Slider steps").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

import streamlit as st

from components import audit_runs, state
from puaudit.data.schema import ComparisonTable
from puaudit.embed.pairs import PairEmbeddings

__all__ = ["by_scores", "choice_key"]

#: views kept (a few per table and setting: each is a small figure or table)
KEEP = 64


@st.cache_resource(show_spinner=False)
def _views() -> tuple[OrderedDict, threading.Lock]:
    return OrderedDict(), threading.Lock()


def choice_key(table: ComparisonTable, emb: PairEmbeddings, params: dict) -> tuple:
    """What the scoring choice of these settings reads (the stage cache's key), with the
    table's content hash and the encoder: the same key means the same scores and evidence."""
    cfg = state.audit_config(params)
    return (state.table_hash(table), params["encoder"],
            audit_runs.stage_cache(table, emb).choice_key(cfg))


def by_scores(name: str, table: ComparisonTable, emb: PairEmbeddings, params: dict,
              build: Callable[[], object]):
    """``build()`` once per ``name`` (the view) and scoring choice (:func:`choice_key`), shared
    by sessions; ``build`` must read nothing an ``m`` or Certify step changes."""
    key = (name, choice_key(table, emb, params))
    views, lock = _views()
    with lock:
        if key in views:
            views.move_to_end(key)
            return views[key]
    value = build()
    with lock:
        views[key] = value
        while len(views) > KEEP:
            views.popitem(last=False)
    return value
