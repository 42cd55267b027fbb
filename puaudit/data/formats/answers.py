"""Questions and model answers of a benchmark folder (MT-Bench / arena-hard-auto layout).

The folder holds ``question.jsonl`` (``question_id``, ``category``, ``turns``) and
``model_answer/<model>.jsonl`` (``question_id``, ``model_id``, ``choices[0].turns``). A turn is
a string (FastChat's MT-Bench) or an object with ``content`` (arena-hard-auto). Judgment files
name questions and models only; this supplies the texts they judged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from puaudit.data.cells import is_missing
from puaudit.data.formats.records import locate
from puaudit.errors import PUAuditError

__all__ = ["Answers", "load_answers"]

_LAYOUT = ("a benchmark folder with question.jsonl and model_answer/<model>.jsonl (FastChat's "
           "fastchat/llm_judge/data/mt_bench, or arena-hard-auto's data/<bench>)")


def _turn_text(turn) -> str:
    if isinstance(turn, dict):
        turn = turn.get("content")
    return "" if turn is None else str(turn)


def _turns(value, *, where: str, field: str) -> list[str]:
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value:
        raise PUAuditError(f"{where}: '{field}' must be a non-empty list of turns.")
    return [_turn_text(t) for t in value]


class Answers:
    """Prompts, categories and answers by question id (as text) and model.

    Parameters
    ----------
    folder : path
        Shown in messages.
    questions : dict
        ``question_id -> {"category": str, "turns": [str, ...]}``.
    answers : dict
        ``(model, question_id) -> [str, ...]`` (one text per turn).
    """

    def __init__(self, folder: str | os.PathLike, questions: dict, answers: dict):
        self.folder, self.questions, self.answers = Path(folder), questions, answers

    def question(self, qid) -> dict:
        q = self.questions.get(str(qid))
        if q is None:
            raise PUAuditError(f"Question {qid} is not in {self.folder / 'question.jsonl'}. Pass "
                               "--answers the benchmark folder the judgments were made on.")
        return q

    def prompt(self, qid, turn: int) -> str:
        turns = self.question(qid)["turns"]
        if not 1 <= turn <= len(turns):
            raise PUAuditError(f"Question {qid} has {len(turns)} turn(s) in "
                               f"{self.folder / 'question.jsonl'}; the judgment asks turn {turn}.")
        return turns[turn - 1]

    def answer(self, model: str, qid, turn: int) -> str:
        turns = self.answers.get((str(model), str(qid)))
        if turns is None:
            have = sorted({m for m, _ in self.answers})
            raise PUAuditError(
                f"No answer of model '{model}' to question {qid} in "
                f"{self.folder / 'model_answer'} (models there: {', '.join(have[:12]) or 'none'})."
                f" Add model_answer/{model}.jsonl or pass the folder the judgments were made on.")
        if not 1 <= turn <= len(turns):
            raise PUAuditError(f"Model '{model}' answered {len(turns)} turn(s) of question {qid} "
                               f"in {self.folder / 'model_answer'}; the judgment asks turn {turn}.")
        return turns[turn - 1]


def load_answers(folder: str | os.PathLike, *, read: Callable[[Path], pd.DataFrame]) -> Answers:
    """Read ``folder`` (see the module docstring) with ``read`` (a table reader that applies the
    run's size limits)."""
    root = Path(folder)
    if not root.is_dir():
        raise PUAuditError(f"--answers {root}: not a folder; give {_LAYOUT}.")
    qfile, afolder = root / "question.jsonl", root / "model_answer"
    if not qfile.is_file() or not afolder.is_dir():
        raise PUAuditError(f"--answers {root}: no question.jsonl or model_answer/ there; give "
                           f"{_LAYOUT}.")
    qs = read(qfile)
    for field in ("question_id", "turns"):
        if field not in qs.columns:
            raise PUAuditError(f"{qfile}: {locate(qfile, 1)} has no '{field}' field; each "
                               "question needs question_id and turns.", column=field)
    questions, lines = {}, {}
    cats = qs["category"].tolist() if "category" in qs.columns else [None] * len(qs)
    for i, (qid, turns, cat) in enumerate(zip(qs["question_id"], qs["turns"], cats), start=1):
        where = f"{qfile}: {locate(qfile, i)}"
        if is_missing(qid):
            raise PUAuditError(f"{where} has no 'question_id' field.", column="question_id")
        if str(qid) in questions:
            raise PUAuditError(f"{qfile}: {locate(qfile, lines[str(qid)])} and {locate(qfile, i)} "
                               f"both hold question {qid}; keep one (which texts a judgment "
                               "names would otherwise depend on the order).", column="question_id")
        lines[str(qid)] = i
        questions[str(qid)] = {"category": "" if is_missing(cat) else str(cat),
                               "turns": _turns(turns, where=where, field="turns")}
    answers, seen = {}, {}
    files = sorted(afolder.glob("*.jsonl"))
    if not files:
        raise PUAuditError(f"--answers {root}: model_answer/ holds no .jsonl file; give {_LAYOUT}.")
    for path in files:
        frame = read(path)
        if "question_id" not in frame.columns or "choices" not in frame.columns:
            missing = "question_id" if "question_id" not in frame.columns else "choices"
            raise PUAuditError(f"{path}: {locate(path, 1)} has no '{missing}' field; each answer "
                               "needs question_id and choices.", column=missing)
        models = (frame["model_id"].tolist() if "model_id" in frame.columns
                  else [path.stem] * len(frame))
        for i, (qid, model, choices) in enumerate(zip(frame["question_id"], models,
                                                       frame["choices"]), start=1):
            where = f"{path}: {locate(path, i)}"
            if hasattr(choices, "tolist"):
                choices = choices.tolist()
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                raise PUAuditError(f"{where}: 'choices' must be a list of objects with 'turns'.",
                                   column="choices")
            model = path.stem if is_missing(model) else str(model)
            if (model, str(qid)) in seen:
                raise PUAuditError(f"{seen[(model, str(qid))]} and {where} both hold the answer "
                                   f"of model '{model}' to question {qid}; keep one (which answer "
                                   "is audited would otherwise depend on the order).",
                                   column="question_id")
            seen[(model, str(qid))] = where
            answers[(model, str(qid))] = _turns(choices[0].get("turns"), where=where,
                                                 field="choices[0].turns")
    return Answers(root, questions, answers)
