"""The audited table as download bytes, cached per result and format."""

from __future__ import annotations

import streamlit as st

from components.state import table_hash

__all__ = ["export_bytes"]


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
