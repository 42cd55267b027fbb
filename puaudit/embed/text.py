"""The text embedded for a prompt-response pair, and how long texts are cut before tokenising
(docs/encoders.md, "Truncation").

A tokenizer's memory grows with the text it is given, not with ``max_length``, so every text
is cut *before* tokenising, to ``max_length * CHARS_PER_TOKEN`` characters (at a space where
one is near), and cut again ``4x`` longer while that yields too few tokens, up to
``max_length * MAX_CHARS_PER_TOKEN``; a tail is read the same way from the end.

A pair ``Question: {prompt}\nAnswer: {response}`` that does not fit the window (``max_length``
tokens, special tokens included) is built from its two parts in the encoder's own tokens
(:func:`fit_pair`): the question keeps at most ``min(QUESTION_MAX, W * QUESTION_SHARE)`` tokens
(``W`` the window less the special tokens) or what a short answer leaves, the answer the rest;
a part over its budget keeps its head (``HEAD_SHARE``) and tail, joined by :data:`CUT_MARKER`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["format_text", "PairText", "as_text", "distinct_pairs", "embedding_key",
           "prompt_length", "from_prompt_length", "fit_pair", "pair_token_ids", "CHARS_PER_TOKEN",
           "MAX_CHARS_PER_TOKEN", "TOKENISE_GROUP", "TEXT_FORMAT", "QUESTION_SHARE",
           "QUESTION_MAX", "HEAD_SHARE", "CUT_MARKER"]

#: texts are cut to ``max_length * CHARS_PER_TOKEN`` characters before tokenising
CHARS_PER_TOKEN = 32
#: ... and, when that gives too few tokens, at most ``max_length * MAX_CHARS_PER_TOKEN``
MAX_CHARS_PER_TOKEN = 1024
#: distinct texts tokenised together (their ids are the only per-text state kept at once)
TOKENISE_GROUP = 2048
# Characters per tokenizer call: a fast tokenizer keeps ~16 bytes of alignment per character.
_TOKENISE_CHARS = 4_000_000
# Extra tokens a cut text must yield beyond max_length: the word at the cut may tokenise
# differently from the same word uncut.
_CUT_MARGIN = 16

#: version of the text embedded for a pair: part of the encoder cache key
#: (:mod:`puaudit.embed.encoder_cache`), so vectors of an older layout are never served.
#: 1: ``Question: ...\nAnswer: ...`` cut at the end; 2: the window shared (module notes).
TEXT_FORMAT = 2
#: the question keeps at most this share of the window ...
QUESTION_SHARE = 0.25
#: ... and at most this many tokens (when the answer needs the room)
QUESTION_MAX = 128
#: a part cut to its budget keeps this share of it from its head, the rest from its tail
HEAD_SHARE = 0.75
#: joins the head and the tail of a cut part
CUT_MARKER = " [...] "


class PairText(str):
    """The text of one prompt-response pair, ``Question: {prompt}\\nAnswer: {response}``, that
    remembers its two parts, so that an encoder can share its window between them
    (:func:`fit_pair`); an encoder that knows nothing of pairs embeds the ``str``.
    ``cache_key`` differs from the key of the same text as a plain ``str`` (cut at the end).
    """

    def __new__(cls, prompt: str, response: str):
        self = super().__new__(cls, f"Question: {prompt}\nAnswer: {response}")
        self.prompt, self.response = prompt, response
        return self

    def __reduce__(self):
        return (PairText, (self.prompt, self.response))

    @property
    def question_part(self) -> str:
        return f"Question: {self.prompt}"

    @property
    def answer_part(self) -> str:
        return f"\nAnswer: {self.response}"

    @property
    def cache_key(self) -> bytes:
        import hashlib

        h = hashlib.sha256(f"pair-v{TEXT_FORMAT}:{len(self.prompt)}:".encode())
        h.update(self.encode("utf-8", "surrogatepass"))
        return h.digest()


def embedding_key(text: str) -> bytes:
    """The embedding cache's key of a text: :attr:`PairText.cache_key` for a pair's text, the
    sha256 of the text (:func:`puaudit.embed.cache.text_key`) for any other."""
    from puaudit.embed.cache import text_key

    return text.cache_key if isinstance(text, PairText) else text_key(text)


def prompt_length(text: str) -> int:
    """The length of a :class:`PairText`'s prompt, -1 for a plain ``str`` (what travels beside
    the text where only strings can: :func:`from_prompt_length` rebuilds the pair)."""
    return len(text.prompt) if isinstance(text, PairText) else -1


def from_prompt_length(text: str, n: int) -> str:
    """The :class:`PairText` that ``text`` (``Question: {prompt}\\nAnswer: {response}``) and
    ``n = len(prompt)`` describe; ``text`` itself when ``n`` is negative."""
    if n < 0:
        return text
    q, a = len("Question: "), len("Question: ") + n + len("\nAnswer: ")
    return PairText(text[q:q + n], text[a:])


def format_text(prompt: str, response: str) -> PairText:
    """The text embedded for one prompt-response pair (docs/method.md, "Features"):
    ``"Question: {prompt}\\nAnswer: {response}"`` as a :class:`PairText` (:func:`fit_pair`)."""
    return PairText(prompt, response)


def as_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value if isinstance(value, str) else str(value)


def distinct_pairs(prompts, responses) -> tuple[list[PairText], np.ndarray]:
    """Each distinct ``format_text(prompt, response)`` once, in order of first appearance
    (missing cells as empty strings), and ``inverse``: row i's text is ``texts[inverse[i]]``."""
    first: dict[str, int] = {}
    inverse = np.fromiter((first.setdefault(format_text(as_text(p), as_text(r)), len(first))
                           for p, r in zip(prompts, responses)), dtype=np.int64, count=len(prompts))
    return list(first), inverse


def _cut_text(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at the last space or newline of the final
    tenth when there is one (so that no word is split where the tokens are kept)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    at = max(head.rfind(" ", limit - limit // 10), head.rfind("\n", limit - limit // 10))
    return head[:at] if at > 0 else head


def tokenise(tokenizer, texts: list[str], **kwargs) -> list[list[int]]:
    """``tokenizer(texts, **kwargs)["input_ids"]``, in calls of at most
    :data:`_TOKENISE_CHARS` characters so that the tokenizer's own memory stays bounded."""
    ids: list[list[int]] = []
    start = 0
    while start < len(texts):
        stop, chars = start, 0
        while stop < len(texts) and (stop == start or chars + len(texts[stop]) <= _TOKENISE_CHARS):
            chars += len(texts[stop])
            stop += 1
        ids.extend(tokenizer(texts[start:stop], padding=False, **kwargs)["input_ids"])
        start = stop
    return ids


def token_ids(tokenizer, texts: list[str], *, max_length: int,
              one_more: bool = False) -> list[list[int]]:
    """Token ids of each text, truncated to ``max_length`` (``one_more``: ``max_length + 1``,
    so that a longer text shows it), tokenising only a bounded prefix (:func:`_prefix_ids`)."""
    return _prefix_ids(tokenizer, texts, max_length, special=True,
                       keep=max_length + (1 if one_more else 0))


def _prefix_ids(tokenizer, texts: list[str], n: int, *, special: bool,
                keep: int | None = None) -> list[list[int]]:
    """The first ``n`` token ids of each text (``special``: with the special tokens, counted in
    ``n``; ``keep``, at most ``n + _CUT_MARGIN``: that many instead), tokenising only a prefix
    cut as the module notes say."""
    limit = n * CHARS_PER_TOKEN
    cap = n * MAX_CHARS_PER_TOKEN
    cut = [_cut_text(t, limit) for t in texts]
    unsure = [i for i, t in enumerate(texts) if len(cut[i]) < len(t)]
    need = n + _CUT_MARGIN
    while unsure and limit < cap:
        counts = tokenise(tokenizer, [cut[i] for i in unsure], add_special_tokens=False,
                          truncation=True, max_length=need)
        short = [i for i, c in zip(unsure, counts) if len(c) < need]
        limit = min(limit * 4, cap)
        for i in short:
            cut[i] = _cut_text(texts[i], limit)
        unsure = [i for i in short if len(cut[i]) < len(texts[i])]
    return tokenise(tokenizer, cut, add_special_tokens=special, truncation=True,
                    max_length=n if keep is None else keep)


def _cut_tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, from just after a space or newline of their
    first tenth when there is one (so that no word is split where the tokens are kept)."""
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    window = tail[: limit // 10]
    at = max(window.rfind(" "), window.rfind("\n"))
    return tail[at:] if at >= 0 else tail


def _tail_ids(tokenizer, texts: list[str], n: int) -> list[list[int]]:
    """The last ``n`` token ids of each text (no special tokens), tokenising only a suffix cut
    as the module notes say."""
    out: list[list[int]] = [[] for _ in texts]
    limit, cap, need = n * CHARS_PER_TOKEN, n * MAX_CHARS_PER_TOKEN, n + _CUT_MARGIN
    todo = list(range(len(texts)))
    while todo:
        cut = [_cut_tail(texts[i], limit) for i in todo]
        ids = tokenise(tokenizer, cut, add_special_tokens=False)
        again = []
        for i, c, x in zip(todo, cut, ids):
            out[i] = x[-n:] if n else []
            if len(x) < need and len(c) < len(texts[i]) and limit < cap:
                again.append(i)
        todo, limit = again, min(limit * 4, cap)
    return out


def _special_ids(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids the tokenizer puts before and after a text (``[CLS]`` / ``[SEP]``
    for BERT), read from a probe text so that any tokenizer works."""
    with_sp = tokenise(tokenizer, ["a"], add_special_tokens=True)[0]
    bare = tokenise(tokenizer, ["a"], add_special_tokens=False)[0]
    for i in range(len(with_sp) - len(bare) + 1):
        if with_sp[i:i + len(bare)] == bare:
            return list(with_sp[:i]), list(with_sp[i + len(bare):])
    return [], []


def _part(head: list, tail: list, budget: int, marker: list) -> list:
    """A part within ``budget`` tokens: whole when ``head`` (its first tokens, one more than
    any budget) fits, else its first ``HEAD_SHARE`` of the budget, the marker, and its last
    tokens."""
    if len(head) <= budget:
        return list(head)
    room = budget - len(marker)
    if room < 2:
        return list(head[:budget])
    n_head = max(1, int(round(room * HEAD_SHARE)))
    n_tail = room - n_head
    return list(head[:n_head]) + list(marker) + (list(tail[-n_tail:]) if n_tail else [])


def fit_pair(q_head: list, q_tail: list, a_head: list, a_tail: list, window: int,
             marker: list) -> list:
    """The tokens of one pair in ``window`` tokens (special tokens not counted), as the module
    notes say.

    ``q_head`` / ``a_head``: the first ``window + 1`` tokens (or all) of the question
    ``Question: {prompt}`` and of the answer ``\\nAnswer: {response}``; ``q_tail`` /
    ``a_tail``: their last ``window`` tokens.
    """
    q_cap = min(QUESTION_MAX, int(window * QUESTION_SHARE))
    nq, na = len(q_head), len(a_head)  # > window: longer than the window
    q_budget = min(nq, max(q_cap, window - na))
    return _part(q_head, q_tail, q_budget, marker) + _part(a_head, a_tail, window - q_budget,
                                                             marker)


def pair_token_ids(tokenizer, texts: list[str], *, max_length: int) -> list[list[int]]:
    """Token ids of each text in at most ``max_length`` tokens, special tokens included: whole
    when it fits; else a :class:`PairText` shares the window (:func:`fit_pair`) and a plain
    ``str`` is cut at the end."""
    ids = token_ids(tokenizer, texts, max_length=max_length, one_more=True)
    long = [i for i, x in enumerate(ids) if len(x) > max_length]
    plain = [i for i in long if not isinstance(texts[i], PairText)]
    pairs = [i for i in long if isinstance(texts[i], PairText)]
    if plain:
        for i, x in zip(plain, token_ids(tokenizer, [texts[i] for i in plain],
                                         max_length=max_length)):
            ids[i] = x
    if pairs:
        before, after = _special_ids(tokenizer)
        window = max(2, max_length - len(before) - len(after))
        marker = tokenise(tokenizer, [CUT_MARKER], add_special_tokens=False)[0]
        qs = [texts[i].question_part for i in pairs]
        ans = [texts[i].answer_part for i in pairs]
        q_head = _prefix_ids(tokenizer, qs, window + 1, special=False)
        a_head = _prefix_ids(tokenizer, ans, window + 1, special=False)
        q_tail = _tail_ids(tokenizer, [texts[i].prompt for i in pairs], window)
        a_tail = _tail_ids(tokenizer, [texts[i].response for i in pairs], window)
        for k, i in enumerate(pairs):
            body = fit_pair(q_head[k], q_tail[k], a_head[k], a_tail[k], window, marker)
            ids[i] = before + body + after
    return ids
