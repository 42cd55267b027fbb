"""FastChat's own pairwise judgment file (``gen_judgment.py --mode pairwise-all`` or
``pairwise-baseline``: ``data/mt_bench/model_judgment/<judge>_pair.jsonl``).

One record per (question, turn, model pair) judged in both answer orders: ``g1_winner`` (game
1, ``model_1`` shown first) and ``g2_winner`` (game 2, ``model_2`` first), each naming a model,
``tie``, or ``error`` for a reply without a verdict. The verdict is the release's rule
(:func:`.mtbench.two_order_verdict`); both games are kept as ``verdict_1`` / ``verdict_2``, the
both-orders signal of the audit's verdict evidence. See docs/data_formats.md ("MT-Bench").
"""

from __future__ import annotations

import os

import pandas as pd

import puaudit.data.formats.mtbench as mtbench
from puaudit.data.formats.mtbench import Judged, parse_turn, two_order_verdict
from puaudit.data.formats.records import locate, require_fields
from puaudit.errors import PUAuditError

__all__ = ["NAME", "FIELDS", "looks_like", "judged_from_fastchat", "to_table"]

NAME = "FastChat pairwise judgments"
FIELDS = ("question_id", "turn", "model_1", "model_2", "g1_winner", "g2_winner")
_GAME = {"model_1": "model_1", "model_2": "model_2", "tie": "tie", "error": None}


def looks_like(columns) -> bool:
    cols = set(columns)
    return bool({"g1_winner", "g2_winner"} & cols) or {"model_1", "model_2", "question_id",
                                                      "turn"} <= cols


def _game(value, *, name: str, field: str, where: str) -> str | None:
    word = str(value).strip().lower()
    if word not in _GAME:
        raise PUAuditError(f"{name}: {where}: '{field}' is {str(value)[:60]!r}; FastChat writes "
                           "model_1, model_2, tie or error.", column=field)
    return _GAME[word]


def judged_from_fastchat(frame: pd.DataFrame, *, name: str, path: str | os.PathLike | None
                         ) -> list[Judged]:
    """Judge verdicts of a FastChat pairwise judgment file (one per record, file order)."""
    require_fields(frame, FIELDS, name=name, fmt=NAME, path=path)
    out = []
    for i in range(len(frame)):
        where = locate(path, i + 1)
        g1 = _game(frame["g1_winner"].iat[i], name=name, field="g1_winner", where=where)
        g2 = _game(frame["g2_winner"].iat[i], name=name, field="g2_winner", where=where)
        # order 1 shows model_1 first (A = model_1); order 2 model_2 first (A = model_2)
        v1 = None if g1 is None else {"model_1": "A", "model_2": "B", "tie": "tie"}[g1]
        v2 = None if g2 is None else {"model_2": "A", "model_1": "B", "tie": "tie"}[g2]
        raw = two_order_verdict(v1, v2)
        known = FIELDS + ("judge",)
        source = frame["judge"].iat[i] if "judge" in frame.columns else None
        out.append(Judged(qid=frame["question_id"].iat[i],
                          turn=parse_turn(frame["turn"].iat[i], name=name, where=where),
                          model_a=str(frame["model_1"].iat[i]),
                          model_b=str(frame["model_2"].iat[i]),
                          raw=raw, v1=v1, v2=v2, both_orders=True, verdict_source=source,
                          extra={**{c: frame[c].iat[i] for c in ("model_1", "model_2",
                                                                 "g1_winner", "g2_winner")},
                                 **{c: frame[c].iat[i] for c in frame.columns
                                    if c not in known}}))
    return out


def to_table(frame: pd.DataFrame, *, name: str, path, human, answers, read) -> pd.DataFrame:
    """The comparison table of a FastChat judgment file (see :func:`mtbench.to_table`)."""
    judged = judged_from_fastchat(frame, name=name, path=path)
    return mtbench.to_table(frame, name=name, path=path, human=human, answers=answers, read=read,
                            judged=judged, fmt=NAME)
