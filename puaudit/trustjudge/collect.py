"""From an input table to judge requests, and from the judge's responses to TrustJudge tables.

Two input shapes (column names case-insensitive, common variants recognised):

answers (one row per question and candidate)
    ``question_id`` (qid, prompt_id, id; generated from the question text when absent),
    ``question`` (prompt, instruction, query, input), ``candidate`` (model, model_name, system),
    ``answer`` (response, output, completion, text), optional ``category`` (question_type, type,
    task, domain). Every pair of a question's candidates is compared.
comparisons (a PUAudit table: one row per comparison)
    ``prompt``, ``response_a``, ``response_b`` and the other columns :func:`puaudit.data.schema
    .guess_columns` recognises (``model_a``, ``model_b``, ``question_id``, ``category``, ...).
    Each row is judged as it stands (order 1 shows response_a first) and the judge's verdict is
    written to its ``judge_winner`` column, so the table goes straight to ``puaudit audit``.

:func:`plan_judging` builds the requests; :func:`assemble` turns the cached responses into the
pairwise table (``verdict_1``, ``verdict_2``, ``p1_A`` … ``p2_tie``, ``ppl_1``, ``ppl_2``,
``token_logprobs_1``, ``token_logprobs_2``, ``rationale_1``, ``rationale_2``; see
:func:`puaudit.trustjudge.io.read_pairwise`) and the single-score table (``score``,
``p_<low>`` … ``p_<high>``, ``ppl``, ``token_logprobs``; see
:func:`puaudit.trustjudge.io.read_scores`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError
from puaudit.trustjudge.likelihood import (perplexity, score_distribution_from_logprobs,
                                           verdict_probabilities)
from puaudit.trustjudge.prompts import PromptTemplate
from puaudit.trustjudge.relations import relation_baseline, relation_bidirectional
from puaudit.trustjudge.runner import response_text, response_usage

__all__ = ["JudgePlan", "JudgeTables", "plan_judging", "assemble", "usable_tokens",
           "ANSWER_ALIASES", "WINNER_RULES", "detect_input_kind"]

ANSWER_ALIASES: dict[str, tuple[str, ...]] = {
    "question_id": ("question_id", "qid", "prompt_id", "question_idx", "id"),
    "question": ("question", "prompt", "instruction", "query", "input", "user_prompt",
                 "turn_prompt"),
    "candidate": ("candidate", "model", "model_name", "system", "response_model"),
    "answer": ("answer", "response", "output", "completion", "text"),
    "category": ("category", "question_type", "type", "task", "domain"),
}
WINNER_RULES = ("baseline", "bidirectional", "first")
_PAIR_OUT = ("verdict", "p{o}_A", "p{o}_B", "p{o}_tie", "ppl", "n_tokens", "rationale",
             "token_logprobs", "note")
_WINNER = {">": "model_a", "<": "model_b", "=": "tie"}


@dataclass
class JudgePlan:
    """What to ask the judge.

    Attributes
    ----------
    kind : {"answers", "comparisons"}
    frame : DataFrame
        The input table.
    pair_tasks : DataFrame
        One row per pair: ``question_id``, ``category``, ``candidate_i``, ``candidate_j``,
        ``key_1`` and ``key_2`` (request keys; ``key_2`` None without both orders).
    score_tasks : DataFrame
        One row per scored answer: ``question_id``, ``category``, ``candidate``, ``key``.
    requests : dict {key: messages}
        Distinct requests, in the order they are first needed.
    meta : dict {key: dict}
        What each request is (stored with the cached response).
    """

    kind: str
    frame: pd.DataFrame
    pair_tasks: pd.DataFrame
    score_tasks: pd.DataFrame
    requests: dict
    meta: dict
    both_orders: bool
    pair_template: PromptTemplate | None
    score_template: PromptTemplate | None
    columns: dict = field(default_factory=dict)
    generated_ids: bool = False


@dataclass
class JudgeTables:
    """What :func:`assemble` returns.

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


def _text(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).strip()


def _find(frame: pd.DataFrame, role: str, columns: Mapping[str, str] | None) -> str | None:
    if columns and columns.get(role):
        if columns[role] not in frame.columns:
            raise PUAuditError(f"Column '{columns[role]}' given for {role} is not in the table.")
        return columns[role]
    lowered = {str(c).strip().lower(): c for c in frame.columns}
    return next((lowered[a] for a in ANSWER_ALIASES[role] if a in lowered), None)


def detect_input_kind(frame: pd.DataFrame) -> str:
    """``"comparisons"`` when the table has response_a and response_b columns, ``"answers"``
    when it has candidate and answer columns; else :class:`PUAuditError`."""
    from puaudit.data.schema import guess_columns

    guessed = guess_columns(frame)
    if "response_a" in guessed and "response_b" in guessed:
        return "comparisons"
    if _find(frame, "candidate", None) and _find(frame, "answer", None):
        return "answers"
    raise PUAuditError(
        "Cannot tell what to judge. Give either one row per question and candidate (columns "
        "question_id, question, candidate, answer; optional category) or one row per comparison "
        "(columns prompt, response_a, response_b; optional model_a, model_b, question_id). "
        f"Columns found: {', '.join(map(str, frame.columns))}.")


def _qid(text: str) -> str:
    return "q" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def plan_judging(frame: pd.DataFrame, *, key: Callable[[list[dict]], str],
                 pair_template: PromptTemplate | None, score_template: PromptTemplate | None,
                 both_orders: bool = False, columns: Mapping[str, str] | None = None,
                 name: str = "input") -> JudgePlan:
    """The requests that judge ``frame``.

    Parameters
    ----------
    frame : DataFrame
        Answers or comparisons (see the module docstring).
    key : callable
        Request key of a message list (:meth:`puaudit.trustjudge.runner.JudgeClient.key`).
    pair_template, score_template : PromptTemplate or None
        ``None`` skips pairwise verdicts / single scores.
    both_orders : bool, default False
        Also ask each pair with the second candidate shown first.
    columns : mapping role -> column, optional
        Explicit columns for the answers shape (``question_id``, ``question``, ``candidate``,
        ``answer``, ``category``).

    Raises
    ------
    PUAuditError
        Unrecognised shape, empty texts, a candidate listed twice for a question.
    """
    if pair_template is None and score_template is None:
        raise PUAuditError("Nothing to ask: request pairwise verdicts, scores, or both.")
    if len(frame) == 0:
        raise PUAuditError(f"{name}: has no rows.")
    kind = detect_input_kind(frame) if not columns else "answers"
    requests: dict[str, list[dict]] = {}
    meta: dict[str, dict] = {}

    def add(messages: list[dict], info: dict) -> str:
        k = key(messages)
        if k not in requests:
            requests[k] = messages
            meta[k] = info
        return k

    if kind == "answers":
        answers, used, generated = _answers(frame, columns, name)
    else:
        answers, used, generated = _comparison_answers(frame, name, need_models=score_template is not None)

    pair_rows = []
    if pair_template is not None:
        if kind == "answers":
            pairs = []
            for qid, grp in answers.groupby("question_id", sort=False):
                cands = sorted(grp["candidate"])
                text = dict(zip(grp["candidate"], grp["answer"]))
                q = grp["question"].iloc[0]
                cat = grp["category"].iloc[0]
                for a in range(len(cands)):
                    for b in range(a + 1, len(cands)):
                        pairs.append((qid, cat, q, cands[a], cands[b], text[cands[a]], text[cands[b]]))
        else:
            pairs = list(zip(used["question_id"], used["category"], used["question"],
                             used["candidate_i"], used["candidate_j"], used["answer_i"],
                             used["answer_j"]))
        for qid, cat, q, ci, cj, ai, aj in pairs:
            info = {"task": "pair", "question_id": qid, "candidate_i": ci, "candidate_j": cj}
            k1 = add(pair_template.messages(question=q, answer_a=ai, answer_b=aj), {**info, "order": 1})
            k2 = (add(pair_template.messages(question=q, answer_a=aj, answer_b=ai), {**info, "order": 2})
                  if both_orders else None)
            pair_rows.append({"question_id": qid, "category": cat, "candidate_i": ci,
                              "candidate_j": cj, "key_1": k1, "key_2": k2})
    score_rows = []
    if score_template is not None:
        for r in answers.itertuples(index=False):
            k = add(score_template.messages(question=r.question, answer=r.answer),
                    {"task": "score", "question_id": r.question_id, "candidate": r.candidate})
            score_rows.append({"question_id": r.question_id, "category": r.category,
                               "candidate": r.candidate, "key": k})
    return JudgePlan(kind=kind, frame=frame, pair_tasks=pd.DataFrame(
                         pair_rows, columns=["question_id", "category", "candidate_i",
                                             "candidate_j", "key_1", "key_2"]),
                     score_tasks=pd.DataFrame(score_rows, columns=["question_id", "category",
                                                                   "candidate", "key"]),
                     requests=requests, meta=meta, both_orders=both_orders,
                     pair_template=pair_template, score_template=score_template,
                     columns=used.attrs.get("columns", {}) if kind == "comparisons" else used,
                     generated_ids=generated)


def _answers(frame: pd.DataFrame, columns, name: str) -> tuple[pd.DataFrame, dict, bool]:
    found = {role: _find(frame, role, columns) for role in ANSWER_ALIASES}
    for role in ("question", "candidate", "answer"):
        if found[role] is None:
            raise PUAuditError(f"{name}: no column for the {role}. Name it '{role}' (or one of "
                               f"{', '.join(ANSWER_ALIASES[role][1:])}).", column=role)
    n = len(frame)
    question = [_text(v) for v in frame[found["question"]]]
    candidate = [_text(v) for v in frame[found["candidate"]]]
    answer = [_text(v) for v in frame[found["answer"]]]
    for label, values in (("question", question), ("candidate", candidate), ("answer", answer)):
        empty = next((i for i, v in enumerate(values) if not v), None)
        if empty is not None:
            raise PUAuditError(f"{name}: the {label} (column '{found[label]}') is empty at row "
                               f"{empty + 1}. Fill it in or delete the row.",
                               column=found[label], row=empty + 1)
    generated = found["question_id"] is None
    qid = ([_text(v) for v in frame[found["question_id"]]] if not generated
           else [_qid(q) for q in question])
    empty = next((i for i, v in enumerate(qid) if not v), None)
    if empty is not None:
        raise PUAuditError(f"{name}: the question id is empty at row {empty + 1}.", row=empty + 1)
    cat = ([_text(v) or "all" for v in frame[found["category"]]] if found["category"]
           else ["all"] * n)
    out = pd.DataFrame({"question_id": qid, "question": question, "candidate": candidate,
                        "answer": answer, "category": cat})
    dup = out.duplicated(["question_id", "candidate"]).to_numpy()
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        raise PUAuditError(f"{name}: row {r + 1} gives a second answer of '{candidate[r]}' to "
                           f"question '{qid[r]}'. Keep one answer per question and candidate.",
                           row=r + 1)
    texts = out.groupby("question_id")["question"].nunique()
    if (texts > 1).any():
        q = texts.index[texts > 1][0]
        raise PUAuditError(f"{name}: question '{q}' appears with different question texts. Give "
                           "each question its own id.", column=found["question_id"])
    return out, {r: c for r, c in found.items() if c}, generated


def _comparison_answers(frame: pd.DataFrame, name: str, *, need_models: bool):
    from puaudit.data.schema import _as_text, guess_columns

    cols = guess_columns(frame)
    for role in ("prompt", "response_a", "response_b"):
        if role not in cols:
            raise PUAuditError(f"{name}: no column for the {role.replace('_', ' ')}.", column=role)
    resp_a, user_a = _as_text(frame[cols["response_a"]].tolist(), column=cols["response_a"],
                              role="response A")
    resp_b, _ = _as_text(frame[cols["response_b"]].tolist(), column=cols["response_b"],
                         role="response B")
    prompt, _ = _as_text(frame[cols["prompt"]].tolist(), column=cols["prompt"], role="prompt")
    prompt = [p if p else u for p, u in zip(prompt, user_a)]
    for label, values in (("prompt", prompt), ("response A", resp_a), ("response B", resp_b)):
        empty = next((i for i, v in enumerate(values) if not str(v).strip()), None)
        if empty is not None:
            raise PUAuditError(f"{name}: the {label} is empty at row {empty + 1}. Fill it in or "
                               "delete the row.", row=empty + 1)
    generated = "question_id" not in cols
    qid = ([_text(v) for v in frame[cols["question_id"]]] if not generated
           else [_qid(p) for p in prompt])
    cat = ([_text(v) or "all" for v in frame[cols["question_type"]]] if "question_type" in cols
           else ["all"] * len(frame))
    has_models = "model_a" in cols and "model_b" in cols
    if need_models and not has_models:
        raise PUAuditError(f"{name}: single scores of a comparison table need the model names "
                           "(columns model_a and model_b), to know whose answer each score is.")
    ci = [_text(v) for v in frame[cols["model_a"]]] if has_models else ["A"] * len(frame)
    cj = [_text(v) for v in frame[cols["model_b"]]] if has_models else ["B"] * len(frame)
    used = pd.DataFrame({"question_id": qid, "category": cat, "question": prompt,
                         "candidate_i": ci, "candidate_j": cj, "answer_i": list(resp_a),
                         "answer_j": list(resp_b)})
    used.attrs["columns"] = dict(cols)
    # the answers being scored: each (question, model) once
    both = pd.concat([
        used[["question_id", "question", "candidate_i", "answer_i", "category"]].set_axis(
            ["question_id", "question", "candidate", "answer", "category"], axis=1),
        used[["question_id", "question", "candidate_j", "answer_j", "category"]].set_axis(
            ["question_id", "question", "candidate", "answer", "category"], axis=1)],
        ignore_index=True).drop_duplicates(["question_id", "question", "candidate", "answer"])
    if need_models:
        dup = both.duplicated(["question_id", "candidate"])
        if dup.any():
            r = both[dup].iloc[0]
            raise PUAuditError(f"{name}: question '{r['question_id']}' has two different answers "
                               f"by '{r['candidate']}' (several turns?). Give a question_id that "
                               "tells them apart, or judge without --scores.")
    answers = both.reset_index(drop=True)
    return answers, used, generated


# --- assembling ---------------------------------------------------------------------------------
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


def _token_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return f"is {_show(item)}, not an object"
    if not isinstance(item.get("token"), str):
        return f"has token {_show(item.get('token'))}, not a string"
    why = _logprob_problem(item.get("logprob"))
    if why:
        return f"logprob {why}"
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
        if not isinstance(alt, dict):
            return f"top_logprobs[{j}] is {_show(alt)}, not an object"
        if not isinstance(alt.get("token"), str):
            return f"top_logprobs[{j}] has token {_show(alt.get('token'))}, not a string"
        why = _logprob_problem(alt.get("logprob"))
        if why:
            return f"top_logprobs[{j}].logprob {why}"
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


def _parse_pair(response: Mapping | None) -> dict:
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
            "rationale": content, "token_logprobs": json.dumps(lps) if lps else "",
            "note": "; ".join(notes)}


def assemble(plan: JudgePlan, responses: Mapping[str, Mapping], *, judge_name: str,
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
    failures = failures or {}
    notes = notes or {}
    problems = []

    def with_note(note: str, k: str | None) -> str:
        return "; ".join(n for n in (note, notes.get(k, "") if k is not None else "") if n)

    def get(k):
        return responses.get(k) if k is not None else None

    pairs_out = None
    counts = {"pairs": 0, "pairs_kept": 0, "scores": 0, "scores_kept": 0}
    if plan.pair_template is not None:
        orders = (1, 2) if plan.both_orders else (1,)
        cols: dict[str, list] = {}
        for o in orders:
            parsed = []
            for t in plan.pair_tasks.itertuples(index=False):
                k = getattr(t, f"key_{o}")
                p = _parse_pair(get(k))
                if not p:
                    p = {"note": f"request failed: {failures.get(k, 'no response')}"}
                p["note"] = with_note(p.get("note", ""), k)
                if p["note"]:
                    problems.append({"task": f"pair order {o}", "question_id": t.question_id,
                                     "candidates": f"{t.candidate_i} vs {t.candidate_j}",
                                     "note": p["note"], "rationale": p.get("rationale", "")})
                parsed.append(p)
            cols[f"verdict_{o}"] = [p.get("verdict") for p in parsed]
            for letter in ("A", "B", "tie"):
                cols[f"p{o}_{letter}"] = [p.get(letter, math.nan) for p in parsed]
            for name in ("ppl", "n_tokens", "rationale", "token_logprobs", "note"):
                default = math.nan if name in ("ppl", "n_tokens") else ""
                cols[f"{name}_{o}"] = [p.get(name, default) for p in parsed]
        order_cols = [f"{c.format(o=o)}" if "{o}" in c else f"{c}_{o}"
                      for o in orders for c in _PAIR_OUT]
        judged = pd.DataFrame(cols)[order_cols]
        counts["pairs"] = len(judged)
        if plan.kind == "answers":
            out = pd.concat([pd.DataFrame({"judge": judge_name}, index=judged.index),
                             plan.pair_tasks[["question_id", "category", "candidate_i",
                                              "candidate_j"]].reset_index(drop=True),
                             judged], axis=1)
            keep = out["verdict_1"].notna() | (out["verdict_2"].notna() if plan.both_orders else False)
            pairs_out = out[keep].reset_index(drop=True)
            counts["pairs_kept"] = int(keep.sum())
        else:
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
            pairs_out = out
            counts["pairs_kept"] = int(pd.notna(out[winner_column]).sum())

    scores_out = None
    if plan.score_template is not None:
        lo, hi = plan.score_template.scale
        rows = []
        for t in plan.score_tasks.itertuples(index=False):
            resp = get(t.key)
            base = {"judge": judge_name, "question_id": t.question_id, "category": t.category,
                    "candidate": t.candidate}
            if resp is None:
                problems.append({"task": "score", "question_id": t.question_id,
                                 "candidates": t.candidate, "rationale": "",
                                 "note": f"request failed: {failures.get(t.key, 'no response')}"})
                rows.append({**base, "score": math.nan, "note": "request failed"})
                continue
            content = response_text(resp)
            tokens, bad = usable_tokens(resp)
            s = score_distribution_from_logprobs(content, tokens, scale=(lo, hi))
            lps = [float(x["logprob"]) for x in tokens] if tokens else None
            row = {**base, "score": math.nan if s["score"] is None else s["score"]}
            for v in range(lo, hi + 1):
                row[f"p_{v}"] = s["distribution"][v] if s["distribution"] else math.nan
            reason = s["reason"]
            if bad:
                reason = (_malformed_note(bad, "score") if s["score"] is not None
                          else f"{reason}; {_malformed_note(bad, 'rationale')}")
            reason = with_note(reason, t.key)
            row.update(ppl=perplexity(lps) if lps else math.nan,
                       n_tokens=len(tokens) if tokens else math.nan, rationale=content,
                       token_logprobs=json.dumps(lps) if lps else "", note=reason)
            if reason:
                problems.append({"task": "score", "question_id": t.question_id,
                                 "candidates": t.candidate, "note": reason,
                                 "rationale": content})
            rows.append(row)
        dist_cols = [f"p_{v}" for v in range(lo, hi + 1)]
        frame = pd.DataFrame(rows, columns=["judge", "question_id", "category", "candidate",
                                            "score", *dist_cols, "ppl", "n_tokens", "rationale",
                                            "token_logprobs", "note"])
        counts["scores"] = len(frame)
        keep = frame["score"].notna() | frame[dist_cols].notna().any(axis=1)
        scores_out = frame[keep].reset_index(drop=True)
        counts["scores_kept"] = int(keep.sum())
    problems_df = pd.DataFrame(problems, columns=["task", "question_id", "candidates", "note",
                                                  "rationale"])
    return JudgeTables(pairs=pairs_out, scores=scores_out, problems=problems_df, counts=counts)
