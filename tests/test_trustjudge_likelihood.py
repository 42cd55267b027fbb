"""Perplexity, exp(−γ·PPL) weights, verdict and score probabilities from token log-probabilities,
perplexity read from token log-probability columns, table-wide rescaling, prompt templates."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from puaudit.errors import PUAuditError
from puaudit.trustjudge import (
    analyse,
    confidence_weights,
    perplexity,
    read_pairwise,
    read_scores,
    relation_weighted,
    score_distribution_from_logprobs,
    score_table,
    verdict_probabilities,
)
from puaudit.trustjudge.prompts import (
    PAIR_TEMPLATES,
    SCORE_TEMPLATES,
    get_template,
    load_template,
)


def tok(text, lp, alts=None, with_bytes=True):
    d = {"token": text, "logprob": lp,
         "top_logprobs": [{"token": t, "logprob": a} for t, a in (alts or [(text, lp)])]}
    if with_bytes:
        d["bytes"] = list(text.encode("utf-8"))
    return d


def test_perplexity_by_hand():
    assert perplexity([-0.1, -0.2, -0.3]) == pytest.approx(math.exp(0.2))
    assert perplexity([0.0, 0.0]) == 1.0
    assert math.isnan(perplexity([])) and math.isnan(perplexity(None))
    with pytest.raises(PUAuditError, match="≤ 0"):
        perplexity([-0.1, 0.5])


def test_confidence_weights():
    w = confidence_weights([1.0, 2.5, np.nan], gamma=0.4)
    assert w[:2] == pytest.approx([math.exp(-0.4), math.exp(-1.0)]) and np.isnan(w[2])
    assert confidence_weights([3.0], gamma=0.0)[0] == 1.0
    with pytest.raises(PUAuditError, match="gamma"):
        confidence_weights([1.0], gamma=-1)


def test_verdict_probabilities_sum_spellings_of_a_letter():
    content = "Both fine. Verdict: [[B]]"
    tokens = [tok("Both", -0.1), tok(" fine", -0.1), tok(".", -0.1), tok(" Verdict", -0.1),
              tok(":", -0.1), tok(" [[", -0.1),
              tok("B", math.log(0.5), [("B", math.log(0.5)), (" B", math.log(0.1)),
                                       ("A", math.log(0.3)), ("C", math.log(0.05)), ("x", -1)]),
              tok("]]", -0.1)]
    v = verdict_probabilities(content, tokens)
    assert v["verdict"] == "B"
    assert v["probs"] == pytest.approx({"A": 0.3, "B": 0.6, "tie": 0.05})


def test_verdict_last_bracket_wins_and_tie_letter():
    content = "Assistant [A] was long. Final: [C]"
    tokens = [tok(t, -0.2) for t in ("Assistant", " [", "A", "]", " was", " long", ".", " Final",
                                     ":", " [")]
    tokens += [tok("C", math.log(0.7), [("C", math.log(0.7)), ("A", math.log(0.2))]), tok("]", -0.1)]
    v = verdict_probabilities(content, tokens)
    assert v["verdict"] == "tie" and v["probs"] == pytest.approx({"A": 0.2, "B": 0.0, "tie": 0.7})


def test_verdict_with_multibyte_text_and_tokens_that_do_not_spell_it():
    content = "Réponse “B” meilleure. [A]"
    pieces = ["R", "é", "ponse", " “", "B", "”", " meilleure", ".", " [", "A", "]"]
    assert "".join(pieces) == content
    tokens = [tok(p, -0.1) for p in pieces]
    tokens[9] = tok("A", math.log(0.9), [("A", math.log(0.9)), ("B", math.log(0.1))])
    assert verdict_probabilities(content, tokens)["probs"] == pytest.approx({"A": .9, "B": .1, "tie": 0})
    # a server whose tokens do not concatenate to the text: the last token that is the letter
    odd = [tok(p, -0.1, with_bytes=False) for p in ["x", "y", "A", "z"]]
    odd[2] = tok("A", math.log(0.8), [("A", math.log(0.8))], with_bytes=False)
    assert verdict_probabilities(content, odd)["probs"]["A"] == pytest.approx(0.8)
    assert verdict_probabilities("no verdict here", odd) == {"verdict": None, "probs": None}
    assert verdict_probabilities(content, None) == {"verdict": "A", "probs": None}


def test_score_distribution_from_logprobs():
    content = "Good. Score: [4]"
    tokens = [tok("Good", -0.1), tok(".", -0.1), tok(" Score", -0.1), tok(":", -0.1), tok(" [", -0.1),
              tok("4", math.log(0.6), [("4", math.log(0.6)), ("5", math.log(0.25)), (" 3", math.log(0.1)),
                                       ("9", math.log(0.04)), ("four", -1.0)]),
              tok("]", -0.1)]
    s = score_distribution_from_logprobs(content, tokens, scale=(1, 5))
    assert s["score"] == 4.0 and s["reason"] == ""
    assert s["distribution"] == pytest.approx({1: 0, 2: 0, 3: 0.1, 4: 0.6, 5: 0.25})  # 9 is off-scale
    # a number split over two tokens gives no distribution
    split = [tok("Score", -0.1), tok(": [", -0.1), tok("1", -0.2), tok("0", -0.1), tok("]", -0.1)]
    s = score_distribution_from_logprobs("Score: [10]", split, scale=(1, 10))
    assert s["score"] == 10 and s["distribution"] is None and "split" in s["reason"]
    assert score_distribution_from_logprobs("Score: [12]", None, scale=(1, 10))["score"] is None


def test_read_pairwise_computes_perplexity_from_token_logprobs():
    df = pd.DataFrame({"question_id": ["q", "q"], "candidate_i": ["a", "a"], "candidate_j": ["b", "c"],
                       "verdict_1": ["A", "B"], "verdict_2": ["B", "B"],
                       "token_logprobs_1": [json.dumps([-0.1, -0.3]), ""],
                       "token_logprobs_2": [json.dumps([-0.5, -0.5, -0.2]), json.dumps([-1.0])]})
    pairs = read_pairwise(df)
    assert pairs.attrs["has_perplexity"] and pairs.attrs["ppl_from_logprobs"] == ["ppl_1", "ppl_2"]
    assert pairs["ppl_1"].iloc[0] == pytest.approx(math.exp(0.2)) and np.isnan(pairs["ppl_1"].iloc[1])
    assert pairs["ppl_2"].tolist() == pytest.approx([math.exp(0.4), math.exp(1.0)])
    bad = df.assign(token_logprobs_1=["[-0.1, 0.7]", ""])
    with pytest.raises(PUAuditError, match="token_logprobs_1' at row 1"):
        read_pairwise(bad)
    rep = analyse(df, method="ppl", k=(3,))
    # a vs b: order 1 has the lower perplexity, its verdict A: a > b
    assert rep.relations["relation"].tolist()[0] == ">"


def test_relation_weighted_by_hand():
    p1 = np.array([[0.6, 0.3, 0.1]])
    p2 = np.array([[0.7, 0.2, 0.1]])  # order 2: A = j
    w1, w2 = math.exp(-2 * 1.5), math.exp(-2 * 1.1)
    P_i = (w1 * 0.6 + w2 * 0.2) / (w1 + w2)
    P_j = (w1 * 0.3 + w2 * 0.7) / (w1 + w2)
    assert P_j > P_i
    assert relation_weighted(["A"], ["A"], p1, p2, [1.5], [1.1], gamma=2.0).tolist() == ["<"]
    # γ = 0: the plain mean, i has 0.4, j 0.5
    assert relation_weighted(["A"], ["A"], p1, p2, [1.5], [1.1], gamma=0.0).tolist() == ["<"]
    assert relation_weighted(["A"], ["A"], p1, p2, [1.5], [1.1], gamma=0.0, delta=0.2).tolist() == ["="]
    # no probabilities: the verdicts as point masses, weighted by confidence
    nan = np.full((1, 3), np.nan)
    assert relation_weighted(["A"], ["A"], nan, nan, [1.0], [3.0], gamma=1.0).tolist() == [">"]
    assert relation_weighted(["A"], ["A"], nan, nan, [3.0], [1.0], gamma=1.0).tolist() == ["<"]
    assert relation_weighted(["A"], ["A"], nan, nan, [2.0], [2.0], gamma=1.0).tolist() == ["="]


def test_rescaling_uses_one_scale_for_the_table():
    df = pd.DataFrame({"question_id": ["q", "q"], "candidate": ["a", "b"],
                       "score_distribution": [json.dumps({"60": 0.5, "80": 0.5}),
                                              json.dumps({"1": 0.1, "100": 0.9})]})
    scores = read_scores(df)
    fine = score_table(scores, method="distribution")
    assert fine.tolist() == pytest.approx([70.0, 90.1])
    # one scale (1..100) for both rows, not each row's own smallest and largest token
    out = score_table(scores, method="distribution", rescale_to=(1, 5))
    assert out.tolist() == pytest.approx([1 + 69 * 4 / 99, 1 + 89.1 * 4 / 99])
    out = score_table(scores, method="distribution", rescale_to=(0, 1), scale=(0, 100))
    assert out.tolist() == pytest.approx([0.7, 0.901])
    with pytest.raises(PUAuditError, match="distribution score only"):
        score_table(scores, method="geval", rescale_to=(1, 5))


def test_templates(tmp_path):
    msgs = PAIR_TEMPLATES["trustjudge"].messages(question="Q {x}", answer_a="a}", answer_b="{b")
    assert msgs[0]["role"] == "system" and "[C]" in msgs[0]["content"]
    assert "Q {x}" in msgs[1]["content"] and "a}" in msgs[1]["content"]
    assert "[[C]]" in PAIR_TEMPLATES["mtbench"].system
    s = SCORE_TEMPLATES["trustjudge-100"].messages(question="q", answer="a")
    assert "scale of 1 (poor) to 100" in s[0]["content"]
    assert SCORE_TEMPLATES["mtbench-10"].scale == (1, 10)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"kind": "score", "user": "{question}\n{answer}\n{low}-{high}",
                                "scale": [0, 9]}))
    t = load_template(path, kind="score")
    assert t.scale == (0, 9) and t.messages(question="q", answer="a")[-1]["content"] == "q\na\n0-9"
    assert get_template(str(path), kind="score").name == "mine"
    with pytest.raises(PUAuditError, match="'score' template"):
        load_template(path, kind="pair")
    path.write_text(json.dumps({"user": "{question} {answer_a}"}))
    with pytest.raises(PUAuditError, match=r"\{answer_b\} must appear"):
        load_template(path, kind="pair")
    path.write_text(json.dumps({"user": "{question} {answer}", "scale": [5, 5]}))
    with pytest.raises(PUAuditError, match="low < high"):
        load_template(path, kind="score")
