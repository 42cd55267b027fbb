"""The text embedded for a prompt-response pair, and how long texts are cut before tokenising.

Long texts
----------
A tokenizer's memory grows with the text it is given, not with ``max_length``: a 5 MB cell
tokenised whole costs gigabytes before it is cut to 512 tokens. Every text is therefore cut
*before* tokenising, to ``max_length * CHARS_PER_TOKEN`` characters (at a space where one is
near). No tokenizer we know puts more than a few characters of ordinary text into one token, so
the cut text still yields more than ``max_length`` tokens and the tokens the model sees are the
same as for the whole text. When a cut text yields too few tokens (long runs of spaces or
symbols that tokenise to little), it is cut again ``4x`` longer, up to
``max_length * MAX_CHARS_PER_TOKEN`` characters; beyond that the rest is not looked at.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["format_text", "CHARS_PER_TOKEN", "MAX_CHARS_PER_TOKEN", "TOKENISE_GROUP"]

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


def format_text(prompt: str, response: str) -> str:
    """The text embedded for one prompt-response pair (docs/method.md, "Features").

    ``"Question: {prompt}\\nAnswer: {response}"``; truncation to the model limit happens at
    tokenisation (after a generous cut by characters: see *Long texts* in the module notes), so the end of a
    long answer is what is cut.
    """
    return f"Question: {prompt}\nAnswer: {response}"


def _as_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value if isinstance(value, str) else str(value)


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


def token_ids(tokenizer, texts: list[str], *, max_length: int) -> list[list[int]]:
    """Token ids of each text, truncated to ``max_length``, tokenising only a bounded prefix.

    Each text is first cut to ``max_length * CHARS_PER_TOKEN`` characters. A cut text that
    yields fewer than ``max_length + _CUT_MARGIN`` tokens might have lost tokens the model
    would have seen: it is cut again 4x longer, up to ``max_length * MAX_CHARS_PER_TOKEN``.
    """
    limit = max_length * CHARS_PER_TOKEN
    cap = max_length * MAX_CHARS_PER_TOKEN
    cut = [_cut_text(t, limit) for t in texts]
    unsure = [i for i, t in enumerate(texts) if len(cut[i]) < len(t)]
    need = max_length + _CUT_MARGIN
    while unsure and limit < cap:
        counts = tokenise(tokenizer, [cut[i] for i in unsure], add_special_tokens=False,
                          truncation=True, max_length=need)
        short = [i for i, c in zip(unsure, counts) if len(c) < need]
        limit = min(limit * 4, cap)
        for i in short:
            cut[i] = _cut_text(texts[i], limit)
        unsure = [i for i in short if len(cut[i]) < len(texts[i])]
    return tokenise(tokenizer, cut, add_special_tokens=True, truncation=True,
                    max_length=max_length)
