"""pages/review.py under Streamlit's AppTest (hashing test encoder, demo data): a name is
required, a click saves a decision with the audit settings, two reviewers on one row are both
kept and their disagreement shown, decisions flow back into the audit and the Annotators page,
a signed-in reviewer is named by the login, a corrupt or locked database gives a clear message
and no decision is lost."""

from __future__ import annotations

import json
import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from components.safe_text import WORD_JOINER
from puaudit.review.keys import row_keys
from puaudit.review.store import ReviewStore
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")
APP = str(ROOT / "app.py")


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "review.sqlite"
    monkeypatch.delenv("PUAUDIT_REVIEW_URL", raising=False)
    monkeypatch.setenv("PUAUDIT_REVIEW_DB", str(path))
    return path


def _review_page(user=None):
    at = AppTest.from_file(APP, default_timeout=180)
    if user is not None:
        at.user = user
    at.run()
    at.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    return at


def _metric(at, label):
    return [m.value for m in at.metric if m.label == label][0]


def _current_row(at):
    return at.selectbox(key="w_review_row").value


def _store(db):
    return ReviewStore(f"sqlite:///{db}")


def test_name_required_then_decisions_saved_with_settings(db):
    at = _review_page()
    assert not db.exists()  # visiting the page creates no database
    assert at.button(key="review_A").disabled  # no name yet
    left = int(_metric(at, "Left in your queue").replace(",", ""))
    assert left > 0
    at.text_input(key="w_review_name").input("alice").run()
    first = _current_row(at)
    at.text_input(key="w_review_note").input("A answers the question")
    at.button(key="review_A").click().run()
    assert not at.exception
    d = _store(db).decisions()
    assert d["verdict"].tolist() == ["A"] and d["reviewer"].tolist() == ["alice"]
    assert d.loc[0, "note"] == "A answers the question"
    settings = json.loads(d.loc[0, "settings"])
    assert settings["p_ratio"] == 0.3 and settings["rule"] == "guarded"
    assert d.loc[0, "audit_group"] in ("uncertain", "negative", "positive")
    assert _current_row(at) != first  # the queue moved on
    assert _metric(at, "Your decisions") == "1"
    assert int(_metric(at, "Left in your queue").replace(",", "")) == left - 1
    at.button(key="review_skip").click().run()
    at.button(key="review_tie").click().run()
    assert _store(db).decisions()["verdict"].tolist() == ["A", "skip", "tie"]

    # a second reviewer in another session sees alice's row (with her vote counted, not shown)
    bob = _review_page()
    bob.text_input(key="w_review_name").input("bob").run()
    assert _current_row(bob) == first
    bob.button(key="review_B").click().run()
    assert _metric(bob, "Rows where reviewers disagree") == "1"
    dis = [df.value for df in bob.dataframe if "votes" in df.value.columns][0]
    assert dis["row"].tolist() == [first]
    assert set(dis["votes"].iloc[0].split("; ")) == {"alice: A", "bob: B"}

    # decisions flow back: the audit reruns with the votes, reviewers become annotators
    bob.button(key="review_apply").click().run()
    assert not bob.exception
    table = bob.session_state["table"]
    assert table.extra["review_n_votes"] == 3  # alice A, alice tie, bob B (the skip is no vote)
    assert {"alice", "bob"} <= set(table.annotator)
    bob.switch_page("pages/annotators.py").run()
    assert not bob.exception
    names = [df.value for df in bob.dataframe if "Annotator" in df.value.columns][0]["Annotator"]
    assert {"alice", "bob"} <= set(names)
    # the Export page exports the rows that were loaded, with the review columns
    bob.switch_page("pages/export.py").run()
    assert not bob.exception
    assert any(m.value.startswith("600 rows") for m in bob.markdown), [m.value for m in bob.markdown]
    shown = bob.dataframe[-1].value
    assert "puaudit_review_votes" in shown.columns and "puaudit_adjusted" in shown.columns


def test_signed_in_reviewer_is_named_by_the_login(db):
    at = _review_page(user={"is_logged_in": True, "name": "Dana Reviewer",
                            "email": "dana@example.org"})
    assert not [t for t in at.text_input if t.key == "w_review_name"]  # cannot be typed
    assert any("Dana Reviewer" in c.value for c in at.caption)
    at.button(key="review_B").click().run()
    d = _store(db).decisions()
    # keyed by the login's identity, shown by its display name
    assert d["reviewer"].tolist() == ["dana@example.org"]
    assert d["reviewer_name"].tolist() == ["Dana Reviewer"]
    assert any("by Dana Reviewer." in s.value for s in at.success)
    log = [df.value for df in at.dataframe if "reviewer_id" in df.value.columns][0]
    assert log[["reviewer", "reviewer_id"]].values.tolist() == [["Dana Reviewer",
                                                                 "dana@example.org"]]


def test_two_signed_in_users_sharing_a_display_name_are_two_reviewers(db):
    """Issue 41, item 19: two logins, one display name."""
    first = _review_page(user={"is_logged_in": True, "name": "Alex", "email": "alex@one.org"})
    row = _current_row(first)
    first.button(key="review_A").click().run()
    second = _review_page(user={"is_logged_in": True, "name": "Alex", "sub": "oidc|42"})
    assert _current_row(second) == row  # the other Alex's decision is not this Alex's
    second.button(key="review_B").click().run()
    assert not second.exception
    d = _store(db).decisions()
    assert d["reviewer"].tolist() == ["alex@one.org", "oidc|42"]
    assert d["reviewer_name"].tolist() == ["Alex", "Alex"]
    assert _metric(second, "Reviewers") == "2"
    assert _metric(second, "Rows where reviewers disagree") == "1"


def test_a_reviewer_name_is_shown_as_text_not_as_an_icon(db):
    """Issue 41, item 20: ':material/verified: admin' in the Saved message."""
    at = _review_page()
    name = ":material/verified: admin"
    at.text_input(key="w_review_name").input(name).run()
    at.button(key="review_A").click().run()
    assert _store(db).decisions()["reviewer"].tolist() == [name]
    saved = [s.value for s in at.success if s.value.startswith("Saved")]
    assert saved, [s.value for s in at.success]
    # Streamlit draws ":material/<name>:" (and emoji shortcodes) after escapes are resolved:
    # nothing of the kind is left in the message, yet a reader sees the name as typed
    raw = saved[0].replace("\\", "")
    assert ":material/" not in raw and "material/verified" in raw
    assert raw.replace(WORD_JOINER, "").endswith(f"by {name}.")


def test_a_read_only_database_shows_its_decisions_and_says_saving_is_off(db, monkeypatch):
    """Issue 41, item 18 (a read-only mount, here a read-only connection to the file)."""
    _store(db).add("k-elsewhere", "A", "erin")
    monkeypatch.setenv("PUAUDIT_REVIEW_URL", f"sqlite:///file:{db}?mode=ro&uri=true")
    at = _review_page()
    assert not at.exception
    assert any("read-only" in w.value and "saving is off" in w.value for w in at.warning)
    at.text_input(key="w_review_name").input("frank").run()
    assert at.button(key="review_A").disabled  # no click that cannot be saved
    assert _store(db).decisions()["reviewer"].tolist() == ["erin"]


def test_with_authentication_configured_nobody_types_a_name(db):
    at = _review_page(user={"is_logged_in": False})
    assert not [t for t in at.text_input if t.key == "w_review_name"]
    assert at.button(key="review_login") is not None
    assert at.button(key="review_A").disabled
    assert _store(db).count() == 0


def test_corrupt_database_is_a_clear_message_and_left_untouched(db):
    junk = b"not a database" * 500
    db.write_bytes(junk)
    at = _review_page()
    assert any("not a valid SQLite database" in e.value for e in at.error)
    assert db.read_bytes() == junk


def test_locked_database_keeps_the_decision_until_it_can_be_saved(db, monkeypatch):
    import puaudit.review.store as store_mod

    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_S", 0.2)
    _store(db).dispose()  # the database exists (WAL): readers go on while a writer holds it
    at = _review_page()
    at.text_input(key="w_review_name").input("carol").run()
    first = _current_row(at)
    other = sqlite3.connect(db, timeout=0.1, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        at.button(key="review_A").click().run()
        assert not at.exception
        assert any("is locked" in e.value and "kept in this session" in e.value for e in at.error)
        assert _current_row(at) != first  # the pending decision counts for the queue
    finally:
        other.execute("ROLLBACK")
        other.close()
    at.run()
    assert any("Saved 1 decision(s) that were waiting" in s.value for s in at.success)
    d = _store(db).decisions()
    assert d["reviewer"].tolist() == ["carol"] and d["verdict"].tolist() == ["A"]


def test_reviewer_identity_rules():
    from components.review import reviewer_identity

    assert reviewer_identity({}, " ann ") == ("ann", "ann", "typed")
    assert reviewer_identity({"email": "x@y"}, "") == ("", "", "typed")  # no auth configured
    assert reviewer_identity({"is_logged_in": True, "name": "Dana", "email": "d@x"}, "evil") == \
        ("d@x", "Dana", "login")
    assert reviewer_identity({"is_logged_in": True, "name": "Dana", "sub": "s1"}, "evil") == \
        ("s1", "Dana", "login")
    assert reviewer_identity({"is_logged_in": True, "email": "d@x"}, "evil") == \
        ("d@x", "d@x", "login")
    assert reviewer_identity({"is_logged_in": False}, "evil") == ("", "", "sign-in")


def test_after_a_cascade_the_rows_left_for_people_lead_the_queue(db):
    """Issue 42 item 4: a cascade run in the Audit page's Certify section; the Review page then
    queues the rows it left for people (without a human verdict) first, labelled as such."""
    import numpy as np

    from puaudit.review.queue import CASCADE_TIER
    from tests.test_page_other_judges import _frame, _page

    at = _page("pages/audit.py", _frame(), target_agreement=0.8, risk=0.1)
    pick = next(m for m in at.multiselect if m.label == "Judges, cheapest first")
    pick.set_value(["judge_winner_gpt35", "judge_winner"]).run()
    assert not at.exception, at.exception
    saved = at.session_state["review_cascade"]
    assert saved["judges"] == ["judge_winner_gpt35", "judge_winner"]
    table = at.session_state["table"]
    stage = saved["stage"].reindex(row_keys(table)).to_numpy()
    people = {int(i) for i in np.flatnonzero((stage == "people")
                                             & np.array([h is None for h in table.human]))}
    assert people  # the cascade leaves rows for people on this table

    at.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    labels = at.selectbox(key="w_review_row").options  # "#1 · row 12 · tier · ..."
    n = min(len(people), len(labels))
    first = [int(lab.split(" · ")[1].removeprefix("row ")) for lab in labels[:n]]
    assert set(first) <= people and len(set(first)) == n
    assert all(f" · {CASCADE_TIER} · " in lab for lab in labels[:n])
    assert not any(CASCADE_TIER in lab for lab in labels[n:])
    assert any(f"left {len(people):,} row(s)" in c.value and "judge_winner_gpt35" in c.value
               for c in at.caption)
    # the row shown first is a row left for people
    assert _current_row(at) in people

    # choosing no judge clears the cascade: the queue is the audit's again
    at.switch_page("pages/audit.py").run()
    next(m for m in at.multiselect if m.label == "Judges, cheapest first").set_value([]).run()
    assert "review_cascade" not in at.session_state
    at.switch_page("pages/review.py").run()
    assert not any("row(s) without a human verdict for people" in c.value for c in at.caption)
    labels = at.selectbox(key="w_review_row").options
    assert not any(CASCADE_TIER in lab for lab in labels)


def test_a_loaded_cascade_export_queues_its_rows_for_people_first(db):
    """A table carrying ``puaudit_cascade_stage`` (a cascade export loaded on the Data page):
    its rows for people without a human verdict lead the queue, with no cascade run here."""
    import numpy as np

    from puaudit.review.queue import CASCADE_TIER
    from tests.test_page_other_judges import _frame, _page

    frame = _frame()
    unlabelled = np.flatnonzero(frame["human_winner"].isna().to_numpy()
                                | frame["human_winner"].astype(str).eq("").to_numpy())
    people = unlabelled[::7][:6]
    frame["puaudit_cascade_stage"] = np.where(np.isin(np.arange(len(frame)), people), "people",
                                              "judge_winner")
    at = _page("pages/review.py", frame)
    labels = at.selectbox(key="w_review_row").options
    first = [int(lab.split(" · ")[1].removeprefix("row ")) for lab in labels[:len(people)]]
    assert sorted(first) == sorted(int(r) for r in people)
    assert all(CASCADE_TIER in lab for lab in labels[:len(people)])
    assert any(f"left {len(people)} row(s)" in c.value and "puaudit_cascade_stage" in c.value
               for c in at.caption)
