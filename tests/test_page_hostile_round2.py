"""Hostile inputs through the dashboard (AppTest, hashing test encoder): upload limits on every page
that accepts a file, and markup in the data shown as text on every page.

The real-browser proof that nothing is fetched is tests/test_browser_markup.py; these tests
check the same on the element tree, fast.
"""

from __future__ import annotations

import gzip
import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from components.safe_text import WORD_JOINER, md, md_label
from puaudit.report.figures.text import plotly_text
from puaudit.data.demo import generate_demo
from puaudit.data.limits import DEFAULT_UPLOAD_LIMITS, upload_limits
from tests.conftest import ROOT
from tests.make_hostile_files import markup_frame, markup_pairwise, planted

pytestmark = pytest.mark.usefixtures("app_env")

APP = str(ROOT / "app.py")
TIMEOUT = 240
PAGES = ["pages/data.py", "pages/audit.py", "pages/scores.py", "pages/embedding_map.py",
         "pages/question_types.py", "pages/export.py", "pages/annotators.py"]


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def _rows_metric(at) -> str:
    return next(m.value for m in at.metric if m.label == "Rows")


def _unescape(text: str) -> str:
    """The text a reader sees: escapes resolved, the invisible word joiners (which keep GFM
    from building links out of bare URLs) left out."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text).replace(WORD_JOINER, "")


# -- upload limits ----------------------------------------------------------------------------
def test_upload_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_MB", "12")
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_ROWS", "1_000")
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_COLUMNS", "lots")  # ignored: not a number
    lim = upload_limits()
    assert (lim.max_mb, lim.max_rows) == (12, 1000)
    assert lim.max_columns == DEFAULT_UPLOAD_LIMITS.max_columns
    assert lim.max_bytes == 12 * 2**20


def test_data_page_refuses_a_small_gzip_that_expands_past_the_limit(monkeypatch):
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_MB", "1")
    blob = gzip.compress(generate_demo(n_rows=600, random_state=1).to_csv(index=False).encode()
                         * 1, mtime=0)
    blob = gzip.compress(gzip.decompress(blob) + b"".join(
        gzip.decompress(blob).split(b"\n", 1)[1] for _ in range(5)), mtime=0)
    assert len(blob) < 2**20 < len(gzip.decompress(blob))
    at = _app()
    at.file_uploader[0].set_value(("bomb.csv.gz", blob, "application/gzip")).run()
    assert not at.exception
    shown = _unescape(" ".join(e.value for e in at.error))
    assert "expands to more than 1 MB when decompressed" in shown
    assert "puaudit audit bomb.csv.gz" in shown and "PUAUDIT_MAX_UPLOAD_MB" in shown
    assert _rows_metric(at) == "600"  # the previous data stay


def test_data_page_refuses_too_many_rows(monkeypatch):
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_ROWS", "100")
    at = _app()
    data = generate_demo(n_rows=150, random_state=2).to_csv(index=False).encode()
    at.file_uploader[0].set_value(("rows.csv", data, "text/csv")).run()
    assert "more than 100 data rows" in _unescape(" ".join(e.value for e in at.error))
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_ROWS", "150")
    data = generate_demo(n_rows=150, random_state=4).to_csv(index=False).encode()  # a new file
    at.file_uploader[0].set_value(("rows2.csv", data, "text/csv")).run()
    assert not at.error and _rows_metric(at) == "150"


def test_annotators_and_consistency_uploads_have_the_same_limits(monkeypatch):
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_ROWS", "50")
    data = generate_demo(n_rows=120, random_state=3).to_csv(index=False).encode()
    at = AppTest.from_file(str(ROOT / "pages" / "annotators.py"), default_timeout=TIMEOUT)
    at.run()
    at.file_uploader[0].set_value(("many.csv", data, "text/csv")).run()
    assert not at.exception and "more than 50 data rows" in _unescape(at.error[0].value)
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_ROWS", "20")
    pairs = markup_pairwise().to_csv(index=False).encode()  # 36 rows
    at = AppTest.from_file(str(ROOT / "pages" / "consistency.py"), default_timeout=TIMEOUT)
    at.run()
    at.file_uploader[0].set_value(("pairs.csv", pairs, "text/csv")).run()
    assert not at.exception and "more than 20 data rows" in _unescape(at.error[0].value)


# -- markup shown as text ---------------------------------------------------------------------
def test_escaping_helpers():
    for kind in ("img", "link", "html", "style"):
        text = planted(kind, "t")
        assert re.search(r"(?<!\\)[\[<]", md(text)) is None
        assert _unescape(md(text)) == text
        assert "<" not in plotly_text(text)
    plain = "'judge_winner' appears twice: see row 3."
    assert md(plain) == plain
    assert md("_x_ *y* `z` $1$ :red[a]") == r"\_x\_ \*y\* \`z\` \$1\$ \:red\[a\]"
    assert md("- a\n# b\n1. c") == "\\- a\n\\# b\n1\\. c"
    assert md_label("a\nb") == "a b"
    wj = WORD_JOINER
    assert md("http://h/x www.h.org a@b.c") == f"http\\:{wj}//h/x www{wj}.h.org a{wj}@b.c"


def _texts(at) -> list[str]:
    """Everything on the page that Streamlit renders as Markdown."""
    out = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "header",
                 "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [e.label for e in at.expander] + [e.label for e in at.metric]
    out += [str(t.label) for t in at.tabs]
    for r in at.radio:
        out += [str(o) for o in r.options]
    return out


def _plotly_strings(at) -> list[str]:
    found = []

    def walk(x):
        if isinstance(x, str):
            found.append(x)
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(k)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for chart in at.get("plotly_chart"):
        walk(json.loads(chart.proto.spec))
    return found


def _assert_text_only(at, page: str) -> int:
    n = 0
    for text in _texts(at):
        if "planted" in text:
            n += 1
            assert re.search(r"(?<!\\)[\[<]", text) is None, (page, text)
    for text in _plotly_strings(at):
        if "planted" in text:
            n += 1
            assert "<a" not in text and "<img" not in text, (page, text)
    return n


def test_markup_in_cells_names_and_labels_is_shown_as_text_on_every_page():
    at = _app()
    bad = markup_frame().copy()
    bad.loc[3, "judge_winner"] = planted("img", "label")  # an unknown label: an error box
    at.file_uploader[0].upload("labels.csv", bad.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception and at.error
    assert _assert_text_only(at, "data (unknown label)") >= 1
    at.file_uploader[0].upload("markup.csv", markup_frame().to_csv(index=False).encode(),
                               "text/csv").run()
    assert not at.exception and _rows_metric(at) == "180", [e.value for e in at.error]
    seen = {}
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        seen[page] = _assert_text_only(at, page)
    # the planted names reached the pages that show them
    assert seen["pages/export.py"] >= 1 and seen["pages/annotators.py"] >= 1, seen
    assert seen["pages/question_types.py"] >= 1 and seen["pages/scores.py"] >= 1, seen


def test_markup_in_a_pairwise_table_is_shown_as_text_on_the_consistency_page():
    at = AppTest.from_file(str(ROOT / "pages" / "consistency.py"), default_timeout=TIMEOUT)
    at.run()
    at.file_uploader[0].upload("pairs.csv", markup_pairwise().to_csv(index=False).encode(),
                               "text/csv").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert _assert_text_only(at, "consistency") >= 3
