"""Each question's candidates ranked per judge from the aggregated pairwise probabilities
(Bradley–Terry strengths from :func:`puaudit.rankings.bradley_terry.bradley_terry`, the fit the
leaderboards of whole models use)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError
from puaudit.rankings.bradley_terry import bradley_terry

__all__ = ["rank_candidates"]


def rank_candidates(relations: pd.DataFrame, *, prior: float = 0.1) -> pd.DataFrame:
    r"""Rank every question's candidates per judge by Bradley–Terry strengths.

    Each pair contributes ``prob_i + prob_tie/2`` wins to candidate i and ``prob_j + prob_tie/2``
    to candidate j (columns from ``pair_relations``: the judge's probabilities over both orders,
    or the orders' votes when there are none). With :math:`w_{ab}` the wins of a over b plus
    ``prior`` pseudo-wins each way per compared pair, the strengths :math:`\theta` maximise

    .. math:: \sum_{a \ne b} w_{ab} \log \sigma(\theta_a - \theta_b)

    per judge and question (mean 0 over the question's candidates;
    :func:`puaudit.rankings.bradley_terry.bradley_terry` with its Gaussian prior off), so a
    candidate that never wins or never loses keeps a finite strength.

    Parameters
    ----------
    relations : DataFrame
        ``judge, question_id, category, candidate_i, candidate_j, prob_i, prob_j, prob_tie``.
    prior : float, default 0.1
        Pseudo-wins added both ways to every compared pair (≥ 0).

    Returns
    -------
    DataFrame
        ``judge, question_id, category, candidate, strength, rank`` (1 = best; equal strengths
        share the better rank), sorted by judge, question and rank.
    """
    if prior < 0:
        raise PUAuditError(f"prior (pseudo-wins per pair) must be >= 0, got {prior}.")
    cols = ["judge", "question_id", "category", "candidate", "strength", "rank"]
    ci = relations["candidate_i"].to_numpy(dtype=object)
    cj = relations["candidate_j"].to_numpy(dtype=object)
    cat = relations["category"].to_numpy(dtype=object)
    half_tie = relations["prob_tie"].to_numpy(dtype=float) / 2
    win_i = relations["prob_i"].to_numpy(dtype=float) + half_tie
    win_j = relations["prob_j"].to_numpy(dtype=float) + half_tie
    groups = sorted(relations.groupby(["judge", "question_id"]).indices.items(), key=lambda t: t[0])
    if not groups:
        return pd.DataFrame(columns=cols)
    parts: dict[str, list] = {c: [] for c in cols}
    for (judge, qid), idx in groups:
        names = sorted(set(ci[idx]) | set(cj[idx]))
        theta = _strengths(names, ci[idx], cj[idx], win_i[idx], win_j[idx], prior=prior)
        rounded = np.round(theta, 9)
        rank = 1 + (rounded[None, :] > rounded[:, None]).sum(axis=1)
        order = np.lexsort((np.array(names, dtype=object), rank))
        parts["judge"] += [judge] * len(names)
        parts["question_id"] += [qid] * len(names)
        parts["category"] += [cat[idx[0]]] * len(names)
        parts["candidate"] += [names[o] for o in order]
        parts["strength"] += list(theta[order])
        parts["rank"] += list(rank[order])
    return pd.DataFrame(parts, columns=cols)


def _strengths(names: list, ci, cj, win_i, win_j, *, prior: float) -> np.ndarray:
    """Strengths of one question's candidates: the pairs' wins (a pair listed twice adds up)
    plus the pseudo-wins, fitted without a Gaussian prior."""
    d = len(names)
    pos = {c: k for k, c in enumerate(names)}
    wins = np.zeros((d, d))
    a = np.array([pos[c] for c in ci])
    b = np.array([pos[c] for c in cj])
    np.add.at(wins, (a, b), win_i)
    np.add.at(wins, (b, a), win_j)
    np.fill_diagonal(wins, 0.0)
    wins += prior * ((wins + wins.T) > 0)
    i, j = np.triu_indices(d, 1)
    n = wins[i, j] + wins[j, i]
    keep = n > 0
    theta, _ = bradley_terry(i[keep], j[keep], wins[i, j][keep], n[keep], n_models=d, prior=0.0)
    return theta
