"""The Audit page's background spread over seeds (``components.audit_runs.spread_job``): one worker
serves every session, so a spread that nobody polls any more (the visitor left or closed the
tab) stops at its next split, and one that is still polled runs to the end."""

from __future__ import annotations

import time

import pytest

from puaudit.audit.config import AuditConfig
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons


class _Result:
    metrics = {"delta": 0.01}


def _fake_spread(calls):
    """A stand-in for delta_over_seeds: four splits of 0.2 s, reporting after each."""

    def run(table, emb, cfg, *, n_seeds, first_delta, progress, run_seed=None):
        for done in range(1, n_seeds):
            time.sleep(0.2)
            calls.append(done)
            progress(done, n_seeds - 1)
        return {"mean": first_delta, "min": first_delta, "max": first_delta, "n": n_seeds}

    return run


@pytest.mark.parametrize("watched", [True, False])
def test_an_unwatched_spread_stops_and_a_watched_one_finishes(monkeypatch, watched):
    import puaudit.audit.evaluate as evaluate
    from components import audit_runs

    calls: list[int] = []
    monkeypatch.setattr(evaluate, "delta_over_seeds", _fake_spread(calls))
    monkeypatch.setattr(audit_runs, "SPREAD_UNWATCHED_S", 0.5)
    table = load_comparisons(generate_demo(60, random_state=3 + watched))
    params = {**AuditConfig.defaults(), "encoder": "test", "random_state": 11 + watched}
    fut, prog = audit_runs.spread_job(table, None, params, _Result(), n_seeds=5)
    deadline = time.monotonic() + 10
    while not fut.done() and time.monotonic() < deadline:
        if watched:  # the page's fragment asks for the job every second
            again, _ = audit_runs.spread_job(table, None, params, _Result(), n_seeds=5)
            assert again is fut
        time.sleep(0.1)
    assert fut.done()
    if watched:
        assert fut.result()["n"] == 5 and calls == [1, 2, 3, 4]
    else:
        with pytest.raises(audit_runs.SpreadSuperseded, match="nobody has asked"):
            fut.result()
        assert len(calls) < 4
        # a visitor who comes back gets a fresh spread, not the stopped one
        again, _ = audit_runs.spread_job(table, None, params, _Result(), n_seeds=5)
        assert again is not fut
        again.cancel()
