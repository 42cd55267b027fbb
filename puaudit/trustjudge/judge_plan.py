"""The requests that judge an input table (:func:`plan_judging`).

Two input shapes (docs/judge.md; column variants in :data:`ANSWER_ALIASES`): *answers*, one row
per question and candidate, every pair of a question's candidates compared; *comparisons*, a
PUAudit table judged row by row (order 1 shows response_a first), the verdict written to its
``judge_winner`` column so that the table goes straight to ``puaudit audit``.
"""

from __future__ import annotations

import hashlib
from itertools import combinations
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from puaudit.data.cells import id_text
from puaudit.data.vocabulary import match_columns
from puaudit.errors import PUAuditError
from puaudit.trustjudge.prompts import PromptTemplate

__all__ = ["JudgePlan", "plan_judging", "detect_input_kind", "ANSWER_ALIASES"]

ANSWER_ALIASES: dict[str, tuple[str, ...]] = {
    "question_id": ("question_id", "qid", "prompt_id", "question_idx", "id"),
    "question": ("question", "prompt", "instruction", "query", "input", "user_prompt",
                 "turn_prompt"),
    "candidate": ("candidate", "model", "model_name", "system", "response_model"),
    "answer": ("answer", "response", "output", "completion", "text"),
    "category": ("category", "question_type", "type", "task", "domain"),
}


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


def answer_columns(frame: pd.DataFrame, columns: Mapping[str, str] | None) -> dict:
    """Role -> column of the answers shape (None where absent): the explicit ``columns``, then
    the first alias of :data:`ANSWER_ALIASES` present (:func:`puaudit.data.vocabulary
    .match_columns`, as every other table reader finds its columns)."""
    explicit = {r: c for r, c in (columns or {}).items() if r in ANSWER_ALIASES and c}
    for role, col in explicit.items():
        if col not in frame.columns:
            raise PUAuditError(f"Column '{col}' given for {role} is not in the table (columns: "
                               f"{', '.join(map(str, frame.columns))}).", column=col)
    found = match_columns(frame.columns, ANSWER_ALIASES, explicit)
    return {role: found.get(role) for role in ANSWER_ALIASES}


def detect_input_kind(frame: pd.DataFrame) -> str:
    """``"comparisons"`` when the table has response_a and response_b columns, ``"answers"``
    when it has candidate and answer columns; else :class:`PUAuditError`."""
    from puaudit.data.schema import guess_columns

    guessed = guess_columns(frame)
    if "response_a" in guessed and "response_b" in guessed:
        return "comparisons"
    found = answer_columns(frame, None)
    if found["candidate"] and found["answer"]:
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
        for qid, cat, q, ci, cj, ai, aj in _pairs_to_judge(kind, answers, used):
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


def _pairs_to_judge(kind: str, answers: pd.DataFrame, used) -> list[tuple]:
    """``(question_id, category, question, candidate_i, candidate_j, answer_i, answer_j)`` per
    pair: every pair of a question's candidates (answers), or each row as it stands."""
    if kind != "answers":
        return list(zip(used["question_id"], used["category"], used["question"],
                        used["candidate_i"], used["candidate_j"], used["answer_i"],
                        used["answer_j"]))
    pairs = []
    for qid, grp in answers.groupby("question_id", sort=False):
        cands = sorted(grp["candidate"])
        text = dict(zip(grp["candidate"], grp["answer"]))
        q = grp["question"].iloc[0]
        cat = grp["category"].iloc[0]
        pairs += [(qid, cat, q, a, b, text[a], text[b]) for a, b in combinations(cands, 2)]
    return pairs


def _answers(frame: pd.DataFrame, columns, name: str) -> tuple[pd.DataFrame, dict, bool]:
    found = answer_columns(frame, columns)
    for role in ("question", "candidate", "answer"):
        if found[role] is None:
            raise PUAuditError(f"{name}: no column for the {role}. Name it '{role}' (or one of "
                               f"{', '.join(ANSWER_ALIASES[role][1:])}).", column=role)
    n = len(frame)
    question = [id_text(v) for v in frame[found["question"]]]
    candidate = [id_text(v) for v in frame[found["candidate"]]]
    answer = [id_text(v) for v in frame[found["answer"]]]
    for label, values in (("question", question), ("candidate", candidate), ("answer", answer)):
        empty = next((i for i, v in enumerate(values) if not v), None)
        if empty is not None:
            raise PUAuditError(f"{name}: the {label} (column '{found[label]}') is empty at row "
                               f"{empty + 1}. Fill it in or delete the row.",
                               column=found[label], row=empty + 1)
    generated = found["question_id"] is None
    qid = ([id_text(v) for v in frame[found["question_id"]]] if not generated
           else [_qid(q) for q in question])
    empty = next((i for i, v in enumerate(qid) if not v), None)
    if empty is not None:
        raise PUAuditError(f"{name}: the question id is empty at row {empty + 1}.", row=empty + 1)
    cat = ([id_text(v) or "all" for v in frame[found["category"]]] if found["category"]
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
    from puaudit.data.schema import guess_columns, text_cells

    cols = guess_columns(frame)
    for role in ("prompt", "response_a", "response_b"):
        if role not in cols:
            raise PUAuditError(f"{name}: no column for the {role.replace('_', ' ')}.", column=role)
    resp_a, user_a = text_cells(frame[cols["response_a"]].tolist(), column=cols["response_a"],
                                role="response A")
    resp_b, _ = text_cells(frame[cols["response_b"]].tolist(), column=cols["response_b"],
                           role="response B")
    prompt, _ = text_cells(frame[cols["prompt"]].tolist(), column=cols["prompt"], role="prompt")
    prompt = [p if p else u for p, u in zip(prompt, user_a)]
    for label, values in (("prompt", prompt), ("response A", resp_a), ("response B", resp_b)):
        empty = next((i for i, v in enumerate(values) if not str(v).strip()), None)
        if empty is not None:
            raise PUAuditError(f"{name}: the {label} is empty at row {empty + 1}. Fill it in or "
                               "delete the row.", row=empty + 1)
    generated = "question_id" not in cols
    qid = ([id_text(v) for v in frame[cols["question_id"]]] if not generated
           else [_qid(p) for p in prompt])
    cat = ([id_text(v) or "all" for v in frame[cols["question_type"]]] if "question_type" in cols
           else ["all"] * len(frame))
    has_models = "model_a" in cols and "model_b" in cols
    if need_models and not has_models:
        raise PUAuditError(f"{name}: single scores of a comparison table need the model names "
                           "(columns model_a and model_b), to know whose answer each score is.")
    ci = [id_text(v) for v in frame[cols["model_a"]]] if has_models else ["A"] * len(frame)
    cj = [id_text(v) for v in frame[cols["model_b"]]] if has_models else ["B"] * len(frame)
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
