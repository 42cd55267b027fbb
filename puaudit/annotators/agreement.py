"""Auditing the annotators: reliability, position and length biases, and consensus labels.

The LLM judge is audited as one more annotator next to the people who voted. Every statistic is
a share with a 95% interval, so a reviewer sees both who stands out and how sure that is.

Votes are compared as *which response won* (:mod:`puaudit.annotators.consensus`), never as raw
letters.

Conventions
-----------
* A person's *votes* are the rows with their id in the annotator column and a non-missing human
  verdict; *strict* votes are those equal to ``"A"`` or ``"B"``. Rows with an empty annotator id
  count for the consensus only.
* The judge's verdict is repeated on every row of an item, so the judge votes **once per item**:
  its item vote is the majority of its (winner-identity) verdicts over the item's rows, ties of
  the count broken as ``tie``; it is placed on the item's first row (file order) holding a judge
  verdict, in that row's A/B order, for the judge's own ``pick_a_share`` / ``longer_share``.
* ``agree_judge`` of a person is per row: the judge's verdict on the very row they voted on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from puaudit.annotators.consensus import (TIE_KEY, item_majority, require_annotator_column,
                                          to_keys, to_letters, winner_keys)
from puaudit.data.jsonsafe import to_jsonable
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError
from puaudit.stats.proportions import proportion_interval

__all__ = [
    "CI_METHODS", "AnnotatorReport", "annotator_report", "share_columns", "share_interval",
]

CI_METHODS = ("wilson", "jeffreys")


def share_interval(k, n, *, method: str = "wilson",
                   confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    r"""Two-sided interval for a share :math:`\hat p = k / n`, elementwise (``k`` may be
    fractional): :func:`puaudit.stats.proportions.proportion_interval`, Wilson or Jeffreys, whose
    bounds are 0 at :math:`k = 0` and 1 at :math:`k = n` (an annotator who never did something is
    not shown a positive lower bound). NaN where ``n == 0``.
    """
    if method not in CI_METHODS:
        raise PUAuditError(f"Unknown interval method '{method}': choose one of {list(CI_METHODS)}.")
    if not 0 < confidence < 1:
        raise PUAuditError(f"confidence must lie strictly between 0 and 1, got {confidence}.")
    return proportion_interval(k, n, alpha=1.0 - confidence, method=method)


def share_columns(prefix: str, k, n, method: str, confidence: float) -> dict:
    """``{prefix: k / n, prefix_lo, prefix_hi}`` (NaN where ``n == 0``), ready to become columns."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    lo, hi = share_interval(k, n, method=method, confidence=confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(n > 0, k / n, np.nan)
    return {prefix: share, f"{prefix}_lo": lo, f"{prefix}_hi": hi}


@dataclass
class AnnotatorReport:
    """Per-annotator statistics, overall reliability and item consensus.

    Attributes
    ----------
    annotators : DataFrame
        One row per annotator (the judge first when included). Columns: ``annotator``,
        ``is_judge``, ``n_votes``, ``n_strict``, ``agree_judge`` (+ ``_lo``/``_hi``),
        ``n_agree_judge`` (its denominator: rows where both the person and the judge are strict),
        ``agree_peers`` (+ ``_lo``/``_hi``), ``n_peer_pairs``, ``n_peer_votes``,
        ``pick_a_share`` (+ ci), ``tie_share`` (+ ci), ``longer_share`` (+ ci),
        ``n_unequal_length``, ``flag_eligible`` and ``flags`` (list of reason strings).
    overall : dict
        ``krippendorff_alpha``, ``alpha_includes_judge``, ``n_items_alpha``, ``n_items``,
        ``n_items_multi``, ``n_annotators``, ``n_votes``, the people's medians used by the flags
        and the flag parameters.
    consensus : DataFrame
        One row per item with a human vote: ``item_id``, ``row`` (0-based first row of the item),
        ``n_votes``, ``consensus`` (in that row's A/B order), ``consensus_share`` (share of the
        votes equal to the consensus), ``judge`` (the judge's item vote in that row's order).
    """

    annotators: pd.DataFrame
    overall: dict
    consensus: pd.DataFrame
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """The annotator table with ``flags`` joined by ``"; "`` (for CSV export)."""
        out = self.annotators.copy()
        out["flags"] = [_join_flags(f) for f in out["flags"]]
        return out

    def to_dict(self) -> dict:
        """JSON-ready dict: ``annotators`` (list of records, NaN -> None) and ``overall``."""
        return to_jsonable({"annotators": self.annotators.to_dict(orient="records"),
                            "overall": self.overall})


def _join_flags(flags) -> str:
    return "; ".join(flags) if isinstance(flags, (list, tuple)) else str(flags or "")


_FLAG_PARAMS = ("min_votes_flag", "peer_margin", "judge_margin", "position_margin",
                "length_margin")
_COLUMNS = ["annotator", "is_judge", "n_votes", "n_strict",
            "agree_judge", "agree_judge_lo", "agree_judge_hi", "n_agree_judge",
            "agree_peers", "agree_peers_lo", "agree_peers_hi", "n_peer_pairs", "n_peer_votes",
            "pick_a_share", "pick_a_share_lo", "pick_a_share_hi",
            "tie_share", "tie_share_lo", "tie_share_hi",
            "longer_share", "longer_share_lo", "longer_share_hi", "n_unequal_length",
            "flag_eligible", "flags"]


def _people_with_votes(table: ComparisonTable, *, ci_method: str, include_judge: bool,
                       judge_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Each row's annotator id and whether the row is a person's vote; clear errors first."""
    require_annotator_column(table)
    if ci_method not in CI_METHODS:
        raise PUAuditError(f"Unknown interval method '{ci_method}': choose one of "
                           f"{list(CI_METHODS)}.")
    ann_col = table.columns.get("annotator", "annotator")
    annot = np.array(["" if a is None else str(a).strip() for a in table.annotator], dtype=object)
    has_vote = np.array([h is not None for h in table.human]) & (annot != "")
    if not has_vote.any():
        hcol = table.columns.get("human")
        raise PUAuditError(
            "No human votes with an annotator id: " + (
                f"column '{hcol}' is empty on every row that has an id in '{ann_col}'."
                if hcol else "no human verdict column was found; map it (CLI --human-col)."),
            column=hcol or ann_col)
    if include_judge and judge_name in set(annot[has_vote]):
        raise PUAuditError(f"An annotator in '{ann_col}' is named '{judge_name}', the judge's "
                           "name in the report; choose another judge_name.", column=ann_col)
    return annot, has_vote


def _people_votes(table: ComparisonTable, hkey: np.ndarray, longer: np.ndarray, *,
                  ci_method: str, include_judge: bool,
                  judge_name: str) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """One row per person's vote with its peer counts: for a strict vote with identity k by p
    on item i, peers = strict votes on i by others, agreeing peers = those with identity k.
    Also the strict votes per item and per (item, identity)."""
    annot, has_vote = _people_with_votes(table, ci_method=ci_method, include_judge=include_judge,
                                         judge_name=judge_name)
    votes = pd.DataFrame({
        "row": np.arange(len(table)), "item": table.item_id, "annotator": annot,
        "vote": table.human, "key": hkey, "judge": table.judge, "longer": longer})[has_vote]
    votes["strict"] = votes["vote"].isin(["A", "B"])
    strict = votes[votes["strict"]]
    tot_item = strict.groupby("item").size()
    tot_item_key = strict.groupby(["item", "key"]).size()
    own_item = strict.groupby(["item", "annotator"]).size()
    own_item_key = strict.groupby(["item", "annotator", "key"]).size()
    idx_i = pd.MultiIndex.from_arrays([strict["item"], strict["key"]])
    idx_ia = pd.MultiIndex.from_arrays([strict["item"], strict["annotator"]])
    idx_iak = pd.MultiIndex.from_arrays([strict["item"], strict["annotator"], strict["key"]])
    peers = np.zeros(len(votes), dtype=int)
    agree = np.zeros(len(votes), dtype=int)
    sel = votes["strict"].to_numpy()
    peers[sel] = tot_item.reindex(strict["item"]).to_numpy() - own_item.reindex(idx_ia).to_numpy()
    agree[sel] = (tot_item_key.reindex(idx_i).to_numpy()
                  - own_item_key.reindex(idx_iak).to_numpy())
    votes["peers"], votes["peer_agree"] = peers, agree
    votes["judge_strict"] = votes["judge"].isin(["A", "B"])
    return votes, tot_item, tot_item_key


def _judge_counts(table: ComparisonTable, jkey: np.ndarray, judge_item: dict, key_a, key_b,
                  longer: np.ndarray, tot_item: pd.Series, tot_item_key: pd.Series,
                  judge_name: str) -> pd.DataFrame:
    """The judge's counts, from its one vote per item on the item's first row with a verdict."""
    first_row: dict = {}
    for i, (it, k) in enumerate(zip(table.item_id, jkey)):
        if k is not None and it not in first_row:
            first_row[it] = i
    jrows = np.array(sorted(first_row.values()), dtype=int)
    jk = np.array([judge_item[table.item_id[i]] for i in jrows], dtype=object)
    jv = pd.DataFrame({"annotator": judge_name, "item": table.item_id[jrows],
                       "vote": to_letters(jk, key_a[jrows], key_b[jrows]),
                       "longer": longer[jrows]})
    jv["strict"] = jv["vote"].isin(["A", "B"])
    # Its peers: every strict human vote on the item; none of them is the judge's own.
    jv["peers"] = np.where(jv["strict"], tot_item.reindex(jv["item"], fill_value=0), 0)
    jv["peer_agree"] = np.where(jv["strict"], tot_item_key.reindex(
        pd.MultiIndex.from_arrays([jv["item"], jk]), fill_value=0), 0)
    jv["judge"], jv["judge_strict"] = None, False  # no agreement with itself
    return _counts(jv, "annotator").assign(is_judge=True)


def _add_shares(df: pd.DataFrame, ci_method: str, confidence: float) -> None:
    """Every share of the report with its interval, as columns of ``df``."""
    blocks = {}
    for prefix, k, m in (("agree_judge", "k_jd", "n_agree_judge"),
                         ("agree_peers", "k_pairs", "n_peer_pairs"),
                         ("pick_a_share", "k_a", "n_strict"),
                         ("tie_share", "k_tie", "n_votes"),
                         ("longer_share", "k_longer", "n_unequal_length")):
        if prefix == "agree_peers":
            # Point estimate over pairs, interval on the number of votes with peers (see above).
            share = np.where(df[m] > 0, df[k] / df[m].where(df[m] > 0, 1), np.nan)
            lo, hi = share_interval(np.nan_to_num(share) * df["n_peer_votes"], df["n_peer_votes"],
                                    method=ci_method, confidence=confidence)
            lo = np.where(np.isnan(share), np.nan, lo)
            hi = np.where(np.isnan(share), np.nan, hi)
            blocks.update({prefix: share, f"{prefix}_lo": lo, f"{prefix}_hi": hi})
        else:
            blocks.update(share_columns(prefix, df[k], df[m], ci_method, confidence))
    for key, val in blocks.items():
        df[key] = val
    judge_mask = df["is_judge"].to_numpy()
    for c in ("agree_judge", "agree_judge_lo", "agree_judge_hi"):
        df.loc[judge_mask, c] = np.nan  # the judge's agreement with itself is not a statistic


def _flagged(df: pd.DataFrame, *, min_votes_flag: int, peer_margin: float, judge_margin: float,
             position_margin: float, length_margin: float) -> tuple[pd.DataFrame, dict, int]:
    """``df`` with ``flag_eligible`` and ``flags`` against the eligible people's medians,
    ordered (the judge first, then by votes) and cut to the report's columns; the medians and
    the number of eligible people."""
    df["flag_eligible"] = df["n_strict"] >= min_votes_flag
    people = df[~df["is_judge"] & df["flag_eligible"]]
    med = {c: (float(people[c].median()) if people[c].notna().any() else float("nan"))
           for c in ("agree_peers", "agree_judge", "longer_share", "pick_a_share")}
    df["flags"] = [
        _flags(r, med, peer_margin=peer_margin, judge_margin=judge_margin,
               position_margin=position_margin, length_margin=length_margin)
        if r["flag_eligible"] else [] for r in df.to_dict(orient="records")]
    df = pd.concat([df[df["is_judge"]],
                    df[~df["is_judge"]].sort_values(["n_votes", "annotator"],
                                                    ascending=[False, True])])
    return df[_COLUMNS].reset_index(drop=True), med, len(people)


def annotator_report(table: ComparisonTable, *, include_judge: bool = True,
                     judge_name: str = "LLM judge", judge_in_alpha: bool = False,
                     min_votes_flag: int = 30, ci_method: str = "wilson",
                     confidence: float = 0.95, peer_margin: float = 0.05,
                     judge_margin: float = 0.05, position_margin: float = 0.05,
                     length_margin: float = 0.05) -> AnnotatorReport:
    r"""Audit every annotator (and the LLM judge) of a comparison table.

    For annotator :math:`p` with votes :math:`V_p` (rows), strict votes :math:`S_p \subseteq V_p`:

    * ``agree_judge`` :math:`= \#\{r \in S_p: j_r \in \{A,B\}, v_r = j_r\} /
      \#\{r \in S_p: j_r \in \{A,B\}\}`, per row (the judge's verdict on the same row).
    * ``agree_peers``: over the pairs :math:`(r, s)` with :math:`r \in S_p`, :math:`s` a strict
      vote of another person :math:`q \neq p` on the same item, the share with the same winner.
      The judge is not a peer of the people. The judge's own ``agree_peers`` pairs its item vote
      (once per item) with every strict human vote on the item. Pairs that share a vote are not
      independent, so the interval uses as :math:`n` the number of votes of :math:`p` with at
      least one peer (``n_peer_votes``), not ``n_peer_pairs``.
    * ``pick_a_share`` :math:`= \#\{r \in S_p: v_r = A\} / |S_p|` (first-shown response).
    * ``tie_share`` :math:`= \#\{r \in V_p: v_r = \text{tie}\} / |V_p|`.
    * ``longer_share``: over :math:`r \in S_p` whose responses differ in character length, the
      share voting for the longer one (``n_unequal_length`` is the denominator).

    Each share has a two-sided interval (``ci_method``, ``confidence``).

    Flags, for annotators with ``n_strict >= min_votes_flag`` (``flag_eligible``), against the
    medians :math:`m` of the eligible *people* (the judge never sets the norm):

    * ``agree_peers``: upper bound :math:`< m_{peers} -` ``peer_margin``;
    * ``agree_judge``: upper bound :math:`< m_{judge} -` ``judge_margin``;
    * ``pick_a_share``: interval entirely above :math:`0.5 +` ``position_margin`` or below
      :math:`0.5 -` ``position_margin``;
    * ``longer_share``: lower bound :math:`> m_{longer} +` ``length_margin``.

    Krippendorff's alpha (nominal, ``krippendorff`` package): units are the items with at least
    two votes among the coders, coders are the people (plus the judge, voting once per item, when
    ``judge_in_alpha``); a person with several votes on one item contributes their first. Values
    are coded per item as "first of the pair in sorted identity order", "second", or "tie", so the
    categories mean the same on every item.

    Parameters
    ----------
    table : ComparisonTable
        Needs an annotator column (``table.annotator``) and human verdicts.
    include_judge : bool
        Add the judge as a row of ``annotators`` (named ``judge_name``).
    judge_in_alpha : bool
        Count the judge as one more coder in Krippendorff's alpha (default: people only).
    min_votes_flag : int
        Strict votes needed to be flagged and to count in the people's medians.

    Raises
    ------
    PUAuditError
        No annotator column, no human votes, or a person named like ``judge_name``.
    """
    params = {"include_judge": include_judge, "judge_name": judge_name,
              "judge_in_alpha": judge_in_alpha, "min_votes_flag": min_votes_flag,
              "ci_method": ci_method, "confidence": confidence, "peer_margin": peer_margin,
              "judge_margin": judge_margin, "position_margin": position_margin,
              "length_margin": length_margin}
    key_a, key_b = winner_keys(table)
    hkey, longer = to_keys(table.human, key_a, key_b), _longer_letter(table)
    votes, by_item, by_item_key = _people_votes(table, hkey, longer, ci_method=ci_method,
                                                include_judge=include_judge, judge_name=judge_name)
    jkey, judge_item = _judge_items(table, key_a, key_b)
    parts = [_counts(votes, "annotator")]
    if include_judge and judge_item:
        parts.insert(0, _judge_counts(table, jkey, judge_item, key_a, key_b, longer, by_item,
                                      by_item_key, judge_name))
    df = pd.concat(parts, ignore_index=True)
    _add_shares(df, ci_method, confidence)
    df, med, n_eligible = _flagged(df, **{k: params[k] for k in _FLAG_PARAMS})
    alpha, n_units = _alpha(votes, judge_item if judge_in_alpha else None,
                            _item_first(table, key_a, key_b))
    consensus = _consensus_frame(table, key_a, key_b, hkey, judge_item)
    overall = {"krippendorff_alpha": alpha, "alpha_includes_judge": judge_in_alpha,
               "n_items_alpha": n_units, **_counts_overall(table, votes, df, consensus, med,
                                                           n_eligible)}
    return AnnotatorReport(annotators=df, overall=overall, consensus=consensus, params=params)


def _judge_items(table: ComparisonTable, key_a, key_b) -> tuple[np.ndarray, dict]:
    """The judge's verdict identities per row, and its one vote per item (their majority)."""
    jkey = to_keys(table.judge, key_a, key_b)
    return jkey, {it: v[0] for it, v in item_majority(table.item_id, jkey).items()}


def _longer_letter(table: ComparisonTable) -> np.ndarray:
    """Per row, the letter of the longer response ("" for equal lengths)."""
    len_a = np.array([len(t) for t in table.response_a])
    len_b = np.array([len(t) for t in table.response_b])
    return np.where(len_a > len_b, "A", np.where(len_b > len_a, "B", ""))


def _item_first(table: ComparisonTable, key_a, key_b) -> dict:
    """Per item, the first of its pair in sorted identity order (from its first row)."""
    item_pair: dict = {}
    for it, a, b in zip(table.item_id, key_a, key_b):
        item_pair.setdefault(it, min(a, b))
    return item_pair


def _counts_overall(table: ComparisonTable, votes: pd.DataFrame, df: pd.DataFrame,
                    consensus: pd.DataFrame, med: dict, n_eligible: int) -> dict:
    return {"n_items": int(len(set(table.item_id))),
            "n_items_multi": int((consensus["n_votes"] >= 2).sum()),
            "n_annotators": int((~df["is_judge"]).sum()), "n_votes": int(len(votes)),
            "n_flag_eligible": n_eligible, **{f"median_{c}": v for c, v in med.items()},
            "n_flagged": int(sum(bool(f) for f in df["flags"]))}


def _counts(v: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per-annotator counts behind every share, from one row per vote."""
    strict = v["strict"]
    unequal = strict & (v["longer"] != "")
    both = strict & v["judge_strict"]
    ind = pd.DataFrame({
        by: v[by], "n_votes": 1, "n_strict": strict, "k_tie": v["vote"] == "tie",
        "k_a": strict & (v["vote"] == "A"),
        "n_agree_judge": both, "k_jd": both & (v["vote"] == v["judge"]),
        "n_peer_pairs": v["peers"], "k_pairs": v["peer_agree"], "n_peer_votes": v["peers"] > 0,
        "n_unequal_length": unequal, "k_longer": unequal & (v["vote"] == v["longer"])})
    out = ind.groupby(by, sort=False).sum().astype(int).reset_index()
    out.insert(1, "is_judge", False)
    return out


def _fmt_ci(r: dict, c: str) -> str:
    return f"{r[c]:.2f} [{r[c + '_lo']:.2f}, {r[c + '_hi']:.2f}]"


def _flags(r: dict, med: dict, *, peer_margin: float, judge_margin: float,
           position_margin: float, length_margin: float) -> list[str]:
    out = []  # a comparison with NaN (no interval, no median) is False: no flag
    if r["agree_peers_hi"] < med["agree_peers"] - peer_margin:
        out.append(f"agree_peers {_fmt_ci(r, 'agree_peers')} is below the people's median "
                   f"{med['agree_peers']:.2f} minus {peer_margin:.2f} "
                   f"({r['n_peer_votes']} votes with peers)")
    if not r["is_judge"] and r["agree_judge_hi"] < med["agree_judge"] - judge_margin:
        out.append(f"agree_judge {_fmt_ci(r, 'agree_judge')} is below the people's median "
                   f"{med['agree_judge']:.2f} minus {judge_margin:.2f} "
                   f"(n={r['n_agree_judge']})")
    lo, hi = r["pick_a_share_lo"], r["pick_a_share_hi"]
    if not np.isnan(lo) and (lo > 0.5 + position_margin or hi < 0.5 - position_margin):
        side = "first" if lo > 0.5 else "second"
        out.append(f"pick_a_share {_fmt_ci(r, 'pick_a_share')} favours the {side}-shown response "
                   f"(interval clear of 0.50 by more than {position_margin:.2f}; "
                   f"n={r['n_strict']})")
    if r["longer_share_lo"] > med["longer_share"] + length_margin:
        out.append(f"longer_share {_fmt_ci(r, 'longer_share')} is above the people's median "
                   f"{med['longer_share']:.2f} plus {length_margin:.2f} "
                   f"(n={r['n_unequal_length']})")
    return out


def _alpha(votes: pd.DataFrame, judge_item: dict | None, item_first: dict) -> tuple[float, int]:
    """Nominal Krippendorff alpha over items with ≥ 2 coders' values (see annotator_report)."""
    import krippendorff

    first = votes.drop_duplicates(["item", "annotator"], keep="first")
    per_item: dict = {}
    for it, a, k in zip(first["item"], first["annotator"], first["key"]):
        per_item.setdefault(it, {})[a] = k
    if judge_item is not None:
        for it, k in judge_item.items():
            if it in per_item:  # items without any human vote cannot reach 2 coders
                per_item[it] = {**per_item[it], "\x00judge": k}
    units = {it: d for it, d in per_item.items() if len(d) >= 2}
    if not units:
        return float("nan"), 0
    coders = sorted({a for d in units.values() for a in d})
    cidx = {a: j for j, a in enumerate(coders)}
    data = np.full((len(coders), len(units)), np.nan)
    for u, (it, d) in enumerate(units.items()):
        for a, k in d.items():
            # 0 = the first of the pair in sorted identity order won, 1 = the second, 2 = tie.
            data[cidx[a], u] = 2.0 if k == TIE_KEY else 0.0 if k == item_first[it] else 1.0
    values = np.unique(data[~np.isnan(data)])
    if len(values) < 2:  # one value everywhere: expected disagreement is 0, alpha undefined
        return float("nan"), len(units)
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")), \
        len(units)


def _consensus_frame(table: ComparisonTable, key_a, key_b, hkey, judge_item: dict) -> pd.DataFrame:
    maj = item_majority(table.item_id, hkey)
    first: dict = {}
    for i, it in enumerate(table.item_id):
        if it in maj and it not in first:
            first[it] = i
    items = list(first)
    rows = np.array([first[it] for it in items], dtype=int)
    cons = np.array([maj[it][0] for it in items], dtype=object)
    judge = np.array([judge_item.get(it) for it in items], dtype=object)
    return pd.DataFrame({
        "item_id": pd.Series(items, dtype=object), "row": rows,
        "n_votes": np.array([maj[it][2] for it in items], dtype=int),
        "consensus": to_letters(cons, key_a[rows], key_b[rows]),
        "consensus_share": np.array([maj[it][1] / maj[it][2] for it in items], dtype=float),
        "judge": to_letters(judge, key_a[rows], key_b[rows])})
