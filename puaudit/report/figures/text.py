"""Data-derived strings as Plotly text, never markup.

Question types, model and annotator names, judge columns and file names come from the table.
Plotly renders a subset of HTML (``<a href>``, ``<b>``, ``<br>``) in titles, tick labels,
legends and hover text, so a value such as ``<a href=...>`` would become a live link: every such
string goes through :func:`plotly_text` first. (The dashboard's Markdown escaping lives beside
the pages, in ``components/safe_text.py``.)
"""

from __future__ import annotations

__all__ = ["plotly_text", "plotly_texts"]


def plotly_text(value) -> str:
    """``str(value)`` with ``&``, ``<``, ``>`` as entities: Plotly shows them as characters and
    builds no link, line break or styling from them."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plotly_texts(values) -> list[str]:
    """:func:`plotly_text` of each value (for categories, tick labels, legend names)."""
    return [plotly_text(v) for v in values]
