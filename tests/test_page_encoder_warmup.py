"""The dashboard's first page view never waits for the encoder to load.

The app starts loading the default encoder in a background thread at server start
(``components.encoder_state.start_encoder_warmup``); here that load is held back on purpose, and
the first page view must still complete, with the load still pending, and the encoder the pages
use later must be the very instance the warm-up loaded.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import puaudit.embed.encoders as encoders
from puaudit.embed.hf_encoder import HFEncoder
from puaudit.embed.model_folder import default_model_path

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def held_load(monkeypatch):
    """HFEncoder.load blocks until the returned event is set (at most 60 s)."""
    default_model_path()  # the bundled model is a requirement: missing, this fails
    release = threading.Event()
    started = threading.Event()
    real_load = HFEncoder.load

    def load(self):
        started.set()
        release.wait(60)
        return real_load(self)

    monkeypatch.setattr(HFEncoder, "load", load)
    monkeypatch.setattr(encoders, "_SHARED", {})
    monkeypatch.delenv("PUAUDIT_TEST_ENCODER", raising=False)  # other test modules set it
    monkeypatch.delenv("PUAUDIT_ENCODERS", raising=False)
    monkeypatch.setenv("PUAUDIT_UMAP_WARMUP", "0")
    monkeypatch.delenv("PUAUDIT_ENCODER_WARMUP", raising=False)
    yield release, started
    release.set()


def test_first_page_view_does_not_wait_for_the_encoder(held_load):
    release, started = held_load
    import sys

    sys.path.insert(0, str(ROOT))
    import components.encoder_state

    components.encoder_state.start_encoder_warmup.clear()  # once per process: start it afresh here
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    t = time.perf_counter()
    at.run()
    took = time.perf_counter() - t
    assert not at.exception, at.exception
    assert any(m.label == "Rows" for m in at.metric)  # the Data page rendered
    assert started.wait(30), "the app's run did not start loading the encoder"
    th = components.encoder_state.start_encoder_warmup()  # cached: the thread the app's run started
    assert isinstance(th, threading.Thread) and th.name == "puaudit-encoder-warmup"
    assert th.is_alive(), "the load was held back, so the page cannot have waited for it"
    release.set()
    th.join(120)
    assert not th.is_alive()
    # the pages' encoder is the instance the warm-up loaded: nothing is loaded twice
    enc = components.encoder_state.load_encoder(components.encoder_state.encoder_options()[0])
    assert getattr(enc, "model_", None) is not None
    print(f"first page view: {took:.1f} s while the encoder load was held back")


def test_warm_up_can_be_switched_off(monkeypatch):
    import sys

    sys.path.insert(0, str(ROOT))
    import components.encoder_state

    monkeypatch.setenv("PUAUDIT_ENCODER_WARMUP", "0")
    components.encoder_state.start_encoder_warmup.clear()
    assert components.encoder_state.start_encoder_warmup() is None
    components.encoder_state.start_encoder_warmup.clear()
