"""The dashboard's one job runner: progress, cancellation by newer settings, and background
work that gives way to a slider answer and resumes after it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from components.jobs import Cancelled, JobRunner, Preempted, job_status


def _steps(n, seen, delay=0.05):
    def work(job):
        for i in range(n):
            job.report(i, n, f"step {i}")
            time.sleep(delay)
            seen.append(i)
        return n
    return work


def _wait(job, timeout=10):
    deadline = time.monotonic() + timeout
    while not job.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert job.done()


def test_a_background_job_reports_progress_and_its_key_is_shared():
    runner = JobRunner(unwatched_s=0)
    seen = []
    job = runner.submit("a", _steps(4, seen))
    assert runner.submit("a", _steps(4, [])) is job  # one job per key
    _wait(job)
    assert job.result() == 4 and seen == [0, 1, 2, 3]
    assert job.progress["done"] == 3 and job.progress["total"] == 4
    assert job_status(job) == "ready"


def test_a_newer_setting_cancels_the_queued_and_running_jobs_of_its_group():
    runner = JobRunner(unwatched_s=0)
    started = threading.Event()

    def slow(job):
        started.set()
        while True:
            job.checkpoint()
            time.sleep(0.01)

    old = runner.submit(("curve", 1), slow, group="curve")
    started.wait(5)
    queued = runner.submit(("curve", 2), _steps(2, []), group="curve")
    newest = runner.submit(("curve", 3), _steps(2, []), group="curve")
    _wait(newest)
    assert newest.result() == 2
    with pytest.raises(Cancelled, match="newer settings"):
        old.result()
    assert queued.cancelled() and job_status(old) == "pending"
    again = runner.submit(("curve", 1), _steps(1, []), group="curve")  # asked for again: rerun
    assert again is not old
    _wait(again)
    assert again.result() == 1


def test_background_work_gives_way_to_a_foreground_answer_and_resumes_after_it():
    runner = JobRunner(unwatched_s=0)
    done_steps = []

    def work(job):
        while len(done_steps) < 30:  # resumable: it keeps what it finished
            job.checkpoint()
            time.sleep(0.01)
            done_steps.append(1)
        return len(done_steps)

    job = runner.submit("spread", work)
    time.sleep(0.05)
    with runner.foreground():  # a slider answer
        _wait(job)
        with pytest.raises(Preempted):
            job.result()
        assert job_status(job) == "pending"
        n_during = len(done_steps)
        time.sleep(0.1)
        assert len(done_steps) == n_during  # nothing ran beside the answer
    again = runner.submit("spread", work)  # the page's next poll
    assert again is not job
    _wait(again)
    assert again.result() == 30


def test_a_foreground_job_returns_its_value_and_errors_are_raised_where_read():
    runner = JobRunner()
    job = runner.start(lambda j: j.report(1, 2, "half") or 42, text="work")
    job.thread.join(5)
    assert job.result() == 42 and job.progress["text"] == "half"
    assert not runner.foreground_active()

    def fail(j):
        raise ValueError("bad cell")

    bad = runner.start(fail)
    bad.thread.join(5)
    with pytest.raises(ValueError, match="bad cell"):
        bad.result()


def test_an_unwatched_background_job_stops():
    runner = JobRunner(unwatched_s=0.2)
    job = runner.submit("umap", _steps(100, [], delay=0.02))
    _wait(job)
    with pytest.raises(Cancelled, match="nobody has asked"):
        job.result()


def test_queued_background_jobs_start_most_urgent_first():
    runner = JobRunner(unwatched_s=0)
    gate, busy = threading.Event(), threading.Event()
    order = []
    runner.submit("busy", lambda job: busy.set() or gate.wait(5))
    # the others queue behind a running job (on a loaded machine the worker thread started
    # late and popped the first of them before they were all queued: spread before curve)
    assert busy.wait(5)
    jobs = [runner.submit(name, lambda job, name=name: order.append(name), priority=p)
            for name, p in (("compare", 3), ("spread", 2), ("curve", 0), ("precompute", 1))]
    gate.set()
    for job in jobs:
        _wait(job)
    assert order == ["curve", "precompute", "spread", "compare"]


def test_background_work_waits_while_the_page_draws_its_answer():
    runner = JobRunner(unwatched_s=0)
    runner.quiet(0.4)
    t0 = time.monotonic()
    started = []
    job = runner.submit("curve", lambda job: started.append(time.monotonic() - t0))
    _wait(job)
    assert started[0] >= 0.35


@pytest.mark.slow  # UMAP compiles its numba kernels once per process
def test_the_umap_job_gives_way_to_a_foreground_answer_and_its_layout_is_unchanged(monkeypatch):
    from components import audit_runs
    from puaudit.embed import projection

    runner = JobRunner(unwatched_s=0)
    monkeypatch.setattr(audit_runs, "runner", lambda: runner)
    z = np.random.default_rng(0).normal(size=(200, 8))
    expected = projection.project_2d(z, method="umap", random_state=0)
    real = projection.project_2d
    calls, in_layout, answer_started = [], threading.Event(), threading.Event()

    def watched(*args, checkpoint=None, **kw):  # the job's own checkpoint, counted
        def counted():
            calls.append(1)
            if len(calls) == 50:  # midway through the layout's epochs: a slider answer comes
                in_layout.set()
                answer_started.wait(5)
            checkpoint()
        return real(*args, checkpoint=counted, **kw)

    monkeypatch.setattr(projection, "project_2d", watched)
    job = audit_runs.umap_job("table|encoder|0", z, 0)
    assert in_layout.wait(60)
    with runner.foreground():
        answer_started.set()
        _wait(job, timeout=30)
        with pytest.raises(Preempted):
            job.result()
        assert len(calls) == 50  # it stopped at the first checkpoint after the answer began
        time.sleep(0.2)
        assert len(calls) == 50  # and nothing ran beside the answer
    again = audit_runs.umap_job("table|encoder|0", z, 0)  # the page's next poll
    assert again is not job
    _wait(again, timeout=60)
    np.testing.assert_array_equal(again.result(), expected)  # started again, same layout
    assert len(calls) > 50 + 500  # the whole layout ran the second time


def test_a_umap_job_for_newer_settings_cancels_the_older_one(monkeypatch):
    from components import audit_runs
    from puaudit.embed import projection

    runner = JobRunner(unwatched_s=0)
    monkeypatch.setattr(audit_runs, "runner", lambda: runner)
    started = threading.Event()

    def endless(z, *, checkpoint=None, **kw):
        started.set()
        while True:
            checkpoint()
            time.sleep(0.01)

    monkeypatch.setattr(projection, "project_2d", endless)
    old = audit_runs.umap_job("table|encoder|0", np.zeros((5, 2)), 0)
    assert started.wait(10)
    monkeypatch.setattr(projection, "project_2d", lambda z, **kw: np.ones((len(z), 2)))
    new = audit_runs.umap_job("table|encoder|1", np.zeros((5, 2)), 1)  # another seed
    _wait(new)
    with pytest.raises(Cancelled, match="newer settings"):
        old.result()
    assert new.result().shape == (5, 2)


def test_two_sessions_umap_jobs_do_not_cancel_each_other(monkeypatch):
    """A newer map cancels the older one of its own session only: two visitors polling maps of
    different tables would otherwise restart each other's UMAP at every poll."""
    from types import SimpleNamespace

    from components import audit_runs
    from puaudit.embed import projection

    runner = JobRunner(unwatched_s=0)
    monkeypatch.setattr(audit_runs, "runner", lambda: runner)
    started, release = threading.Event(), threading.Event()

    def held(z, *, checkpoint=None, **kw):
        started.set()
        while not release.is_set():
            checkpoint()
            time.sleep(0.01)
        return np.zeros((len(z), 2))

    monkeypatch.setattr(projection, "project_2d", held)
    session = SimpleNamespace(session_id="visitor-1")
    monkeypatch.setattr(audit_runs, "get_script_run_ctx", lambda: session)
    first = audit_runs.umap_job("table-1|encoder|0", np.zeros((5, 2)), 0)
    assert started.wait(10)
    session = SimpleNamespace(session_id="visitor-2")
    second = audit_runs.umap_job("table-2|encoder|0", np.zeros((5, 2)), 0)
    time.sleep(0.1)
    assert not first.cancelled() and not second.cancelled()
    release.set()
    _wait(first)
    _wait(second)
    assert first.result().shape == second.result().shape == (5, 2)
    session = SimpleNamespace(session_id="visitor-2")  # the same visitor, another seed
    started.clear()
    release.clear()
    third = audit_runs.umap_job("table-2|encoder|1", np.zeros((5, 2)), 1)
    assert started.wait(10)
    fourth = audit_runs.umap_job("table-2|encoder|2", np.zeros((5, 2)), 2)
    assert third.cancelled()
    _wait(third)  # it stops at its next checkpoint
    with pytest.raises(Cancelled, match="newer settings"):
        third.result()
    release.set()
    _wait(fourth)
    assert fourth.result().shape == (5, 2)


def test_a_running_job_yields_to_a_more_urgent_one_and_resumes_after_it():
    """The spread (priority 2) gives way at its next checkpoint to a precompute (1) queued
    behind it, then runs again by itself (no poll needed) and finishes."""
    runner = JobRunner(unwatched_s=0)
    order, started, runs = [], threading.Event(), []

    def spread(job):
        runs.append("spread")
        started.set()
        for i in range(20):
            job.checkpoint()
            time.sleep(0.01)
        order.append("spread")
        return "spread done"

    def precompute(job):
        order.append("precompute")
        return "precompute done"

    slow = runner.submit("spread", spread, priority=2)
    started.wait(5)
    urgent = runner.submit("precompute", precompute, priority=1)
    _wait(urgent)
    _wait(slow)
    assert urgent.result() == "precompute done" and slow.result() == "spread done"
    assert order == ["precompute", "spread"]
    assert runs == ["spread", "spread"]  # stopped once, started again from its checkpoint
    assert job_status(slow) == "ready"


def test_a_job_does_not_yield_to_a_less_urgent_one():
    runner = JobRunner(unwatched_s=0)
    order, started = [], threading.Event()

    def curve(job):
        started.set()
        for _ in range(10):
            job.checkpoint()
            time.sleep(0.01)
        order.append("curve")

    first = runner.submit("curve", curve, priority=0)
    started.wait(5)
    later = runner.submit("spread", lambda job: order.append("spread"), priority=2)
    _wait(later)
    _wait(first)
    assert order == ["curve", "spread"]


def test_cancel_group_keeps_the_job_of_the_settings_shown():
    """A redraw of the same settings (a background result arriving) keeps their precompute;
    the precompute of other settings stops."""
    runner = JobRunner(unwatched_s=0)
    release = threading.Event()

    def blocked(job):
        while not release.is_set():
            job.checkpoint()
            time.sleep(0.01)
        return "done"

    shown = runner.submit(("precompute", 1), blocked, group="precompute", priority=1)
    runner.cancel_group("precompute", keep=("precompute", 1))  # the same settings, redrawn
    release.set()
    _wait(shown)
    assert shown.result() == "done" and not shown.cancelled()
    release.clear()
    other = runner.submit(("precompute", 2), blocked, group="precompute", priority=1)
    runner.cancel_group("precompute", keep=("precompute", 1))  # the visitor moved on
    _wait(other)
    assert other.cancelled() and job_status(other) == "pending"  # asked again, it starts again
