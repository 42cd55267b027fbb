"""Markup in the data, in a real browser (Debian's Chromium, Playwright): data whose cells, column
names, question types, labels, annotator ids, model and candidate names hold Markdown images
(``![](http://127.0.0.1:9/...)``), HTML images and ``<a href>`` links is uploaded, every page
of the dashboard is visited, and the browser must have requested nothing but the app's own
origin, drawn no planted image and built no planted link. Screenshots go to tests/artifacts/.

The server runs with the hashing test encoder (no model), so the test measures rendering only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.make_hostile_files import (
    PLANTED_HOST,
    markup_frame,
    markup_pairwise,
    planted,
)
from bench._browser import idle, wait_for_value
from tests.browser_support import ARTIFACTS, chromium, hashing_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# every planted DOM node: an <img> or <image> whose source, or an <a> whose target, is planted
_PLANTED_NODES = """() => [...document.querySelectorAll('img, image, a')].map(
    e => e.getAttribute('src') || e.getAttribute('href') || e.getAttribute('xlink:href') || '')
    .filter(u => u.includes('puaudit-planted') || u.includes('%s'))""" % PLANTED_HOST


def _seen(text: str) -> str:
    """Text as a reader sees it: without the invisible word joiners of components.safe_text."""
    return text.replace("\u2060", "")


def _upload(page, path: Path, *, sidebar: bool = False) -> None:
    scope = '[data-testid="stSidebar"] ' if sidebar else '[data-testid="stMain"] '
    page.locator(scope + '[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(
        str(path))
    idle(page, 300)


def test_markup_in_data_is_never_rendered_and_nothing_is_fetched(hashing_server,  # noqa: F811
                                                                 tmp_path):
    bad = markup_frame()
    bad.loc[3, "judge_winner"] = planted("img", "label")  # an unknown label: an error box
    bad_path = tmp_path / "labels.csv"
    bad.to_csv(bad_path, index=False)
    good_path = tmp_path / "markup.csv"
    markup_frame().to_csv(good_path, index=False)
    pairs_path = tmp_path / "pairs.csv"
    markup_pairwise().to_csv(pairs_path, index=False)

    requests: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 2000})
        page.on("request", lambda r: requests.append(r.url))
        page.set_default_timeout(300_000)
        page.goto(hashing_server)
        page.wait_for_selector('[data-testid="stMetric"]')
        idle(page)

        _upload(page, bad_path)
        box = page.locator('[data-testid="stAlertContainer"]').first
        # the unknown label is in the error box as typed (invisible word joiners aside), not as
        # an image or a link
        assert planted("img", "label") in _seen(box.inner_text()), box.inner_text()
        page.screenshot(path=str(ARTIFACTS / "markup_error.png"), full_page=True)
        assert page.evaluate(_PLANTED_NODES) == []

        _upload(page, good_path)
        wait_for_value(page, "180")
        links = page.locator('[data-testid="stSidebarNav"] a')
        # a link reads "<icon name>\n\n<title>"
        titles = [links.nth(i).inner_text().strip().split("\n")[-1].strip()
                  for i in range(links.count())]
        assert {"Data", "Audit", "Scores", "Export", "Annotators", "Consistency"} <= set(titles)
        shown: dict[str, str] = {}
        for title in titles:
            page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()
            idle(page, 600)
            if title == "Consistency":
                _upload(page, pairs_path, sidebar=True)
            if title == "Annotators":  # open a disagreement: its label holds a planted name
                expanders = page.locator('[data-testid="stExpander"] summary')
                if expanders.count():
                    expanders.last.click()
                    idle(page, 120)
            page.wait_for_timeout(1500)  # charts draw after the run ends
            assert page.locator('[data-testid="stException"]').count() == 0, title
            slug = title.lower().replace(" ", "_")
            page.screenshot(path=str(ARTIFACTS / f"markup_{slug}.png"), full_page=True)
            assert page.evaluate(_PLANTED_NODES) == [], title
            shown[title] = _seen(page.locator('[data-testid="stMain"]').inner_text())

    origin = hashing_server.rstrip("/")
    foreign = [u for u in requests if not (u.startswith(origin + "/") or u == origin
                                           or u.startswith(("data:", "blob:", "about:")))]
    assert foreign == [], sorted(set(foreign))
    assert not [u for u in requests if "planted" in u]
    # the planted strings reached the pages, as text
    assert "puaudit-planted-type" in shown["Scores"] + shown["Audit"]
    assert "puaudit-planted-column" in shown["Export"]
    assert "puaudit-planted-ann" in shown["Annotators"]
    assert "puaudit-planted-cand" in shown["Consistency"]
