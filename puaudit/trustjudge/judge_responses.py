"""What a judge's response holds: its token log-probabilities checked value by value, and the
verdict or score read from it."""

from __future__ import annotations

import math
from typing import Any, Mapping

from puaudit.data.jsonsafe import dumps
from puaudit.trustjudge.likelihood import (perplexity, score_distribution_from_logprobs,
                                           verdict_probabilities)
from puaudit.trustjudge.completion import response_text, response_usage

__all__ = ["usable_tokens", "parse_pair", "parse_score"]


def _show(value: Any) -> str:
    """A server's value in a note: short (it may be anything, of any length)."""
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


def _logprob_problem(value: Any) -> str:
    """Why ``value`` is not a log-probability (a finite number ≤ 0), or ``""``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is {_show(value)}, not a number" if value is not None else "is missing"
    try:
        x = float(value)
    except OverflowError:
        return "is a number too large for a float"
    if not math.isfinite(x):
        return f"is {x}, not a finite number"
    if x > 1e-6:  # rounding may give +1e-7 for a certain token; more is a probability above 1
        return f"is {x:g} > 0 (a probability above 1)"
    return ""


def _entry_problem(item: Any, name: str = "") -> str:
    """Why a token entry (or, named ``name``, one of its alternatives) is unusable, or ``""``:
    it must be an object with a text ``token`` and a log-probability that is one."""
    lead = f"{name} " if name else ""
    if not isinstance(item, dict):
        return f"{lead}is {_show(item)}, not an object"
    if not isinstance(item.get("token"), str):
        return f"{lead}has token {_show(item.get('token'))}, not a string"
    why = _logprob_problem(item.get("logprob"))
    return f"{name + '.' if name else ''}logprob {why}" if why else ""


def _token_problem(item: Any) -> str:
    why = _entry_problem(item)
    if why:
        return why
    raw = item.get("bytes")
    if raw is not None and not (isinstance(raw, list) and all(
            isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in raw)):
        return "has bytes that are not a list of byte values"
    alts = item.get("top_logprobs")
    if alts is None:
        return ""
    if not isinstance(alts, list):
        return f"has top_logprobs {_show(alts)}, not a list"
    for j, alt in enumerate(alts, 1):
        why = _entry_problem(alt, f"top_logprobs[{j}]")
        if why:
            return why
    return ""


def usable_tokens(response: Mapping) -> tuple[list[dict] | None, str]:
    """The response's per-token log-probabilities, checked value by value.

    A server may send anything: every token must be an object with a ``token`` string and a
    ``logprob`` that is a finite number ≤ 0, and so must every ``top_logprobs`` alternative;
    ``bytes``, when present, must be byte values; and the perplexity
    ``exp(−(1/N) Σ_t log p(t))`` must be a finite number.

    Returns
    -------
    tokens : list of dict or None
        ``choices[0].logprobs.content``, or ``None`` when it is absent, empty or has a bad
        value (then none of its probabilities is used).
    problem : str
        ``""``, or what is wrong and where (token 1 is the first), for the problems list.
    """
    choice = response["choices"][0]
    lp = choice.get("logprobs") if isinstance(choice, dict) else None
    if lp is None:
        return None, ""
    if not isinstance(lp, dict):
        return None, f"logprobs is {_show(lp)}, not an object"
    items = lp.get("content")
    if items is None or (isinstance(items, list) and not items):
        return None, ""
    if not isinstance(items, list):
        return None, f"logprobs.content is {_show(items)}, not a list"
    for i, item in enumerate(items, 1):
        why = _token_problem(item)
        if why:
            return None, f"token {i} {why}"
    mean = math.fsum(float(t["logprob"]) for t in items) / len(items)
    if -mean > 700:  # exp(709.8) is the largest float
        return None, f"mean log-probability {mean:g}: the perplexity is too large for a float"
    return items, ""


def _malformed_note(problem: str, kept: str) -> str:
    return f"malformed log-probabilities ({problem}): {kept} kept, no probabilities"


def _n_tokens(response: Mapping, tokens: list | None) -> float:
    if tokens:
        return len(tokens)
    n = response_usage(response)[1]
    return n if n else math.nan


def parse_pair(response: Mapping | None) -> dict:
    """A pairwise judgment: verdict, the letters' probabilities, perplexity, token count,
    rationale, log-probabilities (JSON) and a note on what is missing; ``{}`` for no
    response."""
    if response is None:
        return {}
    content = response_text(response)
    tokens, bad = usable_tokens(response)
    v = verdict_probabilities(content, tokens)
    lps = [float(t["logprob"]) for t in tokens] if tokens else None
    notes = []
    if v["verdict"] is None:
        notes.append("no verdict [A], [B] or [C] in the judgment")
        if bad:
            notes.append(_malformed_note(bad, "rationale"))
    elif bad:
        notes.append(_malformed_note(bad, "verdict"))
    elif tokens is None:
        notes.append("no log-probabilities in the response")
    elif v["probs"] is None:
        notes.append("the verdict letter is not a token of its own: no probabilities")
    probs = v["probs"] or {}
    return {"verdict": v["verdict"], "A": probs.get("A", math.nan), "B": probs.get("B", math.nan),
            "tie": probs.get("tie", math.nan), "ppl": perplexity(lps) if lps else math.nan,
            "n_tokens": _n_tokens(response, tokens),
            "rationale": content, "token_logprobs": dumps(lps) if lps else "",
            "note": "; ".join(notes)}


def parse_score(response: Mapping, scale: tuple[int, int]) -> dict:
    """A single-score judgment: ``score``, ``p_<low>`` … ``p_<high>``, perplexity, token count,
    rationale, log-probabilities (JSON) and a note on what is missing."""
    lo, hi = scale
    content = response_text(response)
    tokens, bad = usable_tokens(response)
    s = score_distribution_from_logprobs(content, tokens, scale=(lo, hi))
    lps = [float(x["logprob"]) for x in tokens] if tokens else None
    row = {"score": math.nan if s["score"] is None else s["score"]}
    for v in range(lo, hi + 1):
        row[f"p_{v}"] = s["distribution"][v] if s["distribution"] else math.nan
    reason = s["reason"]
    if bad:
        reason = (_malformed_note(bad, "score") if s["score"] is not None
                  else f"{reason}; {_malformed_note(bad, 'rationale')}")
    row.update(ppl=perplexity(lps) if lps else math.nan,
               n_tokens=len(tokens) if tokens else math.nan, rationale=content,
               token_logprobs=dumps(lps) if lps else "", note=reason)
    return row
