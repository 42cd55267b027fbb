"""Single scores from a judge's output: the given score, G-Eval, or distribution-sensitive.

A distribution is a mapping ``{score token s: p(s)}`` over the allowed tokens (the judge's
probabilities; they need not sum to 1).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError

__all__ = ["SCORE_METHODS", "score_baseline", "score_geval", "score_distribution", "score_scale",
           "score_table"]

SCORE_METHODS = ("baseline", "geval", "distribution")


def _arrays(dist: Mapping[float, float]) -> tuple[np.ndarray, np.ndarray]:
    tokens = np.array(sorted(dist), dtype=float)
    probs = np.array([dist[t] for t in sorted(dist)], dtype=float)
    if np.any(probs < 0) or probs.sum() <= 0:
        raise PUAuditError("A score distribution needs non-negative probabilities with a positive "
                           "sum.")
    return tokens, probs


def score_baseline(dist: Mapping[float, float]) -> float:
    """The most likely score token (``argmax p(s)``; on an exact tie, the lowest such token)."""
    tokens, probs = _arrays(dist)
    return float(tokens[int(np.argmax(probs))])


def score_geval(dist: Mapping[float, float]) -> float:
    """G-Eval score ``Σ s·p(s)`` over the allowed tokens, not normalised."""
    tokens, probs = _arrays(dist)
    return float(np.dot(tokens, probs))


def score_distribution(dist: Mapping[float, float], *,
                       rescale_to: tuple[float, float] | None = None,
                       scale: tuple[float, float] | None = None) -> float:
    """Distribution-sensitive (TrustJudge) score.

    ``p̃(s) = p(s) / Σ_t p(t)`` and ``score = Σ s·p̃(s)``. A judge that put all its mass on one
    token scores exactly that token.

    Parameters
    ----------
    dist : mapping
        ``{token: probability}`` on the fine scale the judge was asked to use (e.g. 1–100).
    rescale_to : (low, high), optional
        Map the fine scale linearly onto this range for display,
        ``low + (score − a)·(high − low)/(b − a)`` with ``(a, b) = scale``. Default: no rescaling.
    scale : (a, b), optional
        The fine scale's ends; default the smallest and largest token of ``dist``.
    """
    tokens, probs = _arrays(dist)
    value = float(np.dot(tokens, probs / probs.sum()))
    if rescale_to is None:
        return value
    a, b = scale if scale is not None else (float(tokens.min()), float(tokens.max()))
    if b == a:
        raise PUAuditError("Cannot rescale a score scale with a single token; give scale=(low, high).")
    low, high = rescale_to
    return float(low + (value - a) * (high - low) / (b - a))


def score_scale(scores: pd.DataFrame) -> tuple[float, float] | None:
    """The smallest and largest score token over every distribution of a scores table (``None``
    without distributions). With ``p_1 … p_K`` columns every row lists every token, so this is
    the scale the judge was asked to use."""
    tokens = [t for d in scores["distribution"] if d is not None for t in d]
    return (float(min(tokens)), float(max(tokens))) if tokens else None


def score_table(scores: pd.DataFrame, *, method: str = "baseline",
                rescale_to: tuple[float, float] | None = None,
                scale: tuple[float, float] | None = None) -> pd.Series:
    """Score per row of a table read by :func:`puaudit.trustjudge.io.read_scores`.

    ``baseline`` uses the ``score`` column where present, else the most likely token;
    ``geval`` and ``distribution`` need the distribution of every row.

    Parameters
    ----------
    rescale_to : (low, high), optional
        ``distribution`` only: map the fine scale linearly onto this range (see
        :func:`score_distribution`).
    scale : (a, b), optional
        The fine scale's ends for the rescaling; default the table's :func:`score_scale` (one
        scale for every row, so that rows whose judge put no mass on the extremes are rescaled
        like the others).
    """
    if method not in SCORE_METHODS:
        raise PUAuditError(f"Unknown score method '{method}'. Use one of: {', '.join(SCORE_METHODS)}.")
    if rescale_to is not None and method != "distribution":
        raise PUAuditError(f"Rescaling applies to the distribution score only (got score method "
                           f"'{method}').")
    if rescale_to is not None and scale is None:
        scale = score_scale(scores)
    out = np.empty(len(scores))
    for pos, (score, dist, row) in enumerate(zip(scores["score"], scores["distribution"], scores["row"])):
        if method == "baseline" and not pd.isna(score):
            out[pos] = float(score)
        elif dist is None:
            raise PUAuditError(f"Score method '{method}' needs the judge's score distribution, and "
                               f"row {row} has none. Give p_1 … p_K columns, or use the baseline "
                               "score method.", row=int(row))
        elif method == "baseline":
            out[pos] = score_baseline(dist)
        elif method == "geval":
            out[pos] = score_geval(dist)
        else:
            out[pos] = score_distribution(dist, rescale_to=rescale_to, scale=scale)
    return pd.Series(out, index=scores.index, name="score_value")
