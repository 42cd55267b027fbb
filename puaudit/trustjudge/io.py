"""Reading TrustJudge inputs: pairwise-verdict tables and single-score tables.

Both readers accept anything :func:`puaudit.data.io.read_table` accepts, or a DataFrame, find
the columns by name (case-insensitive, common variants: :data:`PAIRWISE_ALIASES`,
:data:`SCORE_ALIASES`) and return canonical columns with typed values. The columns, the verdict
spellings, turns and the merging of repeated pairs are described in docs/trustjudge.md
("Input tables"); a verdict order is named by which candidate was shown first, and ``verdict_2`` has
**A = candidate_j**.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pandas as pd

from puaudit.data.cells import id_text, is_missing
from puaudit.data.io import read_table
from puaudit.data.vocabulary import match_columns, parse_verdict
from puaudit.errors import PUAuditError

__all__ = [
    "read_pairwise",
    "read_scores",
    "normalise_verdict",
    "PAIRWISE_ALIASES",
    "SCORE_ALIASES",
    "PROB_COLUMNS",
]

PROB_COLUMNS = ("p1_A", "p1_B", "p1_tie", "p2_A", "p2_B", "p2_tie")

PAIRWISE_ALIASES: dict[str, tuple[str, ...]] = {
    "question_id": ("question_id", "question", "qid", "prompt_id", "question id", "id"),
    "category": ("category", "question_type", "type", "task", "domain"),
    "judge": ("judge", "judge_model", "evaluator", "judge_name"),
    "candidate_i": ("candidate_i", "model_a", "candidate_a", "model_1", "cand_i", "candidate_1"),
    "candidate_j": ("candidate_j", "model_b", "candidate_b", "model_2", "cand_j", "candidate_2"),
    "verdict_1": ("verdict_1", "verdict", "winner", "judge_winner", "winner_1", "verdict_ij"),
    "verdict_2": ("verdict_2", "verdict_swapped", "winner_2", "verdict_ji"),
    "rationale_1": ("rationale_1", "explanation_1", "reasoning_1", "judgment_1", "rationale"),
    "rationale_2": ("rationale_2", "explanation_2", "reasoning_2", "judgment_2"),
    "turn": ("turn", "round", "turn_id"),
}

SCORE_ALIASES: dict[str, tuple[str, ...]] = {
    "question_id": PAIRWISE_ALIASES["question_id"],
    "category": PAIRWISE_ALIASES["category"],
    "judge": PAIRWISE_ALIASES["judge"],
    "candidate": ("candidate", "model", "model_name", "system", "response_model"),
    "score": ("score", "rating", "grade"),
    "distribution": ("score_distribution", "distribution", "score_probs", "probs"),
}

_PROB_RE = (
    re.compile(r"^p(?:rob(?:ability)?)?_?(?P<order>[12])_?(?P<letter>a|b|tie)$", re.I),
    re.compile(r"^p(?:rob(?:ability)?)?_?(?P<letter>a|b|tie)_?(?P<order>[12])$", re.I),
)
_PPL_RE = re.compile(r"^(?:ppl|perplexity)_?(?P<order>[12])$", re.I)
_LOGPROBS_RE = re.compile(r"^(?:token_)?logprobs_?(?P<order>[12])$", re.I)
_DIST_RE = re.compile(r"^p_?(?P<token>-?\d+(?:\.\d+)?)$", re.I)


def normalise_verdict(value: Any, *, column: str = "verdict", row: int | None = None) -> str | None:
    """Map a verdict cell to ``"A"``, ``"B"``, ``"tie"``, or ``None`` when the cell is empty.

    Raises
    ------
    PUAuditError
        The value is not a recognised verdict.
    """
    if is_missing(value):
        return None
    try:
        return parse_verdict(id_text(value))
    except KeyError:
        pass
    where = f" at row {row}" if row is not None else ""
    raise PUAuditError(
        f"Column '{column}'{where}: verdict '{value}' is not recognised. Use A (first-shown "
        "response wins), B (second-shown wins) or tie; model_a / model_b / 1 / 2 also work.",
        column=column, row=row)


def _load(source: Any, name: str | None) -> tuple[pd.DataFrame, str]:
    if isinstance(source, pd.DataFrame):
        if len(source) == 0:
            raise PUAuditError(f"{name or 'table'}: has no rows. Add at least one row.")
        return source.reset_index(drop=True), name or "table"
    df = read_table(source, name=name)
    label = name or (str(source) if isinstance(source, (str,)) else getattr(source, "name", "table"))
    return df, str(label)


def _find(columns: list[str], aliases: tuple[str, ...], mapping: dict[str, str] | None,
          canon: str, label: str) -> str | None:
    if mapping and canon in mapping:
        if mapping[canon] not in columns:
            raise PUAuditError(f"{label}: column '{mapping[canon]}' given for {canon} is not in the "
                               f"table (columns: {', '.join(columns)}).", column=mapping[canon])
        return mapping[canon]
    return match_columns(columns, {canon: aliases}).get(canon)


def _require(found: str | None, canon: str, aliases: tuple[str, ...], columns: list[str],
             label: str) -> str:
    if found is None:
        raise PUAuditError(
            f"{label}: no column for {canon}. Name it '{canon}' (or one of: "
            f"{', '.join(aliases[1:])}). Columns found: {', '.join(columns)}.", column=canon)
    return found


def _number(value: Any, *, column: str, row: int, label: str) -> float:
    if is_missing(value):
        return math.nan
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise PUAuditError(f"{label}: column '{column}' at row {row} holds '{value}', which is not "
                           "a number. Fix or empty that cell.", column=column, row=row) from None
    if not math.isfinite(x):
        raise PUAuditError(f"{label}: column '{column}' at row {row} is {value}; give a finite "
                           "number or leave the cell empty.", column=column, row=row)
    return x


def read_pairwise(source: Any, *, mapping: dict[str, str] | None = None,
                  name: str | None = None) -> pd.DataFrame:
    """Read a pairwise-verdict table into canonical columns.

    Parameters
    ----------
    source : path, bytes, file-like or DataFrame
        The table (CSV / TSV / Parquet / JSONL).
    mapping : dict, optional
        ``{canonical name: your column}`` for columns the auto-detection misses.
    name : str, optional
        Name used in messages.

    Returns
    -------
    pandas.DataFrame
        Columns ``row`` (1-based source row), ``judge``, ``question_id``, ``category``,
        ``candidate_i``, ``candidate_j``, ``verdict_1``, ``verdict_2`` (``"A"``/``"B"``/``"tie"``
        or ``None``), the six probability columns and ``ppl_1``, ``ppl_2`` (float, NaN when
        absent), ``rationale_1``, ``rationale_2`` (str). ``df.attrs["has_probabilities"]`` and
        ``df.attrs["has_perplexity"]`` say whether those columns were present;
        ``df.attrs["merged_repeats"]`` counts the rows merged into an earlier one (turns and
        repeated pairs: see the module's docstring).

    Raises
    ------
    PUAuditError
        Missing required columns, unknown verdicts, non-numeric or out-of-range probabilities,
        a candidate compared with itself, or a pair whose rows disagree about the same order.
    """
    raw, label = _load(source, name)
    columns = [str(c) for c in raw.columns]
    raw.columns = columns
    found = {canon: _find(columns, aliases, mapping, canon, label)
             for canon, aliases in PAIRWISE_ALIASES.items()}
    for canon in ("question_id", "candidate_i", "candidate_j", "verdict_1"):
        _require(found[canon], canon, PAIRWISE_ALIASES[canon], columns, label)

    prob_cols, ppl_cols, logprob_cols = _order_columns(columns, mapping)
    rows = np.arange(1, len(raw) + 1)
    out = pd.DataFrame({"row": rows})
    out["judge"] = ([id_text(v) or "judge" for v in raw[found["judge"]]] if found["judge"]
                    else "judge")
    out["category"] = ([id_text(v) or "all" for v in raw[found["category"]]]
                       if found["category"] else "all")
    for canon in ("question_id", "candidate_i", "candidate_j"):
        out[canon] = _filled_texts(raw, found[canon], label, what=f" ({canon})",
                                   hint=" Fill it in or delete the row.")
    if found["turn"]:
        out["question_id"] = _with_turns(out["question_id"], raw[found["turn"]])
    same = np.flatnonzero(out["candidate_i"].to_numpy() == out["candidate_j"].to_numpy())
    if len(same):
        r = int(same[0]) + 1
        raise PUAuditError(f"{label}: row {r} compares '{out['candidate_i'].iloc[r - 1]}' with "
                           "itself. Each row must compare two different candidates.", row=r)
    for canon in ("verdict_1", "verdict_2"):
        col = found[canon]
        if col is None:
            out[canon] = None
            continue
        out[canon] = [normalise_verdict(v, column=col, row=r) for v, r in zip(raw[col], rows)]
    for canon in ("rationale_1", "rationale_2"):
        col = found[canon]
        out[canon] = [id_text(v) for v in raw[col]] if col else ""

    for canon in PROB_COLUMNS:
        out[canon] = _checked(raw, prob_cols.get(canon), rows, label,
                              bad=lambda v: (v < 0) | (v > 1 + 1e-6), why=", outside [0, 1]. "
                              "Give probabilities, not logits or percentages.")
    from_logprobs = [c for c in ("ppl_1", "ppl_2") if ppl_cols.get(c) is None and c in logprob_cols]
    for canon in ("ppl_1", "ppl_2"):
        out[canon] = _perplexities(raw, canon, ppl_cols, logprob_cols, from_logprobs, rows, label)
    _check_verdicts(out, found, label)
    out = _merge_repeats(out, label)  # one row per judge, question and pair
    out.attrs["has_probabilities"] = bool(prob_cols)
    out.attrs["has_perplexity"] = bool(ppl_cols) or bool(from_logprobs)
    out.attrs["ppl_from_logprobs"] = from_logprobs
    out.attrs["name"] = label
    return out


def _order_columns(columns: list[str], mapping: dict[str, str] | None
                   ) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The columns of each order's probabilities, perplexity and token log-probabilities."""
    prob_cols: dict[str, str] = {}
    ppl_cols: dict[str, str] = {}
    logprob_cols: dict[str, str] = {}
    for col in columns:
        m = _LOGPROBS_RE.match(col.strip())
        if m:
            logprob_cols.setdefault(f"ppl_{m['order']}", col)
        for rx in _PROB_RE:
            m = rx.match(col.strip())
            if m:
                letter = {"a": "A", "b": "B", "tie": "tie"}[m["letter"].lower()]
                prob_cols.setdefault(f"p{m['order']}_{letter}", col)
                break
        m = _PPL_RE.match(col.strip())
        if m:
            ppl_cols.setdefault(f"ppl_{m['order']}", col)
    if mapping:
        prob_cols.update({k: v for k, v in mapping.items() if k in PROB_COLUMNS})
        ppl_cols.update({k: v for k, v in mapping.items() if k in ("ppl_1", "ppl_2")})
    return prob_cols, ppl_cols, logprob_cols


def _filled_texts(raw: pd.DataFrame, col: str, label: str, *, what: str = "",
                  hint: str = "") -> list[str]:
    """The column's cells as text; a clear error at the first empty one."""
    values = [id_text(v) for v in raw[col]]
    empty = next((i for i, v in enumerate(values) if v == ""), None)
    if empty is not None:
        raise PUAuditError(f"{label}: column '{col}'{what} is empty at row {empty + 1}.{hint}",
                           column=col, row=empty + 1)
    return values


def _numbers(raw: pd.DataFrame, col: str | None, rows: np.ndarray, label: str) -> np.ndarray:
    if col is None:
        return np.full(len(rows), np.nan)
    return np.array([_number(v, column=col, row=r, label=label) for v, r in zip(raw[col], rows)])


def _checked(raw: pd.DataFrame, col: str | None, rows: np.ndarray, label: str, *,
             bad: Any, why: str) -> np.ndarray:
    """The column's numbers; an error at the first where ``bad`` holds (``why`` says why)."""
    vals = _numbers(raw, col, rows, label)
    where = np.flatnonzero(bad(vals))
    if len(where):
        r = int(where[0]) + 1
        raise PUAuditError(f"{label}: column '{col}' at row {r} is {vals[where[0]]}{why}",
                           column=col, row=r)
    return vals


def _perplexities(raw: pd.DataFrame, canon: str, ppl_cols: dict, logprob_cols: dict,
                  from_logprobs: list, rows: np.ndarray, label: str) -> np.ndarray:
    """One order's perplexities: its column, or computed from its token log-probabilities."""
    if canon not in from_logprobs:
        return _checked(raw, ppl_cols.get(canon), rows, label, bad=lambda v: v <= 0,
                        why="; a perplexity must be positive.")
    col = logprob_cols[canon]
    return np.array([_ppl_cell(v, column=col, row=r, label=label)
                     for v, r in zip(raw[col], rows)], dtype=float)


def _with_turns(question_ids: pd.Series, turns: pd.Series) -> pd.Series:
    """``"<question> · turn <t>"`` where the table has several turns; the ids as they were
    where it has one (or the cell is empty)."""
    t = [id_text(v) for v in turns]
    if len({v for v in t if v}) < 2:
        return question_ids
    return pd.Series([f"{q} · turn {v}" if v else q for q, v in zip(question_ids, t)],
                     index=question_ids.index, dtype=object)


_ORDER_FIELDS = {1: ("verdict_1", "p1_A", "p1_B", "p1_tie", "ppl_1", "rationale_1"),
                 2: ("verdict_2", "p2_A", "p2_B", "p2_tie", "ppl_2", "rationale_2")}


def _merge_repeats(out: pd.DataFrame, label: str) -> pd.DataFrame:
    """One row per judge, question and pair: rows listing the same pair (either way round) are
    combined order by order (see :func:`read_pairwise`'s Notes); ``attrs["merged_repeats"]``
    counts the rows merged into an earlier one."""
    ci = out["candidate_i"].to_numpy(dtype=object)
    cj = out["candidate_j"].to_numpy(dtype=object)
    flip = np.array([b < a for a, b in zip(ci, cj)], dtype=bool)
    key = pd.DataFrame({"j": out["judge"], "q": out["question_id"],
                        "lo": np.where(flip, cj, ci), "hi": np.where(flip, ci, cj)})
    gid = key.groupby(list(key.columns), sort=False).ngroup().to_numpy()
    n_groups = int(gid.max()) + 1 if len(gid) else 0
    out.attrs["merged_repeats"] = len(out) - n_groups
    if n_groups == len(out):
        return out
    # each row's two orders, named by who is shown first: 0 = the lower name, 1 = the higher;
    # an order's letters, probabilities and perplexity are about that order's display, so a
    # whole order moves between rows unchanged
    parts = []
    for k, fields in _ORDER_FIELDS.items():
        part = out[list(fields)].copy()
        part.columns = ["v", "pA", "pB", "pT", "ppl", "rat"]
        part["gid"], part["shown"], part["i"] = gid, (flip if k == 1 else ~flip).astype(int), out.index
        parts.append(part[part["v"].notna()])
    long = pd.concat(parts)
    values = long.drop(columns="i").astype(str).drop_duplicates()
    clash = values.duplicated(["gid", "shown"], keep=False).to_numpy()
    if clash.any():
        g = int(values["gid"].to_numpy()[clash][0])
        i = long.loc[long["gid"] == g, "i"].sort_values().to_numpy()[1]
        r = int(out["row"].iloc[i])
        raise PUAuditError(
            f"{label}: row {r} repeats the pair {key['lo'].iloc[i]} / {key['hi'].iloc[i]} for judge "
            f"'{out['judge'].iloc[i]}' and question '{out['question_id'].iloc[i]}' with a different "
            "judgment in the same answer order. List each pair once per judge and question (rows "
            "repeating a judgment, or giving the other order, are merged).", row=r)
    first_of = long.drop_duplicates(["gid", "shown"]).set_index(["gid", "shown"])["i"]
    _, firsts = np.unique(gid, return_index=True)
    merged = out.iloc[np.sort(firsts)].copy()
    m = merged.index.to_numpy()
    for k, fields in _ORDER_FIELDS.items():
        shown = flip[m].astype(int) if k == 1 else (~flip[m]).astype(int)
        src = np.array([first_of.get((g, s_), -1) for g, s_ in zip(gid[m].tolist(), shown.tolist())])
        take = (src >= 0) & (src != m)
        if not take.any():
            continue
        # the source row gave this display as its own order 1 (same flip) or its order 2
        own_first = flip[src[take]].astype(int) == shown[take]
        for f, f1, f2 in zip(fields, _ORDER_FIELDS[1], _ORDER_FIELDS[2]):
            col = merged[f].to_numpy(dtype=object).copy()
            col[take] = np.where(own_first, out[f1].to_numpy(dtype=object)[src[take]],
                                 out[f2].to_numpy(dtype=object)[src[take]])
            merged[f] = pd.Series(col, index=merged.index, dtype=out[f].dtype)
    merged = merged.reset_index(drop=True)
    merged.attrs = dict(out.attrs)
    return merged


def _check_verdicts(out: pd.DataFrame, found: dict, label: str) -> None:
    """Every row has a verdict in at least one order."""
    no_verdict = np.flatnonzero(out["verdict_1"].isna().to_numpy() & out["verdict_2"].isna().to_numpy())
    if len(no_verdict):
        r = int(no_verdict[0]) + 1
        raise PUAuditError(f"{label}: row {r} has no verdict in either order. Give verdict_1 (and "
                           "verdict_2 if the judge also saw the swapped order), or delete the row.",
                           column=found["verdict_1"], row=r)


def _ppl_cell(value: Any, *, column: str, row: int, label: str) -> float:
    """Perplexity from a cell of token log-probabilities (NaN when empty)."""
    from puaudit.trustjudge.likelihood import parse_token_logprobs, perplexity

    try:
        return perplexity(parse_token_logprobs(value))
    except PUAuditError as exc:
        raise PUAuditError(f"{label}: column '{column}' at row {row}: {exc}", column=column,
                           row=row) from None


def read_scores(source: Any, *, mapping: dict[str, str] | None = None,
                name: str | None = None) -> pd.DataFrame:
    """Read a single-score table.

    Returns
    -------
    pandas.DataFrame
        Columns ``row``, ``judge`` (``None`` when the table has no judge column: the scores then
        apply to every judge), ``question_id``, ``candidate``, ``score`` (float, NaN if absent),
        ``distribution`` (dict ``{token: probability}`` or ``None``).

    Raises
    ------
    PUAuditError
        Missing columns, non-numeric scores, negative probabilities, unreadable JSON, a candidate
        scored twice, or a row with neither a score nor a distribution.
    """
    raw, label = _load(source, name)
    columns = [str(c) for c in raw.columns]
    raw.columns = columns
    found = {canon: _find(columns, aliases, mapping, canon, label)
             for canon, aliases in SCORE_ALIASES.items()}
    for canon in ("question_id", "candidate"):
        _require(found[canon], canon, SCORE_ALIASES[canon], columns, label)
    dist_cols = [(float(m["token"]), c) for c in columns if (m := _DIST_RE.match(c.strip()))]
    if found["score"] is None and found["distribution"] is None and not dist_cols:
        raise PUAuditError(f"{label}: no score column. Give a 'score' column, or the judge's "
                           "probabilities per score token as columns p_1 … p_K, or a JSON column "
                           f"'score_distribution'. Columns found: {', '.join(columns)}.",
                           column="score")
    n = len(raw)
    rows = np.arange(1, n + 1)
    out = pd.DataFrame({"row": rows})
    out["judge"] = [id_text(v) or None for v in raw[found["judge"]]] if found["judge"] else None
    for canon in ("question_id", "candidate"):
        out[canon] = _filled_texts(raw, found[canon], label)
    scol = found["score"]
    out["score"] = ([_number(v, column=scol, row=r, label=label) for v, r in zip(raw[scol], rows)]
                    if scol else np.nan)
    out["distribution"] = _distributions(raw, dist_cols, found["distribution"], rows, label)
    missing = np.flatnonzero(out["score"].isna().to_numpy() & out["distribution"].isna().to_numpy())
    if len(missing):
        r = int(missing[0]) + 1
        raise PUAuditError(f"{label}: row {r} has neither a score nor a score distribution. Fill "
                           "it in or delete the row.", row=r)
    key = out[["question_id", "candidate"]].assign(judge=out["judge"].fillna(""))
    dup = key.duplicated().to_numpy()
    if dup.any():
        r = int(np.flatnonzero(dup)[0]) + 1
        raise PUAuditError(f"{label}: row {r} scores candidate '{out['candidate'].iloc[r - 1]}' "
                           f"on question '{out['question_id'].iloc[r - 1]}' a second time. Keep one "
                           "score per judge, question and candidate.", row=r)
    out.attrs["has_distribution"] = bool(dist_cols or found["distribution"])
    out.attrs["name"] = label
    return out


def _parse_json_dist(value: Any, *, column: str, row: int, label: str) -> dict[float, float] | None:
    if is_missing(value):
        return None
    obj = value
    if isinstance(value, str):
        try:
            obj = json.loads(value)
        except json.JSONDecodeError as exc:
            raise PUAuditError(f"{label}: column '{column}' at row {row} is not valid JSON "
                               f"({exc.msg}). Write it like {{\"1\": 0.2, \"2\": 0.8}}.",
                               column=column, row=row) from None
    if not isinstance(obj, dict) or not obj:
        raise PUAuditError(f"{label}: column '{column}' at row {row} must be a JSON object mapping "
                           "score tokens to probabilities.", column=column, row=row)
    dist: dict[float, float] = {}
    for tok, p in obj.items():
        try:
            dist[float(tok)] = float(p)
        except (TypeError, ValueError):
            raise PUAuditError(f"{label}: column '{column}' at row {row}: '{tok}': '{p}' is not "
                               "a numeric score token and probability.", column=column, row=row) from None
    return dist


def _distributions(raw: pd.DataFrame, dist_cols: list[tuple[float, str]], json_name: str | None,
                   rows: np.ndarray, label: str) -> list[dict[float, float] | None]:
    """Each row's score distribution ``{token: probability}`` (None when it has none), from the
    ``p_<token>`` columns or a JSON column; negative or massless distributions refused."""
    tokens = [tok for tok, _ in dist_cols]
    probs = np.column_stack([[_number(v, column=c, row=int(r), label=label) for v, r in zip(raw[c], rows)]
                             for _, c in dist_cols]) if dist_cols else None
    json_col = raw[json_name].tolist() if json_name else None
    dists: list[dict[float, float] | None] = []
    for i, r in enumerate(rows):
        dist: dict[float, float] | None = None
        if probs is not None:
            # all cells empty = no distribution for this row; a single empty cell = probability 0
            if not np.isnan(probs[i]).all():
                dist = dict(zip(tokens, np.nan_to_num(probs[i]).tolist()))
        elif json_col is not None:
            dist = _parse_json_dist(json_col[i], column=json_name, row=int(r), label=label)
        if dist is not None:
            neg = [tok for tok, p in dist.items() if p < 0]
            if neg:
                raise PUAuditError(f"{label}: row {r} gives a negative probability for score "
                                   f"{neg[0]:g}. Probabilities must be ≥ 0.", row=int(r))
            if sum(dist.values()) <= 0:
                raise PUAuditError(f"{label}: row {r} has a score distribution with no mass "
                                   "(all probabilities 0). Give at least one positive probability "
                                   "or leave the row's cells empty.", row=int(r))
        dists.append(dist)
    return dists
