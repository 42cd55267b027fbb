"""``puaudit judge`` against an endpoint that answers with huge responses (issue 41, item 4:
ten 1 MB judge responses gave a 996 MB cache and a 2.8 GB peak).

* one response larger than a request can honestly bring (by default what ``--max-tokens`` and
  ``--top-logprobs`` allow; ``--max-response-mb``) fails its request, unread past the limit,
  with a message naming the request; it is never cached;
* the cache may not grow past ``--max-cache-mb``: the run stops with a message, and a rerun with
  a larger limit continues from what was cached;
* the cache is read a line at a time and the tables are built from it one response at a time:
  opening and reading a 40 MB cache allocates a few MB at its peak (tracemalloc, in a child
  process; the old cache held it all: 82 MB).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from puaudit.trustjudge.completion import ResponseTooLarge
from puaudit.trustjudge.response_cache import CachedResponses, ResponseCache
from puaudit.trustjudge.runner import read_capped
from tests.conftest import ROOT
from tests.judge_stub import StubJudgeServer
from tests.test_trustjudge_runner import FAST, judge, stdout_json

MB = 1_000_000


@pytest.fixture()
def ten_pairs(tmp_path):
    """Five questions, two candidates each: with both orders, ten requests."""
    df = pd.DataFrame({"question_id": [f"q{i // 2}" for i in range(10)],
                       "question": [f"Question {i // 2}?" for i in range(10)],
                       "candidate": ["x", "y"] * 5, "answer": [f"answer {i}" for i in range(10)]})
    path = tmp_path / "answers.csv"
    df.to_csv(path, index=False)
    return path


def megabyte_reply(body):
    """A 1 MB judgment (no log-probabilities needed to make the point)."""
    return {"content": "x" * MB + " [A]", "tokens": []}


def test_a_response_larger_than_the_request_allows_fails_naming_it(ten_pairs, tmp_path, capsys):
    # --max-tokens 16, no alternatives: an honest response is far below 1 MB (limit 0.27 MB)
    with StubJudgeServer(reply=megabyte_reply) as stub:
        rc, out, err = judge(capsys, ten_pairs, "--endpoint", stub.url, "--model", "m",
                             "--both-orders", "--max-tokens", "16", "--top-logprobs", "0",
                             "-o", tmp_path / "p.csv", "--retries", "2", *FAST)
        calls = len(stub.calls)
    assert rc == 1, err
    assert "10 of 10 requests failed for good" in err
    assert re.search(r"first: pair q\d \(x vs y, order [12]\): the response is 1\.0 MB, over "
                     r"the limit of 0\.3 MB per response", err), err
    assert "--max-response-mb" in err
    assert calls == 10  # not retried: the same request would bring the same response
    cache = tmp_path / "p.judge-cache.jsonl"
    assert not cache.exists() or cache.stat().st_size == 0  # nothing of it was kept
    # an operator who expects such responses raises the limit; the run then completes
    with StubJudgeServer(reply=megabyte_reply) as stub:
        rc, out, err = judge(capsys, ten_pairs, "--endpoint", stub.url, "--model", "m",
                             "--both-orders", "--max-tokens", "16", "--top-logprobs", "0",
                             "--max-response-mb", "2", "-o", tmp_path / "p.csv", "--json", *FAST)
    assert rc == 0, err
    assert stdout_json(out)["stats"]["n_new"] == 10


class _Streamed:
    """A streamed HTTP response without Content-Length, counting the chunks read."""

    def __init__(self, n_chunks: int, size: int):
        self.headers = {}
        self.n_chunks, self.size, self.read = n_chunks, size, 0

    def iter_bytes(self):
        for _ in range(self.n_chunks):
            self.read += 1
            yield b"x" * self.size


def test_a_streamed_body_is_not_read_past_the_limit():
    raw = _Streamed(n_chunks=1000, size=64 * 1024)  # 65 MB on offer
    with pytest.raises(ResponseTooLarge, match="passed the limit of 1.0 MB"):
        read_capped(raw, MB)
    assert raw.read == 16  # 16 × 64 KiB > 1 MB: stopped there
    assert read_capped(_Streamed(3, 10), MB) == b"x" * 30


def test_the_cache_stops_at_its_limit_and_a_rerun_continues(ten_pairs, tmp_path, capsys):
    common = ["--endpoint", None, "--model", "m", "--both-orders", "--max-response-mb", "2",
              "-o", tmp_path / "p.csv", "--concurrency", "1", "--json", *FAST]
    cache = tmp_path / "p.judge-cache.jsonl"
    with StubJudgeServer(reply=megabyte_reply) as stub:
        common[1] = stub.url
        rc, out, err = judge(capsys, ten_pairs, *common, "--max-cache-mb", "3")
    assert rc == 2, err
    assert "would pass 3 MB (--max-cache-mb)" in err and str(cache) in err
    assert cache.stat().st_size <= 3 * MB
    with ResponseCache(cache) as c:
        n_kept = len(c)
    assert n_kept == 2  # 2 × 1 MB fit, the third would not
    with StubJudgeServer(reply=megabyte_reply) as stub:
        common[1] = stub.url
        rc, out, err = judge(capsys, ten_pairs, *common, "--max-cache-mb", "20")
    assert rc == 0, err
    stats = stdout_json(out)["stats"]
    assert stats["n_cached"] == 2 and stats["n_new"] == 8


_MEASURE = """
import json, sys, tracemalloc
from puaudit.trustjudge.response_cache import CachedResponses, ResponseCache
from puaudit.trustjudge.completion import response_text
tracemalloc.start()  # after the imports: what reading the cache allocates, at its peak
with ResponseCache(sys.argv[1]) as cache:
    responses = CachedResponses(cache, cache.keys())
    total = sum(len(response_text(responses[k])) for k in responses)
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"n": len(responses), "chars": total, "peak_mb": peak / 1e6}))
"""


def test_reading_a_large_cache_holds_one_response_at_a_time(tmp_path):
    path = tmp_path / "big.judge-cache.jsonl"
    with ResponseCache(path, fsync=False) as cache:
        for i in range(40):
            cache.put(f"k{i}", {"choices": [{"message": {"content": f"{i}" + "x" * MB}}]})
    assert path.stat().st_size > 40 * MB
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["n"] == 40 and got["chars"] == 40 * MB + 40 + 30  # every response read whole
    # the whole file in memory (the old cache) is > 80 MB at its peak; one line at a time, a
    # few MB
    assert got["peak_mb"] < 10, got


def test_cached_responses_is_a_mapping_of_the_cached_keys(tmp_path):
    with ResponseCache(tmp_path / "c.jsonl") as cache:
        cache.put("a", {"choices": [{"message": {"content": "A"}}]}, redacted=2)
        got = CachedResponses(cache, ["a", "missing"])
        assert list(got) == ["a"] and len(got) == 1 and got.get("missing") is None
        assert got["a"]["choices"][0]["message"]["content"] == "A"
        assert cache.redacted("a") == 2 and cache.redacted("missing") == 0
    # readable after the cache is closed (the tables are built after the run)
    assert got["a"]["choices"][0]["message"]["content"] == "A"
