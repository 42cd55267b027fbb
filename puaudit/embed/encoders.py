"""The encoder a user names, one shared per process, and the embedding of prompt-response pairs.

The encoder itself is :class:`~puaudit.embed.hf_encoder.HFEncoder` (docs/encoders.md); import
the other names from the modules that define them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from puaudit.embed.hf_encoder import HFEncoder, Progress, TextEncoder
from puaudit.embed.model_folder import DEFAULT_ALIASES, DEFAULT_MODEL_NAME
from puaudit.embed.text import distinct_pairs
from puaudit.errors import PUAuditError

__all__ = ["get_encoder", "shared_encoder", "warm_up_encoder", "embed_pairs", "embed_distinct"]

_log = logging.getLogger(__name__)


def get_encoder(name_or_path: str | os.PathLike | None = None, **kwargs) -> HFEncoder:
    """The encoder named by the user: ``None``, ``"default"`` or ``"all-MiniLM-L6-v2"`` for the
    default, otherwise a local model folder. Keyword arguments go to :class:`HFEncoder`.

    The folder is checked now (cheaply), so a bad name fails before any data is processed.
    """
    if name_or_path is None or str(name_or_path).strip().lower() in DEFAULT_ALIASES:
        enc = HFEncoder(None, **kwargs)
    else:
        path = Path(os.fspath(name_or_path)).expanduser()
        if not path.exists():
            raise PUAuditError(
                f"Encoder {str(name_or_path)!r} is neither {DEFAULT_MODEL_NAME!r} nor an existing "
                "local model folder. Nothing is downloaded: give the path of a folder holding "
                "config.json, the weights and the tokenizer files.")
        enc = HFEncoder(str(path), **kwargs)
    enc._resolve()
    return enc


_SHARED: dict[tuple, HFEncoder] = {}
_SHARED_LOCK = threading.Lock()


def shared_encoder(name_or_path: str | os.PathLike | None = None, **kwargs) -> HFEncoder:
    """One :func:`get_encoder` instance per process for the same arguments (a server's sessions
    and its start-up warm-up share it, so the model is loaded once). Thread-safe: a second caller
    waits while the first one builds it."""
    key = (None if name_or_path is None else os.fspath(name_or_path), tuple(sorted(kwargs.items())))
    with _SHARED_LOCK:
        enc = _SHARED.get(key)
        if enc is None:
            enc = _SHARED[key] = get_encoder(name_or_path, **kwargs)
        return enc


def warm_up_encoder(name_or_path: str | os.PathLike | None = None, **kwargs) -> threading.Thread:
    """Build :func:`shared_encoder` ``(name_or_path, **kwargs)`` and load its model in a daemon
    thread (a server's start: no page view waits for it); returns the started thread at once.
    A failure is logged; the next use raises it plainly."""

    def run() -> None:
        try:
            shared_encoder(name_or_path, **kwargs).load()
        except BaseException as exc:  # noqa: BLE001 - raised again where the encoder is used
            _log.warning("warming up encoder %r failed: %s", name_or_path, exc)

    th = threading.Thread(target=run, name="puaudit-encoder-warmup", daemon=True)
    th.start()
    return th


def embed_pairs(prompts: Sequence[Any], responses: Sequence[Any], encoder: TextEncoder,
                **kwargs) -> np.ndarray:
    """``F(x, o)`` for each row, shape (n, encoder.dim), float32, in row order: the vectors of
    :func:`embed_distinct` (each distinct text embedded once) gathered per row. Missing cells
    (None / NaN) are embedded as empty strings; ``kwargs`` are ``progress`` / ``show_progress``."""
    vecs, inverse = embed_distinct(prompts, responses, encoder, **kwargs)
    return vecs[inverse]


def embed_distinct(prompts: Sequence[Any], responses: Sequence[Any], encoder: TextEncoder, *,
                   progress: Progress | None = None,
                   show_progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Embed each distinct ``format_text(prompt, response)`` once; no per-row copies.

    Returns
    -------
    vectors : ndarray (n_distinct, encoder.dim), float32, in order of first appearance
    inverse : ndarray (n,), int64: row i's text is ``vectors[inverse[i]]``
    """
    if len(prompts) != len(responses):
        raise PUAuditError(f"embed_distinct got {len(prompts)} prompts but {len(responses)} "
                           "responses; give one prompt per response.")
    texts, inverse = distinct_pairs(prompts, responses)
    if not texts:
        return np.zeros((0, int(encoder.dim)), dtype=np.float32), inverse
    vecs = np.asarray(encoder.encode(texts, progress=progress, show_progress=show_progress),
                      dtype=np.float32)
    return vecs, inverse

