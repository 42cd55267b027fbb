"""The Review page in a real browser (Chromium via Playwright, hashing test encoder, demo data):
two reviewers in two browser sessions review three rows each, clicking at the same time (one
decision by keyboard shortcut, after a note whose letters must not trigger one); the
server restarts; the decisions are all there; the export downloaded from the page contains them."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from puaudit.review.store import ReviewStore
from bench._browser import idle, metric
from tests.browser_support import ARTIFACTS, chromium, hashing_env, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _env(db) -> dict:
    env = hashing_env(review_db=db)
    env.pop("PUAUDIT_REVIEW_URL", None)
    return env


def _open_review(page, url: str, name: str) -> None:
    page.goto(url + "/review")
    page.wait_for_selector('[data-testid="stMetric"]:has-text("Left in your queue")')
    idle(page)
    box = page.get_by_label("Your name (required to review)")
    box.fill(name)
    box.press("Enter")
    idle(page)
    page.wait_for_selector('button:has-text("A is better"):not([disabled])')


def _current_row(page) -> int:
    box = page.locator('[data-testid="stSelectbox"]', has_text="Row to review").first
    text = box.inner_text() + " " + box.locator("input").input_value()
    found = re.search(r"row (\d+)", text)
    assert found, text
    return int(found.group(1))


def test_review_three_rows_restart_find_and_export(tmp_path):
    db = tmp_path / "review.sqlite"
    env = _env(db)
    clicks = {"alice": ("A is better", "B is better", "Tie"),
              "bob": ("B is better", "B is better", "A is better")}
    reviewed = {"alice": [], "bob": []}
    with streamlit_server(env, "streamlit_review_1.log") as url, chromium() as browser:
        pages = {}
        for who in clicks:  # two browser sessions (separate cookies and session state)
            page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
            page.set_default_timeout(300_000)
            _open_review(page, url, who)
            pages[who] = page
        for i in range(3):
            for who, page in pages.items():
                reviewed[who].append(_current_row(page))
            if i == 2:
                # alice's third decision by keyboard: a note typed key by key (its letters are
                # shortcuts too, and must not decide while the field has the focus), then "T"
                note = pages["alice"].get_by_label("Note (optional)")
                note.press_sequentially("a b t s", delay=20)
                note.press("Enter")
                idle(pages["alice"], 300)
                assert _current_row(pages["alice"]) == reviewed["alice"][-1]
                pages["alice"].evaluate("document.activeElement && document.activeElement.blur()")
            for who, page in pages.items():  # both act before either waits: concurrent writes
                if who == "alice" and i == 2:
                    page.keyboard.press("t")
                else:
                    page.get_by_role("button", name=clicks[who][i]).click()
            for page in pages.values():
                idle(page, 300)
        pages["alice"].screenshot(path=str(ARTIFACTS / "page_review.png"), full_page=True)
        for page in pages.values():
            assert page.locator('[data-testid="stException"]').count() == 0
    assert len(set(reviewed["alice"])) == 3 and len(set(reviewed["bob"])) == 3

    saved = ReviewStore(f"sqlite:///{db}").decisions()
    assert len(saved) == 6  # nothing lost
    assert saved.groupby("reviewer").size().to_dict() == {"alice": 3, "bob": 3}
    by_key = saved[saved["reviewer"] == "alice"].sort_values("created_at")
    assert by_key["verdict"].tolist() == ["A", "B", "tie"]  # the last one by keyboard
    assert by_key["note"].tolist()[-1] == "a b t s"

    # a new server process on the same database finds the decisions
    with streamlit_server(env, "streamlit_review_2.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1600}, accept_downloads=True)
        page.set_default_timeout(300_000)
        _open_review(page, url, "alice")
        assert metric(page, "Decisions on this table") == "6"
        assert metric(page, "Your decisions") == "3"
        assert _current_row(page) not in reviewed["alice"]  # her rows are done
        with page.expect_download() as dl:
            page.get_by_role("button",
                             name="Download the audited table with review columns (CSV)").click()
        path = tmp_path / "review_export.csv"
        dl.value.save_as(path)

    out = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert len(out) == 600  # every demo row
    assert {"puaudit_adjusted", "puaudit_review_votes", "puaudit_review_verdict"} <= set(out.columns)
    voted = out[out["puaudit_review_n_votes"] != "0"]
    rows = set(reviewed["alice"]) | set(reviewed["bob"])
    assert set(voted.index) == rows
    verdict_of = {"A is better": "A", "B is better": "B", "Tie": "tie"}
    for who in clicks:
        for r, label in zip(reviewed[who], clicks[who]):
            assert f"{who}: {verdict_of[label]}" in out.loc[r, "puaudit_review_votes"]
