r"""Per-row scores and win rates against the field, plain and length-controlled.

A verdict scores the row's model A: ``A`` → 1, ``B`` → 0, ``tie`` → ½ (or no comparison with
``ties="exclude"``). The win rate of model :math:`k` is its score summed over the comparisons
where it appears, divided by their number; the length covariate is AlpacaEval 2.0's bounded
length difference.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["TIES", "verdict_scores", "win_rates", "length_covariate"]

TIES = ("half", "exclude")


def verdict_scores(verdicts: Sequence, *, ties: str = "half") -> np.ndarray:
    """Score of the row's model A: ``A`` → 1, ``B`` → 0, ``tie`` → ½ (NaN with ``ties="exclude"``).

    Missing verdicts (``None``) are NaN: the row is not a comparison for that source.
    """
    if ties not in TIES:
        raise PUAuditError(f"ties must be one of {list(TIES)}, got {ties!r}.")
    v = np.asarray(verdicts, dtype=object)
    out = np.full(len(v), np.nan)
    out[v == "A"] = 1.0
    out[v == "B"] = 0.0
    if ties == "half":
        out[v == "tie"] = 0.5
    return out


def win_rates(i, j, wins, n, *, n_models: int) -> np.ndarray:
    r"""Win rate of every model against the field from (fractional) pairwise results.

    .. math:: \mathrm{wr}_k = \frac{\sum_{u: i_u = k} w_u + \sum_{u: j_u = k} (n_u - w_u)}
                                   {\sum_{u: i_u = k \lor j_u = k} n_u}

    Parameters
    ----------
    i, j : array of int
        The two models of each unit (row or group of rows).
    wins : array of float
        Score of model ``i`` summed over the unit's comparisons (a tie counts ½).
    n : array of float
        Number of comparisons in the unit.
    n_models : int

    Returns
    -------
    ndarray of shape (n_models,), NaN for a model without comparisons.
    """
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    wins = np.asarray(wins, dtype=float)
    n = np.asarray(n, dtype=float)
    won = np.bincount(i, wins, n_models) + np.bincount(j, n - wins, n_models)
    played = np.bincount(i, n, n_models) + np.bincount(j, n, n_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(played > 0, won / np.where(played > 0, played, 1.0), np.nan)


def length_covariate(length_a, length_b) -> np.ndarray:
    r"""AlpacaEval 2.0's length feature: :math:`\tanh\big((\ell_A - \ell_B) / \mathrm{sd}(\ell_A -
    \ell_B)\big)`, bounded in (−1, 1) so that very long answers cannot dominate the fit.

    Lengths are in characters; the standard deviation is over the rows given (0 when constant).
    """
    diff = np.asarray(length_a, dtype=float) - np.asarray(length_b, dtype=float)
    finite = np.isfinite(diff)
    sd = float(np.std(diff[finite])) if finite.any() else 0.0
    if not sd > 0:
        return np.zeros(len(diff))
    return np.where(finite, np.tanh(diff / sd), 0.0)
