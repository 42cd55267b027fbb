"""From the judge's responses to TrustJudge tables (:func:`assemble_judge_tables`): each
response's token log-probabilities checked value by value, its verdict or score read, the
tables assembled."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from puaudit.data.jsonsafe import dumps
from puaudit.errors import PUAuditError
from puaudit.trustjudge.completion import response_text, response_usage
from puaudit.trustjudge.judge_plan import JudgePlan
from puaudit.trustjudge.likelihood import (perplexity, score_distribution_from_logprobs,
                                           verdict_probabilities)
from puaudit.trustjudge.relations import relation_baseline, relation_bidirectional

__all__ = ["JudgeTables", "assemble_judge_tables", "WINNER_RULES", "usable_tokens", "parse_pair",
           "parse_score"]

WINNER_RULES = ("baseline", "bidirectional", "first")
_PAIR_OUT = ("verdict", "p{o}_A", "p{o}_B", "p{o}_tie", "ppl", "n_tokens", "rationale",
             "token_logprobs", "note")
_WINNER = {">": "model_a", "<": "model_b", "=": "tie"}



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


def _logprob_cells(tokens: list | None) -> dict:
    """The judgment's perplexity and its token log-probabilities as JSON (NaN / "" without)."""
    lps = [float(t["logprob"]) for t in tokens] if tokens else None
    return {"ppl": perplexity(lps) if lps else math.nan,
            "token_logprobs": dumps(lps) if lps else ""}


def parse_pair(response: Mapping | None) -> dict:
    """A pairwise judgment: verdict, the letters' probabilities, perplexity, token count,
    rationale, log-probabilities (JSON) and a note on what is missing; ``{}`` for no
    response."""
    if response is None:
        return {}
    content = response_text(response)
    tokens, bad = usable_tokens(response)
    v = verdict_probabilities(content, tokens)
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
    cells = _logprob_cells(tokens)
    return {"verdict": v["verdict"], "A": probs.get("A", math.nan), "B": probs.get("B", math.nan),
            "tie": probs.get("tie", math.nan), "ppl": cells["ppl"],
            "n_tokens": len(tokens) if tokens else (response_usage(response)[1] or math.nan),
            "rationale": content, "token_logprobs": cells["token_logprobs"],
            "note": "; ".join(notes)}


def parse_score(response: Mapping, scale: tuple[int, int]) -> dict:
    """A single-score judgment: ``score``, ``p_<low>`` … ``p_<high>``, perplexity, token count,
    rationale, log-probabilities (JSON) and a note on what is missing."""
    lo, hi = scale
    content = response_text(response)
    tokens, bad = usable_tokens(response)
    s = score_distribution_from_logprobs(content, tokens, scale=(lo, hi))
    row = {"score": math.nan if s["score"] is None else s["score"]}
    for v in range(lo, hi + 1):
        row[f"p_{v}"] = s["distribution"][v] if s["distribution"] else math.nan
    reason = s["reason"]
    if bad:
        reason = (_malformed_note(bad, "score") if s["score"] is not None
                  else f"{reason}; {_malformed_note(bad, 'rationale')}")
    cells = _logprob_cells(tokens)
    row.update(ppl=cells["ppl"], n_tokens=len(tokens) if tokens else math.nan,
               rationale=content, token_logprobs=cells["token_logprobs"], note=reason)
    return row


@dataclass
class JudgeTables:
    """What :func:`assemble_judge_tables` returns.

    Attributes
    ----------
    pairs : DataFrame or None
        The pairwise table (answers input), or the input table with the judge's columns and
        ``judge_winner`` filled (comparisons input).
    scores : DataFrame or None
    problems : DataFrame
        One row per judgment that gave no verdict / score / probabilities (malformed
        log-probabilities included), whose request failed, or with a note from ``notes``:
        ``task``, ``question_id``, ``candidates``, ``note``, ``rationale``.
    counts : dict
    """

    pairs: pd.DataFrame | None
    scores: pd.DataFrame | None
    problems: pd.DataFrame
    counts: dict


class _Responses:
    """The judge's responses by request key, with the failures, the notes and the problems
    list that assembling collects."""

    def __init__(self, responses: Mapping[str, Mapping], failures: Mapping[str, str] | None,
                 notes: Mapping[str, str] | None) -> None:
        self.responses = responses
        self.failures = failures or {}
        self.notes = notes or {}
        self.problems: list[dict] = []

    def get(self, k: str | None) -> Mapping | None:
        return self.responses.get(k) if k is not None else None

    def failure(self, k: str | None) -> str:
        return f"request failed: {self.failures.get(k, 'no response')}"

    def with_note(self, note: str, k: str | None) -> str:
        return "; ".join(n for n in (note, self.notes.get(k, "") if k is not None else "") if n)

    def problem(self, task: str, question_id: Any, candidates: str, note: str,
                rationale: str) -> None:
        self.problems.append({"task": task, "question_id": question_id,
                              "candidates": candidates, "note": note, "rationale": rationale})


def _judged_pairs(plan: JudgePlan, got: _Responses) -> pd.DataFrame:
    """One row per pair task: each order's verdict, probabilities, perplexity, rationale,
    log-probabilities and note."""
    orders = (1, 2) if plan.both_orders else (1,)
    cols: dict[str, list] = {}
    for o in orders:
        parsed = []
        for t in plan.pair_tasks.itertuples(index=False):
            k = getattr(t, f"key_{o}")
            p = parse_pair(got.get(k))
            if not p:
                p = {"note": got.failure(k)}
            p["note"] = got.with_note(p.get("note", ""), k)
            if p["note"]:
                got.problem(f"pair order {o}", t.question_id,
                            f"{t.candidate_i} vs {t.candidate_j}", p["note"],
                            p.get("rationale", ""))
            parsed.append(p)
        cols[f"verdict_{o}"] = [p.get("verdict") for p in parsed]
        for letter in ("A", "B", "tie"):
            cols[f"p{o}_{letter}"] = [p.get(letter, math.nan) for p in parsed]
        for name in ("ppl", "n_tokens", "rationale", "token_logprobs", "note"):
            default = math.nan if name in ("ppl", "n_tokens") else ""
            cols[f"{name}_{o}"] = [p.get(name, default) for p in parsed]
    order_cols = [f"{c.format(o=o)}" if "{o}" in c else f"{c}_{o}"
                  for o in orders for c in _PAIR_OUT]
    return pd.DataFrame(cols)[order_cols]


def _answers_pairs(plan: JudgePlan, judged: pd.DataFrame, judge_name: str
                   ) -> tuple[pd.DataFrame, int]:
    """The pairwise table of an answers input: the pairs with a verdict in some order."""
    out = pd.concat([pd.DataFrame({"judge": judge_name}, index=judged.index),
                     plan.pair_tasks[["question_id", "category", "candidate_i",
                                      "candidate_j"]].reset_index(drop=True),
                     judged], axis=1)
    keep = out["verdict_1"].notna() | (out["verdict_2"].notna() if plan.both_orders else False)
    return out[keep].reset_index(drop=True), int(keep.sum())


def _comparisons_pairs(plan: JudgePlan, judged: pd.DataFrame, judge_name: str, *,
                       winner_column: str, winner_rule: str) -> tuple[pd.DataFrame, int]:
    """A comparisons input with the judge's columns and its verdict in ``winner_column``."""
    n = len(judged)
    v1 = judged["verdict_1"].to_numpy(dtype=object)
    v2 = (judged["verdict_2"].to_numpy(dtype=object)
          if plan.both_orders and winner_rule != "first" else np.full(n, None, dtype=object))
    has = pd.notna(v1) | pd.notna(v2)
    rel = np.full(n, None, dtype=object)
    if has.any():
        rel[has] = relation_baseline(v1[has], v2[has])
    if winner_rule == "bidirectional" and plan.both_orders:
        bi = relation_bidirectional(judged[["p1_A", "p1_B", "p1_tie"]].to_numpy(dtype=float),
                                    judged[["p2_A", "p2_B", "p2_tie"]].to_numpy(dtype=float))
        rel = np.where(pd.notna(bi), bi, rel)
    out = plan.frame.copy()
    if plan.generated_ids:
        out["question_id"] = plan.pair_tasks["question_id"].to_numpy()
    out["judge_model"] = judge_name
    out[winner_column] = [None if r is None else _WINNER[r] for r in rel]
    for c in judged.columns:
        out[c] = judged[c].to_numpy()
    return out, int(pd.notna(out[winner_column]).sum())


def _score_row(t: Any, got: _Responses, judge_name: str, scale: tuple[int, int]) -> dict:
    """One scored answer's row (a failed request leaves the score empty)."""
    base = {"judge": judge_name, "question_id": t.question_id, "category": t.category,
            "candidate": t.candidate}
    resp = got.get(t.key)
    if resp is None:
        got.problem("score", t.question_id, t.candidate, got.failure(t.key), "")
        return {**base, "score": math.nan, "note": "request failed"}
    row = {**base, **parse_score(resp, scale)}
    row["note"] = got.with_note(row["note"], t.key)
    if row["note"]:
        got.problem("score", t.question_id, t.candidate, row["note"], row["rationale"])
    return row


def _scores_table(plan: JudgePlan, got: _Responses, judge_name: str) -> tuple[pd.DataFrame,
                                                                              int, int]:
    """The single-score table (the answers with a score or a distribution), how many answers
    were scored and how many were kept."""
    lo, hi = plan.score_template.scale
    rows = [_score_row(t, got, judge_name, (lo, hi))
            for t in plan.score_tasks.itertuples(index=False)]
    dist_cols = [f"p_{v}" for v in range(lo, hi + 1)]
    frame = pd.DataFrame(rows, columns=["judge", "question_id", "category", "candidate",
                                        "score", *dist_cols, "ppl", "n_tokens", "rationale",
                                        "token_logprobs", "note"])
    keep = frame["score"].notna() | frame[dist_cols].notna().any(axis=1)
    return frame[keep].reset_index(drop=True), len(frame), int(keep.sum())


def assemble_judge_tables(plan: JudgePlan, responses: Mapping[str, Mapping], *, judge_name: str,
             failures: Mapping[str, str] | None = None, notes: Mapping[str, str] | None = None,
             winner_column: str = "judge_winner", winner_rule: str = "baseline") -> JudgeTables:
    """Tables from the judge's responses.

    Parameters
    ----------
    plan : JudgePlan
    responses : mapping {key: response dict}
        Usually the cache's responses; a missing key is a request that failed (see
        ``failures``) and leaves its cells empty.
    judge_name : str
        Written to the ``judge`` column (answers input) or ``judge_model`` (comparisons input).
    failures : mapping {key: message}, optional
    notes : mapping {key: message}, optional
        Something to tell about a response that is otherwise fine (e.g. that the API key was
        removed from it): added to its note and to the problems list.
    winner_column : str, default "judge_winner"
        Comparisons input: the column that receives the verdict (``model_a``, ``model_b``,
        ``tie``).
    winner_rule : {"baseline", "bidirectional", "first"}
        How both orders make one verdict: both must agree, else tie (``baseline``); the summed
        probabilities (``bidirectional``, falling back to ``baseline`` without them); or order 1
        only (``first``). With one order every rule is order 1's verdict.

    Returns
    -------
    JudgeTables
    """
    if winner_rule not in WINNER_RULES:
        raise PUAuditError(f"Unknown winner rule '{winner_rule}'. Use one of {', '.join(WINNER_RULES)}.")
    got = _Responses(responses, failures, notes)
    counts = {"pairs": 0, "pairs_kept": 0, "scores": 0, "scores_kept": 0}
    pairs_out = scores_out = None
    if plan.pair_template is not None:
        judged = _judged_pairs(plan, got)
        counts["pairs"] = len(judged)
        if plan.kind == "answers":
            pairs_out, counts["pairs_kept"] = _answers_pairs(plan, judged, judge_name)
        else:
            pairs_out, counts["pairs_kept"] = _comparisons_pairs(
                plan, judged, judge_name, winner_column=winner_column, winner_rule=winner_rule)
    if plan.score_template is not None:
        scores_out, counts["scores"], counts["scores_kept"] = _scores_table(plan, got, judge_name)
    problems_df = pd.DataFrame(got.problems, columns=["task", "question_id", "candidates", "note",
                                                      "rationale"])
    return JudgeTables(pairs=pairs_out, scores=scores_out, problems=problems_df, counts=counts)
