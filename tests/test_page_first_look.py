"""The Audit page's first look: while the texts are embedded it shows the evidence-only audit,
labelled preliminary with the time left; when they are, the full audit replaces it in the same
session (a rerun, no page reload)."""

from __future__ import annotations

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from puaudit.audit.scorers.evidence import PRELIMINARY
from components.first_look import preliminary_label
from puaudit.audit.config import AuditConfig
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from tests.conftest import ROOT
from puaudit.embed.hashing import HashingEncoder

pytestmark = pytest.mark.usefixtures("app_env")


def _texts(at: AppTest) -> list[str]:
    return [e.value for kind in ("info", "caption", "markdown") for e in getattr(at, kind)]


def test_preliminary_audit_then_the_full_one_without_reload(monkeypatch):
    gate = threading.Event()
    encode = HashingEncoder.encode

    def slow(self, texts, **kw):  # the encoder waits until the test lets it go
        assert gate.wait(120)
        return encode(self, texts, **kw)

    monkeypatch.setattr(HashingEncoder, "encode", slow)
    # a table no other test embedded (the embeddings' cache is the server process's)
    frame = generate_demo(n_rows=400, random_state=4343)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    from components.data_summary import mapping_defaults

    at.session_state["raw_frame"] = frame
    at.session_state["source_name"] = "first-look.csv"
    at.session_state["columns"] = {r: c for r, c in mapping_defaults(frame).items() if c}
    at.session_state["table"] = load_comparisons(frame)
    at.session_state["audit"] = {**AuditConfig.defaults(), "encoder": None}
    at.session_state["visit"] = "one session"
    at.switch_page("pages/audit.py").run()
    assert not at.exception, at.exception
    shown = _texts(at)
    label = next(t for t in shown if t.startswith(PRELIMINARY))
    assert label.endswith("left)")
    # every headline number of the evidence-only audit is there; the full audit's m slider not
    assert {m.label for m in at.metric} >= {"Cons_orig", "Cons_adj"}
    assert any("validation rows" in t for t in shown)
    assert not any(s.label.startswith("m —") for s in at.slider)

    gate.set()  # the embedding finishes; the page's poll reruns it
    for _ in range(120):
        at.run()
        assert not at.exception, at.exception
        if any(s.label.startswith("m —") for s in at.slider):
            break
        time.sleep(0.25)
    assert any(s.label.startswith("m —") for s in at.slider)  # the full audit
    assert not any(t.startswith(PRELIMINARY) for t in _texts(at))
    assert at.session_state["visit"] == "one session"  # the same session: no reload


def test_label_counts_down_from_the_rate_so_far():
    assert preliminary_label({"done": 0, "total": 100, "start": None}).endswith(
        "(estimating the time left)")
    # 40 texts in 10 s after 20 were cached: 40 left take 10 s
    assert preliminary_label({"done": 60, "total": 100, "start": (20, 5.0)}, now=15.0) == (
        f"{PRELIMINARY} (10 s left)")
    assert preliminary_label({"done": 21, "total": 100, "start": (20, 5.0)}, now=15.0).endswith(
        "13 min 10 s left)")


def test_data_page_says_when_the_numbers_will_be_ready():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    assert not at.exception, at.exception
    est = next(c.value for c in at.caption if c.value.startswith("First numbers"))
    # the test encoder has no measured rate: the texts are counted, no time is promised
    n_texts = len({(p, r) for p, a, b in zip(at.session_state["table"].prompt,
                                                at.session_state["table"].response_a,
                                                at.session_state["table"].response_b)
                   for r in (a, b)})
    assert "(judge evidence only) in about" in est
    assert f"{n_texts:,} of {n_texts:,} distinct texts to embed" in est
