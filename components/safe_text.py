r"""Show data-derived strings as text, never as markup.

Question types, column names, labels, annotator ids and file names come from the uploaded table.
Streamlit renders Markdown in ``st.markdown``, ``st.caption``, ``st.write``, ``st.error`` and
in the labels of expanders, widgets, tabs, metrics and radio options; Plotly renders a subset of
HTML (``<a href>``, ``<b>``, ``<br>``) in titles, tick labels, legends and hover text. A value
such as ``![](http://host/x.png)`` would make every viewer's browser fetch that URL, and
``<a href=...>`` would become a live link. Every such string goes through one of these helpers
first:

:func:`md`
    Backslash-escapes (CommonMark: an escaped punctuation character is always shown literally)
    every character that can start Markdown, HTML, math or a Streamlit directive: always
    ``\ ` * [ ] < ~ $ & |`` (with ``[`` and ``]`` escaped no link or image can form, so ``!``
    and parentheses stay as they are); ``_`` where it could delimit emphasis (not inside a word
    such as ``judge_winner``); ``:`` where it could start an emoji, icon or colour directive
    (not before a space); and ``- + = # >`` or ``1.`` at the start of a line, where they make
    lists, headings or quotes. Ordinary messages therefore stay readable in the page source.
    Streamlit finds icons and emoji shortcodes (``:material/verified:``, ``:smile:``) in the
    text *after* escapes are resolved, so an escaped colon alone does not stop them: a WORD
    JOINER goes after the colon that opens one, and the name no longer follows it.
    GitHub-flavoured Markdown also turns bare ``http://``, ``www.`` and e-mail addresses into
    links *after* escapes are resolved, so a WORD JOINER (U+2060, invisible) is put into
    ``://``, after ``www`` and before ``@``: the text looks the same and no link is built.
:func:`md_label`
    :func:`md` on one line: newlines become spaces (a label is one line).

Plotly's labels go through :func:`puaudit.report.figures.text.plotly_text`.
"""

from __future__ import annotations

import re

__all__ = ["md", "md_label", "WORD_JOINER"]

_ALWAYS = re.compile(r"([\\`*\[\]<~$&|])")
_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_COLON = re.compile(r":(?=\S)")
# an icon or emoji shortcode Streamlit would draw: ":material/name:", ":streamlit:", ":smile:"
# (its characters may have been escaped already: ":smile:x" is "\:smile\:x" by now)
_SHORTCODE = re.compile(r"(?<=\\:)(?=material/|streamlit/|(?:\\?[\w+-])+\\?:)")
_LINE_START = re.compile(r"^([ \t]*)([-+=#>]|\d+(?=[.)]))", re.MULTILINE)
# what GFM turns into a link on its own (after escapes are resolved): scheme://, www., x@y
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)
WORD_JOINER = "\u2060"


def _line_start(m: re.Match) -> str:
    lead, mark = m.group(1), m.group(2)
    # "1." / "1)": escape the character after the digits; "-", "#", ...: escape the character
    return lead + (mark + "\\" if mark[0].isdigit() else "\\" + mark)


def md(value) -> str:
    """``str(value)`` escaped so that Streamlit's Markdown shows it literally (see above)."""
    text = _ALWAYS.sub(r"\\\1", str(value))
    text = _UNDERSCORE.sub(r"\\_", text)
    text = _COLON.sub(r"\\:", text)
    text = _SHORTCODE.sub(WORD_JOINER, text)
    text = _AUTOLINK.sub(WORD_JOINER, text)
    return _LINE_START.sub(_line_start, text)


def md_label(value) -> str:
    """:func:`md` for a one-line label (expander, widget, tab, metric): newlines become spaces."""
    return md(re.sub(r"[\r\n]+", " ", str(value)))
