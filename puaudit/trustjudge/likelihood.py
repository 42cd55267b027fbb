"""What a judge's token log-probabilities say: perplexity, confidence weights, verdict and score
probabilities.

All functions take the response's ``choices[0].logprobs.content`` list as plain dicts (keys
``token``, ``logprob``, ``bytes``, ``top_logprobs``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Sequence

import numpy as np

from puaudit.errors import PUAuditError

__all__ = [
    "perplexity",
    "confidence_weights",
    "parse_token_logprobs",
    "token_offsets",
    "verdict_probabilities",
    "score_distribution_from_logprobs",
    "VERDICT_RE",
    "SCORE_RE",
]

#: The last ``[A]`` / ``[[B]]`` / ``[ C ]`` in a judgment is its verdict (C = tie).
VERDICT_RE = re.compile(r"\[\[?\s*([ABC])\s*\]\]?")
#: The last bracketed number (``[[7]]``, ``[85]``, ``[4.5]``) in a judgment is its score.
SCORE_RE = re.compile(r"\[\[?\s*(\d{1,4}(?:\.\d+)?)\s*\]\]?")
_LETTER_OUTCOME = {"A": "A", "B": "B", "C": "tie"}
_STRIP = " \t\r\n[]*:\"'`.()"


def perplexity(logprobs: Sequence[float] | None) -> float:
    """Perplexity of a generated text from its tokens' log-probabilities.

    ``PPL = exp(−(1/N) Σ_t log p(t))`` (natural logarithms, as the chat-completions API returns
    them).

    Parameters
    ----------
    logprobs : sequence of float
        One log-probability per generated token.

    Returns
    -------
    float
        ``nan`` for an empty or missing sequence.

    Raises
    ------
    PUAuditError
        A log-probability is positive or not finite.
    """
    if logprobs is None:
        return math.nan
    arr = np.asarray(list(logprobs), dtype=float)
    if arr.size == 0:
        return math.nan
    if not np.all(np.isfinite(arr)) or np.any(arr > 1e-6):
        raise PUAuditError("Token log-probabilities must be finite and ≤ 0 (natural logarithms); "
                           f"got values from {arr.min():g} to {arr.max():g}.")
    return float(np.exp(-arr.mean()))


def confidence_weights(ppl: Any, *, gamma: float) -> np.ndarray:
    """Confidence weights ``exp(−γ·PPL)`` of judgments with perplexities ``ppl``.

    Parameters
    ----------
    ppl : array-like of float
        Perplexities (NaN where unknown: weight NaN).
    gamma : float
        ``γ ≥ 0``; 0 weighs every judgment 1.

    Returns
    -------
    numpy.ndarray
    """
    if not (gamma >= 0) or not math.isfinite(gamma):
        raise PUAuditError(f"gamma must be a finite number ≥ 0 (got {gamma}).")
    return np.exp(-float(gamma) * np.asarray(ppl, dtype=float))


def parse_token_logprobs(value: Any) -> list[float] | None:
    """A cell holding token log-probabilities (JSON list, list or array) as a list of floats.

    Empty cells give ``None``; anything else that is not a list of numbers raises
    :class:`PUAuditError`.
    """
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise PUAuditError(f"token log-probabilities are not a JSON list ({exc.msg}).") from None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise PUAuditError("token log-probabilities must be a JSON list of numbers, like "
                           "[-0.1, -0.02].")
    try:
        return [float(v) for v in value]
    except (TypeError, ValueError):
        raise PUAuditError("token log-probabilities must be numbers.") from None


def _token_bytes(item: Mapping) -> bytes | None:
    b = item.get("bytes")
    if isinstance(b, list):
        try:
            return bytes(b)
        except (TypeError, ValueError):
            return None
    return None


def token_offsets(content: str, tokens: Sequence[Mapping]) -> list[int] | None:
    """Character offset in ``content`` at which each token starts, or ``None`` when the tokens do
    not spell ``content`` exactly (some servers return tokens that do not concatenate to the
    text; callers then fall back to scanning the tokens)."""
    raw = [_token_bytes(t) for t in tokens]
    if all(b is not None for b in raw):
        data = content.encode("utf-8")
        if b"".join(raw) != data:
            return None
        # byte offset -> character offset
        char_at = np.cumsum([0] + [len(ch.encode("utf-8")) for ch in content])
        starts, pos = [], 0
        for b in raw:
            starts.append(int(np.searchsorted(char_at, pos, side="right") - 1))
            pos += len(b)
        return starts
    texts = [str(t.get("token", "")) for t in tokens]
    if "".join(texts) != content:
        return None
    starts, pos = [], 0
    for t in texts:
        starts.append(pos)
        pos += len(t)
    return starts


def _token_at(content: str, tokens: Sequence[Mapping], char_pos: int) -> int | None:
    starts = token_offsets(content, tokens)
    if starts is None:
        return None
    idx = int(np.searchsorted(np.asarray(starts), char_pos, side="right") - 1)
    return idx if 0 <= idx < len(tokens) else None


def _norm(token: str) -> str:
    return str(token).strip(_STRIP).upper()


def _alternatives(item: Mapping) -> list[tuple[str, float]]:
    """(token, logprob) of the chosen token and its top alternatives, the chosen one included
    once."""
    alts = [(str(a.get("token", "")), float(a.get("logprob", -math.inf)))
            for a in (item.get("top_logprobs") or [])]
    chosen = (str(item.get("token", "")), float(item.get("logprob", -math.inf)))
    if chosen[0] not in {t for t, _ in alts}:
        alts.append(chosen)
    return alts


def verdict_probabilities(content: str, tokens: Sequence[Mapping] | None) -> dict:
    """The verdict of a pairwise judgment and the probabilities of its letters.

    The verdict is the last ``[A]``, ``[B]`` or ``[C]`` (single or double brackets; C = tie) in
    the text. At the token that holds that letter, the probability of each outcome is the sum of
    ``exp(logprob)`` over the alternatives that spell that letter (``"A"``, ``" A"``, ``"[A"``,
    ...); letters absent from the alternatives get 0.

    Parameters
    ----------
    content : str
        The judgment text.
    tokens : list of dict or None
        ``choices[0].logprobs.content``.

    Returns
    -------
    dict
        ``verdict`` (``"A"``, ``"B"``, ``"tie"`` or ``None`` when no verdict is found) and
        ``probs`` (``{"A": p, "B": p, "tie": p}``, or ``None`` without usable log-probabilities).
    """
    matches = list(VERDICT_RE.finditer(content or ""))
    if not matches:
        return {"verdict": None, "probs": None}
    m = matches[-1]
    letter = m.group(1)
    out = {"verdict": _LETTER_OUTCOME[letter], "probs": None}
    if not tokens:
        return out
    idx = _token_at(content, tokens, m.start(1))
    if idx is None or _norm(tokens[idx].get("token", "")) != letter:
        # tokens do not spell the text: the last token that is exactly the verdict letter
        idx = next((i for i in range(len(tokens) - 1, -1, -1)
                    if _norm(tokens[i].get("token", "")) == letter), None)
    if idx is None:
        return out
    probs = {"A": 0.0, "B": 0.0, "tie": 0.0}
    for tok, lp in _alternatives(tokens[idx]):
        key = _LETTER_OUTCOME.get(_norm(tok))
        if key is not None and math.isfinite(lp):
            probs[key] += math.exp(lp)
    out["probs"] = probs
    return out


def _as_score(text: str) -> float | None:
    t = _norm(text)
    try:
        value = float(t)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def score_distribution_from_logprobs(content: str, tokens: Sequence[Mapping] | None, *,
                                     scale: tuple[int, int]) -> dict:
    """The score of a single-answer judgment and the probability of every allowed score token.

    The score is the last bracketed number in the text (``[[7]]``, ``Score: [85]``). When that
    number is one token, the probability of each integer ``s`` of ``scale`` is the sum of
    ``exp(logprob)`` over the alternatives at that position that spell ``s``; integers absent
    from the alternatives get 0. A number split over several tokens (``"1"`` + ``"0"``) gives no
    distribution: the first token's alternatives would mix ``1`` and ``10``.

    Parameters
    ----------
    content : str
    tokens : list of dict or None
    scale : (low, high)
        The allowed integer scores.

    Returns
    -------
    dict
        ``score`` (float or ``None`` when no score is found or it lies outside ``scale``),
        ``distribution`` (``{s: p}`` over every integer of the scale, or ``None``) and
        ``reason`` (why there is no distribution, else ``""``).
    """
    lo, hi = int(scale[0]), int(scale[1])
    matches = [m for m in SCORE_RE.finditer(content or "")]
    if not matches:
        return {"score": None, "distribution": None, "reason": "no bracketed score in the judgment"}
    m = matches[-1]
    score = float(m.group(1))
    if not lo <= score <= hi:
        return {"score": None, "distribution": None,
                "reason": f"score {m.group(1)} outside the scale {lo}–{hi}"}
    out = {"score": score, "distribution": None, "reason": ""}
    if not tokens:
        out["reason"] = "no log-probabilities in the response"
        return out
    idx = _token_at(content, tokens, m.start(1))
    number = m.group(1)
    if idx is None:
        idx = next((i for i in range(len(tokens) - 1, -1, -1)
                    if _norm(tokens[i].get("token", "")) == number), None)
    if idx is None or _norm(tokens[idx].get("token", "")) != number:
        out["reason"] = "the score is split over several tokens"
        return out
    dist = {s: 0.0 for s in range(lo, hi + 1)}
    for tok, lp in _alternatives(tokens[idx]):
        value = _as_score(tok)
        if value is not None and value.is_integer() and lo <= value <= hi and math.isfinite(lp):
            dist[int(value)] += math.exp(lp)
    out["distribution"] = dist
    return out
