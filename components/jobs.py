"""The dashboard's one job runner: every long computation runs as a :class:`Job` with progress
and cancellation (no Streamlit here; docs/dashboard.md).

**Foreground** jobs (:meth:`JobRunner.start`) answer the page being drawn, each in its own
thread at once. **Background** jobs (:meth:`JobRunner.submit`) run one at a time on one worker,
most urgent first, one per key per server process; a job of a ``group`` cancels the group's
other jobs, and stops at its next :meth:`Job.checkpoint` while a foreground job runs.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from concurrent.futures import Future
from typing import Callable

__all__ = ["Job", "JobRunner", "Cancelled", "Preempted", "Yielded", "job_status"]


class Cancelled(RuntimeError):
    """A job stopped at a checkpoint: newer settings superseded it, or nobody polled it."""


class Preempted(Cancelled):
    """A background job gave way to a foreground job; it runs again when next polled."""


class Yielded(Preempted):
    """A background job gave way to a more urgent one queued behind it; it is queued again at
    once and resumes after that one."""


class Job:
    """One computation: its future, progress (``done``, ``total``, ``text``) and cancellation.

    ``fn(job)`` reports with :meth:`report` and may stop at :meth:`checkpoint` (both raise
    :class:`Cancelled` once the job is cancelled).
    """

    def __init__(self, key, runner: "JobRunner | None", *, background: bool,
                 group: str | None = None, text: str = ""):
        self.key, self.group, self.background = key, group, background
        self.future: Future = Future()
        self.progress = {"done": 0, "total": 0, "text": text}
        self.seen = time.monotonic()
        self._cancel: str | None = None
        self._runner = runner
        self.unwatched_s = 0.0 if runner is None else runner.unwatched_s
        self.priority = 0

    def cancel(self, why: str = "cancelled") -> None:
        """Stop at the next checkpoint (a job that has not started never starts)."""
        self._cancel = why
        if not self.future.running():
            self.future.cancel()

    def cancelled(self) -> bool:
        """Whether it was cancelled (before or while running)."""
        return self._cancel is not None or self.future.cancelled()

    def checkpoint(self) -> None:
        """Raise :class:`Cancelled` when the job was cancelled, or :class:`Preempted` when it is
        a background job and a foreground job is running."""
        if self._cancel is not None:
            raise Cancelled(self._cancel)
        runner = self._runner
        if runner is not None and self.background:
            if runner.foreground_active():
                raise Preempted("a slider answer goes first")
            if runner._more_urgent(self.priority):
                raise Yielded("a more urgent job goes first")
            if self.unwatched_s and time.monotonic() - self.seen > self.unwatched_s:
                raise Cancelled(f"nobody has asked for it for {self.unwatched_s:.0f} s")

    def report(self, done: int, total: int, text: str | None = None) -> None:
        self.progress.update(done=done, total=total, **({"text": text} if text else {}))
        self.checkpoint()

    def _run(self, fn: Callable) -> None:
        # a job that yielded is running already (its future stays pending for the pages)
        if not self.future.running() and not self.future.set_running_or_notify_cancel():
            return
        try:
            self.checkpoint()
            result = fn(self)
        except Yielded:
            self._runner._requeue(self, fn)
        except BaseException as exc:  # kept in the future, raised where it is read
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)

    # Future-like reading (the pages poll these)
    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout: float | None = None):
        return self.future.result(timeout)

    def exception(self):
        return self.future.exception() if self.future.done() and not self.future.cancelled() \
            else None


class JobRunner:
    """Foreground and background jobs of one server process (see the module docstring).

    Parameters
    ----------
    keep : int
        Finished background jobs remembered (their results are what the pages poll).
    unwatched_s : float
        A background job nobody asked for this long stops at its next checkpoint; 0: never.
    """

    def __init__(self, *, keep: int = 32, unwatched_s: float = 60.0):
        self.keep, self.unwatched_s = int(keep), float(unwatched_s)
        self._jobs: dict = {}
        self._lock = threading.Lock()
        self._foreground = 0
        self._quiet_until = 0.0
        # the background queue: (priority, order, job, fn), served by one worker thread
        self._queue: list = []
        self._order = itertools.count()
        self._ready = threading.Condition(self._lock)
        self._worker: threading.Thread | None = None

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                _, _, job, fn = heapq.heappop(self._queue)
            while self.foreground_active() and not job.cancelled():
                time.sleep(0.05)  # the answer first: start once it is computed and drawn
            job._run(fn)

    def _more_urgent(self, priority: int) -> bool:
        """Whether a job more urgent than ``priority`` waits in the background queue."""
        with self._lock:
            return any(p < priority and not job.cancelled() for p, _, job, _ in self._queue)

    def _requeue(self, job: Job, fn: Callable) -> None:
        with self._ready:
            heapq.heappush(self._queue, (job.priority, next(self._order), job, fn))
            self._ready.notify()

    # --- foreground -------------------------------------------------------------------------
    def foreground_active(self) -> bool:
        """A foreground job runs, or a page is still drawing its answer (:meth:`quiet`)."""
        return self._foreground > 0 or time.monotonic() < self._quiet_until

    def quiet(self, seconds: float) -> None:
        """Keep background work paused for ``seconds`` more: the page draws the answer it just
        computed (a few hundred milliseconds) before background work resumes."""
        self._quiet_until = max(self._quiet_until, time.monotonic() + float(seconds))

    def start(self, fn: Callable, *, text: str = "", thread_hook: Callable | None = None) -> Job:
        """A foreground job started at once in its own thread (``thread_hook(thread)`` before it
        starts: Streamlit attaches its script context there)."""
        job = Job(None, self, background=False, text=text)
        with self._lock:
            self._foreground += 1

        def run():
            try:
                job._run(fn)
            finally:
                with self._lock:
                    self._foreground -= 1

        th = threading.Thread(target=run, name="puaudit-foreground", daemon=True)
        if thread_hook is not None:
            thread_hook(th)
        th.start()
        job.thread = th
        return job

    @contextlib.contextmanager
    def foreground(self):
        """A context in which background jobs give way (work done in the calling thread)."""
        with self._lock:
            self._foreground += 1
        try:
            yield
        finally:
            with self._lock:
                self._foreground -= 1

    # --- background -------------------------------------------------------------------------
    def submit(self, key, fn: Callable, *, group: str | None = None, text: str = "",
               unwatched_s: float | None = None, priority: int = 5) -> Job:
        """The background job of ``key``: the running or finished one, else ``fn`` queued (a
        cancelled, preempted or failed one is started again). With ``group``, the group's jobs
        of other keys are cancelled. ``unwatched_s``: this job's own limit (default the
        runner's). ``priority``: queued jobs start lowest first, then in the order asked.
        """
        with self._lock:
            job = self._jobs.get(key)
            if job is not None:
                job.seen = time.monotonic()
                failed = job.done() and (job.future.cancelled()
                                         or job.future.exception() is not None)
                if not (job.cancelled() or failed):
                    return job
            if group is not None:
                for other in self._jobs.values():
                    if other.group == group and other.key != key and not other.done():
                        other.cancel("newer settings asked for their own")
            job = Job(key, self, background=True, group=group, text=text)
            job.priority = int(priority)
            if unwatched_s is not None:
                job.unwatched_s = float(unwatched_s)
            self._jobs[key] = job
            heapq.heappush(self._queue, (int(priority), next(self._order), job, fn))
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, name="puaudit-job",
                                                daemon=True)
                self._worker.start()
            self._ready.notify()
            while len(self._jobs) > self.keep:  # bounded memory: forget the oldest finished
                old = next((k for k, j in self._jobs.items() if j.done()), None)
                if old is None:
                    break
                self._jobs.pop(old)
            return job

    def get(self, key) -> Job | None:
        with self._lock:
            return self._jobs.get(key)

    def cancel_group(self, group: str, *, keep=None) -> None:
        """Cancel the group's unfinished jobs, but the one of key ``keep`` (work for the
        settings shown, which a redraw of the same settings must not throw away)."""
        with self._lock:
            for job in self._jobs.values():
                if job.group == group and not job.done() and job.key != keep:
                    job.cancel("cancelled: the visitor acted")


def job_status(job: Job | None) -> str:
    """``"ready"`` (a result), ``"failed"`` (an error to show), or ``"pending"`` (queued,
    running, or stopped to give way: the next poll starts it again)."""
    if job is None or not job.done() or job.future.cancelled():
        return "pending"
    exc = job.future.exception()
    return "ready" if exc is None else "pending" if isinstance(exc, Cancelled) else "failed"
