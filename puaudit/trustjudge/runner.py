"""Query an OpenAI-compatible chat-completions endpoint, with retries, concurrency and a
resumable on-disk cache of every response.

Three pieces, used by ``puaudit judge`` (:mod:`puaudit.trustjudge.judge_cli`) and usable alone:

:class:`JudgeClient`
    One chat completion with ``logprobs`` through the ``openai`` client (vLLM, Ollama, llama.cpp
    server, hosted APIs). Each attempt has one wall-clock deadline for connecting, the headers
    and the whole body, so a server that trickles bytes cannot keep it alive. Retries 429, 5xx,
    timeouts, dropped connections and malformed responses with exponential backoff and jitter
    (honouring ``Retry-After``); a refused key (401), a forbidden or unknown model (403, 404) or
    an endpoint without log-probabilities stop the run; another 4xx fails that one request. The
    API key is read from an environment variable and is never logged, cached or written
    anywhere, also when the server sends it back (it is replaced by ``***`` on arrival).
:class:`ResponseCache`
    An append-only JSON-lines file: every response is written and flushed (and fsynced) the
    moment it arrives, keyed by a hash of the model, sampling parameters and messages. A crash,
    ``kill -9`` or Ctrl-C loses at most the requests still in flight; a torn last line is
    dropped on the next start; a rerun asks only for what is missing. One process at a time
    (a lock file).
:func:`run_requests`
    Sends every request not yet cached with at most ``concurrency`` in flight, shows a progress
    bar with counts and token totals, and returns :class:`RunStats`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import socket
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from puaudit.errors import PUAuditError

__all__ = ["JudgeClient", "ResponseCache", "RunStats", "RequestFailed", "EndpointError",
           "request_key", "run_requests", "response_text", "response_tokens", "response_usage",
           "redact_secret", "DEFAULT_KEY_ENV"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
CACHE_VERSION = 1


class RequestFailed(Exception):
    """One request failed for good (retries used up, or a 4xx that retrying cannot fix)."""


class EndpointError(PUAuditError):
    """The endpoint refuses every request (bad key, unknown model, no log-probabilities): stop."""


class _Malformed(Exception):
    """A 200 response that is not a usable chat completion."""


class _DeadlinePassed(Exception):
    """An attempt outlived its wall-clock deadline (retried like any timeout)."""


def request_key(model: str, params: Mapping[str, Any], messages: list[dict]) -> str:
    """SHA-256 of the model, the sampling parameters and the messages (the cache key)."""
    blob = json.dumps({"model": model, "params": dict(params), "messages": messages},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def response_text(response: Mapping) -> str:
    """``choices[0].message.content`` of a chat-completion response (a dict)."""
    return str(response["choices"][0]["message"].get("content") or "")


def response_tokens(response: Mapping) -> list[dict] | None:
    """``choices[0].logprobs.content`` (one dict per generated token) or ``None``."""
    lp = response["choices"][0].get("logprobs")
    if not isinstance(lp, dict) or not isinstance(lp.get("content"), list) or not lp["content"]:
        return None
    return lp["content"]


def response_usage(response: Mapping) -> tuple[int, int]:
    """``(prompt_tokens, completion_tokens)`` from ``usage``; 0 for anything that is not a
    whole number ≥ 0 (a server may send any JSON there)."""
    u = response.get("usage") if isinstance(response, Mapping) else None
    if not isinstance(u, Mapping):
        return 0, 0

    def count(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return 0
        try:
            n = int(v)
        except (OverflowError, ValueError):  # inf, nan
            return 0
        return n if 0 <= n < 2 ** 53 else 0
    return count(u.get("prompt_tokens")), count(u.get("completion_tokens"))


def _check_response(data: Any) -> dict:
    """A response must hold ``choices[0].message.content`` text; its log-probabilities may be
    anything: :func:`puaudit.trustjudge.collect.assemble` checks them and lists the bad ones,
    keeping the verdict (asking again would not change a deterministic server's answer)."""
    try:
        choice = data["choices"][0]
        content = choice["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise _Malformed("the response has no choices[0].message") from None
    if not isinstance(content, str):
        raise _Malformed("the response's message has no text content")
    return data


_SURROGATE = re.compile("[\ud800-\udfff]")


def redact_secret(value: Any, secret: str) -> tuple[Any, int]:
    """``value`` (parsed JSON) with every occurrence of ``secret`` in its strings and keys
    replaced by ``***``, and the number of strings changed.

    Lone surrogates (``"\\ud800"`` in the JSON) are replaced by U+FFFD on the way: they cannot
    be written as UTF-8, so the cache and the tables could not hold them. A token whose text
    changes gets the ``bytes`` of its new text.
    """
    n = 0

    def text(s: str) -> str:
        nonlocal n
        if secret and secret in s:
            s = s.replace(secret, "***")
            n += 1
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:  # json.loads has already joined the valid pairs
            s = _SURROGATE.sub("\ufffd", s)
        return s

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            out = {text(str(k)): walk(x) for k, x in v.items()}
            tok = v.get("token")
            if isinstance(tok, str) and out.get("token") != tok and isinstance(v.get("bytes"), list):
                out["bytes"] = list(out["token"].encode("utf-8"))
            return out
        return v
    return walk(value), n


def _parse_int(digits: str) -> int | float:
    # a 5000-digit number would make json.loads raise (int max str digits): as a float it is
    # inf, which assemble lists as a malformed log-probability
    return int(digits) if len(digits) <= 64 else float(digits)


def _parse_body(raw: bytes, secret: str) -> tuple[dict, int]:
    try:
        data = json.loads(raw, parse_int=_parse_int)
        data, n = redact_secret(data, secret)
    except RecursionError:
        raise _Malformed("the response is nested too deeply to be a chat completion") from None
    return _check_response(data), n


# --- cache --------------------------------------------------------------------------------------
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


# --- client -------------------------------------------------------------------------------------
class _Deadline:
    """The wall-clock deadline of one attempt.

    The HTTP client's timeouts restart with every read, so a server that sends one byte a second
    keeps a request alive for ever. A timer shuts the attempt's socket down when ``seconds`` have
    passed since the attempt began, whatever it is doing (connecting, TLS, waiting for headers,
    reading the body); the blocked read then fails at once and the attempt counts as timed out.
    The socket comes from the ``trace`` extension of httpx/httpcore (event
    ``connection.connect_tcp.complete``), which is why the client keeps no idle connections:
    every attempt connects anew and so is traced.
    """

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(self.seconds, self._fire)
        self._timer.daemon = True

    def trace(self, event: str, info: dict) -> None:
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._sock = sock
            if self.expired:  # connected after the deadline
                self._shutdown()

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed
                pass

    def __enter__(self) -> "_Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


def _http_client(openai: Any, *, timeout: float, on_request: Callable) -> Any:
    """An ``openai.DefaultHttpxClient`` that keeps no idle connection and calls ``on_request``
    on every request (openai ≥ 1 builds on httpx; its newest releases on httpx2)."""
    http = next((sys.modules[c.__module__.split(".")[0]] for c in openai.DefaultHttpxClient.__mro__
                 if c.__module__.split(".")[0] != "openai"
                 and hasattr(sys.modules.get(c.__module__.split(".")[0]), "Limits")), None)
    limits = ({"limits": http.Limits(max_connections=1000, max_keepalive_connections=0)}
              if http is not None else {})
    return openai.DefaultHttpxClient(timeout=timeout, event_hooks={"request": [on_request]},
                                     **limits)


def _base_url(endpoint: str) -> str:
    url = str(endpoint).strip().rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    if not url.startswith(("http://", "https://")):
        raise PUAuditError(f"--endpoint must be an http(s) URL such as http://127.0.0.1:8000/v1 "
                           f"(got '{endpoint}').")
    return url


class JudgeClient:
    """Chat completions with log-probabilities from one OpenAI-compatible endpoint.

    Parameters
    ----------
    endpoint : str
        Base URL (``http://127.0.0.1:8000/v1``); a trailing ``/chat/completions`` is removed.
    model : str
        Model name as the server knows it.
    api_key_env : str, default "OPENAI_API_KEY"
        Environment variable holding the API key. Unset: the placeholder ``"none"`` is sent
        (enough for local servers). The key is never logged, cached or exported.
    timeout : float, default 120
        Seconds per attempt, all of it: connecting, waiting for the answer and reading it. A
        server that trickles its answer is cut off when they are up (and the attempt retried
        like any timeout).
    max_retries : int, default 6
        Retries of a request after 429, 5xx, a timeout, a dropped connection or a malformed
        response.
    backoff, max_backoff : float, default 1 and 60
        Wait ``min(max_backoff, backoff·2^(attempt−1))``, times a random factor in [0.5, 1],
        between attempts; a ``Retry-After`` header overrides it (capped at ``max_backoff``).
    temperature : float, default 0
    max_tokens : int, default 1024
    top_logprobs : int, default 20
        Alternatives per token (OpenAI allows up to 20; vLLM more).
    seed : int, optional
        Sent when given (servers that honour it make sampling reproducible).
    """

    def __init__(self, *, endpoint: str, model: str, api_key_env: str = DEFAULT_KEY_ENV,
                 timeout: float = 120.0, max_retries: int = 6, backoff: float = 1.0,
                 max_backoff: float = 60.0, temperature: float = 0.0, max_tokens: int = 1024,
                 top_logprobs: int = 20, seed: int | None = None):
        try:
            import openai
        except ImportError:  # pragma: no cover - a requirement
            raise PUAuditError("puaudit judge needs the 'openai' package: pip install openai") from None
        if not model:
            raise PUAuditError("--model is required: the model name the endpoint serves.")
        if timeout <= 0 or max_retries < 0 or backoff < 0 or max_backoff < 0:
            raise PUAuditError("--timeout must be > 0; --retries, --backoff and --max-backoff ≥ 0.")
        if not 0 <= top_logprobs <= 100:
            raise PUAuditError("--top-logprobs must be between 0 and 100.")
        self._openai = openai
        self.base_url = _base_url(endpoint)
        self.model = model
        self.api_key_env = api_key_env
        key = os.environ.get(api_key_env) or ""
        self.has_key = bool(key)
        self._secret = key
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.top_logprobs = int(top_logprobs)
        self.seed = seed
        self._local = threading.local()  # the deadline of the attempt this thread is making

        def on_request(request: Any) -> None:
            deadline = getattr(self._local, "deadline", None)
            if deadline is not None:
                request.extensions["trace"] = deadline.trace

        # retries are ours (counted, interruptible, Retry-After aware): the client's are off
        self._client = openai.OpenAI(
            api_key=key or "none", base_url=self.base_url, max_retries=0, timeout=self.timeout,
            http_client=_http_client(openai, timeout=self.timeout, on_request=on_request))

    def __repr__(self) -> str:  # never shows the key
        return f"JudgeClient(endpoint={self.base_url!r}, model={self.model!r})"

    def params(self) -> dict:
        """Sampling parameters that change the answer (part of the cache key)."""
        p = {"temperature": self.temperature, "max_tokens": self.max_tokens,
             "logprobs": True, "top_logprobs": self.top_logprobs}
        if self.seed is not None:
            p["seed"] = int(self.seed)
        return p

    def key(self, messages: list[dict]) -> str:
        """Cache key of a request."""
        return request_key(self.model, self.params(), messages)

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``."""
        text = str(text)
        return text.replace(self._secret, "***") if self._secret else text

    def redact_json(self, value: Any) -> tuple[Any, int]:
        """Parsed JSON with the API key replaced by ``***`` (see :func:`redact_secret`)."""
        return redact_secret(value, self._secret)

    def _wait(self, attempt: int, exc: Exception | None) -> float:
        retry_after = None
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                retry_after = float(response.headers.get("retry-after"))
            except (TypeError, ValueError, AttributeError):
                retry_after = None
        if retry_after is not None and math.isfinite(retry_after):
            return min(max(retry_after, 0.0), self.max_backoff)
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)

    def _classify(self, exc: Exception) -> str:
        """'retry', 'fail' (this request only) or 'stop' (the endpoint refuses everything)."""
        o = self._openai
        if isinstance(exc, (o.AuthenticationError, o.PermissionDeniedError, o.NotFoundError)):
            return "stop"
        if isinstance(exc, (o.RateLimitError, o.APIConnectionError, _Malformed, _DeadlinePassed,
                            ValueError, o.APIResponseValidationError)):
            return "retry"
        if isinstance(exc, o.APIStatusError):
            code = getattr(exc, "status_code", 0) or 0
            if code >= 500 or code in (408, 409, 425, 429):
                return "retry"
            if code == 400 and "logprob" in str(exc).lower():
                return "stop"
            return "fail"
        return "fail"

    def _describe(self, exc: Exception) -> str:
        if isinstance(exc, _DeadlinePassed):
            # named like the client's own timeouts: one reason in the retry counts
            return f"APITimeoutError: no complete response within {self.timeout:g} s"
        code = getattr(exc, "status_code", None)
        name = type(exc).__name__
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else name
        return self.redact(f"HTTP {code}: {msg}" if code else f"{name}: {msg}")[:300]

    def complete(self, messages: list[dict], *, stop: threading.Event | None = None,
                 on_retry: Callable[[str], None] | None = None) -> tuple[dict, int, float, int]:
        """One chat completion with retries.

        Returns
        -------
        response : dict
            The chat-completion JSON (``choices``, ``usage``, ...), with the API key replaced by
            ``***`` wherever the server wrote it.
        attempts : int
        elapsed_s : float
        redacted : int
            How many strings of the response held the API key.

        Raises
        ------
        RequestFailed
            Retries used up, or a 4xx other than 401/403/404/408/409/425/429.
        EndpointError
            401, 403, 404, or a 400 about log-probabilities: no request can succeed.
        InterruptedError
            ``stop`` was set while waiting to retry.
        """
        t0 = time.perf_counter()
        kwargs = dict(model=self.model, messages=messages, logprobs=True,
                      temperature=self.temperature, max_tokens=self.max_tokens)
        if self.top_logprobs:
            kwargs["top_logprobs"] = self.top_logprobs
        if self.seed is not None:
            kwargs["seed"] = int(self.seed)
        last = ""
        for attempt in range(1, self.max_retries + 2):
            if stop is not None and stop.is_set():
                raise InterruptedError("stopped")
            try:
                data, n = self._attempt(kwargs)
                return data, attempt, time.perf_counter() - t0, n
            except Exception as exc:  # noqa: BLE001 - sorted by _classify
                kind = self._classify(exc)
                last = self._describe(exc)
                if kind == "stop":
                    hint = ""
                    if isinstance(exc, self._openai.AuthenticationError):
                        hint = (f" Put the key in the environment variable ${self.api_key_env}"
                                + ("" if self.has_key else " (it is not set)")
                                + " or name another with --api-key-env.")
                    elif isinstance(exc, self._openai.NotFoundError):
                        hint = (f" Check --endpoint ({self.base_url}, usually ending in /v1) and "
                                f"--model ({self.model}).")
                    elif "logprob" in last.lower():
                        hint = " This endpoint does not return log-probabilities; use a server that does."
                    raise EndpointError(f"The endpoint refused the request ({last}).{hint}") from None
                if kind == "fail" or attempt > self.max_retries:
                    raise RequestFailed(last) from None
                if on_retry is not None:
                    on_retry(last)
                delay = self._wait(attempt, exc)
                if stop is not None:
                    if stop.wait(delay):
                        raise InterruptedError("stopped") from None
                else:
                    time.sleep(delay)
        raise RequestFailed(last)  # pragma: no cover - the loop returns or raises

    def _attempt(self, kwargs: dict) -> tuple[dict, int]:
        # the raw body, parsed here: the client's typed models would pass odd values through
        # (and warn about them on stderr, values included)
        with _Deadline(self.timeout) as deadline:
            self._local.deadline = deadline
            try:
                raw = self._client.chat.completions.with_raw_response.create(**kwargs)
                body = raw.http_response.content
            except Exception:
                if deadline.expired:  # the socket was shut down under the request
                    raise _DeadlinePassed() from None
                raise
            finally:
                self._local.deadline = None
        return _parse_body(body, self._secret)


# --- running ------------------------------------------------------------------------------------
@dataclass
class RunStats:
    """What a :func:`run_requests` call did.

    Attributes
    ----------
    n_total : int
        Distinct requests asked for.
    n_cached : int
        Answered from the cache at the start.
    n_new : int
        Answered by the endpoint in this run.
    n_failed : int
        Failed for good in this run (see ``failures``).
    n_retries : int
        Retries made (429, 5xx, timeouts, dropped connections, malformed responses).
    prompt_tokens, completion_tokens : int
        Token totals reported by the endpoint for this run's responses.
    elapsed_s : float
    failures : dict {key: message}
    retry_reasons : dict {message: count}
    """

    n_total: int = 0
    n_cached: int = 0
    n_new: int = 0
    n_failed: int = 0
    n_retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_s: float = 0.0
    failures: dict = field(default_factory=dict)
    retry_reasons: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready copy (failure messages only, no keys)."""
        return {"n_total": self.n_total, "n_cached": self.n_cached, "n_new": self.n_new,
                "n_failed": self.n_failed, "n_retries": self.n_retries,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "elapsed_s": round(self.elapsed_s, 3),
                "failures": sorted(set(self.failures.values()))[:20],
                "retry_reasons": dict(self.retry_reasons)}


def _fmt_tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else (f"{n / 1e3:.1f}k" if n >= 1e4 else str(n))


def run_requests(requests: Mapping[str, list[dict]], *, client: JudgeClient, cache: ResponseCache,
                 concurrency: int = 4, meta: Mapping[str, Mapping] | None = None,
                 progress: bool = True, desc: str = "judging") -> RunStats:
    """Send every request that is not cached yet, at most ``concurrency`` at a time.

    Each response is written to ``cache`` by the worker that received it, before anything else
    happens, so an interruption (Ctrl-C, a killed process, a fatal endpoint error) loses only the
    requests in flight. Ctrl-C stops sending at once and re-raises :class:`KeyboardInterrupt`
    after the requests in flight have finished (they are cached too).

    Parameters
    ----------
    requests : mapping {key: messages}
        Keys from :meth:`JudgeClient.key`.
    client : JudgeClient
    cache : ResponseCache
    concurrency : int, default 4
    meta : mapping {key: dict}, optional
        Small descriptions stored with each cached response (question id, candidates, order).
    progress : bool, default True
        A progress bar on stderr: done / total, cached, new, retries, failed, tokens.

    Returns
    -------
    RunStats

    Raises
    ------
    EndpointError
        The endpoint refuses every request (stops the run; finished responses stay cached).
    """
    from tqdm.auto import tqdm

    if concurrency < 1:
        raise PUAuditError("--concurrency must be at least 1.")
    t0 = time.perf_counter()
    stats = RunStats(n_total=len(requests))
    todo = [(k, m) for k, m in requests.items() if k not in cache]
    stats.n_cached = stats.n_total - len(todo)
    meta = meta or {}
    stop = threading.Event()
    lock = threading.Lock()
    bar = tqdm(total=stats.n_total, initial=stats.n_cached, desc=desc, unit="req",
               disable=not progress, file=sys.stderr, dynamic_ncols=True, mininterval=0.5)

    def postfix() -> None:
        bar.set_postfix_str(f"cached {stats.n_cached}, new {stats.n_new}, retries "
                            f"{stats.n_retries}, failed {stats.n_failed}, tokens "
                            f"{_fmt_tokens(stats.prompt_tokens)} in / "
                            f"{_fmt_tokens(stats.completion_tokens)} out", refresh=False)

    def on_retry(reason: str) -> None:
        with lock:
            stats.n_retries += 1
            short = reason.split(":")[0]
            stats.retry_reasons[short] = stats.retry_reasons.get(short, 0) + 1

    def one(key: str, messages: list[dict]) -> dict:
        response, attempts, elapsed, redacted = client.complete(messages, stop=stop,
                                                                on_retry=on_retry)
        info, _ = client.redact_json(dict(meta.get(key) or {}))
        # durable before anything else can go wrong
        return cache.put(key, response, meta=info, attempts=attempts, elapsed_s=elapsed,
                         redacted=redacted)

    postfix()
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="puaudit-judge")
    pending: dict[Future, str] = {}
    it = iter(todo)
    try:
        while True:
            # keep at most 2×concurrency submitted: Ctrl-C never has a long queue to cancel
            while len(pending) < 2 * concurrency and not stop.is_set():
                nxt = next(it, None)
                if nxt is None:
                    break
                pending[pool.submit(one, *nxt)] = nxt[0]
            if not pending:
                break
            done, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                key = pending.pop(fut)
                try:
                    rec = fut.result()
                except RequestFailed as exc:
                    stats.n_failed += 1
                    stats.failures[key] = str(exc)
                except InterruptedError:
                    continue
                else:
                    stats.n_new += 1
                    pt, ct = response_usage(rec["response"])
                    stats.prompt_tokens += pt
                    stats.completion_tokens += ct
                bar.update(1)
                postfix()
    except BaseException as exc:
        stop.set()
        for fut in pending:
            fut.cancel()
        if isinstance(exc, KeyboardInterrupt) and progress:
            bar.write("interrupted: finishing the requests in flight (they are cached too); "
                      "Ctrl-C again abandons them", file=sys.stderr)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        stats.elapsed_s = time.perf_counter() - t0
        postfix()
        bar.refresh()
        bar.close()
    return stats
