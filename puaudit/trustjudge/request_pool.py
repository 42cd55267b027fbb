"""Every request not cached yet, sent with bounded concurrency and a progress bar
(:func:`run_requests`)."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Protocol

from puaudit.errors import PUAuditError
from puaudit.trustjudge.completion import RequestFailed, ResponseTooLarge, response_usage
from puaudit.trustjudge.response_cache import ResponseCache

__all__ = ["RunStats", "run_requests", "request_name"]


class JudgeClient(Protocol):
    """What the pool needs of :class:`puaudit.trustjudge.runner.JudgeClient` (which imports
    this module, so the pool names the methods it calls instead of importing the class)."""

    def complete(self, messages: list[dict], *, stop: Any = None,
                 on_retry: Callable[[str], None] | None = None) -> tuple[dict, int, float, int]:
        ...

    def redact_json(self, value: Any) -> tuple[Any, int]:
        ...


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
        return {**asdict(self), "elapsed_s": round(self.elapsed_s, 3),
                "failures": sorted(set(self.failures.values()))[:20]}


def request_name(info: Mapping | None, key: str) -> str:
    """A request as a person knows it: ``pair q3 (x vs y, order 1)``, ``score q3 (x)``."""
    info = dict(info or {})
    qid = info.get("question_id")
    if info.get("task") == "pair":
        return (f"pair {qid} ({info.get('candidate_i')} vs {info.get('candidate_j')}, order "
                f"{info.get('order', 1)})")
    if info.get("task") == "score":
        return f"score {qid} ({info.get('candidate')})"
    return f"request {key[:12]}"


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
    shown = _Progress(stats, tqdm(total=stats.n_total, initial=stats.n_cached, desc=desc,
                                  unit="req", disable=not progress, file=sys.stderr,
                                  dynamic_ncols=True, mininterval=0.5))

    def one(key: str, messages: list[dict]) -> dict:
        try:
            response, attempts, elapsed, redacted = client.complete(messages, stop=stop,
                                                                    on_retry=shown.on_retry)
        except ResponseTooLarge as exc:  # say which request brought it
            raise ResponseTooLarge(f"{request_name(meta.get(key), key)}: {exc}") from None
        info, _ = client.redact_json(dict(meta.get(key) or {}))
        # durable before anything else can go wrong
        return cache.put(key, response, meta=info, attempts=attempts, elapsed_s=elapsed,
                         redacted=redacted)

    shown.postfix()
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="puaudit-judge")
    pending: dict[Future, str] = {}
    try:
        _drain(pool, one, iter(todo), pending, stop=stop, concurrency=concurrency, shown=shown)
    except BaseException as exc:
        stop.set()
        for fut in pending:
            fut.cancel()
        if isinstance(exc, KeyboardInterrupt) and progress:
            # SIGTERM arrives as puaudit.cli.signals.Terminated, which carries its word;
            # only a Ctrl-C can be followed by a second one
            word = getattr(exc, "word", "interrupted")
            shown.bar.write(f"{word}: finishing the requests in flight (they are cached too)"
                            + ("; Ctrl-C again abandons them" if word == "interrupted" else ""),
                            file=sys.stderr)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        stats.elapsed_s = time.perf_counter() - t0
        shown.close()
    return stats


class _Progress:
    """The run's counters on a progress bar: retries are counted by the workers (under a
    lock), finished requests by the main thread."""

    def __init__(self, stats: RunStats, bar) -> None:
        self.stats = stats
        self.bar = bar
        self.lock = threading.Lock()

    def postfix(self) -> None:
        st = self.stats
        self.bar.set_postfix_str(f"cached {st.n_cached}, new {st.n_new}, retries "
                                 f"{st.n_retries}, failed {st.n_failed}, tokens "
                                 f"{_fmt_tokens(st.prompt_tokens)} in / "
                                 f"{_fmt_tokens(st.completion_tokens)} out", refresh=False)

    def on_retry(self, reason: str) -> None:
        with self.lock:
            self.stats.n_retries += 1
            short = reason.split(":")[0]
            self.stats.retry_reasons[short] = self.stats.retry_reasons.get(short, 0) + 1

    def finished(self, key: str, fut: Future) -> None:
        """Count one finished request: new (with its tokens) or failed for good."""
        st = self.stats
        try:
            rec = fut.result()
        except RequestFailed as exc:
            st.n_failed += 1
            st.failures[key] = str(exc)
        except InterruptedError:
            return
        else:
            st.n_new += 1
            pt, ct = response_usage(rec["response"])
            st.prompt_tokens += pt
            st.completion_tokens += ct
        self.bar.update(1)
        self.postfix()

    def close(self) -> None:
        self.postfix()
        self.bar.refresh()
        self.bar.close()


def _drain(pool: ThreadPoolExecutor, one, todo, pending: dict, *, stop: threading.Event,
           concurrency: int, shown: _Progress) -> None:
    """Submit the requests and collect them until none is left; ``pending`` holds those in
    flight (for the caller to cancel on an interruption)."""
    while True:
        # keep at most 2×concurrency submitted: Ctrl-C never has a long queue to cancel
        while len(pending) < 2 * concurrency and not stop.is_set():
            nxt = next(todo, None)
            if nxt is None:
                break
            pending[pool.submit(one, *nxt)] = nxt[0]
        if not pending:
            break
        done, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
        for fut in done:
            shown.finished(pending.pop(fut), fut)
