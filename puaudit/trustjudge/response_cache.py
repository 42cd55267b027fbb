"""The resumable on-disk cache of the judge's responses (:class:`ResponseCache`)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from puaudit.errors import PUAuditError
from puaudit.trustjudge.completion import Malformed, check_response

__all__ = ["ResponseCache", "CachedResponses", "request_key", "CACHE_VERSION",
           "DEFAULT_MAX_CACHE_BYTES"]

CACHE_VERSION = 1
#: the largest cache file a run writes to unless told otherwise (``--max-cache-mb``)
DEFAULT_MAX_CACHE_BYTES = 4096 * 10**6


def request_key(model: str, params: Mapping[str, Any], messages: list[dict]) -> str:
    """SHA-256 of the model, the sampling parameters and the messages (the cache key)."""
    blob = json.dumps({"model": model, "params": dict(params), "messages": messages},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Append-only JSON-lines cache of chat-completion responses.

    Each line is ``{"v": 1, "key": ..., "response": {...}, "meta": {...}, "attempts": n,
    "elapsed_s": t, "saved_at": unix time}``. Lines are written whole and flushed (fsynced with
    ``fsync=True``) one at a time under a lock, so concurrent workers never interleave them and a
    killed process leaves at most one torn last line, which the next open drops.

    Memory stays small whatever the file's size: opening reads the file a line at a time and
    keeps only where each response's line starts; :meth:`get` reads that one line again.

    Parameters
    ----------
    path : path
        The cache file (created with its folder when missing).
    fsync : bool, default True
        ``os.fsync`` after every line: survives a machine crash, not only a killed process.
    max_bytes : int, optional
        The file may not grow past this size: :meth:`put` refuses the response that would pass
        it (a :class:`PUAuditError` naming the limit, which stops a run). Default
        :data:`DEFAULT_MAX_CACHE_BYTES`; ``None`` or 0 for no limit.

    Raises
    ------
    PUAuditError
        Another process holds the cache, or the file cannot be read or written.
    """

    def __init__(self, path: str | os.PathLike, *, fsync: bool = True,
                 max_bytes: int | None = DEFAULT_MAX_CACHE_BYTES):
        self.path = Path(path).expanduser()
        self.fsync = fsync
        self.max_bytes = int(max_bytes) if max_bytes else None
        self._lock = threading.Lock()
        #: key -> (offset of its line, length of its line, redacted count)
        self._index: dict[str, tuple[int, int, int]] = {}
        self._size = 0
        self.n_dropped = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lockfile = open(self.path.with_name(self.path.name + ".lock"), "a+")
        except OSError as exc:
            raise PUAuditError(f"Cannot use the cache {self.path}: {exc.strerror or exc}.") from None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
            fcntl = None
        if fcntl is not None:
            try:
                fcntl.flock(self._lockfile.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._lockfile.close()
                raise PUAuditError(f"Another puaudit judge run is using the cache {self.path}; "
                                   "wait for it to finish or give another --cache.") from None
        self._load()
        self._fh = open(self.path, "ab")

    def _load(self) -> None:
        if not self.path.exists():
            return
        good_end = 0
        with open(self.path, "rb") as fh:
            for line in iter(fh.readline, b""):
                start = good_end
                if not line.endswith(b"\n"):  # a torn last line: the process died writing it
                    self.n_dropped += 1
                    break
                good_end += len(line)
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    key = rec["key"]
                    check_response(rec["response"])
                except (ValueError, KeyError, TypeError, Malformed):
                    self.n_dropped += 1
                    continue
                self._index[key] = (start, len(line), int(rec.get("redacted") or 0))
                del rec
        if good_end < self.path.stat().st_size:
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        self._size = good_end

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> list[str]:
        """The cached keys."""
        return list(self._index)

    @property
    def size(self) -> int:
        """Bytes in the file (complete lines)."""
        return self._size

    def redacted(self, key: str) -> int:
        """How many strings of the cached response held the API key (0 when none, or not
        cached)."""
        entry = self._index.get(key)
        return entry[2] if entry else 0

    def get(self, key: str) -> dict | None:
        """The cached record for ``key`` (``record["response"]`` is the response) or ``None``;
        read from the file (also after :meth:`close`)."""
        entry = self._index.get(key)
        if entry is None:
            return None
        offset, length, _ = entry
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            return json.loads(fh.read(length))

    def put(self, key: str, response: dict, *, meta: Mapping | None = None, attempts: int = 1,
            elapsed_s: float = 0.0, redacted: int = 0) -> dict:
        """Append one response and make it durable before returning.

        ``redacted`` (how many of the response's strings held the API key, already replaced) is
        stored as ``"redacted"`` when not 0.

        Raises
        ------
        PUAuditError
            The line would take the file past ``max_bytes`` (nothing is written).
        """
        rec = {"v": CACHE_VERSION, "key": key, "response": response, "meta": dict(meta or {}),
               "attempts": int(attempts), "elapsed_s": round(float(elapsed_s), 4),
               "saved_at": round(time.time(), 3)}
        if redacted:
            rec["redacted"] = int(redacted)
        # Not jsonsafe: the cache keeps a response exactly as it came, NaN and Infinity
        # included (Python's json reads them back), so that a rerun meets the same malformed
        # values and writes the same tables.
        line = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            if self.max_bytes is not None and self._size + len(line) > self.max_bytes:
                n = max(len(self._index), 1)
                raise PUAuditError(
                    f"The response cache {self.path} would pass {self.max_bytes / 1e6:,.0f} MB "
                    f"(--max-cache-mb) with this response of {len(line) / 1e6:.1f} MB (the "
                    f"{len(self._index):,} cached average {self._size / n / 1e6:.2f} MB). Raise "
                    "--max-cache-mb if the run honestly needs more, or lower --max-tokens / "
                    "--top-logprobs.")
            self._fh.write(line)
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())
            self._index[key] = (self._size, len(line), int(redacted or 0))
            self._size += len(line)
        return rec

    def close(self) -> None:
        """Close the file and release the lock."""
        with self._lock:
            if not self._fh.closed:
                self._fh.close()
        if not self._lockfile.closed:
            self._lockfile.close()

    def __enter__(self) -> "ResponseCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CachedResponses(Mapping):
    """The responses of ``keys`` in ``cache`` as a read-only mapping {key: response} that reads
    each from the file when asked, so that the tables are built without holding every response
    in memory at once."""

    def __init__(self, cache: ResponseCache, keys: Iterable[str]):
        self._cache = cache
        self._keys = [k for k in keys if k in cache]

    def __getitem__(self, key: str) -> dict:
        if key not in self._cache:
            raise KeyError(key)
        return self._cache.get(key)["response"]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
