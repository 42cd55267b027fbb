"""The audit report in a real browser (Debian's Chromium, Playwright): the HTML file written by
``puaudit report`` for a table whose names and texts hold planted markup is opened from disk
with every request routed through the test; nothing but the file itself may be requested, the
plots must draw, and no planted image or link may appear. A screenshot goes to tests/artifacts/.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from puaudit.cli.commands import main
from puaudit.embed.hashing import HashingEncoder
from tests.make_hostile_files import PLANTED_HOST, markup_frame
from tests.browser_support import ARTIFACTS, chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# every node that would fetch or link: an image, an anchor, a frame, an external script
_LINKING_NODES = """() => [...document.querySelectorAll('img, image, a, iframe, script[src], link')]
    .map(e => e.outerHTML.slice(0, 120))"""


@pytest.fixture(scope="module")
def report_file(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("browser_report")
    df = markup_frame()
    df.to_csv(d / "bad.csv", index=False)
    enc = HashingEncoder()
    np.savez(d / "emb.npz", e_a=enc.encode(df["prompt"] + " " + df["response_a"]),
             e_b=enc.encode(df["prompt"] + " " + df["response_b"]))
    assert main(["report", str(d / "bad.csv"), "-o", str(d / "report.html"), "--embeddings",
                 str(d / "emb.npz"), "--scorer", "centroid", "--spread-seeds", "2"]) == 0
    return d / "report.html"


def test_report_opens_offline_and_draws_its_plots(report_file):
    url = report_file.resolve().as_uri()
    requested, errors = [], []

    def route(r):  # the page itself may load; anything else is recorded and refused
        requested.append(r.request.url)
        (r.continue_() if r.request.url == url else r.abort())

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/*", route)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url, wait_until="load")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        page.wait_for_timeout(1500)  # the last figures draw after the first
        n_plots = page.locator(".js-plotly-plot").count()
        linking = page.evaluate(_LINKING_NODES)
        text = page.inner_text("body")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    assert [u for u in requested if u != url] == [], requested
    assert errors == []
    assert n_plots >= 6  # radar, densities, two rankings, two annotator plots, consistency
    assert linking == []
    assert f"http://{PLANTED_HOST}/puaudit-planted-ann" in text  # shown as typed, as text
    assert "Verdict" in text and "Model rankings" in text


# the m curve's geometry: each y tick label, and the axis titles, against the plot's own box
_M_CURVE_BOXES = """() => {
    const div = [...document.querySelectorAll('.js-plotly-plot')]
        .find(d => (d.querySelector('.ytitle') || {}).textContent === 'rows reversed');
    const box = e => { const b = e.getBoundingClientRect();
                       return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
    return {svg: box(div.querySelector('.main-svg')),
            yticks: [...div.querySelectorAll('.ytick text')].map(box),
            xticks: [...div.querySelectorAll('.xtick text')].map(box),
            xtitle: box(div.querySelector('.xtitle')), ytitle: box(div.querySelector('.ytitle'))};
}"""


@pytest.fixture(scope="module")
def export_page_report(report_file) -> Path:
    """The same report built as the Export page builds it: in a process whose plotly template
    is Streamlit's (no axis automargin; Streamlit's frontend adds its own margins)."""
    import plotly.io as pio
    import streamlit.elements.plotly_chart  # noqa: F401 - registers Streamlit's template

    d = report_file.parent
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pio.templates, "default", "streamlit")
        assert main(["report", str(d / "bad.csv"), "-o", str(d / "export.html"),
                     "--embeddings", str(d / "emb.npz"), "--scorer", "centroid",
                     "--spread-seeds", "1"]) == 0
    return d / "export.html"


def test_m_curve_labels_are_inside_the_plot_and_clear_of_each_other(export_page_report):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
                   else r.abort())
        page.goto(export_page_report.resolve().as_uri(), wait_until="load")
        page.wait_for_selector(".js-plotly-plot .ytitle", timeout=60_000)
        page.wait_for_timeout(1000)
        boxes = page.evaluate(_M_CURVE_BOXES)
    svg = boxes["svg"]
    assert boxes["yticks"] and boxes["xticks"]
    # every y tick label and the y title are drawn whole, inside the figure
    assert min(b["left"] for b in boxes["yticks"]) >= svg["left"]
    assert boxes["ytitle"]["left"] >= svg["left"]
    assert boxes["ytitle"]["right"] <= min(b["left"] for b in boxes["yticks"])
    # the x title sits below the x tick labels, inside the figure
    assert boxes["xtitle"]["top"] >= max(b["bottom"] for b in boxes["xticks"])
    assert boxes["xtitle"]["bottom"] <= svg["bottom"]
