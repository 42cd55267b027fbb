"""arena-hard-auto judgments (``data/<bench>/model_judgment/<judge>/<model>.jsonl``).

One record per (question, model) with two ``games``, each scored with a label such as
``A>>B`` or ``B>A``: game 1 shows the baseline's answer first (A = baseline, B = ``model``),
game 2 the other way round. The baseline is the judge configuration's ``baseline_model``,
which the file does not record (v0.1's ``gpt-4-0314`` is the default). Each record is one row,
its verdict by the release rule (:func:`.mtbench.two_order_verdict`); docs/data_formats.md
("arena-hard-auto judgments") lists its columns.
"""

from __future__ import annotations

import os

import pandas as pd

import puaudit.data.formats.mtbench as mtbench
from puaudit.data.cells import is_missing
from puaudit.data.formats.mtbench import Judged, two_order_verdict
from puaudit.data.formats.records import locate, require_fields
from puaudit.errors import PUAuditError

__all__ = ["NAME", "FIELDS", "BASELINE", "looks_like", "parse_score", "judged_from_arena_hard",
           "to_table"]

NAME = "arena-hard-auto judgments"
FIELDS = ("question_id", "model", "games")
BASELINE = "gpt-4-0314"


def looks_like(columns) -> bool:
    cols = set(columns)
    return "games" in cols and bool({"question_id", "model", "judge"} & cols)


def parse_score(label) -> tuple[str, int] | None:
    """``(winner letter, strength)`` of a label in its game's frame; None for no label.

    ``A>>B`` is ``("A", 2)``, ``B>A`` ``("B", 1)``, ``A=B`` ``("tie", 0)``; ``A<B`` and
    ``B<<A`` read the same way round. Raises ``KeyError`` for anything else.
    """
    if is_missing(label):
        return None
    s = str(label).strip().replace(" ", "")
    if len(s) < 3 or s[0] not in "AB" or s[-1] not in "AB" or s[0] == s[-1]:
        raise KeyError(label)
    op = s[1:-1]
    if op == "=":
        return ("tie", 0)
    if op not in (">", ">>", "<", "<<"):
        raise KeyError(label)
    first, second = s[0], s[-1]
    return (first if op[0] == ">" else second, len(op))


def _games(value, *, name: str, where: str) -> list:
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    ok = (isinstance(value, list) and len(value) == 2
          and all(g is None or isinstance(g, dict) for g in value))
    if not ok:
        raise PUAuditError(f"{name}: {where}: 'games' must hold two games (baseline first, then "
                           "swapped), each an object with a 'score'.", column="games")
    return value


def judged_from_arena_hard(frame: pd.DataFrame, *, name: str, path: str | os.PathLike | None,
                           baseline: str = BASELINE) -> list[Judged]:
    """Judge verdicts of an arena-hard-auto judgment file (one per record, file order)."""
    require_fields(frame, FIELDS, name=name, fmt=NAME, path=path)
    out = []
    for i in range(len(frame)):
        where = locate(path, i + 1)
        games = _games(frame["games"].iat[i], name=name, where=where)
        scores, parsed = [], []
        for k, game in enumerate(games, start=1):
            label = None if game is None else game.get("score")
            try:
                parsed.append(parse_score(label))
            except KeyError:
                raise PUAuditError(f"{name}: {where}: game {k} has score {str(label)[:40]!r}; "
                                   "arena-hard-auto writes labels such as A>>B, A>B, A=B, B>A, "
                                   "B>>A.", column="games") from None
            scores.append(label)
        v1 = None if parsed[0] is None else parsed[0][0]
        v2 = None if parsed[1] is None else parsed[1][0]
        raw = two_order_verdict(v1, v2)
        model = frame["model"].iat[i]
        extra = {"score_1": scores[0], "score_2": scores[1],
                 "strength_1": None if parsed[0] is None else parsed[0][1],
                 "strength_2": None if parsed[1] is None else parsed[1][1]}
        extra.update({c: frame[c].iat[i] for c in frame.columns if c not in ("question_id",
                                                                             "judge")})
        out.append(Judged(qid=frame["question_id"].iat[i], turn=1, model_a=baseline,
                          model_b=str(model), raw=raw, v1=v1, v2=v2, both_orders=True,
                          verdict_source=frame["judge"].iat[i] if "judge" in frame.columns
                          else None, extra=extra))
    return out


def to_table(frame: pd.DataFrame, *, name: str, path, human, answers, read) -> pd.DataFrame:
    """The comparison table of an arena-hard-auto judgment file (see :func:`mtbench.to_table`;
    ``--answers`` is arena-hard-auto's ``data/<bench>`` folder)."""
    judged = judged_from_arena_hard(frame, name=name, path=path)
    return mtbench.to_table(frame, name=name, path=path, human=human, answers=answers, read=read,
                            judged=judged, fmt=NAME, folder="arena-hard-auto's data/<bench>, "
                            "e.g. data/arena-hard-v0.1")
