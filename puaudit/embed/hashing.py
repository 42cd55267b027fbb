"""A deterministic, instant hashing encoder: the stand-in for a text model in tests, benchmarks
and the dashboard's test mode (``PUAUDIT_TEST_ENCODER=hashing``: the only encoder the dashboard
offers then). No model, no download; never offered to visitors otherwise."""

from __future__ import annotations

import re
import zlib

import numpy as np

__all__ = ["HashingEncoder"]

_TOKEN = re.compile(r"\w+")


class HashingEncoder:
    """Deterministic test encoder: each word adds ±1 to one of ``dim`` slots chosen by CRC32.

    .. math:: F(t)_k = \\frac{\\sum_{w \\in t,\\; h(w) = k} s(w)}{\\lVert \\cdot \\rVert}

    with ``h`` and ``s`` read from the CRC32 of the lower-cased word: same texts, same vectors,
    in any process. ``max_length`` (default None: every word counts) gives it a window of that many words,
    shared within a pair's text as the text models share theirs
    (:func:`puaudit.embed.text.pair_token_ids`, with the words as tokens).
    """

    name = "hashing-test"

    def __init__(self, dim: int = 64, max_length: int | None = None):
        self.dim = dim
        self.max_length = max_length

    def encode(self, texts, *, progress=None, show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if self.max_length is None:
            words = ([zlib.crc32(w.encode("utf-8")) for w in _TOKEN.findall(str(t).lower())]
                     for t in texts)
        else:
            from puaudit.embed.text import pair_token_ids

            words = iter(pair_token_ids(_WordTokenizer(), texts, max_length=self.max_length))
        for i, hashes in enumerate(words):
            for h in hashes:
                out[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
            if progress is not None and (i + 1) % 256 == 0:
                progress(i + 1, len(texts))
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        if progress is not None:
            progress(len(texts), len(texts))
        return out


class _WordTokenizer:
    """The words of a text as its tokens (each word's id: the CRC32 of the lower-cased word),
    behind the tokenizer call :mod:`puaudit.embed.text` makes; no special tokens."""

    def __call__(self, texts, *, padding: bool = False, add_special_tokens: bool = True,
                 truncation: bool = False, max_length: int | None = None) -> dict:
        ids = []
        for t in texts:
            x = [zlib.crc32(w.encode("utf-8")) for w in _TOKEN.findall(str(t).lower())]
            ids.append(x[:max_length] if truncation and max_length is not None else x)
        return {"input_ids": ids}
