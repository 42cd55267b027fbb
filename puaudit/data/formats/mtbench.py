"""MT-Bench pairwise judgments (the human-judgments release) and the table they make.

The release (``lmsys/mt_bench_human_judgments``) has one record per verdict: ``question_id``,
``turn``, ``model_a``, ``model_b``, ``winner`` and ``judge`` (``gpt4_pair``, or a person); its
judge file and its human file share that layout, and the texts come from the benchmark folder
(:mod:`.answers`). The table has one row per human vote, in the human file's order and
orientation (a judge verdict recorded the other way round is turned to the vote's models);
docs/data_formats.md ("MT-Bench") lists its columns.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pandas as pd

from puaudit.data.cells import is_missing
from puaudit.data.formats.answers import Answers
from puaudit.data.formats.records import locate, require_fields
from puaudit.data.jsonsafe import json_cell
from puaudit.errors import PUAuditError

__all__ = ["NAME", "FIELDS", "looks_like", "Judged", "two_order_verdict", "parse_turn",
           "judged_from_release",
           "votes_from_release", "build_frame", "to_table"]

NAME = "MT-Bench judgments (human-judgments release)"
FIELDS = ("question_id", "turn", "model_a", "model_b", "winner", "judge")
_WINNERS = {"model_a": "model_a", "model_b": "model_b", "tie": "tie",
            "tie (inconsistent)": "tie (inconsistent)", "tie (bothbad)": "tie (bothbad)"}
_SWAP = {"model_a": "model_b", "model_b": "model_a", "A": "B", "B": "A"}


def looks_like(columns) -> bool:
    """The release's key fields without any text: an MT-Bench verdict file (perhaps lacking a
    field), not a comparison table."""
    return {"question_id", "model_a", "model_b", "winner"} <= set(columns)


@dataclasses.dataclass
class Judged:
    """One judge verdict on (question, turn, model pair).

    ``raw`` is the verdict word in this record's orientation (``model_a`` / ``model_b`` /
    ``tie`` / ``tie (inconsistent)``, ``""`` for none); ``v1`` / ``v2`` the verdict of each
    answer order when both are known (``"A"``/``"B"``/``"tie"``/``None``; order 1 shows
    ``model_a`` first, order 2 ``model_b`` first, each in its own A/B frame).
    """

    qid: object
    turn: int
    model_a: str
    model_b: str
    raw: str
    v1: str | None = None
    v2: str | None = None
    both_orders: bool = False
    verdict_source: object = None
    extra: dict = dataclasses.field(default_factory=dict)

    def key(self) -> tuple:
        return (str(self.qid), int(self.turn), frozenset((self.model_a, self.model_b)))

    def flipped(self) -> "Judged":
        """The same verdict with ``model_a`` and ``model_b`` exchanged (so are the orders)."""
        return dataclasses.replace(self, model_a=self.model_b, model_b=self.model_a,
                                   raw=_SWAP.get(self.raw, self.raw), v1=self.v2, v2=self.v1)


def two_order_verdict(v1: str | None, v2: str | None) -> str:
    """The release's verdict word from a judge's two answer orders.

    ``v1``: order 1 (``model_a`` shown first, A = ``model_a``); ``v2``: order 2 (``model_b``
    shown first, A = ``model_b``); each ``"A"`` / ``"B"`` / ``"tie"``, or None for no verdict.
    Both orders agree: ``model_a`` / ``model_b`` / ``tie``; they disagree: ``tie
    (inconsistent)``; either has no verdict: ``""``. FastChat's pairwise judgments and
    arena-hard-auto's games are both read by this rule.
    """
    if v1 is None or v2 is None:
        return ""
    if v1 == _SWAP.get(v2, v2):  # order 2 in order 1's frame
        return {"A": "model_a", "B": "model_b", "tie": "tie"}[v1]
    return "tie (inconsistent)"


def parse_turn(value, *, name: str, where: str) -> int:
    try:
        turn = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400 reads as infinity
        turn = 0
    if turn < 1 or str(value).strip() not in (str(turn), f"{turn}.0"):
        shown = value.item() if isinstance(value, np.generic) else value  # inf, not np.float64(inf)
        raise PUAuditError(f"{name}: {where}: 'turn' is {shown!r}; it must be 1 or 2.",
                           column="turn")
    return turn


def _winner(value, *, name: str, where: str) -> str:
    word = _WINNERS.get(str(value).strip().lower())
    if word is None:
        raise PUAuditError(f"{name}: {where}: 'winner' is {str(value)[:60]!r}; the release uses "
                           "model_a, model_b, tie or tie (inconsistent).", column="winner")
    return word


def _extras(frame: pd.DataFrame, known: tuple[str, ...], i: int, prefix: str = "") -> dict:
    return {f"{prefix}{c}": frame[c].iat[i] for c in frame.columns if c not in known}


def judged_from_release(frame: pd.DataFrame, *, name: str, path: str | os.PathLike | None
                        ) -> list[Judged]:
    """Judge verdicts of a release-format file (one per record, file order)."""
    require_fields(frame, FIELDS, name=name, fmt=NAME, path=path)
    out = []
    for i in range(len(frame)):
        where = locate(path, i + 1)
        out.append(Judged(qid=frame["question_id"].iat[i],
                          turn=parse_turn(frame["turn"].iat[i], name=name, where=where),
                          model_a=str(frame["model_a"].iat[i]),
                          model_b=str(frame["model_b"].iat[i]),
                          raw=_winner(frame["winner"].iat[i], name=name, where=where),
                          verdict_source=frame["judge"].iat[i], extra=_extras(frame, FIELDS, i)))
    return out


def votes_from_release(frame: pd.DataFrame, *, name: str, path: str | os.PathLike | None
                       ) -> list[dict]:
    """Human votes of a release-format file: question, turn, models, winner, voter, extras."""
    fmt = "MT-Bench human judgments (the release's human file)"
    require_fields(frame, FIELDS, name=name, fmt=fmt, path=path)
    out = []
    for i in range(len(frame)):
        where = locate(path, i + 1)
        out.append({"qid": frame["question_id"].iat[i],
                    "turn": parse_turn(frame["turn"].iat[i], name=name, where=where),
                    "model_a": str(frame["model_a"].iat[i]),
                    "model_b": str(frame["model_b"].iat[i]),
                    "winner": _winner(frame["winner"].iat[i], name=name, where=where),
                    "voter": frame["judge"].iat[i],
                    "extra": _extras(frame, FIELDS, i, prefix="human_")})
    return out


def _verdict(raw: str) -> str:
    return "tie" if raw.startswith("tie") else raw


def _texts(ans: Answers, qid, turn: int, model_a: str, model_b: str) -> dict:
    q = ans.question(qid)
    row = {"category": q["category"], "prompt": ans.prompt(qid, turn),
           "response_a": ans.answer(model_a, qid, turn),
           "response_b": ans.answer(model_b, qid, turn)}
    if turn > 1:  # a turn-2 verdict judges the answer in the light of the first exchange
        row.update(prev_prompt=ans.prompt(qid, turn - 1),
                   prev_response_a=ans.answer(model_a, qid, turn - 1),
                   prev_response_b=ans.answer(model_b, qid, turn - 1))
    else:
        row.update(prev_prompt="", prev_response_a="", prev_response_b="")
    return row


def build_frame(judged: list[Judged], votes: list[dict] | None, answers: Answers, *,
                name: str) -> pd.DataFrame:
    """The comparison table of ``judged`` verdicts, one row per human vote when ``votes`` are
    given (else one per verdict); see the module docstring for its columns."""
    index: dict[tuple, int] = {}
    for i, j in enumerate(judged):
        k = j.key()
        if k in index:
            raise PUAuditError(f"{name}: records {index[k] + 1} and {i + 1} both judge question "
                               f"{j.qid}, turn {j.turn}, {j.model_a} vs {j.model_b}; keep one.")
        index[k] = i
    pairs: list[tuple[dict | None, Judged | None]] = []
    if votes is None:
        pairs = [(None, j) for j in judged]
    else:
        for v in votes:
            k = (str(v["qid"]), v["turn"], frozenset((v["model_a"], v["model_b"])))
            j = judged[index[k]] if k in index else None
            if j is not None and j.model_a != v["model_a"]:
                j = j.flipped()
            pairs.append((v, j))
    both = any(j is not None and j.both_orders for j in judged)
    rows = []
    for v, j in pairs:
        src = v if v is not None else {"qid": j.qid, "turn": j.turn, "model_a": j.model_a,
                                       "model_b": j.model_b}
        texts = _texts(answers, src["qid"], src["turn"], src["model_a"], src["model_b"])
        row = {"question_id": src["qid"], "category": texts["category"], "turn": src["turn"],
               "model_a": src["model_a"], "model_b": src["model_b"], "prompt": texts["prompt"],
               "response_a": texts["response_a"], "response_b": texts["response_b"]}
        if v is not None:
            row["human_winner"] = _verdict(v["winner"])
        row["judge_winner"] = "" if j is None else _verdict(j.raw)
        if v is not None:
            row["human_judge"] = "" if is_missing(v["voter"]) else str(v["voter"])
        row["judge_winner_raw"] = "" if j is None else j.raw
        row.update(prev_prompt=texts["prev_prompt"], prev_response_a=texts["prev_response_a"],
                   prev_response_b=texts["prev_response_b"])
        row["verdict_source"] = None if j is None else json_cell(j.verdict_source)
        if both:
            row["verdict_1"] = "" if j is None or j.v1 is None else j.v1
            row["verdict_2"] = "" if j is None or j.v2 is None else j.v2
        if j is not None:
            row.update({k: json_cell(x) for k, x in j.extra.items() if k not in row})
        if v is not None:
            row.update({k: json_cell(x) for k, x in v["extra"].items() if k not in row})
        rows.append(row)
    return pd.DataFrame(rows)


#: Where each judgment format's benchmark folder (``--answers``) is found.
ANSWERS_FOLDER = "FastChat's fastchat/llm_judge/data/mt_bench"


def to_table(frame: pd.DataFrame, *, name: str, path, human, answers, read,
             judged: list[Judged] | None = None, fmt: str = NAME,
             folder: str = ANSWERS_FOLDER) -> pd.DataFrame:
    """The comparison table of an MT-Bench judge file ``frame`` (release format unless
    ``judged`` is given), with the human votes of file ``human`` and the texts of folder
    ``answers``, both read with ``read``; ``fmt`` names the judgment format detected and
    ``folder`` where its benchmark folder is, for the message when ``answers`` is missing."""
    from pathlib import Path

    from puaudit.data.formats.answers import load_answers

    if judged is None:
        judged = judged_from_release(frame, name=name, path=path)
    if answers is None:
        raise PUAuditError(f"{name}: holds {fmt}, which name questions and models but carry no "
                           "texts. Pass --answers DIR, the benchmark folder with question.jsonl "
                           f"and model_answer/ ({folder}).")
    texts = load_answers(answers, read=read)
    votes = None
    if human is not None:
        hname = Path(human).name
        votes = votes_from_release(read(human), name=f"--human {hname}", path=human)
    return build_frame(judged, votes, texts, name=name)
