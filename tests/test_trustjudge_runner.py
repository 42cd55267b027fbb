"""``puaudit judge`` against a local stub of the chat-completions API (no network).

The stub (:mod:`tests.judge_stub`) runs on 127.0.0.1 in the test process. A scripted
judge with known letter probabilities and token log-probabilities lets every number be checked
by hand: verdicts in both orders, parsed probabilities, perplexities, and the TrustJudge report
computed on the collected tables. Faults (429, 500, timeouts, malformed JSON, dropped
connections, a killed process, Ctrl-C) must lose no finished response, and a rerun completes
without asking again for anything already cached.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from puaudit.cli.commands import main
from puaudit.data.io import read_table
from puaudit.trustjudge.response_cache import ResponseCache
from tests.judge_stub import (
    StubJudgeServer,
    cache_key,
    faults_once,
    stub_answers,
)

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-test-NEVER-WRITE-ME-0123456789"

# --- a scripted judge ---------------------------------------------------------------------------
# (answer shown first, answer shown second): P(A), P(B), P(C), log-probability of every other token
PAIRS = {
    ("ans-x", "ans-y"): (0.6, 0.3, 0.1, 0.1),
    ("ans-y", "ans-x"): (0.5, 0.4, 0.1, 0.3),    # position bias: order 2 prefers y
    ("ans-y", "ans-z"): (0.7, 0.2, 0.1, 0.2),
    ("ans-z", "ans-y"): (0.2, 0.7, 0.1, 0.25),
    ("ans-x", "ans-z"): (0.5, 0.2, 0.3, 0.1),
    ("ans-z", "ans-x"): (0.2, 0.35, 0.45, 0.4),  # a tie in order 2
}
# score-token probabilities on the 1-5 scale (x's do not sum to 1: G-Eval ≠ distribution)
SCORES = {"ans-x": {3: 0.25, 4: 0.5, 5: 0.05}, "ans-y": {3: 0.4, 4: 0.5, 5: 0.1},
          "ans-z": {2: 0.3, 3: 0.6, 4: 0.1}}
WORDS = ["Judgment", ".", " Two", " answers", ".", " Verdict", ":", " ["]  # + letter + "]"
_PAIR = re.compile(r"Assistant A's Answer\]\n(.*?)\n\[The End.*?Assistant B's Answer\]\n(.*?)\n\[The End", re.S)
_ONE = re.compile(r"\[The Start of Assistant's Answer\]\n(.*?)\n\[The End", re.S)


def _tok(text, lp, alts=None):
    alts = alts if alts is not None else [(text, lp)]
    return {"token": text, "logprob": lp, "bytes": list(text.encode()),
            "top_logprobs": [{"token": t, "logprob": a, "bytes": list(t.encode())} for t, a in alts]}


def scripted(body):
    user = body["messages"][-1]["content"]
    m = _PAIR.search(user)
    if m:
        pa, pb, pc, c = PAIRS[(m.group(1), m.group(2))]
        probs = {"A": pa, "B": pb, "C": pc}
        letter = max(probs, key=probs.get)
        alts = sorted(((k, math.log(v)) for k, v in probs.items()), key=lambda t: -t[1])
        tokens = ([_tok(w, -c) for w in WORDS] + [_tok(letter, math.log(probs[letter]), alts)]
                  + [_tok("]", -c)])
        return {"content": "".join(WORDS) + letter + "]", "tokens": tokens}
    answer = _ONE.search(user).group(1)
    dist = SCORES[answer]
    best = max(dist, key=dist.get)
    alts = [(str(s), math.log(p)) for s, p in sorted(dist.items(), key=lambda t: -t[1])]
    alts.append(("x", -9.0))  # not a score token: ignored
    tokens = [_tok("Score", -0.05), _tok(":", -0.05), _tok(" [", -0.05),
              _tok(str(best), math.log(dist[best]), alts), _tok("]", -0.05)]
    return {"content": f"Score: [{best}]", "tokens": tokens}


def ppl_by_hand(first, second):
    pa, pb, pc, c = PAIRS[(first, second)]
    p = max(pa, pb, pc)
    return math.exp(-(9 * -c + math.log(p)) / 10)


@pytest.fixture()
def answers(tmp_path):
    df = pd.DataFrame({"question_id": ["q1"] * 3, "category": ["writing"] * 3,
                       "question": ["Say hello."] * 3, "candidate": ["x", "y", "z"],
                       "answer": ["ans-x", "ans-y", "ans-z"]})
    path = tmp_path / "answers.csv"
    df.to_csv(path, index=False)
    return path


def judge(capsys, *argv):
    rc = main(["judge", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def stdout_json(out):
    """The JSON object of a ``--json`` run: stdout holds it alone (``| jq`` reads it)."""
    return json.loads(out)


FAST = ["--backoff", "0.01", "--max-backoff", "0.05", "--no-progress"]


# --- the collected tables and the report, by hand -------------------------------------------------
def test_both_orders_probabilities_and_report_by_hand(answers, tmp_path, capsys):
    with StubJudgeServer(reply=scripted) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "judge-m",
                             "--both-orders", "--scores", "-o", tmp_path / "pairs.csv", "--json",
                             *FAST)
    assert rc == 0, err
    info = stdout_json(out)
    assert info["stats"]["n_new"] == 9 and info["n_pairs"] == 3 and info["n_scores"] == 3
    assert info["written"] == {"pairs": str(tmp_path / "pairs.csv"),
                               "scores": str(tmp_path / "pairs.scores.csv")}
    # the lines a person reads went to stderr, after the request summary
    assert "wrote 3 pairs to" in err and "wrote 3 scores to" in err
    assert "next: puaudit trustjudge" in err.splitlines()[-1]

    pairs = pd.read_csv(tmp_path / "pairs.csv")
    pairs = pairs.set_index(pairs["candidate_i"] + pairs["candidate_j"])
    assert list(pairs.index) == ["xy", "xz", "yz"]
    assert set(pairs["judge"]) == {"judge-m"}
    # order 1 shows candidate_i first (A = i); order 2 shows candidate_j first (A = j)
    assert pairs.loc["xy", ["verdict_1", "verdict_2"]].tolist() == ["A", "A"]
    assert pairs.loc["xz", ["verdict_1", "verdict_2"]].tolist() == ["A", "tie"]
    assert pairs.loc["yz", ["verdict_1", "verdict_2"]].tolist() == ["A", "B"]
    for (i, j), key in (("xy", "xy"), ("xz", "xz"), ("yz", "yz")):
        a, b = f"ans-{i}", f"ans-{j}"
        assert pairs.loc[key, ["p1_A", "p1_B", "p1_tie"]].tolist() == pytest.approx(PAIRS[(a, b)][:3], abs=1e-12)
        assert pairs.loc[key, ["p2_A", "p2_B", "p2_tie"]].tolist() == pytest.approx(PAIRS[(b, a)][:3], abs=1e-12)
        assert pairs.loc[key, "ppl_1"] == pytest.approx(ppl_by_hand(a, b), rel=1e-12)
        assert pairs.loc[key, "ppl_2"] == pytest.approx(ppl_by_hand(b, a), rel=1e-12)
        assert len(json.loads(pairs.loc[key, "token_logprobs_1"])) == 10
    assert pairs.loc["xy", "ppl_1"] == pytest.approx(math.exp((0.9 - math.log(0.6)) / 10))
    assert pairs.loc["xy", "rationale_1"] == "Judgment. Two answers. Verdict: [A]"

    scores = pd.read_csv(tmp_path / "pairs.scores.csv").set_index("candidate")
    assert scores["score"].tolist() == [4, 4, 3]
    assert scores.loc["x", ["p_1", "p_2", "p_3", "p_4", "p_5"]].tolist() == pytest.approx([0, 0, .25, .5, .05])
    assert scores.loc["z", "ppl"] == pytest.approx(math.exp(-(4 * -0.05 + math.log(0.6)) / 5))

    def report(*extra):
        rc, out, err = main_out(capsys, "trustjudge", tmp_path / "pairs.csv", "--scores",
                                tmp_path / "pairs.scores.csv", "--k", "3", "--json", *extra)
        assert rc == 0, err
        assert "TrustJudge: method=" in err  # the summary, on stderr under --json
        return stdout_json(out)

    # baseline: x=y (orders disagree), y>z, x=z (a tie in order 2): x=y, x=z, y≠z
    base = report("--method", "baseline")
    assert base["ntr"]["3"] == 1.0 and base["triples"]["equivalence_contradiction"] == 1
    assert base["cr"] == pytest.approx(1 / 3)          # x=z against scores 4 > 3
    # bidirectional: P(x)=0.6+0.4 > P(y)=0.3+0.5; P(x)=0.5+0.35 > P(tie)=0.3+0.45; y>z: transitive
    bi = report("--method", "bidirectional")
    assert bi["ntr"]["3"] == 0.0 and bi["score_method"] == "distribution"
    assert bi["cr"] == 0.0                             # x 3.75 > y 3.7 > z 2.8
    # G-Eval: x = 3·.25 + 4·.5 + 5·.05 = 3.0 < y = 3.7 although x > y
    assert report("--method", "bidirectional", "--score-method", "geval")["cr"] == pytest.approx(1 / 3)
    # δ = 0.06 > (0.85 − 0.75)/2: x=z, with x>y>z a cycle through a tie
    tie = report("--method", "bidirectional", "--delta", "0.06")
    assert tie["ntr"]["3"] == 1.0 and tie["triples"]["tie_cycle"] == 1
    # perplexity: the lower-PPL order is order 1 in all three pairs: x>y, x>z, y>z
    ppl = report("--method", "ppl")
    assert ppl["ntr"]["3"] == 0.0 and ppl["cr"] == 0.0
    # rescaling the 1-5 distribution scores to 0-1 changes the units of --tol only
    res = report("--method", "bidirectional", "--rescale", "0", "1", "--tol", "0.02")
    assert res["rescale_to"] == [0.0, 1.0] and res["cr"] == pytest.approx(1 / 3)  # |3.75-3.7|/4 ≤ .02


def main_out(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_weighted_relation_by_hand(answers, tmp_path, capsys):
    """exp(−γ·PPL) weights of the two orders, computed here from the scripted numbers."""
    with StubJudgeServer(reply=scripted) as stub:
        rc, _, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "--both-orders",
                           "-o", tmp_path / "pairs.csv", *FAST)
    assert rc == 0, err
    from puaudit.trustjudge import analyse

    for gamma in (0.0, 1.0, 50.0):
        rep = analyse(tmp_path / "pairs.csv", method="weighted", gamma=gamma, k=(3,))
        rel = rep.relations.set_index(rep.relations["candidate_i"] + rep.relations["candidate_j"])
        for key, a, b in (("xy", "ans-x", "ans-y"), ("xz", "ans-x", "ans-z"), ("yz", "ans-y", "ans-z")):
            p1, p2 = PAIRS[(a, b)][:3], PAIRS[(b, a)][:3]
            w1 = math.exp(-gamma * ppl_by_hand(a, b))
            w2 = math.exp(-gamma * ppl_by_hand(b, a))
            P = [(w1 * p1[0] + w2 * p2[1]) / (w1 + w2), (w1 * p1[1] + w2 * p2[0]) / (w1 + w2),
                 (w1 * p1[2] + w2 * p2[2]) / (w1 + w2)]
            assert rel.loc[key, ["prob_i", "prob_j", "prob_tie"]].tolist() == pytest.approx(P)
            top = sorted(P)
            expected = "=" if top[2] == top[1] else "><="[P.index(top[2])]
            assert rel.loc[key, "relation"] == expected
    # γ = 0: the mean of both orders: x vs z is 0.85/2 for x against 0.75/2 for a tie
    rep0 = analyse(tmp_path / "pairs.csv", method="weighted", gamma=0.0, k=(3,))
    assert rep0.relations.set_index(["candidate_i", "candidate_j"]).loc[("x", "z"), "prob_i"] == pytest.approx(0.425)


# --- faults -------------------------------------------------------------------------------------
def test_injected_faults_are_retried_and_lose_nothing(answers, tmp_path, capsys):
    with StubJudgeServer(reply=scripted) as clean:
        rc, _, err = judge(capsys, answers, "--endpoint", clean.url, "--model", "m", "--both-orders",
                           "--scores", "-o", tmp_path / "clean.csv", *FAST)
    assert rc == 0, err
    kinds = ["429", "500", "timeout", "malformed", "drop", None]
    with StubJudgeServer(reply=scripted, fault=faults_once(kinds), slow_s=1.5) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "--both-orders",
                             "--scores", "-o", tmp_path / "faulty.csv", "--timeout", "0.5",
                             "--concurrency", "3", "--json", *FAST)
        answered = stub.answered_keys()
        faults = [c["fault"] for c in stub.calls]
    assert rc == 0, err
    stats = stdout_json(out)["stats"]
    # 9 distinct requests; the first attempt of 8 of them hit a fault, each retried once
    assert sorted(f for f in faults if f) == sorted(kinds[i % 6] for i in range(9) if kinds[i % 6])
    assert stats["n_retries"] == 8 and stats["n_new"] == 9 and stats["n_failed"] == 0
    assert set(stats["retry_reasons"]) >= {"HTTP 429", "HTTP 500", "APITimeoutError"}
    # a timed-out request may still have been answered by the server; the rest exactly once
    assert len(set(answered)) == 9 and len(answered) <= 10
    for name in ("", ".scores"):
        a = read_table(tmp_path / f"clean{name}.csv")
        b = read_table(tmp_path / f"faulty{name}.csv")
        pd.testing.assert_frame_equal(a, b)


def test_retries_used_up_then_rerun_asks_only_the_failed_one(answers, tmp_path, capsys):
    first = {}

    def always_500_for_first(n, key, attempt):
        first.setdefault("key", key)
        return "500" if key == first["key"] else None

    out_csv = tmp_path / "pairs.csv"
    with StubJudgeServer(reply=scripted, fault=always_500_for_first) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "--both-orders",
                             "-o", out_csv, "--retries", "2", "--concurrency", "1", *FAST)
        assert sum(c["key"] == first["key"] for c in stub.calls) == 3  # 1 try + 2 retries
    assert rc == 1
    assert "1 of 6 requests failed for good" in err and "--allow-partial" in err
    assert not out_csv.exists()
    failed = cache_key(next(c["body"] for c in stub.calls if c["key"] == first["key"]))
    with ResponseCache(tmp_path / "pairs.judge-cache.jsonl") as cache:
        assert len(cache) == 5 and failed not in cache
    with StubJudgeServer(reply=scripted) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "--both-orders",
                             "-o", out_csv, "--json", *FAST)
        assert [cache_key(c["body"]) for c in stub.calls] == [failed]  # only the failed request
    assert rc == 0, err
    assert stdout_json(out)["stats"]["n_cached"] == 5 and out_csv.exists()


def test_allow_partial_writes_what_arrived(answers, tmp_path, capsys):
    bad = {}

    def fail_first(n, key, attempt):
        bad.setdefault("key", key)
        return "500" if key == bad["key"] else None

    with StubJudgeServer(reply=scripted, fault=fail_first) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "--both-orders",
                             "-o", tmp_path / "p.csv", "--retries", "0", "--concurrency", "1",
                             "--allow-partial", *FAST)
    assert rc == 0, err
    pairs = pd.read_csv(tmp_path / "p.csv")
    assert len(pairs) == 3 and pairs["verdict_1"].isna().sum() == 1  # order 2 still decides it
    problems = read_table(tmp_path / "p.problems.csv")
    assert len(problems) == 1 and problems["note"][0].startswith("request failed: HTTP 500")


def _subprocess_judge(stub_url, answers_csv, out_csv, *extra):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    # a suite started in the background (`pytest &`) ignores SIGINT, and the child would inherit
    # that and never see the Ctrl-C the test sends: give it the default a terminal gives
    return subprocess.Popen([sys.executable, "-m", "puaudit", "judge", str(answers_csv), "--endpoint",
                             stub_url, "--model", "m", "--both-orders", "--scores", "-o", str(out_csv),
                             "--concurrency", "2", "--no-progress", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_lines(path: Path, n: int, proc, timeout: float = 60.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"judge ended early: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError("the cache did not grow")


#: the signal each way of stopping a run sends, and the exit status it gives (None: killed)
_STOPS = {"kill": (signal.SIGKILL, None), "ctrl-c": (signal.SIGINT, 130),
          "sigterm": (signal.SIGTERM, 143)}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", list(_STOPS))
def test_killed_or_interrupted_run_resumes_without_repeating(tmp_path, capsys, how):
    answers_csv = tmp_path / "answers.csv"
    stub_answers(n_candidates=4, n_questions=4).to_csv(answers_csv, index=False)  # 24 pairs, 16 answers
    out_csv = tmp_path / "pairs.csv"
    cache_path = tmp_path / "pairs.judge-cache.jsonl"
    with StubJudgeServer(delay_s=0.05) as stub:
        proc = _subprocess_judge(stub.url, answers_csv, out_csv)
        _wait_for_lines(cache_path, 12, proc)
        sig, status = _STOPS[how]
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        if how == "kill":
            assert proc.returncode == -signal.SIGKILL
        else:  # SIGTERM stops the run as Ctrl-C does, with the shell's status for it (128 + 15)
            assert proc.returncode == status, err
            word = "terminated" if how == "sigterm" else "interrupted"
            assert f"{word}: " in err and "rerun the same command to continue" in err
            assert out == ""
        assert not out_csv.exists()
        answered_before = set(stub.answered_cache_keys())
        with ResponseCache(cache_path) as cache:
            cached = set(cache.keys())
        assert 12 <= len(cached) < 64
        # every finished response is in the cache; only requests in flight at the kill are lost
        assert cached <= answered_before and len(answered_before - cached) <= 2
        if how != "kill":
            assert answered_before == cached  # requests in flight finished and were cached
        if how == "sigterm":
            return  # after the exit SIGTERM and Ctrl-C share one path: ctrl-c resumes it below
        n_calls = len(stub.calls)
        rc, out, err = judge(capsys, answers_csv, "--endpoint", stub.url, "--model", "m",
                             "--both-orders", "--scores", "-o", out_csv, "--concurrency", "2",
                             "--json", *FAST)
        assert rc == 0, err
        rerun_keys = [cache_key(c["body"]) for c in stub.calls[n_calls:]]
    assert not set(rerun_keys) & cached, "a cached response was asked for again"
    assert len(rerun_keys) == len(set(rerun_keys)) == 64 - len(cached)
    assert stdout_json(out)["stats"]["n_cached"] == len(cached)
    # the resumed run writes what an uninterrupted run writes
    with StubJudgeServer() as stub:
        rc, _, err = judge(capsys, answers_csv, "--endpoint", stub.url, "--model", "m",
                           "--both-orders", "--scores", "-o", tmp_path / "fresh.csv", *FAST)
    assert rc == 0, err
    pd.testing.assert_frame_equal(read_table(out_csv), read_table(tmp_path / "fresh.csv"))
    pd.testing.assert_frame_equal(read_table(tmp_path / "pairs.scores.csv"),
                                  read_table(tmp_path / "fresh.scores.csv"))


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_the_progress_line_names_the_signal(tmp_path, capsys, how):
    """With the progress bar on, the pool says how it was stopped; only after a Ctrl-C does it
    offer a second Ctrl-C."""
    from puaudit.cli.signals import Terminated
    from puaudit.trustjudge.request_pool import run_requests

    class Client:  # a request that gets the signal while it waits
        def complete(self, messages, *, stop, on_retry):
            raise Terminated() if how == "sigterm" else KeyboardInterrupt()

        def redact_json(self, info):
            return info, False

    with ResponseCache(tmp_path / "c.jsonl") as cache, pytest.raises(KeyboardInterrupt) as got:
        run_requests({"k": [{"role": "user", "content": "x"}]}, client=Client(), cache=cache,
                     concurrency=1, progress=True)
    err = capsys.readouterr().err
    assert isinstance(got.value, Terminated) == (how == "sigterm")
    word = "terminated" if how == "sigterm" else "interrupted"
    assert f"{word}: finishing the requests in flight (they are cached too)" in err
    assert ("Ctrl-C again abandons them" in err) == (how == "ctrl-c")


def test_torn_cache_line_is_dropped_and_file_repaired(tmp_path):
    path = tmp_path / "c.jsonl"
    with ResponseCache(path, fsync=False) as cache:
        resp = {"choices": [{"message": {"content": "Verdict: [A]"}}]}
        cache.put("k1", resp)
        cache.put("k2", resp)
    good = path.read_bytes()
    path.write_bytes(good + b'{"v": 1, "key": "k3", "respo')  # killed mid-write
    with ResponseCache(path) as cache:
        assert set(cache.keys()) == {"k1", "k2"} and cache.n_dropped == 1
        cache.put("k3", resp)
    with ResponseCache(path) as cache:
        assert set(cache.keys()) == {"k1", "k2", "k3"} and cache.n_dropped == 0


def test_second_process_on_the_same_cache_is_refused(tmp_path):
    from puaudit.errors import PUAuditError

    with ResponseCache(tmp_path / "c.jsonl"):
        code = ("from puaudit.trustjudge.response_cache import ResponseCache\n"
                f"ResponseCache({str(tmp_path / 'c.jsonl')!r})")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode != 0 and "Another puaudit judge run is using the cache" in proc.stderr
    with ResponseCache(tmp_path / "c.jsonl"):  # released
        pass
    assert issubclass(PUAuditError, ValueError)


# --- the API key, concurrency, progress -----------------------------------------------------------
def test_api_key_only_from_environment_and_never_written(answers, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    with StubJudgeServer(reply=scripted, api_key=SECRET) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "--both-orders",
                             "--scores", "-o", tmp_path / "pairs.csv", "--api-key-env", "MY_JUDGE_KEY",
                             "--json", "--backoff", "0.01")
        assert all(c["authorized"] for c in stub.calls) and len(stub.calls) == 9
    assert rc == 0, err
    assert "API key from $MY_JUDGE_KEY" in err and "cached 0, new 9" in err  # the progress bar
    assert SECRET not in out + err
    for f in tmp_path.iterdir():
        assert SECRET.encode() not in f.read_bytes(), f.name
    # without the variable: refused, told where the key goes, the key never echoed
    monkeypatch.delenv("MY_JUDGE_KEY")
    with StubJudgeServer(reply=scripted, api_key=SECRET) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "-o",
                             tmp_path / "other.csv", "--api-key-env", "MY_JUDGE_KEY", *FAST)
    assert rc == 2
    assert "$MY_JUDGE_KEY" in err and "it is not set" in err and SECRET not in err


def test_concurrency_limit_is_respected(tmp_path, capsys):
    answers_csv = tmp_path / "answers.csv"
    stub_answers(n_candidates=4, n_questions=2).to_csv(answers_csv, index=False)
    with StubJudgeServer(delay_s=0.1) as stub:
        rc, out, err = judge(capsys, answers_csv, "--endpoint", stub.url, "--model", "m",
                             "--both-orders", "-o", tmp_path / "p.csv", "--concurrency", "3",
                             "--json", *FAST)
        assert rc == 0, err
        assert stub.max_in_flight == 3
    stats = stdout_json(out)["stats"]
    assert stats["n_new"] == 24 and stats["prompt_tokens"] > 0 and stats["completion_tokens"] > 0


# --- comparisons input: judge_winner for the audit ----------------------------------------------
def test_comparison_table_gets_judge_winner_and_loads_for_audit(tmp_path, capsys):
    from puaudit.data.schema import load_comparisons
    from puaudit.trustjudge import read_pairwise

    table = pd.DataFrame({
        "question_id": ["q1", "q1", "q1"], "prompt": ["Say hello."] * 3,
        "model_a": ["x", "x", "y"], "model_b": ["y", "z", "z"],
        "response_a": ["ans-x", "ans-x", "ans-y"], "response_b": ["ans-y", "ans-z", "ans-z"],
        "human_winner": ["model_a", "", "model_a"]})
    path = tmp_path / "comparisons.csv"
    table.to_csv(path, index=False)
    results = {}
    for rule in ("baseline", "bidirectional", "first"):
        out = tmp_path / f"judged_{rule}.csv"
        with StubJudgeServer(reply=scripted) as stub:
            rc, _, err = judge(capsys, path, "--endpoint", stub.url, "--model", "m", "--both-orders",
                               "-o", out, "--winner-rule", rule, *FAST)
        assert rc == 0, err
        results[rule] = read_table(out)
    # x vs y: orders disagree; x vs z: A then tie; y vs z: both say y
    assert results["baseline"]["judge_winner"].tolist() == ["tie", "tie", "model_a"]
    assert results["bidirectional"]["judge_winner"].tolist() == ["model_a", "model_a", "model_a"]
    assert results["first"]["judge_winner"].tolist() == ["model_a", "model_a", "model_a"]
    judged = results["baseline"]
    assert judged["human_winner"].fillna("").tolist() == ["model_a", "", "model_a"]  # untouched
    ct = load_comparisons(judged)
    assert ct.judge_column == "judge_winner" and list(ct.judge) == ["tie", "tie", "A"]
    pairs = read_pairwise(judged)
    assert pairs["verdict_2"].tolist() == ["A", "tie", "B"] and pairs.attrs["has_perplexity"]
    # a filled judge_winner is never overwritten
    with StubJudgeServer(reply=scripted) as stub:
        rc, _, err = judge(capsys, tmp_path / "judged_first.csv", "--endpoint", stub.url,
                           "--model", "m", "-o", tmp_path / "again.csv", *FAST)
    assert rc == 2 and "already" in err


def test_unparseable_judgment_is_listed_not_guessed(answers, tmp_path, capsys):
    def no_verdict(body):
        user = body["messages"][-1]["content"]
        if "ans-z" in user and "Assistant A" in user:
            return {"content": "I cannot decide.", "tokens": [_tok("I", -1.0), _tok(" cannot", -1.0),
                                                              _tok(" decide", -1.0), _tok(".", -1.0)]}
        return scripted(body)

    with StubJudgeServer(reply=no_verdict) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m", "--both-orders",
                             "-o", tmp_path / "p.csv", *FAST)
    assert rc == 0, err
    pairs = read_table(tmp_path / "p.csv")
    assert list(pairs["candidate_i"] + pairs["candidate_j"]) == ["xy"]  # pairs with z left out
    problems = read_table(tmp_path / "p.problems.csv")
    assert len(problems) == 4 and set(problems["note"]) == {"no verdict [A], [B] or [C] in the judgment"}
    assert "2 without a verdict left out" in out


def test_bad_arguments_exit_2(answers, tmp_path, capsys):
    rc, _, err = judge(capsys, answers, "--endpoint", "127.0.0.1:1", "--model", "m", "-o",
                       tmp_path / "p.csv")
    assert rc == 2 and "http(s) URL" in err
    rc, _, err = judge(capsys, answers, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                       "-o", answers)
    assert rc == 2 and "same file as the input" in err
    rc, _, err = judge(capsys, answers, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                       "-o", tmp_path / "p.csv", "--pair-template", "nope")
    assert rc == 2 and "Unknown pair template" in err
    tpl = tmp_path / "t.json"
    tpl.write_text(json.dumps({"user": "{question} {answer_a} {answer_c}"}))
    rc, _, err = judge(capsys, answers, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                       "-o", tmp_path / "p.csv", "--pair-template", tpl)
    assert rc == 2 and "{answer_c}" in err
