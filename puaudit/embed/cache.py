"""On-disk embedding cache: one folder per encoder identity, append-only shards of float32 rows.

Layout::

    <root>/<encoder key>/meta.json                      what produced these vectors (for people)
    <root>/<encoder key>/<time_ns>-<uuid>.npy           a shard: structured array of rows
                                                        (key: sha256 of the text, crc, vec)

Every writer publishes a *new* shard with an atomic ``os.replace``, so readers only ever see
complete shards and nothing is locked or unpickled. An unreadable shard is deleted and a row
failing its ``crc32(key + vector bytes)`` counts as missing: both are recomputed, never a crash.
Above ``max_shards`` shards they are merged into one (docs/encoders.md, "Disk cache").
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import uuid
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from puaudit.data.jsonsafe import dumps

__all__ = ["EmbeddingCache", "text_key"]

_log = logging.getLogger(__name__)

KEY_BYTES = 32  # sha256 digest
_STALE_TMP_S = 3600.0  # a temp file this old belongs to a crashed writer


def text_key(text: str) -> bytes:
    """The cache key of one text: the sha256 digest of its UTF-8 bytes.

    ``surrogatepass`` keeps lone surrogates (possible in strings decoded from broken files)
    hashable instead of raising.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _row_dtype(dim: int) -> np.dtype:
    return np.dtype([("key", f"V{KEY_BYTES}"), ("crc", "<u4"), ("vec", "<f4", (dim,))])


def _row_crc(key: bytes, vec: np.ndarray) -> int:
    return zlib.crc32(key + np.ascontiguousarray(vec, dtype="<f4").tobytes())


def _atomic_write_bytes(path: Path, write) -> None:
    """Write through ``write(fileobj)`` to a temp file in the same folder, then rename into place."""
    tmp = path.parent / f".tmp-{uuid.uuid4().hex}{path.suffix}"
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


class EmbeddingCache:
    """Append-only, crash-safe cache of float32 vectors keyed by ``text_key``.

    Parameters
    ----------
    directory : str or Path
        The folder of one encoder identity (created if missing). Vectors of different encoders
        must live in different folders: the key is the text only.
    dim : int
        Vector dimension; shards of another dimension are treated as corrupt.
    meta : dict, optional
        Written once to ``meta.json`` so a person can tell what the folder holds.
    flush_every : int
        ``put`` writes a shard as soon as this many rows are pending, so a run that dies keeps
        what it computed up to the last flush (and ``flush`` is called on every exit path).
    max_shards : int
        Above this many shards, ``refresh`` merges them into one.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        dim: int,
        meta: dict | None = None,
        flush_every: int = 512,
        max_shards: int = 32,
    ):
        self.directory = Path(directory)
        self.dim = int(dim)
        self.flush_every = int(flush_every)
        self.max_shards = int(max_shards)
        self._dtype = _row_dtype(self.dim)
        self._lock = threading.RLock()
        self._shards: dict[str, np.ndarray] = {}
        self._index: dict[bytes, tuple[str, int]] = {}
        self._pending_keys: list[bytes] = []
        self._pending_vecs: list[np.ndarray] = []
        self.directory.mkdir(parents=True, exist_ok=True)
        meta_path = self.directory / "meta.json"
        if meta is not None and not meta_path.exists():
            payload = dumps(meta, indent=2, sort_keys=True).encode("utf-8")
            _atomic_write_bytes(meta_path, lambda f: f.write(payload))

    # -- reading -------------------------------------------------------------------------------
    def _shard_names(self) -> list[str]:
        # Names start with a zero-padded time, so sorting puts newer shards last: their copy of
        # a key wins in the index.
        return sorted(p.name for p in self.directory.glob("[0-9]*.npy"))

    def _load_shard(self, name: str) -> np.ndarray | None:
        path = self.directory / name
        try:
            with open(path, "rb") as f:
                arr = np.load(f, allow_pickle=False)
        except FileNotFoundError:  # merged away by another process between listing and opening
            return None
        except Exception as exc:  # truncated / garbage: drop it, its rows get recomputed
            _log.warning("dropping unreadable embedding cache shard %s (%s)", path, exc)
            self._remove(path)
            return None
        if arr.dtype != self._dtype or arr.ndim != 1:
            _log.warning(
                "dropping embedding cache shard %s: dtype %s, expected %s", path, arr.dtype, self._dtype
            )
            self._remove(path)
            return None
        return arr

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass

    def refresh(self) -> None:
        """Pick up shards written since the last look (by this or another process)."""
        with self._lock:
            names = self._shard_names()
            vanished = set(self._shards) - set(names)
            for name in vanished:
                del self._shards[name]
            new = [n for n in names if n not in self._shards]
            for name in new:
                arr = self._load_shard(name)
                if arr is not None:
                    self._shards[name] = arr
            if vanished:
                self._rebuild_index()
            else:
                for name in new:
                    if name in self._shards:
                        self._add_to_index(name)
            if len(self._shards) > self.max_shards:
                self._compact()
            self._clean_stale_tmp()

    def _add_to_index(self, name: str) -> None:
        keys = self._shards[name]["key"]
        for row, k in enumerate(keys.tolist()):
            self._index[k] = (name, row)

    def _rebuild_index(self) -> None:
        self._index = {}
        for name in sorted(self._shards):
            self._add_to_index(name)

    def _clean_stale_tmp(self) -> None:
        now = time.time()
        for p in self.directory.glob(".tmp-*"):
            try:
                if now - p.stat().st_mtime > _STALE_TMP_S:
                    p.unlink()
            except OSError:
                pass

    def get(self, keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Look up vectors.

        Returns
        -------
        vectors : ndarray of shape (len(keys), dim), float32
            Rows not found are zero.
        found : ndarray of shape (len(keys),), bool
            False for keys absent from the cache or whose stored row failed its checksum.
        """
        self.refresh()
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        found = np.zeros(len(keys), dtype=bool)
        with self._lock:
            for i, k in enumerate(keys):
                hit = self._index.get(k)
                if hit is None:
                    continue
                rec = self._shards[hit[0]][hit[1]]
                vec = rec["vec"]
                if int(rec["crc"]) != _row_crc(k, vec) or not np.all(np.isfinite(vec)):
                    _log.warning("embedding cache row failed its checksum in %s; recomputing", hit[0])
                    del self._index[k]
                    continue
                out[i] = vec
                found[i] = True
        return out, found

    def __len__(self) -> int:
        self.refresh()
        return len(self._index)

    # -- writing -------------------------------------------------------------------------------
    def put(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Queue rows; a shard is written once ``flush_every`` rows are pending."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(f"expected vectors of shape ({len(keys)}, {self.dim}), got {vectors.shape}")
        with self._lock:
            self._pending_keys.extend(keys)
            self._pending_vecs.append(vectors)
            if len(self._pending_keys) >= self.flush_every:
                self.flush()

    def flush(self) -> None:
        """Write pending rows as one new shard (atomically)."""
        with self._lock:
            if not self._pending_keys:
                return
            keys = self._pending_keys
            vecs = np.concatenate(self._pending_vecs, axis=0)
            self._pending_keys, self._pending_vecs = [], []
            self._write_shard(keys, vecs)

    def _write_shard(self, keys: Sequence[bytes], vecs: np.ndarray) -> str:
        arr = np.empty(len(keys), dtype=self._dtype)
        arr["key"] = np.frombuffer(b"".join(keys), dtype=f"V{KEY_BYTES}")
        arr["vec"] = vecs
        arr["crc"] = [_row_crc(k, v) for k, v in zip(keys, arr["vec"])]
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}.npy"
        _atomic_write_bytes(self.directory / name, lambda f: np.save(f, arr, allow_pickle=False))
        self._shards[name] = arr
        self._add_to_index(name)
        return name

    def _compact(self) -> None:
        """Merge all shards into one holding the valid, newest copy of each key."""
        keys, vecs = [], []
        for k, (name, row) in self._index.items():
            rec = self._shards[name][row]
            if int(rec["crc"]) == _row_crc(k, rec["vec"]):
                keys.append(k)
                vecs.append(rec["vec"])
        old = list(self._shards)
        self._shards, self._index = {}, {}
        if keys:
            self._write_shard(keys, np.stack(vecs))
        for name in old:
            self._remove(self.directory / name)
