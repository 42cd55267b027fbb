"""Query an OpenAI-compatible chat-completions endpoint, with retries, concurrency and a
resumable on-disk cache of every response.

This module holds :class:`JudgeClient` (one chat completion with ``logprobs``, one wall-clock
deadline per attempt, retries with backoff, the API key never logged, cached or written); a
response is read by :mod:`.completion`, cached by :mod:`.response_cache` and the requests are
sent by :func:`puaudit.trustjudge.request_pool.run_requests`. What each retries, stops on and
keeps: docs/judge.md.
"""

from __future__ import annotations

import math
import os
import random
import socket
import sys
import threading
import time
from typing import Any, Callable

from puaudit.errors import PUAuditError
from puaudit.trustjudge.completion import (EndpointError, Malformed, RequestFailed,
                                           ResponseTooLarge, default_max_response_bytes,
                                           parse_body, redact_secret)
from puaudit.trustjudge.response_cache import request_key

__all__ = ["JudgeClient", "DEFAULT_KEY_ENV"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


class _DeadlinePassed(Exception):
    """An attempt outlived its wall-clock deadline (retried like any timeout)."""


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


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def read_capped(raw: Any, limit: int) -> bytes:
    """The body of a streamed response, refused as soon as it passes ``limit`` bytes (by its
    Content-Length, or while reading): a hostile server's 100 MB body is never held."""
    declared = raw.headers.get("content-length")
    try:
        declared = int(declared) if declared is not None else None
    except ValueError:
        declared = None
    hint = ("raise --max-response-mb if the endpoint's responses are honestly this large, or "
            "lower --max-tokens / --top-logprobs")
    if declared is not None and declared > limit:
        raise ResponseTooLarge(f"the response is {_mb(declared)}, over the limit of "
                               f"{_mb(limit)} per response ({hint})")
    body = bytearray()
    for chunk in raw.iter_bytes():
        body += chunk
        if len(body) > limit:
            raise ResponseTooLarge(f"the response passed the limit of {_mb(limit)} per "
                                   f"response; the rest was not read ({hint})")
    return bytes(body)


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
    max_response_bytes : int, optional
        The most bytes one response may have; a larger one fails its request
        (:class:`ResponseTooLarge`, not retried) and is not read past the limit. Default
        :func:`~puaudit.trustjudge.completion.default_max_response_bytes` of ``max_tokens``
        and ``top_logprobs``.
    """

    def __init__(self, *, endpoint: str, model: str, api_key_env: str = DEFAULT_KEY_ENV,
                 timeout: float = 120.0, max_retries: int = 6, backoff: float = 1.0,
                 max_backoff: float = 60.0, temperature: float = 0.0, max_tokens: int = 1024,
                 top_logprobs: int = 20, seed: int | None = None,
                 max_response_bytes: int | None = None):
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
        self.max_response_bytes = int(max_response_bytes or default_max_response_bytes(
            self.max_tokens, self.top_logprobs))
        if self.max_response_bytes < 1024:
            raise PUAuditError("--max-response-mb must allow at least 1 KB per response.")
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
        try:
            retry_after = float(exc.response.headers.get("retry-after"))
        except (TypeError, ValueError, AttributeError):  # no response, or no usable header
            retry_after = None
        if retry_after is not None and math.isfinite(retry_after):
            return min(max(retry_after, 0.0), self.max_backoff)
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)

    def _classify(self, exc: Exception) -> str:
        """'retry', 'fail' (this request only) or 'stop' (the endpoint refuses everything)."""
        o = self._openai
        if isinstance(exc, (o.AuthenticationError, o.PermissionDeniedError, o.NotFoundError)):
            return "stop"
        if isinstance(exc, (o.RateLimitError, o.APIConnectionError, Malformed, _DeadlinePassed,
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
        kwargs = dict(model=self.model, messages=messages, **self.params())
        if not self.top_logprobs:
            del kwargs["top_logprobs"]
        last = ""
        for attempt in range(1, self.max_retries + 2):
            if stop is not None and stop.is_set():
                raise InterruptedError("stopped")
            try:
                data, n = self._attempt(kwargs)
                return data, attempt, time.perf_counter() - t0, n
            except ResponseTooLarge:
                raise  # the same request would bring the same response: not retried
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
                with self._client.chat.completions.with_streaming_response.create(**kwargs) as raw:
                    body = read_capped(raw, self.max_response_bytes)
            except ResponseTooLarge:
                raise
            except Exception:
                if deadline.expired:  # the socket was shut down under the request
                    raise _DeadlinePassed() from None
                raise
            finally:
                self._local.deadline = None
        return parse_body(body, self._secret)
