"""The window of a pair (puaudit.embed.text, "The window of a pair"): a long question is cut
first, a long answer keeps its head and its tail, and texts that fit embed exactly as before.

With the default encoder (all-MiniLM-L6-v2, its own tokenizer, exact token counts) and with the
hashing test encoder (words as tokens)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from puaudit.embed.cache import text_key
from puaudit.embed.encoders import embed_pairs, get_encoder
from puaudit.embed.hashing import HashingEncoder, _WordTokenizer
from puaudit.embed.text import (CUT_MARKER, HEAD_SHARE, QUESTION_MAX, PairText, fit_pair,
                                format_text, pair_token_ids, token_ids)

WINDOW = 64  # a small window keeps the model runs short; the rules are the same at 512


@pytest.fixture(scope="module")
def minilm():
    enc = get_encoder(None, cache_dir=None, device="cpu", max_length=WINDOW)
    return enc.load()


def _words(n: int, word: str = "alpha") -> str:
    return " ".join(f"{word}{i % 7}" for i in range(n))


SHORT = [("What is 2+2?", "It is 4."), ("Name a colour.", "Blue."),
         ("Explain gravity in one line.", "Mass attracts mass.")]


def test_short_texts_give_the_same_ids_and_vectors_as_before(minilm):
    texts = [format_text(p, r) for p, r in SHORT]
    old = token_ids(minilm.tokenizer_, texts, max_length=WINDOW)  # the layout of format 1
    assert pair_token_ids(minilm.tokenizer_, texts, max_length=WINDOW) == old
    before = minilm._forward(old)
    now = embed_pairs([p for p, _ in SHORT], [r for _, r in SHORT], minilm)
    np.testing.assert_array_equal(now, before)
    # the hashing encoder: a window that the texts fit changes nothing
    plain = HashingEncoder().encode(texts)
    np.testing.assert_array_equal(HashingEncoder(max_length=WINDOW).encode(texts), plain)
    np.testing.assert_array_equal(embed_pairs([p for p, _ in SHORT], [r for _, r in SHORT],
                                              HashingEncoder()), plain)


def test_a_prompt_longer_than_the_window_leaves_room_for_the_answers(minilm):
    prompt = _words(400)
    a, b = "The capital of France is Paris.", "I think it is Berlin, not Paris."
    # format 1 (the text cut at the end) sees no answer at all: the two embed alike
    old = token_ids(minilm.tokenizer_, [format_text(prompt, a), format_text(prompt, b)],
                    max_length=WINDOW)
    assert old[0] == old[1]
    ids = pair_token_ids(minilm.tokenizer_, [format_text(prompt, a), format_text(prompt, b)],
                         max_length=WINDOW)
    assert ids[0] != ids[1] and all(len(x) == WINDOW for x in ids)
    cls, sep = minilm.tokenizer_([""])["input_ids"][0]
    assert ids[0][0] == cls and ids[0][-1] == sep
    answer = minilm.tokenizer_(["\nAnswer: " + a], add_special_tokens=False)["input_ids"][0]
    assert ids[0][-1 - len(answer):-1] == answer  # the whole short answer is kept
    vec = embed_pairs([prompt, prompt], [a, b], minilm)
    assert np.linalg.norm(vec[0] - vec[1]) > 1e-3
    vec = embed_pairs([prompt, prompt], [a, b], HashingEncoder(max_length=WINDOW))
    assert np.linalg.norm(vec[0] - vec[1]) > 1e-3


def test_budgets_count_the_encoder_tokens_exactly(minilm):
    tok = minilm.tokenizer_
    prompt, answer = _words(300, "beta"), _words(300, "gamma")
    ids = pair_token_ids(tok, [format_text(prompt, answer)], max_length=WINDOW)[0]
    assert len(ids) == WINDOW
    window = WINDOW - 2  # [CLS] and [SEP]
    q_cap = min(QUESTION_MAX, window // 4)
    q_ids = tok(["Question: " + prompt], add_special_tokens=False)["input_ids"][0]
    marker = tok([CUT_MARKER], add_special_tokens=False)["input_ids"][0]
    room = q_cap - len(marker)
    n_head = round(room * HEAD_SHARE)
    # the question: its head, the marker, its tail, in q_cap tokens
    assert ids[1:1 + n_head] == q_ids[:n_head]
    assert ids[1 + n_head:1 + n_head + len(marker)] == marker
    assert ids[1 + n_head + len(marker):1 + q_cap] == q_ids[-(room - n_head):]
    # the answer: the rest of the window, ending with the answer's last tokens
    a_ids = tok(["\nAnswer: " + answer], add_special_tokens=False)["input_ids"][0]
    a_room = window - q_cap - len(marker)
    a_head = round(a_room * HEAD_SHARE)
    assert ids[1 + q_cap:1 + q_cap + a_head] == a_ids[:a_head]
    assert ids[-1 - (a_room - a_head):-1] == a_ids[-(a_room - a_head):]
    # a short question is kept whole and the answer gets all the rest
    ids = pair_token_ids(tok, [format_text("Why?", answer)], max_length=WINDOW)[0]
    q_ids = tok(["Question: Why?"], add_special_tokens=False)["input_ids"][0]
    assert len(ids) == WINDOW and ids[1:1 + len(q_ids)] == q_ids
    # a long question beside a short answer takes what the answer leaves
    ids = pair_token_ids(tok, [format_text(prompt, "Yes.")], max_length=WINDOW)[0]
    a_ids = tok(["\nAnswer: Yes."], add_special_tokens=False)["input_ids"][0]
    assert len(ids) == WINDOW and ids[-1 - len(a_ids):-1] == a_ids


def test_the_tail_of_a_long_answer_changes_the_embedding(minilm):
    prompt, head = "Summarise the report.", _words(300, "delta")
    a, b = head + " In short: it works.", head + " In short: it fails badly."
    for enc in (minilm, HashingEncoder(max_length=WINDOW)):
        vec = embed_pairs([prompt, prompt], [a, b], enc)
        assert np.linalg.norm(vec[0] - vec[1]) > 1e-3, enc


def test_fit_pair_rules():
    head, tail = list(range(100)), list(range(900, 1000))
    # both fit: unchanged
    assert fit_pair([1, 2], [1, 2], [3, 4], [3, 4], 10, [-1]) == [1, 2, 3, 4]
    body = fit_pair(head, tail, head, tail, 40, [-1])
    assert len(body) == 40 and body.count(-1) == 2
    q = body[:10]  # min(QUESTION_MAX, 40 // 4)
    assert q[:7] == head[:7] and q[7] == -1 and q[8:] == tail[-2:]


def test_huge_cells_are_still_cut_before_tokenising(minilm):
    big = "word " * 1_000_000  # 5 MB each side
    t0 = time.perf_counter()
    ids = pair_token_ids(minilm.tokenizer_, [format_text(big, big + "end")], max_length=WINDOW)
    assert len(ids[0]) == WINDOW and time.perf_counter() - t0 < 30
    words = pair_token_ids(_WordTokenizer(), [format_text(big, big + "end")], max_length=WINDOW)
    assert len(words[0]) == WINDOW


def test_pair_texts_have_cache_keys_of_their_own():
    t = format_text("q", "r")
    assert isinstance(t, PairText) and t == "Question: q\nAnswer: r"
    assert t.cache_key != text_key(str(t))  # a plain text's vectors are never served for a pair
    import pickle

    back = pickle.loads(pickle.dumps(t))
    assert isinstance(back, PairText) and (back.prompt, back.response) == ("q", "r")
