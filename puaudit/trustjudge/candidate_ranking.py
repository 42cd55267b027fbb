"""Each question's candidates ranked per judge from the aggregated pairwise probabilities
(Bradley–Terry strengths); the leaderboards of whole models live in :mod:`puaudit.rankings`."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["pseudo_win_strengths", "rank_candidates"]


def pseudo_win_strengths(wins: np.ndarray, *, prior: float = 0.1, max_iter: int = 10_000,
                         tol: float = 1e-9,
                         log: bool = False) -> np.ndarray | tuple[np.ndarray, dict]:
    """Bradley–Terry strengths of win counts smoothed by pseudo-wins, by Hunter's MM iteration.

    Model ``P(a beats b) = π_a / (π_a + π_b)``. With ``w_ab`` the (fractional) wins of a over b and
    ``n_ab = w_ab + w_ba``, iterate ``π_a ← W_a / Σ_b n_ab / (π_a + π_b)``, ``W_a = Σ_b w_ab``.

    The maximum-likelihood estimate on the counts plus ``prior`` pseudo-wins each way per
    compared pair; :func:`puaudit.rankings.estimate.bradley_terry` fits the same likelihood with
    a Gaussian prior on the strengths instead (other numbers for ``prior > 0``; with the
    pseudo-wins added to its counts and ``prior=0`` it gives these strengths to about 3e-8).
    This one solves a stack of small per-question problems at once.

    Parameters
    ----------
    wins : numpy.ndarray, shape (n, n) or (u, n, n)
        ``wins[a, b]`` ≥ 0 (diagonal ignored). A stack of ``u`` independent problems is solved
        at once; pad smaller problems with all-zero rows and columns (a candidate never compared
        gets strength 0 and does not affect the others).
    prior : float, default 0.1
        Pseudo-wins added both ways to every compared pair, so that a candidate that never wins
        (or never loses) keeps a finite strength.

    Returns
    -------
    theta : numpy.ndarray, shape (n,) or (u, n)
        Log-strengths ``log π``, centred to mean 0 over the compared candidates (higher is
        better).
    log : dict, if ``log=True``
        ``n_iter`` and ``converged``.
    """
    w = np.array(wins, dtype=float)
    single = w.ndim == 2
    if single:
        w = w[None]
    idx = np.arange(w.shape[1])
    w[:, idx, idx] = 0.0
    compared = (w + np.swapaxes(w, 1, 2)) > 0
    w = w + prior * compared
    n_ab = w + np.swapaxes(w, 1, 2)
    W = w.sum(axis=2)
    active = compared.any(axis=2)
    n_active = np.maximum(active.sum(axis=1, keepdims=True), 1)
    theta = np.zeros(W.shape)
    converged, it = False, 0
    for it in range(1, max_iter + 1):
        pi = np.exp(theta)
        denom = (n_ab / (pi[:, :, None] + pi[:, None, :])).sum(axis=2)
        new = np.log(np.where(active, W, 1.0)) - np.log(np.where(active, denom, 1.0))
        # fix the scale (π is defined up to a factor): mean log-strength 0 per problem
        new -= (new * active).sum(axis=1, keepdims=True) / n_active
        new = np.where(active, new, 0.0)
        step = np.max(np.abs(new - theta)) if new.size else 0.0
        theta = new
        if step < tol:
            converged = True
            break
    theta = theta[0] if single else theta
    if not log:
        return theta
    return theta, {"n_iter": it, "converged": converged}


def rank_candidates(relations: pd.DataFrame, *, prior: float = 0.1) -> pd.DataFrame:
    """Rank every question's candidates per judge.

    Each pair contributes ``prob_i + prob_tie/2`` wins to candidate i and ``prob_j + prob_tie/2``
    to candidate j (columns from ``pair_relations``: the judge's probabilities over both orders,
    or the orders' votes when there are none).

    Returns
    -------
    DataFrame
        ``judge, question_id, category, candidate, strength, rank`` (1 = best; equal strengths
        share the better rank), sorted by judge, question and rank.
    """
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
    unit_names = [sorted(set(ci[idx]) | set(cj[idx])) for _, idx in groups]
    size = max(len(n) for n in unit_names)
    wins = np.zeros((len(groups), size, size))
    for u, ((_, idx), names) in enumerate(zip(groups, unit_names)):
        pos = {c: i for i, c in enumerate(names)}
        a = np.array([pos[c] for c in ci[idx]])
        b = np.array([pos[c] for c in cj[idx]])
        np.add.at(wins[u], (a, b), win_i[idx])
        np.add.at(wins[u], (b, a), win_j[idx])
    thetas = pseudo_win_strengths(wins, prior=prior)
    parts: dict[str, list] = {c: [] for c in cols}
    for ((judge, qid), idx), names, theta in zip(groups, unit_names, thetas):
        theta = theta[:len(names)]
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
