"""``puaudit judge`` against endpoints that misbehave on purpose.

* a server that trickles its answer one byte at a time, never finishing (the HTTP client's
  timeouts restart with every byte): each attempt is cut off at ``--timeout`` seconds, retried
  as a timeout, and the run ends with the other rows done;
* log-probabilities that are not usable numbers (huge, strings, NaN, missing, wrong types):
  the response keeps its verdict or score, has no probabilities, and is listed in the problems
  file; the run exits 0;
* a server that sends the API key back: the key is in no file written and in no output.

The stub (:mod:`tests.judge_stub`) serves in-process; the odd values come from replies
scripted here.
"""

from __future__ import annotations

import copy
import json
import math
import socket
import threading

import pandas as pd
import pytest

from puaudit.data.io import read_table
from puaudit.trustjudge.judge_tables import usable_tokens
from puaudit.trustjudge.completion import RequestFailed, response_usage
from puaudit.trustjudge.runner import JudgeClient
from tests.judge_stub import StubJudgeServer
from tests.test_trustjudge_runner import (
    FAST,
    PAIRS,
    SCORES,
    SECRET,
    WORDS,
    _tok,
    judge,
    scripted,
    stdout_json,
)
from tests.test_trustjudge_runner import _ONE as ONE_RE
from tests.test_trustjudge_runner import _PAIR as PAIR_RE


@pytest.fixture()
def answers(tmp_path):
    df = pd.DataFrame({"question_id": ["q1"] * 3, "category": ["writing"] * 3,
                       "question": ["Say hello."] * 3, "candidate": ["x", "y", "z"],
                       "answer": ["ans-x", "ans-y", "ans-z"]})
    path = tmp_path / "answers.csv"
    df.to_csv(path, index=False)
    return path


# --- a trickling endpoint -----------------------------------------------------------------------
@pytest.mark.timeout(90)  # a hang is the bug: without the deadline this test never ends
def test_trickling_endpoint_is_cut_off_and_the_other_rows_finish(answers, tmp_path, capsys):
    first = {}

    def trickle_first(n, key, attempt):
        first.setdefault("key", key)
        return "trickle" if key == first["key"] else None

    timeout, trickle_s = 1.0, 0.05
    with StubJudgeServer(reply=scripted, fault=trickle_first, trickle_s=trickle_s) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m",
                             "--both-orders", "-o", tmp_path / "p.csv", "--timeout", timeout,
                             "--retries", "1", "--concurrency", "1", "--allow-partial", "--json",
                             *FAST)
        trickled = [c for c in stub.calls if c["fault"] == "trickle"]
        normal = [c for c in stub.calls if c["fault"] is None]
        _wait_for(lambda: all("trickled" in c for c in trickled))  # the server saw the hang-ups
    assert rc == 0, err
    stats = stdout_json(out)["stats"]
    # the first request trickled on both attempts (1 try + 1 retry), the 5 others answered
    assert len(trickled) == 2 and len(normal) == 5
    assert stats["n_failed"] == 1 and stats["n_new"] == 5 and stats["n_retries"] == 1
    assert stats["retry_reasons"] == {"APITimeoutError": 1}
    assert stats["failures"] == ["APITimeoutError: no complete response within 1 s"]
    # each attempt hung up within 3 × timeout: fewer bytes than 3 × timeout / trickle_s
    assert all(0 < c["trickled"] < 3 * timeout / trickle_s for c in trickled)
    pairs = pd.read_csv(tmp_path / "p.csv")
    pairs = pairs.set_index(pairs["candidate_i"] + pairs["candidate_j"])
    assert list(pairs.index) == ["xy", "xz", "yz"]  # x vs y still decided by its order 2
    assert pd.isna(pairs.loc["xy", "verdict_1"]) and pairs.loc["xy", "verdict_2"] == "A"
    assert pairs.loc["yz", ["verdict_1", "verdict_2"]].tolist() == ["A", "B"]
    problems = read_table(tmp_path / "p.problems.csv")
    assert problems["note"].tolist() == ["request failed: APITimeoutError: no complete response "
                                         "within 1 s"]


def _wait_for(condition, seconds: float = 10.0) -> None:
    import time

    t0 = time.monotonic()
    while not condition() and time.monotonic() - t0 < seconds:
        time.sleep(0.02)


def _header_trickler(stop: threading.Event, hung_up: list[int]):
    """A raw server that sends its status line and headers one byte every 0.05 s (10 000 of
    them); ``hung_up`` gets the bytes sent to each client that hung up."""
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 10_000

    def trickle(conn):
        sent = 0
        try:
            while sent < len(head) and not stop.is_set():
                conn.sendall(head[sent:sent + 1])
                sent += 1
                time.sleep(0.05)
        except OSError:
            hung_up.append(sent)
        conn.close()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=trickle, args=(conn,), daemon=True).start()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}/v1"


@pytest.mark.timeout(60)
def test_trickled_headers_are_cut_off_too():
    """The deadline covers the whole attempt (connecting, headers, body), not only the body."""
    stop, hung_up = threading.Event(), []
    url = _header_trickler(stop, hung_up)
    try:
        client = JudgeClient(endpoint=url, model="m", timeout=1.0, max_retries=1, backoff=0.01,
                             max_backoff=0.01)
        with pytest.raises(RequestFailed, match="no complete response within 1 s"):
            client.complete([{"role": "user", "content": "hello"}])
        _wait_for(lambda: len(hung_up) == 2)
    finally:
        stop.set()
    # both attempts were ended by the client, each within 3 × timeout (60 bytes at 0.05 s)
    assert len(hung_up) == 2 and all(0 < n < 60 for n in hung_up), hung_up


# --- malformed log-probabilities ----------------------------------------------------------------
VERDICT = len(WORDS)  # index of the verdict-letter token in a scripted pairwise judgment
SCORE_TOKEN = 3       # index of the score token in a scripted score judgment


# presentation -> how its response is spoiled, and the problem its note names
SPOILED = {
    ("ans-x", "ans-y"): (("top", 1e308), "token 9 top_logprobs[2].logprob is 1e+308 > 0"),
    ("ans-y", "ans-x"): (("top", "high"), "token 9 top_logprobs[2].logprob is 'high', not a number"),
    ("ans-x", "ans-z"): (("first", math.nan), "token 1 logprob is nan, not a finite number"),
    ("ans-z", "ans-x"): (("drop", None), "token 1 logprob is missing"),
    ("ans-y", "ans-z"): (("logprobs", "garbage"), "logprobs is 'garbage', not an object"),
    "ans-x": (("top", 10 ** 400), "token 4 top_logprobs[2].logprob is inf, not a finite"),
    "ans-y": (("first", 5.0), "token 1 logprob is 5 > 0 (a probability above 1)"),
}


def spoiled_reply(body):
    judged = copy.deepcopy(scripted(body))
    user = body["messages"][-1]["content"]
    m = PAIR_RE.search(user)
    which = (m.group(1), m.group(2)) if m else ONE_RE.search(user).group(1)
    if which not in SPOILED:
        return judged
    (where, value), _ = SPOILED[which]
    tokens = judged["tokens"]
    if where == "logprobs":
        judged["logprobs"] = value
    elif where == "top":  # the second alternative at the verdict / score token
        tokens[VERDICT if m else SCORE_TOKEN]["top_logprobs"][1]["logprob"] = value
    elif where == "first":
        tokens[0]["logprob"] = value
    elif where == "drop":
        del tokens[0]["logprob"]
    return judged


@pytest.mark.timeout(120)
def test_malformed_logprobs_keep_the_verdict_and_are_listed(answers, tmp_path, capsys):
    args = ["--model", "m", "--both-orders", "--scores", "-o", tmp_path / "p.csv", "--json", *FAST]
    with StubJudgeServer(reply=spoiled_reply) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, *args)
        n_calls = len(stub.calls)
    assert rc == 0, err
    assert "bug" not in err and n_calls == 9  # no retries: asking again gives the same answer
    assert stdout_json(out)["n_problems"] == 7

    pairs = pd.read_csv(tmp_path / "p.csv")
    pairs = pairs.set_index(pairs["candidate_i"] + pairs["candidate_j"])
    # verdicts as from a well-behaved server (see tests/test_trustjudge_runner.py)
    assert pairs.loc["xy", ["verdict_1", "verdict_2"]].tolist() == ["A", "A"]
    assert pairs.loc["xz", ["verdict_1", "verdict_2"]].tolist() == ["A", "tie"]
    assert pairs.loc["yz", ["verdict_1", "verdict_2"]].tolist() == ["A", "B"]
    for key, order in (("xy", 1), ("xy", 2), ("xz", 1), ("xz", 2), ("yz", 1)):
        row = pairs.loc[key]
        assert row[[f"p{order}_A", f"p{order}_B", f"p{order}_tie", f"ppl_{order}"]].isna().all()
        assert pd.isna(row[f"token_logprobs_{order}"]) or row[f"token_logprobs_{order}"] == ""
        assert str(row[f"note_{order}"]).startswith("malformed log-probabilities (")
    # the one clean presentation keeps its numbers
    assert pairs.loc["yz", ["p2_A", "p2_B", "p2_tie"]].tolist() == pytest.approx(PAIRS[("ans-z", "ans-y")][:3])

    scores = pd.read_csv(tmp_path / "p.scores.csv").set_index("candidate")
    assert scores["score"].tolist() == [4, 4, 3]  # every score kept
    dist = [f"p_{v}" for v in range(1, 6)]
    assert scores.loc[["x", "y"], dist].isna().all().all()
    assert scores.loc["z", dist].tolist() == pytest.approx([0, SCORES["ans-z"][2], SCORES["ans-z"][3],
                                                           SCORES["ans-z"][4], 0])

    problems = read_table(tmp_path / "p.problems.csv")
    assert len(problems) == 7
    notes = problems["note"].tolist()
    for _, expected in SPOILED.values():
        assert sum(expected in n for n in notes) == 1, (expected, notes)
    assert all(n.startswith("malformed log-probabilities (") for n in notes)
    assert sum(n.endswith("verdict kept, no probabilities") for n in notes) == 5
    assert sum(n.endswith("score kept, no probabilities") for n in notes) == 2

    # the malformed responses are cached as they came: a rerun asks nothing and writes the same
    first = {n: read_table(tmp_path / f"p{n}.csv") for n in ("", ".scores", ".problems")}
    with StubJudgeServer(reply=spoiled_reply) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, *args)
        assert rc == 0 and stub.calls == [], err
    assert stdout_json(out)["stats"]["n_cached"] == 9
    for n, frame in first.items():
        pd.testing.assert_frame_equal(read_table(tmp_path / f"p{n}.csv"), frame)


def _response(tokens=None, logprobs="unset"):
    choice = {"message": {"content": "Verdict: [A]"}}
    if logprobs != "unset":
        choice["logprobs"] = logprobs
    elif tokens is not None:
        choice["logprobs"] = {"content": tokens}
    return {"choices": [choice]}


GOOD = {"token": "A", "logprob": -0.1, "bytes": [65], "top_logprobs": [
    {"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.5}]}


@pytest.mark.parametrize("spoil, problem", [
    (lambda t: t.update(logprob=True), "token 1 logprob is True, not a number"),
    (lambda t: t.update(logprob=[-1.0]), "token 1 logprob is [-1.0], not a number"),
    (lambda t: t.update(logprob=math.inf), "token 1 logprob is inf, not a finite number"),
    (lambda t: t.update(logprob=-math.inf), "token 1 logprob is -inf, not a finite number"),
    (lambda t: t.update(logprob=10 ** 400), "token 1 logprob is a number too large for a float"),
    (lambda t: t.update(logprob="x" * 100), "token 1 logprob is 'xxxxxxxxxxxxxxxxxxxx..., not a number"),
    (lambda t: t.pop("token"), "token 1 has token None, not a string"),
    (lambda t: t.update(token=7), "token 1 has token 7, not a string"),
    (lambda t: t.update(bytes=[65, 300]), "token 1 has bytes that are not a list of byte values"),
    (lambda t: t.update(bytes="A"), "token 1 has bytes that are not a list of byte values"),
    (lambda t: t.update(top_logprobs={"A": -0.1}), "token 1 has top_logprobs {'A': -0.1}, not a list"),
    (lambda t: t["top_logprobs"].append("B"), "token 1 top_logprobs[3] is 'B', not an object"),
    (lambda t: t["top_logprobs"][1].pop("logprob"), "token 1 top_logprobs[2].logprob is missing"),
    (lambda t: t["top_logprobs"][1].update(token=None), "token 1 top_logprobs[2] has token None"),
])
def test_every_malformed_value_is_named(spoil, problem):
    token = copy.deepcopy(GOOD)
    spoil(token)
    tokens, why = usable_tokens(_response([copy.deepcopy(GOOD), token]))
    assert tokens is None
    assert why.startswith(problem.replace("token 1", "token 2")), why


def test_usable_tokens_shapes():
    assert usable_tokens(_response([GOOD])) == ([GOOD], "")
    assert usable_tokens(_response(logprobs=None)) == (None, "")          # none asked / given
    assert usable_tokens(_response(logprobs={"content": []})) == (None, "")
    assert usable_tokens(_response(logprobs={"content": None})) == (None, "")
    assert usable_tokens(_response(logprobs=[1, 2])) == (None, "logprobs is [1, 2], not an object")
    assert usable_tokens(_response(logprobs={"content": "A"})) == (
        None, "logprobs.content is 'A', not a list")
    # finite, ≤ 0, but exp(−mean) is no float: no perplexity, no probabilities
    huge = [{"token": "A", "logprob": -1e308}]
    assert usable_tokens(_response(huge))[1].startswith("mean log-probability -1e+308")
    ok = [{"token": "A", "logprob": -600.0}, {"token": "B", "logprob": 0.0}]  # no top_logprobs
    assert usable_tokens(_response(ok)) == (ok, "")
    # token counts: anything but a whole number ≥ 0 counts 0 (no int(inf) on the way)
    assert response_usage({"usage": {"prompt_tokens": 12, "completion_tokens": 3.0}}) == (12, 3)
    for odd in ("many", math.inf, math.nan, -4, True, 1e300, [3], None):
        assert response_usage({"usage": {"prompt_tokens": odd, "completion_tokens": odd}}) == (0, 0)
    assert response_usage({"usage": "lots"}) == (0, 0) == response_usage({})


# --- a server that echoes the API key -----------------------------------------------------------
def echo_key_reply(body):
    """The judgment, preceded by the key (a whole token, and an alternative of another)."""
    judged = scripted(body)
    lead = [_tok("Your key ", -0.01), _tok(SECRET, -0.02, [(SECRET, -0.02), (" the", -4.0)]),
            _tok(" works. ", -0.01, [(" works. ", -0.01), (f" {SECRET}", -5.0)])]
    return {"content": f"Your key {SECRET} works. " + judged["content"],
            "tokens": lead + judged["tokens"]}


@pytest.mark.timeout(120)
def test_echoed_api_key_is_never_written(answers, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    out_dir = tmp_path / "out"
    out_dir.mkdir()  # an output in a missing folder is refused
    with StubJudgeServer(reply=echo_key_reply, api_key=SECRET) as stub:
        rc, out, err = judge(capsys, answers, "--endpoint", stub.url, "--model", "m",
                             "--both-orders", "--scores", "-o", out_dir / "pairs.csv",
                             "--api-key-env", "MY_JUDGE_KEY", "--json", "--backoff", "0.01")
        assert all(c["authorized"] for c in stub.calls) and len(stub.calls) == 9
    assert rc == 0, err
    assert SECRET not in out + err
    written = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert {f.name for f in written} >= {"pairs.csv", "pairs.scores.csv", "pairs.problems.csv",
                                         "pairs.judge-cache.jsonl"}
    for f in written:
        assert SECRET.encode() not in f.read_bytes(), f.name
    # nor spelled as the bytes of a cached token
    for line in (out_dir / "pairs.judge-cache.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert rec["redacted"] == 4  # content, token, alternative, alternative
        for tok in rec["response"]["choices"][0]["logprobs"]["content"]:
            assert SECRET not in bytes(tok["bytes"]).decode()
    # the verdicts and their probabilities survive (the tokens still spell the cleaned text)
    pairs = pd.read_csv(out_dir / "pairs.csv")
    pairs = pairs.set_index(pairs["candidate_i"] + pairs["candidate_j"])
    assert pairs.loc["xz", ["verdict_1", "verdict_2"]].tolist() == ["A", "tie"]
    assert pairs.loc["xy", ["p1_A", "p1_B", "p1_tie"]].tolist() == pytest.approx(PAIRS[("ans-x", "ans-y")][:3])
    assert pairs.loc["xy", "rationale_1"].startswith("Your key *** works. Judgment.")
    problems = read_table(out_dir / "pairs.problems.csv")
    assert len(problems) == 9 and stdout_json(out)["n_problems"] == 9
    assert all(n.startswith("the response held the API key (replaced by ***") for n in problems["note"])


def test_key_in_the_input_is_not_copied_out(tmp_path, capsys, monkeypatch):
    """The comparisons output repeats the input's columns: the key is cleaned there too."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    table = pd.DataFrame({"prompt": [f"Say hello. (key {SECRET})"], "response_a": ["ans-x"],
                          "response_b": ["ans-y"], "model_a": ["x"], "model_b": ["y"]})
    table.to_csv(tmp_path / "c.csv", index=False)
    with StubJudgeServer(reply=scripted, api_key=SECRET) as stub:
        rc, out, err = judge(capsys, tmp_path / "c.csv", "--endpoint", stub.url, "--model", "m",
                             "-o", tmp_path / "judged.csv", *FAST)
    assert rc == 0, err
    judged = read_table(tmp_path / "judged.csv")
    assert judged["prompt"].tolist() == ["Say hello. (key ***)"]
    assert judged["judge_winner"].tolist() == ["model_a"]
    assert SECRET.encode() not in (tmp_path / "judged.csv").read_bytes()


def test_raw_bodies_that_json_alone_would_choke_on():
    """Parsing the body: a 5000-digit number (over Python's int-string limit), a lone surrogate
    (not writable as UTF-8), nesting deeper than the interpreter's recursion limit."""
    from puaudit.trustjudge.completion import Malformed, parse_body

    head = b'{"choices": [{"message": {"content": "Verdict: [A] \\ud800"}, "logprobs": {"content": ['
    tok = b'{"token": "A", "logprob": -0.1, "top_logprobs": [{"token": "B", "logprob": -' + b"9" * 5000
    data, n = parse_body(head + tok + b"}]}]}}]}", "sk-x")
    assert n == 0 and response_text_ok(data)
    alt = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"]
    assert alt == -math.inf
    assert usable_tokens(data) == (None, "token 1 top_logprobs[1].logprob is -inf, not a finite "
                                         "number")
    with pytest.raises(Malformed, match="nested too deeply"):
        parse_body(b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "")


def response_text_ok(data) -> bool:
    content = data["choices"][0]["message"]["content"]
    content.encode("utf-8")  # writable
    return content == "Verdict: [A] \ufffd"
