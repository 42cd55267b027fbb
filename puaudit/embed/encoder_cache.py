"""Where an encoder's vectors are cached on disk, and the key that says which vectors they are:
``<cache root>/embeddings/<model name>-<key>``, the key hashing everything that determines the
vector of a text (docs/encoders.md, "Disk cache"; :mod:`puaudit.embed.cache`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from puaudit.embed.cache import EmbeddingCache
from puaudit.errors import PUAuditError

__all__ = ["DEFAULT", "default_cache_dir", "encoder_cache_key", "encoder_cache"]

#: 2: the text of a long pair shares the window (puaudit.embed.text.TEXT_FORMAT 2); the
#: vectors of format 1 (the text cut at the end) are never served for it.
_CACHE_FORMAT = 2


class _Default:
    """Sentinel: "use the default cache directory" (distinct from ``None``, which disables it)."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()


def default_cache_dir() -> Path:
    """``$PUAUDIT_CACHE_DIR`` if set, else ``~/.cache/puaudit``."""
    env = os.environ.get("PUAUDIT_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "puaudit"


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:60] or "model"


def encoder_cache_key(enc) -> str:
    """Everything that determines the vector of a given text for a resolved encoder, hashed."""
    ident = {
        "fingerprint": enc.fingerprint_,
        "pooling": enc.pooling_,
        "max_length": enc.max_length_,
        "normalize": enc.normalize_,
        "format": _CACHE_FORMAT,
    }
    if enc.dtype_ != "float32":
        # float32 keys stay what they were before the precision existed, so caches filled
        # then are still read; any other precision gets keys of its own.
        ident["dtype"] = enc.dtype_
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def encoder_cache(enc) -> EmbeddingCache | None:
    """The encoder's disk cache (None when ``cache_dir`` is None), opened once per folder and
    kept on the encoder."""
    if enc.cache_dir is None:
        return None
    root = default_cache_dir() if isinstance(enc.cache_dir, _Default) else Path(enc.cache_dir)
    folder = root.expanduser() / "embeddings" / f"{slug(enc.name)}-{enc.cache_key[:16]}"
    cache = getattr(enc, "_cache_obj", None)
    if cache is None or cache.directory != folder:
        meta = {
            "name": enc.name,
            "model_dir": str(enc.model_dir_),
            "fingerprint": enc.fingerprint_,
            "pooling": enc.pooling_,
            "max_length": enc.max_length_,
            "normalize": enc.normalize_,
            "dtype": enc.dtype_,
            "mode": enc.mode_,
            "dim": enc.dim,
            "format": _CACHE_FORMAT,
        }
        try:
            cache = EmbeddingCache(folder, dim=enc.dim, meta=meta)
        except OSError as exc:
            raise PUAuditError(
                f"Cannot use the embedding cache folder {str(folder)!r}: {exc}. Set "
                "PUAUDIT_CACHE_DIR to a writable folder, or disable the cache (cache_dir=None)."
            ) from exc
        enc._cache_obj = cache
    return cache
