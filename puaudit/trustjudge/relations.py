"""Pair relations (``>``, ``<``, ``=``) of candidate i vs candidate j from a judge's verdicts.

Conventions: order 1 shows candidate i first (A = i); order 2 shows candidate j first (A = j), so
"swapped back", order 2's ``B`` means i wins. Probabilities are arrays of shape ``(n, 3)`` holding
``[P(A), P(B), P(tie)]`` as the judge saw the letters in that order; NaN marks a missing letter (it
counts 0) and a row of NaN an order that was not asked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError
from puaudit.trustjudge.io import PROB_COLUMNS

__all__ = [
    "METHODS",
    "relation_baseline",
    "aggregate_probabilities",
    "relation_bidirectional",
    "relation_ppl",
    "relation_weighted",
    "weighted_distribution",
    "pair_distribution",
    "pair_relations",
]

METHODS = ("baseline", "bidirectional", "ppl", "weighted")

# verdict in order 1 / order 2 -> outcome index in the (i wins, j wins, tie) frame
_ORDER1 = {"A": 0, "B": 1, "tie": 2}
_ORDER2 = {"A": 1, "B": 0, "tie": 2}
_REL = np.array([">", "<", "="], dtype=object)


def _codes(verdicts: Any, table: dict[str, int]) -> np.ndarray:
    """Outcome index per verdict, -1 where the order is missing."""
    return np.array([table.get(v, -1) if isinstance(v, str) else -1 for v in verdicts], dtype=int)


def relation_baseline(verdict_1: Any, verdict_2: Any) -> np.ndarray:
    """Baseline relation: both orders must agree on a winner.

    ``>`` when order 1 says A and order 2 says B (i wins both times), ``<`` for the mirror,
    ``=`` for any disagreement or tie. With one order only, its verdict (tie → ``=``).

    Parameters
    ----------
    verdict_1, verdict_2 : sequence of {"A", "B", "tie", None}
        ``None`` marks an order that was not asked.

    Returns
    -------
    numpy.ndarray of str
    """
    c1 = _codes(verdict_1, _ORDER1)
    c2 = _codes(verdict_2, _ORDER2)
    if np.any((c1 < 0) & (c2 < 0)):
        raise PUAuditError("A pair has no verdict in either order; give at least one.")
    return _REL[np.where(c2 < 0, c1, np.where(c1 < 0, c2, np.where(c1 == c2, c1, 2)))]


def aggregate_probabilities(p1: np.ndarray, p2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum both orders' probabilities in the (i wins, j wins, tie) frame.

    ``P[i] = P1[A] + P2[B]``, ``P[j] = P1[B] + P2[A]``, ``P[tie] = P1[tie] + P2[tie]``; a missing
    letter counts 0.

    Returns
    -------
    P : numpy.ndarray, shape (n, 3)
        Unnormalised sums.
    n_orders : numpy.ndarray of int, shape (n,)
        How many orders carried probabilities (0, 1 or 2).
    """
    p1 = np.asarray(p1, dtype=float).reshape(-1, 3)
    p2 = np.asarray(p2, dtype=float).reshape(-1, 3)
    has1 = ~np.all(np.isnan(p1), axis=1)
    has2 = ~np.all(np.isnan(p2), axis=1)
    a1, a2 = np.nan_to_num(p1), np.nan_to_num(p2)
    P = np.column_stack([a1[:, 0] + a2[:, 1], a1[:, 1] + a2[:, 0], a1[:, 2] + a2[:, 2]])
    return P, has1.astype(int) + has2.astype(int)


def relation_bidirectional(p1: np.ndarray, p2: np.ndarray, *, delta: float = 0.0) -> np.ndarray:
    """Likelihood-aware bidirectional relation.

    With ``P`` from :func:`aggregate_probabilities`, take ``argmax P``; the relation is ``=`` when
    ``(top1 − top2) / n_orders < δ`` (``n_orders = 2`` gives the method's ``(top1 − top2)/2``;
    with one order the margin is not halved) and also when the two largest are exactly equal, so
    that swapping i and j always mirrors the result.

    Returns
    -------
    numpy.ndarray of str
        NaN-free relations; rows with no probabilities in either order get ``None``.
    """
    P, n_orders = aggregate_probabilities(p1, p2)
    return _top_relation(P, np.maximum(n_orders, 1), delta, n_orders == 0)


def _top_relation(P: np.ndarray, scale: Any, delta: float, missing: np.ndarray) -> np.ndarray:
    """``argmax P`` as a relation, ``=`` where the two largest differ by less than
    ``δ·scale`` or are equal; ``None`` where ``missing``."""
    top = np.sort(P, axis=1)
    gap = top[:, 2] - top[:, 1]
    out = _REL[np.where((gap / scale < delta) | (gap == 0), 2, np.argmax(P, axis=1))]
    out[missing] = None
    return out


def relation_ppl(verdict_1: Any, verdict_2: Any, ppl_1: np.ndarray, ppl_2: np.ndarray, *,
                 delta: float = 0.0) -> np.ndarray:
    """Likelihood-aware perplexity relation.

    The verdict of the order whose judgment text has the lower perplexity (swapped back for
    order 2); ``=`` when ``|PPL1 − PPL2| ≤ δ``. Rows lacking either perplexity or either verdict
    get ``None``.
    """
    c1 = _codes(verdict_1, _ORDER1)
    c2 = _codes(verdict_2, _ORDER2)
    q1 = np.asarray(ppl_1, dtype=float)
    q2 = np.asarray(ppl_2, dtype=float)
    ok = (c1 >= 0) & (c2 >= 0) & ~np.isnan(q1) & ~np.isnan(q2)
    pick = np.where(q1 <= q2, c1, c2)
    pick = np.where(np.abs(q1 - q2) <= delta, 2, pick)
    out = _REL[np.clip(pick, 0, 2)].astype(object)
    out[~ok] = None
    return out


def _order_distributions(verdict_1: Any, verdict_2: Any, p1: np.ndarray,
                         p2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each order's (i wins, j wins, tie) distribution: its letter probabilities normalised, or
    its verdict as a point mass where it has none; a row of NaN where the order is missing."""
    n = len(p1)
    out = []
    for verdicts, probs, table, swap in ((verdict_1, p1, _ORDER1, False),
                                         (verdict_2, p2, _ORDER2, True)):
        probs = np.asarray(probs, dtype=float).reshape(-1, 3)
        frame = probs[:, [1, 0, 2]] if swap else probs  # order 2: A = j
        has = ~np.all(np.isnan(frame), axis=1)
        d = np.nan_to_num(frame)
        total = d.sum(axis=1)
        has &= total > 0
        d = np.divide(d, total[:, None], out=np.zeros_like(d), where=total[:, None] > 0)
        codes = _codes(verdicts, table)
        vote = np.zeros((n, 3))
        vote[np.flatnonzero(codes >= 0), codes[codes >= 0]] = 1.0
        d = np.where(has[:, None], d, vote)
        d[(codes < 0) & ~has] = np.nan
        out.append(d)
    return out[0], out[1]


def weighted_distribution(verdict_1: Any, verdict_2: Any, p1: np.ndarray, p2: np.ndarray,
                          ppl_1: np.ndarray, ppl_2: np.ndarray, *, gamma: float) -> np.ndarray:
    """Confidence-weighted (i wins, j wins, tie) distribution of each pair.

    ``P = Σ_o w_o·P_o / Σ_o w_o`` with ``w_o = exp(−γ·PPL_o)`` (see
    :func:`puaudit.trustjudge.likelihood.confidence_weights`) and ``P_o`` order o's letter
    probabilities normalised to sum 1 and swapped into the (i, j, tie) frame, or its verdict as a
    point mass when it has no probabilities. An order without a perplexity gets the weight of
    the other order (equal weights when neither has one); a missing order weighs 0. With
    ``γ = 0`` this is the mean of the two orders (bidirectional aggregation on normalised
    probabilities); as γ grows it tends to the order with the lower perplexity.

    Returns
    -------
    numpy.ndarray, shape (n, 3)
        Rows of NaN where neither order has a verdict or probabilities.
    """
    from puaudit.trustjudge.likelihood import confidence_weights

    d1, d2 = _order_distributions(verdict_1, verdict_2, p1, p2)
    q1 = np.asarray(ppl_1, dtype=float)
    q2 = np.asarray(ppl_2, dtype=float)
    q1 = np.where(np.isnan(q1), q2, q1)
    q2 = np.where(np.isnan(q2), q1, q2)
    base = np.fmin(q1, q2)
    base = np.where(np.isnan(base), 0.0, base)
    # exp(−γ·PPL) relative to the lower perplexity of the pair: the same ratio, no underflow
    w1 = np.nan_to_num(confidence_weights(q1 - base, gamma=gamma), nan=1.0)
    w2 = np.nan_to_num(confidence_weights(q2 - base, gamma=gamma), nan=1.0)
    w1 = np.where(np.isnan(d1).all(axis=1), 0.0, w1)
    w2 = np.where(np.isnan(d2).all(axis=1), 0.0, w2)
    total = w1 + w2
    with np.errstate(invalid="ignore", divide="ignore"):
        P = (w1[:, None] * np.nan_to_num(d1) + w2[:, None] * np.nan_to_num(d2)) / total[:, None]
    P[total == 0] = np.nan
    return P


def relation_weighted(verdict_1: Any, verdict_2: Any, p1: np.ndarray, p2: np.ndarray,
                      ppl_1: np.ndarray, ppl_2: np.ndarray, *, gamma: float = 1.0,
                      delta: float = 0.0) -> np.ndarray:
    """Confidence-weighted relation: argmax of :func:`weighted_distribution`.

    ``=`` when the two largest weighted probabilities differ by less than δ, or are equal.

    Returns
    -------
    numpy.ndarray of str
        ``None`` for rows with neither a verdict nor probabilities in either order.
    """
    P = weighted_distribution(verdict_1, verdict_2, p1, p2, ppl_1, ppl_2, gamma=gamma)
    return _top_relation(np.nan_to_num(P), 1.0, delta, np.isnan(P).any(axis=1))


def _floats(pairs: pd.DataFrame, columns: Any) -> np.ndarray:
    """The columns as floats, shape (n, len(columns)); NaN for a column the table lacks."""
    nan = np.full(len(pairs), np.nan)
    return np.column_stack([pairs[c].to_numpy(dtype=float) if c in pairs else nan
                            for c in columns])


def _prob_arrays(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    arr = _floats(pairs, PROB_COLUMNS)
    return arr[:, :3], arr[:, 3:]


def pair_distribution(pairs: pd.DataFrame) -> np.ndarray:
    """Normalised (i wins, j wins, tie) distribution of each pair, used for margins and ranking.

    From the judge's probabilities when the row has them (both orders summed as in
    :func:`aggregate_probabilities`); otherwise the share of orders voting each outcome, so a pair
    whose two orders disagree is ``(0.5, 0.5, 0)``.
    """
    p1, p2 = _prob_arrays(pairs)
    P, n_orders = aggregate_probabilities(p1, p2)
    c1 = _codes(pairs["verdict_1"], _ORDER1)
    c2 = _codes(pairs["verdict_2"], _ORDER2) if "verdict_2" in pairs else np.full(len(pairs), -1)
    votes = np.zeros((len(pairs), 3))
    for c in (c1, c2):
        m = c >= 0
        votes[np.flatnonzero(m), c[m]] += 1
    use_probs = (n_orders > 0) & (P.sum(axis=1) > 0)
    dist = np.where(use_probs[:, None], P, votes)
    return dist / dist.sum(axis=1, keepdims=True)


def pair_relations(pairs: pd.DataFrame, *, method: str = "baseline", delta: float = 0.0,
                   gamma: float = 1.0, log: bool = False) -> pd.DataFrame | tuple[pd.DataFrame, dict]:
    """Relation of every pair of a table read by :func:`puaudit.trustjudge.io.read_pairwise`.

    Parameters
    ----------
    pairs : DataFrame
        Canonical pairwise table.
    method : {"baseline", "bidirectional", "ppl", "weighted"}
        See :func:`relation_baseline`, :func:`relation_bidirectional`, :func:`relation_ppl`,
        :func:`relation_weighted`.
        Rows the chosen method cannot decide (no probabilities / perplexities) fall back to the
        baseline relation; ``log["n_fallback"]`` counts them.
    delta : float, default 0
        Tie tolerance δ (probability margin or perplexity difference).
    gamma : float, default 1
        γ of the confidence weights ``exp(−γ·PPL)`` (method ``weighted`` only).
    log : bool
        Also return a dict of diagnostics.

    Returns
    -------
    DataFrame
        ``pairs`` plus ``relation``, ``prob_i``, ``prob_j``, ``prob_tie`` (from
        :func:`pair_distribution`; with ``weighted``, from :func:`weighted_distribution`) and
        ``margin`` = P(relation) − max P(other outcomes): how far
        the relation is from flipping (negative when the relation contradicts the distribution,
        e.g. a baseline ``=`` from two disagreeing orders).
    """
    if method not in METHODS:
        raise PUAuditError(f"Unknown method '{method}'. Use one of: {', '.join(METHODS)}.")
    if delta < 0:
        raise PUAuditError(f"delta must be ≥ 0 (got {delta}).")
    v2 = pairs["verdict_2"] if "verdict_2" in pairs else [None] * len(pairs)
    base = relation_baseline(pairs["verdict_1"], v2)
    rel, weighted = (base, None) if method == "baseline" else _method_relations(
        pairs, v2, method=method, delta=delta, gamma=gamma)
    fallback = np.array([r is None for r in rel])
    rel = np.where(fallback, base, rel)
    dist = pair_distribution(pairs)
    if weighted is not None:
        usable = ~np.isnan(weighted).any(axis=1)
        dist[usable] = weighted[usable]
    idx = np.select([rel == ">", rel == "<"], [0, 1], 2)
    own = dist[np.arange(len(dist)), idx]
    others = dist.copy()
    others[np.arange(len(dist)), idx] = -np.inf
    out = pairs.copy()
    out["relation"] = rel.astype(object)
    out["prob_i"], out["prob_j"], out["prob_tie"] = dist[:, 0], dist[:, 1], dist[:, 2]
    out["margin"] = own - others.max(axis=1)
    if not log:
        return out
    return out, {"method": method, "delta": float(delta),
                 **({"gamma": float(gamma)} if method == "weighted" else {}),
                 "n_fallback": int(fallback.sum()),
                 "counts": {r: int((rel == r).sum()) for r in (">", "<", "=")}}


def _method_relations(pairs: pd.DataFrame, v2, *, method: str, delta: float,
                      gamma: float) -> tuple[np.ndarray, np.ndarray | None]:
    """Relations by ``method`` (None where it cannot decide) and, for ``weighted``, its
    distribution; a clear error when the table lacks what the method reads."""
    if method == "bidirectional":
        p1, p2 = _prob_arrays(pairs)
        if np.all(np.isnan(p1)) and np.all(np.isnan(p2)):
            raise PUAuditError("Method 'bidirectional' needs the judge's probabilities (columns "
                               "p1_A, p1_B, p1_tie, p2_A, p2_B, p2_tie); this table has none. Use "
                               "--method baseline, or add the probabilities.", column="p1_A")
        return relation_bidirectional(p1, p2, delta=delta), None
    q1, q2 = _floats(pairs, ("ppl_1", "ppl_2")).T
    if method == "weighted":
        if np.all(np.isnan(q1)) and np.all(np.isnan(q2)):
            raise PUAuditError("Method 'weighted' weighs each answer order by exp(−γ·PPL) and "
                               "needs the perplexity of the judgments (columns ppl_1, ppl_2, or "
                               "token_logprobs_1, token_logprobs_2); this table has none. Use "
                               "--method baseline or bidirectional.", column="ppl_1")
        p1, p2 = _prob_arrays(pairs)
        weighted = weighted_distribution(pairs["verdict_1"], v2, p1, p2, q1, q2, gamma=gamma)
        return relation_weighted(pairs["verdict_1"], v2, p1, p2, q1, q2, gamma=gamma,
                                 delta=delta), weighted
    if np.all(np.isnan(q1)) or np.all(np.isnan(q2)):
        raise PUAuditError("Method 'ppl' needs the perplexity of the judgment in both orders "
                           "(columns ppl_1, ppl_2); this table lacks them. Use --method "
                           "baseline, or add the perplexities.", column="ppl_1")
    return relation_ppl(pairs["verdict_1"], v2, q1, q2, delta=delta), None
