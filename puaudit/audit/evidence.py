"""Verdict evidence: what the table says about each judge verdict, without human labels
(docs/method.md, "Verdict evidence and the evidence scorer": every signal and its formula).

Each signal (:data:`EVIDENCE_SIGNALS`: position, length ratio, markdown structure, the judge's
own Bradley–Terry strengths overall and per type, both-order consistency, its probabilities and
perplexity, other judges' agreement) is one number per row, *oriented by the judge's verdict*
(the chosen answer against the rejected one), computed from the judge's verdicts and the texts
alone, so no human label enters. A signal is computed only when its columns exist; a malformed
column is left out with one message naming it, and the audit goes on. When the table's judge is
a rule (:func:`puaudit.data.schema.apply_judge_rule`), the file's own judge columns are not read.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from puaudit.data.schema import ComparisonTable, normalize_verdicts
from puaudit.errors import PUAuditError

__all__ = ["EVIDENCE_SIGNALS", "VerdictEvidence", "verdict_evidence", "evidence_signal_names"]

#: Every signal family this stage knows, in the order they are reported.
EVIDENCE_SIGNALS = ("position_first", "log_length_ratio", "structure_gap", "bt_gap",
                    "bt_favourite", "bt_upset", "bt_gap_type", "order_consistent", "p_chosen", "p_entropy",
                    "log_perplexity", "agrees")

_PPL_RE = re.compile(r"^(?:ppl|perplexity)(?:_?(?P<order>[12]))?$", re.I)
#: another judge's verdict column names a judge; never a person or a known truth
_JUDGE_WORD = "judge"
_NOT_JUDGE_WORDS = ("human", "true", "truth", "gold", "annotator", "worker", "rater")
_STRUCTURE_RE = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|```|\|)", re.M)


@dataclass
class VerdictEvidence:
    """Per-row signals about the judge's verdicts (NaN where a row has no strict verdict).

    Attributes
    ----------
    values : dict
        Signal name -> (n,) float array, in :data:`EVIDENCE_SIGNALS` order (``agrees_<judge>``
        once per other judge).
    sources : dict
        Signal name -> the input columns it was computed from.
    messages : list of str
        One line per signal left out because its columns are malformed.
    """

    values: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    messages: list = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(self.values)

    def matrix(self, rows: np.ndarray | None = None) -> np.ndarray:
        """``(len(rows), n_signals)`` float array (all rows when ``rows`` is None)."""
        if not self.values:
            n = 0 if rows is None else len(rows)
            return np.zeros((n, 0))
        cols = [v if rows is None else v[rows] for v in self.values.values()]
        return np.column_stack(cols).astype(np.float64)


def evidence_signal_names(spec) -> tuple[str, ...] | None:
    """Normalise the ``evidence`` option: ``"auto"`` -> None (every signal the table allows),
    ``"none"`` -> ``()``, a list -> the signal families named (validated)."""
    if spec is None or spec == "auto":
        return None
    if spec == "none":
        return ()
    names = (spec,) if isinstance(spec, str) else tuple(spec)
    bad = [s for s in names if s not in EVIDENCE_SIGNALS]
    if bad:
        raise PUAuditError(f"Unknown evidence signal(s) {bad}: choose 'auto', 'none' or among "
                           f"{list(EVIDENCE_SIGNALS)}.")
    return tuple(names)


def _strict_sign(verdicts: np.ndarray) -> np.ndarray:
    v = np.asarray(verdicts, dtype=object)
    return np.where(v == "A", 1.0, np.where(v == "B", -1.0, np.nan))


def _lengths(texts) -> np.ndarray:
    return np.fromiter((len(t) for t in texts), dtype=np.float64, count=len(texts))


def _structure(texts) -> np.ndarray:
    return np.fromiter((len(_STRUCTURE_RE.findall(t)) if t else 0 for t in texts),
                       dtype=np.float64, count=len(texts))


def _oriented(a: np.ndarray, b: np.ndarray, sign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(chosen, rejected) values by the judge's sign (+1: A chosen); NaN where no verdict."""
    chosen = np.where(sign > 0, a, b)
    rejected = np.where(sign > 0, b, a)
    bad = np.isnan(sign)
    return np.where(bad, np.nan, chosen), np.where(bad, np.nan, rejected)


def _model_codes(table: ComparisonTable) -> tuple[np.ndarray, np.ndarray, int] | None:
    cols = table.columns
    # a table streamed from Parquet keeps an empty frame: no model columns to read
    if not {cols.get("model_a"), cols.get("model_b")} <= set(table.frame.columns):
        return None
    ma = table.frame[cols["model_a"]].astype(str).to_numpy()
    mb = table.frame[cols["model_b"]].astype(str).to_numpy()
    names, codes = np.unique(np.concatenate([ma, mb]), return_inverse=True)
    return codes[:len(ma)], codes[len(ma):], len(names)


def _judge_strengths(judge: np.ndarray, ia: np.ndarray, ib: np.ndarray, k: int
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """Bradley–Terry strengths of model_a and model_b of every row, from the judge's verdicts
    (a tie is half a win each; prior 0.1 keeps a model that always wins finite)."""
    from puaudit.rankings.bradley_terry import bradley_terry

    j = np.asarray(judge, dtype=object)
    win = np.where(j == "A", 1.0, np.where(j == "B", 0.0, np.where(j == "tie", 0.5, np.nan)))
    ok = ~np.isnan(win) & (ia != ib)
    if ok.sum() < 2 or k < 2:
        return None
    # one unit per ordered model pair: the fit then costs distinct pairs, not rows
    key = ia[ok].astype(np.int64) * k + ib[ok]
    uniq, inv = np.unique(key, return_inverse=True)
    wins = np.bincount(inv, weights=win[ok])
    n = np.bincount(inv).astype(float)
    theta, _ = bradley_terry(uniq // k, uniq % k, wins, n, n_models=k, prior=0.1)
    return theta[ia], theta[ib]


def _numeric(frame: pd.DataFrame, col: str, *, lo: float, hi: float, open_lo: bool = False
             ) -> np.ndarray | str:
    """The column as floats (NaN where empty), or a message saying what is wrong with it."""
    raw = frame[col]
    empty = raw.isna() | raw.astype(str).str.strip().eq("")
    vals = pd.to_numeric(raw.where(~empty), errors="coerce").to_numpy(dtype=np.float64)
    bad = (~empty.to_numpy()) & ~np.isfinite(vals)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        return (f"Column '{col}' row {r + 1}: {str(raw.iloc[r])[:40]!r} is not a number "
                f"({int(bad.sum())} such rows)")
    ok = ~np.isnan(vals)
    out_of_range = ok & ((vals <= lo if open_lo else vals < lo) | (vals > hi))
    if out_of_range.any():
        r = int(np.flatnonzero(out_of_range)[0])
        where = f"({lo}, {hi}]" if open_lo else f"[{lo}, {hi}]"
        return (f"Column '{col}' row {r + 1}: {vals[r]:g} is outside {where} "
                f"({int(out_of_range.sum())} such rows)")
    return vals


def swapped_column(frame: pd.DataFrame, judge_col: str) -> str | None:
    """A column holding the same judge's verdicts with the answers shown in the other order."""
    names = {str(c).lower(): c for c in frame.columns}
    j = judge_col.lower()
    cands = [f"{j}_swapped", f"{j}_swap", f"{j}_reversed", f"{j}_2"]
    if j in ("verdict", "verdict_1", "winner", "winner_1", "verdict_ij"):
        cands += ["verdict_2", "verdict_swapped", "winner_2", "verdict_ji"]
    if j.endswith("1"):
        cands.append(j[:-1] + "2")
    if "verdict_1" in names:  # written by `puaudit judge --both-orders` beside its winner column
        cands.append("verdict_2")
    if j == "g1_winner":
        cands.append("g2_winner")
    for c in cands:
        if c in names and c != j:
            return names[c]
    return None


def _read_verdicts(table: ComparisonTable, col: str) -> np.ndarray | str:
    get = table.frame
    ma = get[table.columns["model_a"]].tolist() if "model_a" in table.columns else None
    mb = get[table.columns["model_b"]].tolist() if "model_b" in table.columns else None
    try:
        return normalize_verdicts(get[col].tolist(), column=str(col), model_a=ma, model_b=mb)
    except PUAuditError as e:
        return str(e).split(". Accepted labels")[0]


def _mostly_verdicts(values: pd.Series) -> bool:
    """Whether most distinct non-empty values of a column read as verdicts (A / B / tie, ...)."""
    from puaudit.data.vocabulary import parse_verdict

    distinct = pd.unique(values.dropna().astype(str).str.strip())
    distinct = [v for v in distinct if v][:200]
    ok = 0
    for v in distinct:
        try:
            ok += parse_verdict(v) is not None
        except KeyError:
            pass
    return bool(distinct) and ok >= 0.5 * len(distinct)


def _agreement(sign: np.ndarray, other: np.ndarray) -> np.ndarray:
    """+1 same strict verdict, −1 the other answer, 0 a tie, NaN no verdict (either side)."""
    o = np.asarray(other, dtype=object)
    osign = np.where(o == "A", 1.0, np.where(o == "B", -1.0, np.where(o == "tie", 0.0, np.nan)))
    return np.where(np.isnan(sign), np.nan, osign * sign)


def _entropy(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return np.where(np.isnan(p).any(axis=1), np.nan, terms.sum(axis=1))


class _Collector:
    """What the signal families below share: the judge's signs, the wanted families, the
    evidence being built, what was skipped and which columns are taken."""

    def __init__(self, table: ComparisonTable, wanted):
        self.table, self.frame, self.cols = table, table.frame, table.columns
        self.sign = _strict_sign(table.judge)
        self.wanted = wanted
        self.ev = VerdictEvidence()
        self.skipped: dict[str, str] = {}
        self.used = {str(v) for v in table.columns.values()}
        self.judge_col = str(table.columns.get("judge", ""))
        # a rule's verdicts are not described by the file's own judge columns
        self.own_judge = not str(table.judge_column).startswith("rule:")
        # whose probabilities unprefixed p_A / p_B are: the table's, or the whole table's when
        # this one is a cascade stage's part of it
        self.default_judge = table.extra.get("default_judge", "auto")

    def want(self, *names: str) -> bool:
        return self.wanted is None or any(n in self.wanted for n in names)

    def put(self, name: str, values, source) -> None:
        values = np.where(np.isnan(self.sign), np.nan, np.asarray(values, dtype=np.float64))
        finite = values[np.isfinite(values)]
        if len(finite) == 0 or np.ptp(finite) == 0:
            self.skipped[name] = "constant on the judge's verdicts"
            return
        self.ev.values[name] = values
        self.ev.sources[name] = list(source)


def _text_signals(c: _Collector) -> None:
    t, cols, sign = c.table, c.cols, c.sign
    texts = [cols["response_a"], cols["response_b"]]
    if c.want("position_first"):
        c.put("position_first", (sign > 0).astype(float), [cols["judge"]])
    if c.want("log_length_ratio"):
        ch, rej = _oriented(_lengths(t.response_a), _lengths(t.response_b), sign)
        c.put("log_length_ratio", np.log1p(ch) - np.log1p(rej), texts)
    if c.want("structure_gap"):
        ch, rej = _oriented(_structure(t.response_a), _structure(t.response_b), sign)
        c.put("structure_gap", np.sign(ch - rej) * np.log1p(np.abs(ch - rej)), texts)


def _strength_signals(c: _Collector) -> None:
    t, cols, sign = c.table, c.cols, c.sign
    codes = _model_codes(t)
    if c.want("bt_gap", "bt_favourite", "bt_upset"):
        strengths = None if codes is None else _judge_strengths(t.judge, *codes)
        if strengths is None:
            c.skipped["bt"] = "no model_a / model_b columns (or fewer than two models)"
        else:
            ch, rej = _oriented(*strengths, sign)
            gap = ch - rej
            src = [cols["model_a"], cols["model_b"], cols["judge"]]
            if c.want("bt_gap"):
                c.put("bt_gap", gap, src)
            if c.want("bt_favourite"):
                c.put("bt_favourite", np.where(np.isnan(gap), np.nan, (gap > 0).astype(float)), src)
            if c.want("bt_upset"):
                with np.errstate(invalid="ignore"):
                    c.put("bt_upset", np.logaddexp(0.0, -gap), src)
    types = np.asarray(t.question_type, dtype=object)
    if c.want("bt_gap_type") and codes is not None and len(set(types.tolist())) > 1:
        gap = np.full(len(t), np.nan)
        for qt in sorted(set(types.tolist())):
            r = np.flatnonzero(types == qt)
            st = _judge_strengths(t.judge[r], codes[0][r], codes[1][r], codes[2])
            if st is not None:
                ch, rej = _oriented(*st, sign[r])
                gap[r] = ch - rej
        c.put("bt_gap_type", gap, [cols["model_a"], cols["model_b"], cols["judge"],
                                   cols.get("question_type", "")])


def _order_signal(c: _Collector) -> None:
    frame, judge_col = c.frame, c.judge_col
    swapped = swapped_column(frame, judge_col)
    raw = next((col for col in frame.columns if str(col).lower() == f"{judge_col.lower()}_raw"),
               None)
    if swapped is not None:
        v2 = _read_verdicts(c.table, swapped)
        if isinstance(v2, str):
            c.ev.messages.append(f"{v2}: the both-orders signal is left out.")
        else:
            back = np.where(v2 == "A", "B", np.where(v2 == "B", "A", v2)).astype(object)
            agree = np.where(pd.isna(v2), np.nan,
                             (back == np.asarray(c.table.judge)).astype(float))
            c.put("order_consistent", agree, [judge_col, swapped])
        c.used.add(str(swapped))
        c.used.update(str(col) for col in frame.columns if str(col).lower() == "verdict_1")
    elif raw is not None:
        txt = frame[raw].astype(str).str.lower()
        c.put("order_consistent", np.where(txt.str.contains("inconsistent"), 0.0, 1.0), [raw])
    if raw is not None:
        c.used.add(str(raw))


def _probability_signals(c: _Collector) -> None:
    """``p_chosen`` / ``p_entropy`` from the judge's own probability columns
    (:mod:`puaudit.data.judge_probabilities`: ``<judge>_p_A`` ..., or unprefixed for the default
    judge only; both orders merged by their mean)."""
    from puaudit.data.judge_probabilities import judge_probabilities

    probs = judge_probabilities(c.frame, c.judge_col, default_judge=c.default_judge)
    c.ev.messages.extend(probs.messages)
    c.used.update(probs.columns)
    if not probs:
        return
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with no probability at all
        if c.want("p_chosen"):
            c.put("p_chosen", probs.of_verdicts(c.table.judge), probs.columns)
        if c.want("p_entropy"):
            ents = np.column_stack([_entropy(p) for p in probs.by_order.values()])
            c.put("p_entropy", np.nanmean(ents, axis=1), probs.columns)


def _perplexity_signal(c: _Collector) -> None:
    ppl_cols = [col for col in c.frame.columns if _PPL_RE.match(str(col).strip())]
    logs = []
    for col in ppl_cols:
        c.used.add(str(col))
        v = _numeric(c.frame, col, lo=0.0, hi=math.inf, open_lo=True)
        if isinstance(v, str):
            c.ev.messages.append(f"{v}: the perplexity signal is left out (perplexities must be "
                                 "positive numbers).")
            continue
        logs.append(np.log(v))
    if logs:
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            c.put("log_perplexity", np.nanmean(np.column_stack(logs), axis=1), ppl_cols)


def _judge_tag(name: str, judge_col: str) -> str:
    low = name.lower()
    return re.sub(r"[^0-9a-z]+", "_", low.removeprefix(judge_col.lower() + "_")).strip("_")


def _named_judges(c: _Collector, names) -> None:
    """The other judges the user named: every one must be a column holding verdicts."""
    for name in names:
        col = next((x for x in c.frame.columns if str(x) == name), None)
        if col is None:
            raise PUAuditError(f"Other judge column '{name}' is not in the table (its columns: "
                               f"{', '.join(map(str, list(c.frame.columns)[:30]))}).",
                               column=name)
        if name in (c.judge_col, str(c.cols.get("human", ""))):
            raise PUAuditError(f"Column '{name}' is the audited judge's or the people's own "
                               "verdict column; name other judges' columns only.", column=name)
        v = _read_verdicts(c.table, col)
        if isinstance(v, str):
            raise PUAuditError(f"{v}: other judge columns must hold verdicts (A / B / tie, "
                               "model_a / model_b, or a model name).", column=name)
        c.put(f"agrees_{_judge_tag(name, c.judge_col)}", _agreement(c.sign, v), [name])


def _other_judges(c: _Collector) -> None:
    for col in c.frame.columns:
        name = str(col)
        low = name.lower()
        if (name in c.used or low.startswith("puaudit_") or low.endswith("_raw")
                or _JUDGE_WORD not in low or any(w in low for w in _NOT_JUDGE_WORDS)):
            continue
        if not _mostly_verdicts(c.frame[col]):
            continue  # a judge's text (its rationale, its name), not its verdicts
        v = _read_verdicts(c.table, col)
        if isinstance(v, str):
            c.ev.messages.append(f"{v}: this column is not read as another judge's verdicts.")
            continue
        if sum(x in ("A", "B") for x in v) < 2:
            continue
        c.put(f"agrees_{_judge_tag(name, c.judge_col)}", _agreement(c.sign, v), [name])


def verdict_evidence(table: ComparisonTable, *, signals=None, other_judges=None,
                     log: bool = False):
    """Every label-free signal the table carries about its judge's verdicts.

    Parameters
    ----------
    table : ComparisonTable
    signals : None, "auto", "none" or sequence of str
        Signal families to compute (:data:`EVIDENCE_SIGNALS`); None / ``"auto"``: every one the
        table allows.
    other_judges : sequence of str, optional
        Columns holding other judges' verdicts (``agrees_<column>``), read even when the judge
        is a rule; each must exist and hold verdicts (else :class:`PUAuditError`). ``None``:
        every column whose name says ``judge`` (and not a person or a known truth); ``()``: none.
    log : bool
        Also return a dict of diagnostics (which families were skipped and why).

    Returns
    -------
    evidence : VerdictEvidence
        Signals with any variation among the judge's strict verdicts (a constant signal says
        nothing about a row and is dropped).
    log : dict, only with ``log=True``
    """
    c = _Collector(table, evidence_signal_names(signals))
    _text_signals(c)
    _strength_signals(c)
    if not c.own_judge:
        c.skipped["judge columns"] = ("the judge is a rule: the file's judge columns describe "
                                      "another judge")
    else:
        if c.want("order_consistent"):
            _order_signal(c)
        if c.want("p_chosen", "p_entropy"):
            _probability_signals(c)
        if c.want("log_perplexity"):
            _perplexity_signal(c)
        if c.want("agrees") and other_judges is None:
            _other_judges(c)
    if c.want("agrees") and other_judges:
        _named_judges(c, other_judges)
    info = {"skipped": c.skipped, "signals": list(c.ev.values), "messages": list(c.ev.messages)}
    return (c.ev, info) if log else c.ev
