"""A chat completion as an endpoint sends it: parsed, checked, read (text, tokens, usage) and
cleaned of a secret the server may echo."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from puaudit.errors import PUAuditError

__all__ = ["RequestFailed", "ResponseTooLarge", "EndpointError", "Malformed", "response_text",
           "response_usage", "redact_secret", "default_max_response_bytes", "check_response",
           "parse_body"]


class RequestFailed(Exception):
    """One request failed for good (retries used up, or a 4xx that retrying cannot fix)."""


class ResponseTooLarge(RequestFailed):
    """A response larger than the per-response limit: that request fails, unread past the
    limit (asking again would bring the same)."""


def default_max_response_bytes(max_tokens: int, top_logprobs: int) -> int:
    """The largest response a request can honestly bring back: 256 KiB for the envelope and
    the text, plus 256 bytes for each of the ``max_tokens × (top_logprobs + 1)`` token entries
    it may list (an entry such as ``{"token": " the", "logprob": -0.31, "bytes": [32, 116,
    104, 101]}`` is about 75 bytes; 256 leaves room for long, escaped tokens). With the
    defaults (1024 tokens, 20 alternatives) 5.8 MB."""
    return 256 * 1024 + max(int(max_tokens), 1) * (max(int(top_logprobs), 0) + 1) * 256


class EndpointError(PUAuditError):
    """The endpoint refuses every request (bad key, unknown model, no log-probabilities): stop."""


class Malformed(Exception):
    """A 200 response that is not a usable chat completion."""


def response_text(response: Mapping) -> str:
    """``choices[0].message.content`` of a chat-completion response (a dict)."""
    return str(response["choices"][0]["message"].get("content") or "")


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


def check_response(data: Any) -> dict:
    """A response must hold ``choices[0].message.content`` text; its log-probabilities may be
    anything: :func:`puaudit.trustjudge.judge_tables.assemble_judge_tables` checks them and lists the bad ones,
    keeping the verdict (asking again would not change a deterministic server's answer)."""
    try:
        choice = data["choices"][0]
        content = choice["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise Malformed("the response has no choices[0].message") from None
    if not isinstance(content, str):
        raise Malformed("the response's message has no text content")
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
    # inf, which assemble_judge_tables lists as a malformed log-probability
    return int(digits) if len(digits) <= 64 else float(digits)


def parse_body(raw: bytes, secret: str) -> tuple[dict, int]:
    try:
        data = json.loads(raw, parse_int=_parse_int)
        data, n = redact_secret(data, secret)
    except RecursionError:
        raise Malformed("the response is nested too deeply to be a chat completion") from None
    return check_response(data), n
