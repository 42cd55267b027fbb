"""The resumable on-disk cache of the judge's responses (:class:`ResponseCache`)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from puaudit.errors import PUAuditError
from puaudit.trustjudge.completion import _check_response, _Malformed

__all__ = ["ResponseCache", "request_key", "CACHE_VERSION"]

CACHE_VERSION = 1


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

    Parameters
    ----------
    path : path
        The cache file (created with its folder when missing).
    fsync : bool, default True
        ``os.fsync`` after every line: survives a machine crash, not only a killed process.

    Raises
    ------
    PUAuditError
        Another process holds the cache, or the file cannot be read or written.
    """

    def __init__(self, path: str | os.PathLike, *, fsync: bool = True):
        self.path = Path(path).expanduser()
        self.fsync = fsync
        self._lock = threading.Lock()
        self._records: dict[str, dict] = {}
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
        data = self.path.read_bytes()
        good_end = 0
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:  # a torn last line: the process died while writing it
                self.n_dropped += 1
                break
            line = data[pos:nl]
            pos = nl + 1
            good_end = pos
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                key = rec["key"]
                _check_response(rec["response"])
            except (ValueError, KeyError, TypeError, _Malformed):
                self.n_dropped += 1
                continue
            self._records[key] = rec
        if good_end < len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: str) -> dict | None:
        """The cached record for ``key`` (``record["response"]`` is the response) or ``None``."""
        return self._records.get(key)

    def put(self, key: str, response: dict, *, meta: Mapping | None = None, attempts: int = 1,
            elapsed_s: float = 0.0, redacted: int = 0) -> dict:
        """Append one response and make it durable before returning.

        ``redacted`` (how many of the response's strings held the API key, already replaced) is
        stored as ``"redacted"`` when not 0.
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
            self._fh.write(line)
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())
            self._records[key] = rec
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
