"""The encoder a session may choose, loaded once per server process, and the warm-ups.

The encoder is a ``st.cache_resource`` keyed by its label; visitors choose among labels only
(paths come from the deployment). ``app.py`` starts two background threads once per process,
UMAP's compilation and the first offered encoder's load (``PUAUDIT_UMAP_WARMUP=0`` /
``PUAUDIT_ENCODER_WARMUP=0`` skip them). Test hook: with ``PUAUDIT_TEST_ENCODER=hashing`` the
only encoder offered is :class:`puaudit.embed.hashing.HashingEncoder` (instant).
"""

from __future__ import annotations

import os
import threading
import time

import streamlit as st

from puaudit.embed.encoder_menu import encoder_choices
from puaudit.errors import PUAuditError

__all__ = ["TEST_ENCODER_ENV", "encoder_options", "load_encoder", "start_umap_warmup",
           "start_encoder_warmup"]

TEST_ENCODER_ENV = "PUAUDIT_TEST_ENCODER"
_HASHING_NAME = "hashing-test"  # puaudit.embed.hashing.HashingEncoder.name


def encoder_options() -> list[str]:
    """Encoder labels a visitor may choose (never free text; paths come from the deployment)."""
    if os.environ.get(TEST_ENCODER_ENV) == "hashing":
        return [_HASHING_NAME]
    return list(encoder_choices())


@st.cache_resource(show_spinner="Loading the encoder…")
def load_encoder(label: str):
    """The encoder for ``label``, loaded once per server process."""
    if label == _HASHING_NAME and os.environ.get(TEST_ENCODER_ENV) == "hashing":
        from puaudit.embed.hashing import HashingEncoder  # the test mode's encoder

        return HashingEncoder()
    choices = encoder_choices()
    if label not in choices:
        raise PUAuditError(f"Encoder '{label}' is not offered here; choose one of {list(choices)}.")
    from puaudit.embed.encoders import shared_encoder

    # trust_remote_code stays at its default (off): a dashboard never runs model-supplied code.
    # The instance is shared with start_encoder_warmup, which may have loaded it already.
    encoder = shared_encoder(choices[label])
    _note_encoder_load(label)
    return encoder


def _note_encoder_load(label: str) -> None:
    """Append a line to ``$PUAUDIT_ENCODER_LOG`` (if set) each time an encoder is loaded (to
    check that concurrent sessions share one)."""
    path = os.environ.get("PUAUDIT_ENCODER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.time():.3f}\t{os.getpid()}\t{label}\n")


@st.cache_resource(show_spinner=False)
def start_umap_warmup() -> threading.Thread | None:
    """Compile UMAP in a background thread, once per server process."""
    if os.environ.get("PUAUDIT_UMAP_WARMUP", "1") == "0":
        return None
    from puaudit.embed.projection import warm_umap

    th = threading.Thread(target=warm_umap, name="puaudit-umap-warmup", daemon=True)
    th.start()
    return th


@st.cache_resource(show_spinner=False)
def start_encoder_warmup() -> threading.Thread | None:
    """Load the first offered encoder in a background thread, once per server process: no page
    view waits for torch and the weights, and the first embedding finds the model loaded."""
    if os.environ.get("PUAUDIT_ENCODER_WARMUP", "1") == "0" or os.environ.get(TEST_ENCODER_ENV) == "hashing":
        return None
    from puaudit.embed.encoders import warm_up_encoder

    return warm_up_encoder(next(iter(encoder_choices().values())))
