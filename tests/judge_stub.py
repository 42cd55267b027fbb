"""A deterministic stand-in judge: an OpenAI-compatible chat-completions server on 127.0.0.1.

For trying ``puaudit judge`` without a model, and for tests. It answers ``POST
/v1/chat/completions`` with a judgment, per-token log-probabilities and ``top_logprobs``:

* a pairwise prompt (one holding ``[The Start of Assistant A's Answer]`` …) gets a verdict
  ``[A]``/``[B]``/``[C]`` (``[[A]]`` … when the system prompt asks for double brackets). Each
  answer has a fixed quality in [0, 1] (from a hash of its text); the judge prefers the better
  answer, with a position bias towards the answer shown first, and reports the softmax
  probabilities of the three letters at the verdict token. Close pairs therefore flip with the
  order: the position bias that likelihood-aware aggregation removes;
* a single-answer prompt (``[The Start of Assistant's Answer]``) gets ``Score: [s]`` (or
  ``Rating: [[s]]``) on the scale named in the prompt (``scale of 1 … to 10``), with a
  discretised normal distribution around the answer's quality;
* the other tokens' log-probabilities grow more negative as the judge is less sure, so
  perplexity tracks confidence.

Faults for tests: ``fault(n, key, attempt)`` (n = request number, key = hash of the request body,
attempt = how often this body has been seen) returns ``None`` or one of ``"429"``, ``"500"``,
``"timeout"`` (answers after ``slow_s`` seconds), ``"malformed"`` (truncated JSON), ``"drop"``
(closes the connection without an answer), ``"trickle"`` (sends the headers, then the body one
byte every ``trickle_s`` seconds without ever finishing it, until the client hangs up), ``"401"``.
``reply(body)`` replaces the judgment (content and tokens) when given; a ``"logprobs"`` entry in
what it returns is sent as the response's ``logprobs`` as it stands (any JSON value).

Command line::

    python -m tests.judge_stub --port 8000            # serve until Ctrl-C
    python -m tests.judge_stub --write-answers answers.csv
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import numpy as np

__all__ = ["StubJudgeServer", "default_reply", "tokenize", "answer_quality", "faults_once",
           "fault_rate", "stub_answers", "cache_key"]

_PAIR_RE = re.compile(r"\[The Start of Assistant A's Answer\]\n(.*?)\n\[The End of Assistant A's "
                      r"Answer\].*?\[The Start of Assistant B's Answer\]\n(.*?)\n\[The End of "
                      r"Assistant B's Answer\]", re.S)
_SINGLE_RE = re.compile(r"\[The Start of Assistant's Answer\]\n(.*?)\n\[The End of Assistant's "
                        r"Answer\]", re.S)
_SCALE_RE = re.compile(r"scale of (\d+)\D+?(\d+)")
_TOKEN_RE = re.compile(r" ?[A-Za-z']+| ?\d+| ?[^A-Za-z'\d\s]|\s+")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into word, number, punctuation and space tokens that concatenate back to
    it (a bracketed verdict letter or score is a token of its own)."""
    return _TOKEN_RE.findall(text)


def _unit(*parts: str) -> float:
    h = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64


def answer_quality(text: str) -> float:
    """The stub's fixed quality of an answer, in [0, 1) (a hash of its stripped text)."""
    return _unit("quality", text.strip())


def _token_entries(tokens: list[str], special: dict[int, list[tuple[str, float]]],
                   uncertainty: float, seed: str) -> list[dict]:
    out = []
    for i, tok in enumerate(tokens):
        if i in special:
            alts = special[i]
            chosen = next(lp for t, lp in alts if t == tok)
        else:
            chosen = -(0.01 + 1.5 * uncertainty * (0.5 + _unit(seed, str(i))))
            alts = [(tok, chosen), (" the", chosen - 1.0 - _unit(seed, "alt", str(i)))]
        out.append({"token": tok, "logprob": chosen, "bytes": list(tok.encode("utf-8")),
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))}
                                     for t, lp in alts]})
    return out


def default_reply(body: dict, *, position_bias: float = 0.15, noise: float = 0.15) -> dict:
    """The stub's judgment of a request: ``{"content": str, "tokens": [token dicts]}``.

    Pairwise: ``d = q(A) − q(B) + position_bias + noise·(2u − 1)`` with ``q`` the answers'
    qualities and ``u`` a hash of the two answers in the order shown (the judge's fixed whim
    about this presentation); letter logits ``(6d, −6d, 0.5 − 6|d|)``.
    """
    messages = body.get("messages") or []
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
    double = "[[" in system
    m = _PAIR_RE.search(user)
    if m:
        qa, qb = answer_quality(m.group(1)), answer_quality(m.group(2))
        d = qa - qb + position_bias + noise * (2 * _unit("whim", m.group(1), m.group(2)) - 1)
        logits = np.array([6.0 * d, -6.0 * d, 0.5 - 6.0 * abs(d)])
        p = np.exp(logits - logits.max())
        p /= p.sum()
        letter = "ABC"[int(np.argmax(p))]
        better = {"A": "Assistant A's answer is more complete and accurate.",
                  "B": "Assistant B's answer is more complete and accurate.",
                  "C": "Both answers are about equally helpful."}[letter]
        content = (f"Strengths: both answers address the question. Weaknesses: each leaves "
                   f"something out. {better} Verdict: " + ("[[" if double else "[") + letter
                   + ("]]" if double else "]"))
        tokens = tokenize(content)
        idx = max(i for i, t in enumerate(tokens) if t == letter)
        special = {idx: sorted(((c, float(np.log(pc))) for c, pc in zip("ABC", p)),
                               key=lambda t: -t[1])}
        return {"content": content,
                "tokens": _token_entries(tokens, special, 1.0 - float(p.max()), user)}
    m = _SINGLE_RE.search(user)
    if m:
        sm = _SCALE_RE.search(system + "\n" + user)
        lo, hi = (int(sm.group(1)), int(sm.group(2))) if sm else (1, 10)
        q = answer_quality(m.group(1))
        mu = lo + q * (hi - lo)
        sigma = 0.08 * (hi - lo) + 0.5
        scores = np.arange(lo, hi + 1)
        w = np.exp(-0.5 * ((scores - mu) / sigma) ** 2)
        w /= w.sum()
        s = int(scores[int(np.argmax(w))])
        content = ("Highlights: the answer is on topic. Opportunities: it could be more "
                   "detailed. Summary: a reasonable answer. "
                   + (f"Rating: [[{s}]]" if double else f"Score: [{s}]"))
        tokens = tokenize(content)
        idx = max(i for i, t in enumerate(tokens) if t == str(s))
        order = np.argsort(-w, kind="stable")[:20]
        special = {idx: [(str(int(scores[i])), float(np.log(max(w[i], 1e-300)))) for i in order]}
        return {"content": content,
                "tokens": _token_entries(tokens, special, 1.0 - float(w.max()), user)}
    content = "I can only judge prompts in the MT-Bench or TrustJudge format."
    return {"content": content, "tokens": _token_entries(tokenize(content), {}, 0.5, user)}


def faults_once(kinds: list[str]) -> Callable[[int, str, int], str | None]:
    """A fault plan: the first attempt of the i-th distinct request gets ``kinds[i % len]``
    (``None`` entries answer normally); later attempts succeed."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def plan(n: int, key: str, attempt: int) -> str | None:
        with lock:
            i = seen.setdefault(key, len(seen))
        return kinds[i % len(kinds)] if attempt == 1 else None
    return plan


def fault_rate(rate: float, *, seed: int = 0,
               kinds: tuple[str, ...] = ("429", "500", "timeout", "malformed", "drop")):
    """A fault plan: each attempt fails with probability ``rate`` (seeded), kind drawn from
    ``kinds``."""
    rng = np.random.default_rng(seed)
    lock = threading.Lock()

    def plan(n: int, key: str, attempt: int) -> str | None:
        with lock:
            return str(rng.choice(kinds)) if rng.random() < rate else None
    return plan


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a client that gave up: not news
        pass


class StubJudgeServer:
    """Run the stub judge in a background thread.

    Parameters
    ----------
    host : str, default "127.0.0.1"
    port : int, default 0 (any free port)
    reply : callable(body) -> {"content", "tokens"}, optional
        Replaces :func:`default_reply`.
    fault : callable(n, key, attempt) -> str or None, optional
        See the module docstring.
    api_key : str, optional
        When set, requests without ``Authorization: Bearer <api_key>`` get 401.
    slow_s : float, default 3
        How long a ``"timeout"`` fault waits before answering.
    trickle_s : float, default 0.05
        Seconds between the bytes of a ``"trickle"`` fault (which stops after 600 s if the client
        never hangs up).
    delay_s : float, default 0
        Added to every answer (to make a run last).
    position_bias, noise : float, default 0.15 and 0.15
        See :func:`default_reply`.

    Attributes
    ----------
    calls : list of dict
        One per request received: ``n``, ``key`` (SHA-256 of the body), ``attempt``, ``fault``,
        ``authorized``, ``body`` (the parsed JSON body); a ``"trickle"`` call also ``trickled``:
        the body bytes sent before the client hung up.
    max_in_flight : int
        The most requests handled at the same time.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, reply=None, fault=None,
                 api_key: str | None = None, slow_s: float = 3.0, delay_s: float = 0.0,
                 trickle_s: float = 0.05, position_bias: float = 0.15, noise: float = 0.15):
        self.reply = reply or (lambda body: default_reply(body, position_bias=position_bias,
                                                          noise=noise))
        self.fault = fault
        self.api_key = api_key
        self.slow_s = slow_s
        self.delay_s = delay_s
        self.trickle_s = trickle_s
        self.calls: list[dict] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._httpd = _QuietServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL for ``--endpoint`` (``http://127.0.0.1:PORT/v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def answered_keys(self) -> list[str]:
        """Body hashes of the requests that got a normal answer."""
        with self._lock:
            return [c["key"] for c in self.calls if c["fault"] is None and c["authorized"]]

    def answered_cache_keys(self) -> list[str]:
        """:func:`puaudit.trustjudge.response_cache.request_key` of the requests that got a
        normal answer (what the judge runner's cache is keyed by)."""
        with self._lock:
            calls = [c for c in self.calls if c["fault"] is None and c["authorized"] and c["body"]]
        return [cache_key(c["body"]) for c in calls]

    def start(self) -> "StubJudgeServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="stub-judge",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "StubJudgeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _record(self, key: str, fault: str | None, authorized: bool, body: Any) -> dict:
        with self._lock:
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
            n = len(self.calls) + 1
            call = {"n": n, "key": key, "attempt": attempt, "fault": fault,
                    "authorized": authorized, "body": body}
            self.calls.append(call)
            return call

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, payload: bytes, headers: dict | None = None):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def _trickle(self) -> int:
                payload = json.dumps({"id": "stub", "object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": " " * 100_000}}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.close_connection = True
                sent, t0 = 0, time.monotonic()
                try:
                    self.wfile.flush()
                    while sent < len(payload) and time.monotonic() - t0 < 600:
                        self.wfile.write(payload[sent].encode())
                        self.wfile.flush()
                        sent += 1
                        time.sleep(server.trickle_s)
                except OSError:  # the client hung up
                    pass
                return sent

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [
                        {"id": "stub", "object": "model", "owned_by": "puaudit"}]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self):
                with server._lock:
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    self._post()
                finally:
                    with server._lock:
                        server._in_flight -= 1

            def _post(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                key = hashlib.sha256(raw).hexdigest()
                auth = self.headers.get("Authorization", "")
                authorized = server.api_key is None or auth == f"Bearer {server.api_key}"
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "unknown path"}}')
                    return
                with server._lock:
                    attempt = server._attempts.get(key, 0) + 1
                    n = len(server.calls) + 1
                fault = server.fault(n, key, attempt) if server.fault and authorized else None
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = None
                call = server._record(key, fault, authorized, body)
                if not authorized or fault == "401":
                    self._send(401, b'{"error": {"message": "Incorrect API key provided", '
                                    b'"type": "invalid_request_error", "code": "invalid_api_key"}}')
                    return
                if fault == "429":
                    self._send(429, b'{"error": {"message": "Rate limit reached", "type": '
                                    b'"requests", "code": "rate_limit_exceeded"}}',
                               {"Retry-After": "0"})
                    return
                if fault == "500":
                    self._send(500, b'{"error": {"message": "The server had an error"}}')
                    return
                if fault == "malformed":
                    self._send(200, b'{"id": "stub", "object": "chat.completion", "choices": [{"ind')
                    return
                if fault == "drop":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if fault == "trickle":
                    call["trickled"] = self._trickle()
                    return
                if fault == "timeout":
                    time.sleep(server.slow_s)
                if server.delay_s:
                    time.sleep(server.delay_s)
                if body is None:
                    self._send(400, b'{"error": {"message": "invalid JSON body"}}')
                    return
                self._send(200, json.dumps(_completion(body, server.reply(body), n)).encode("utf-8"))

        return Handler


def cache_key(body: dict) -> str:
    """The judge runner's cache key of a request body (see
    :meth:`puaudit.trustjudge.runner.JudgeClient.params`)."""
    from puaudit.trustjudge.response_cache import request_key

    params = {"temperature": body.get("temperature"), "max_tokens": body.get("max_tokens"),
              "logprobs": True, "top_logprobs": body.get("top_logprobs", 0)}
    if body.get("seed") is not None:
        params["seed"] = body["seed"]
    return request_key(body.get("model", ""), params, body.get("messages", []))


def _completion(body: dict, judged: dict, n: int) -> dict:
    tokens = judged.get("tokens") or []
    k = int(body.get("top_logprobs") or 0)
    logprobs = None
    if "logprobs" in judged:
        logprobs = judged["logprobs"]
    elif body.get("logprobs"):
        logprobs = {"content": [{**t, "top_logprobs": t["top_logprobs"][:k]}
                                if isinstance(t, dict) and isinstance(t.get("top_logprobs"), list)
                                else t for t in tokens], "refusal": None}
    prompt_tokens = sum(len(tokenize(str(m.get("content", "")))) for m in body.get("messages", []))
    return {"id": f"stub-{n}", "object": "chat.completion", "created": 1700000000,
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs,
                         "message": {"role": "assistant", "content": judged["content"]}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                      "total_tokens": prompt_tokens + len(tokens)}}


_QUESTIONS = [
    ("writing", "Write a short thank-you note to a colleague who helped you move house."),
    ("reasoning", "If all bloops are razzies and some razzies are lazzies, must some bloops be lazzies?"),
    ("math", "What is the sum of the interior angles of a hexagon? Explain briefly."),
    ("coding", "Write a Python function that reverses the words of a sentence."),
    ("stem", "Why is the sky blue? Answer for a ten-year-old."),
    ("humanities", "Name two causes of the French Revolution and explain one of them."),
    ("roleplay", "Pretend you are a tour guide in Rome and greet a group of visitors."),
    ("extraction", "List the three largest planets of the solar system, largest first."),
]
_STYLES = ["A brief answer: ", "A careful, detailed answer: ", "A friendly answer: ",
           "A structured answer with steps: ", "A cautious answer: ", "An enthusiastic answer: "]


def stub_answers(*, n_candidates: int = 5, n_questions: int = 8) -> "Any":
    """A small generated answers table (question_id, category, question, candidate, answer) to
    judge with the stub."""
    import pandas as pd

    rows = []
    for qi, (cat, question) in enumerate(_QUESTIONS[:n_questions]):
        for c in range(n_candidates):
            rows.append({"question_id": f"q{qi + 1}", "category": cat, "question": question,
                         "candidate": f"model-{c + 1}",
                         "answer": f"{_STYLES[(qi + c) % len(_STYLES)]}answer {c + 1} to '"
                                   f"{question[:40]}…' written by model-{c + 1}."})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.judge_stub",
                                     description="A deterministic OpenAI-compatible stand-in judge "
                                                 "on 127.0.0.1 (for trying puaudit judge).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--position-bias", type=float, default=0.15)
    parser.add_argument("--noise", type=float, default=0.15)
    parser.add_argument("--fault-rate", type=float, default=0.0,
                        help="share of requests answered with 429/500/timeout/malformed/drop")
    parser.add_argument("--write-answers", metavar="FILE",
                        help="write a small generated answers table and exit")
    args = parser.parse_args(argv)
    if args.write_answers:
        from puaudit.data.writers import check_output_path, write_table

        check_output_path(args.write_answers, what="answers table")
        df = stub_answers()
        write_table(df, args.write_answers)
        print(f"wrote {len(df)} answers ({df['question_id'].nunique()} questions × "
              f"{df['candidate'].nunique()} candidates) to {args.write_answers}")
        return 0
    server = StubJudgeServer(host=args.host, port=args.port, position_bias=args.position_bias,
                             noise=args.noise,
                             fault=fault_rate(args.fault_rate) if args.fault_rate > 0 else None,
                             slow_s=5.0)
    print(f"stub judge at {server.url} (Ctrl-C to stop)", flush=True)
    server.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
