"""The dashboard's embedding progress text: an estimate of the time left from the rate so far."""

from __future__ import annotations

from components.state import time_left_text


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
