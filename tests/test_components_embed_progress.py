"""The dashboard's embedding progress text: an estimate of the time left from the rate so far."""

from __future__ import annotations

import pytest

from components.time_left import time_left_text


def test_time_left_follows_the_rate_so_far_rounded_up_to_5_s():
    # 100 texts in 20 s -> 0.2 s a text; 400 left -> 80 s
    assert time_left_text(100, 400, 20.0) == ", about 1 min 20 s left"
    # 10 texts in 3 s, 31 left -> 9.3 s -> 10 s
    assert time_left_text(10, 31, 3.0) == ", about 10 s left"
    # exactly a multiple of 5 stays: 50 texts in 10 s, 25 left -> 5 s
    assert time_left_text(50, 25, 10.0) == ", about 5 s left"
    # 1 text in 1 s, 3,600 left -> an hour, in minutes
    assert time_left_text(1, 3600, 1.0) == ", about 60 min 0 s left"


def test_no_estimate_before_the_first_batch_and_none_when_done():
    assert time_left_text(0, 947, 4.0) == ", estimating time left"
    assert time_left_text(5, 100, 0.0) == ", estimating time left"
    assert time_left_text(947, 0, 30.0) == ""


def test_damped_estimate_follows_a_steady_rate_and_barely_rises_when_it_slows():
    """A run that slows: the raw estimate rose from 3 min 30 s to 4 min 25 s (issue 39); the
    damped one counts down with the clock and follows the slower rate only gradually."""
    from components.time_left import TimeLeft

    steady = TimeLeft()
    # 1 text/s, 300 texts: at t seconds, t done and 300 - t left -> exactly 300 - t
    for t in range(5, 60, 5):
        assert steady.update(t, 300 - t, float(t)) == pytest.approx(300 - t)
    # 400 texts, 1 a second for 20 s, then half as fast: the raw estimate climbs by minutes
    slowing, done, raw, shown = TimeLeft(), 0.0, [], []
    for t in range(1, 59):
        done += 1.0 if t <= 20 else 0.5
        raw.append((400 - done) * t / done)
        shown.append(slowing.update(done, 400 - done, float(t)))
    assert max(raw) - raw[19] > 150  # what the old text showed: up by 2.5 minutes in 38 s
    assert max(shown) - shown[19] < 0.5 * (max(raw) - raw[19])
    assert shown[-1] > shown[19]  # it still follows a lasting change of the rate
    assert time_left_text(10, 31, 3.0, damp=TimeLeft()) == ", about 10 s left"
