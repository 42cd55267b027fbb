"""Non-transitivity of pair relations: triple classification and the ratio NTR_k.

Relations are coded ``+1`` (``>``), ``-1`` (``<``), ``0`` (``=``). For one judge and question,
``R[a, b]`` is the relation of candidate a vs b (``R[b, a] = −R[a, b]``) and ``known[a, b]`` says
whether the pair has one.

A triple is *bad* when no weak order (ranking with ties) agrees with its three relations. A
k-subset is non-transitive iff one of its ``C(k, 3)`` triples is bad, so everything is computed
from a per-question boolean tensor ``bad[a, b, c]``.
"""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist
from typing import Sequence

import numpy as np
import pandas as pd

from puaudit.errors import PUAuditError

__all__ = [
    "KINDS",
    "KIND_LABELS",
    "REL_CODE",
    "classify_triple",
    "relation_matrix",
    "bad_triple_tensor",
    "count_nontransitive",
    "pool_counts",
    "violating_triples",
]

KINDS = ("strict_cycle", "tie_cycle", "equivalence_contradiction")
KIND_LABELS = {"strict_cycle": "strict cycle", "tie_cycle": "cycle through a tie",
               "equivalence_contradiction": "equivalence contradiction"}
REL_CODE = {">": 1, "<": -1, "=": 0}
_REL_STR = {1: ">", -1: "<", 0: "="}


def _weak_order_exists(r_ab: int, r_bc: int, r_ac: int) -> bool:
    # three items need at most three levels: try every assignment
    for xa, xb, xc in itertools.product(range(3), repeat=3):
        if (np.sign(xa - xb) == r_ab and np.sign(xb - xc) == r_bc and np.sign(xa - xc) == r_ac):
            return True
    return False


def classify_triple(r_ab: str, r_bc: str, r_ac: str) -> str | None:
    """Classify the relations of a triple (a vs b, b vs c, a vs c).

    Returns ``None`` when some weak order is consistent with them, else ``"strict_cycle"`` (no
    ``=``, e.g. a>b>c>a), ``"tie_cycle"`` (one ``=``, e.g. a=b>c>a) or
    ``"equivalence_contradiction"`` (two ``=``: a=b, b=c, a≠c).
    """
    codes = [REL_CODE[r] for r in (r_ab, r_bc, r_ac)]
    if _weak_order_exists(*codes):
        return None
    return KINDS[sum(c == 0 for c in codes)]


# _KIND[r_ab + 1, r_bc + 1, r_ac + 1] = 0 (consistent) or 1 + index in KINDS
_KIND = np.zeros((3, 3, 3), dtype=np.int8)
for _c in itertools.product((-1, 0, 1), repeat=3):
    _k = classify_triple(*(_REL_STR[x] for x in _c))
    _KIND[_c[0] + 1, _c[1] + 1, _c[2] + 1] = 0 if _k is None else 1 + KINDS.index(_k)


def relation_matrix(candidate_i: Sequence[str], candidate_j: Sequence[str],
                    relation: Sequence[str], *, candidates: Sequence[str] | None = None
                    ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Relation matrix of one judge and question.

    Returns
    -------
    names : list of str
        Candidates, sorted (or as given).
    R : numpy.ndarray of int8, shape (n, n)
    known : numpy.ndarray of bool, shape (n, n)
    """
    names = sorted(set(candidate_i) | set(candidate_j)) if candidates is None else list(candidates)
    pos = {c: i for i, c in enumerate(names)}
    n = len(names)
    R = np.zeros((n, n), dtype=np.int8)
    known = np.zeros((n, n), dtype=bool)
    for ci, cj, r in zip(candidate_i, candidate_j, relation):
        if r is None:
            continue
        a, b = pos[ci], pos[cj]
        R[a, b] = REL_CODE[r]
        R[b, a] = -REL_CODE[r]
        known[a, b] = known[b, a] = True
    return names, R, known


def bad_triple_tensor(R: np.ndarray, known: np.ndarray, *, kinds: bool = False) -> np.ndarray:
    """``bad[a, b, c]`` = the triple has all three relations and admits no weak order.

    With ``kinds=True`` return the int8 kind code instead (0 consistent or incomplete,
    ``1 + KINDS.index(kind)`` otherwise). Symmetric in its three indices; zero on repeated indices.
    """
    R = np.asarray(R, dtype=np.int64)
    k = _KIND[(R + 1)[:, :, None], (R + 1)[None, :, :], (R + 1)[:, None, :]]
    complete = known[:, :, None] & known[None, :, :] & known[:, None, :]
    k = np.where(complete, k, 0).astype(np.int8)
    return k if kinds else k > 0


def _subset_flags(bad: np.ndarray, known: np.ndarray, subsets: np.ndarray,
                  all_known: bool) -> tuple[np.ndarray, np.ndarray]:
    """(eligible, non-transitive) flags for an array of k-subsets, shape (m, k)."""
    k = subsets.shape[1]
    nontrans = np.zeros(len(subsets), dtype=bool)
    for p, q, r in itertools.combinations(range(k), 3):
        nontrans |= bad[subsets[:, p], subsets[:, q], subsets[:, r]]
    eligible = np.ones(len(subsets), dtype=bool)
    if not all_known:
        for p, q in itertools.combinations(range(k), 2):
            eligible &= known[subsets[:, p], subsets[:, q]]
    return eligible, nontrans & eligible


def _sample_subsets(n: int, k: int, m: int, rng: np.random.Generator) -> np.ndarray:
    if n <= 4 * k:
        return np.argsort(rng.random((m, n)), axis=1)[:, :k]
    out = rng.integers(0, n, size=(m, k))
    while True:
        s = np.sort(out, axis=1)
        dup = np.any(s[:, 1:] == s[:, :-1], axis=1)
        if not dup.any():
            return out
        out[dup] = rng.integers(0, n, size=(int(dup.sum()), k))


def count_nontransitive(bad: np.ndarray, known: np.ndarray, k: int, *,
                        max_exact_subsets: int = 200_000, n_samples: int = 20_000,
                        random_state: int | np.random.Generator | None = None,
                        chunk: int = 100_000) -> dict:
    """Count the non-transitive k-subsets of one question's candidates.

    Exact when ``C(n, k) ≤ max_exact_subsets``: every k-subset is enumerated. Otherwise
    ``n_samples`` k-subsets are drawn uniformly (with ``random_state``) and the counts are
    estimated as ``C(n, k)·mean``; :func:`pool_counts` turns the sample moments into a
    confidence interval.

    Returns
    -------
    dict
        ``nontransitive`` and ``eligible`` (counts, estimated when not exact), ``exact``,
        ``total`` = C(n, k), and for an estimate ``n_samples``, ``mean_bad``, ``mean_eligible``.
    """
    if k < 3:
        raise PUAuditError(f"k must be at least 3 (got {k}): a subset needs a triple to be "
                           "non-transitive.")
    n = bad.shape[0]
    total = math.comb(n, k)
    all_known = bool(known[~np.eye(n, dtype=bool)].all()) if n else True
    if total == 0:
        return {"nontransitive": 0.0, "eligible": 0.0, "exact": True, "total": 0}
    if total <= max_exact_subsets:
        n_bad = n_elig = 0
        combos = itertools.combinations(range(n), k)
        while True:
            block = np.fromiter(itertools.chain.from_iterable(itertools.islice(combos, chunk)),
                                dtype=np.int64)
            if block.size == 0:
                break
            elig, nt = _subset_flags(bad, known, block.reshape(-1, k), all_known)
            n_bad += int(nt.sum())
            n_elig += int(elig.sum())
        return {"nontransitive": float(n_bad), "eligible": float(n_elig), "exact": True,
                "total": total}
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    subsets = _sample_subsets(n, k, n_samples, rng)
    elig, nt = _subset_flags(bad, known, subsets, all_known)
    mb, me = float(nt.mean()), float(elig.mean())
    return {"nontransitive": total * mb, "eligible": total * me, "exact": False, "total": total,
            "n_samples": int(n_samples), "mean_bad": mb, "mean_eligible": me}


def pool_counts(counts: Sequence[dict], *, confidence: float = 0.95) -> dict:
    """Pool per-question counts into one ratio ``NTR_k = Σ non-transitive / Σ eligible``.

    Estimated questions add variance by the delta method for a ratio: with per-sample indicators
    ``b`` (non-transitive) and ``e`` (eligible, ``b ⊆ e``) and ``R`` the pooled ratio,
    ``Var(R) ≈ Σ_q T_q² Var(b − R·e)_q / m_q / D²`` where ``D = Σ eligible`` and
    ``Var(b − R·e) = mb(1−mb) + R²·me(1−me) − 2R·mb(1−me)``. The interval is the normal one,
    clipped to [0, 1]; it is a point when every count is exact.

    Returns
    -------
    dict
        ``ntr`` (None when nothing is eligible), ``ci`` (low, high) or None, ``exact``,
        ``nontransitive``, ``eligible``.
    """
    num = sum(c["nontransitive"] for c in counts)
    den = sum(c["eligible"] for c in counts)
    exact = all(c["exact"] for c in counts)
    if den <= 0:
        return {"ntr": None, "ci": None, "exact": exact, "nontransitive": num, "eligible": den}
    ratio = num / den
    var = 0.0
    for c in counts:
        if c["exact"]:
            continue
        mb, me, T, m = c["mean_bad"], c["mean_eligible"], c["total"], c["n_samples"]
        v = mb * (1 - mb) + ratio ** 2 * me * (1 - me) - 2 * ratio * mb * (1 - me)
        var += T ** 2 * max(v, 0.0) / m
    var /= den ** 2
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(var)
    return {"ntr": ratio, "ci": (max(0.0, ratio - half), min(1.0, ratio + half)), "exact": exact,
            "nontransitive": num, "eligible": den}


def violating_triples(names: Sequence[str], R: np.ndarray, known: np.ndarray,
                      margin: np.ndarray | None = None) -> pd.DataFrame:
    """List the bad triples of one question, each oriented as a cycle ``x ≥ y ≥ z ≥ x``.

    Every bad triple has exactly one cyclic orientation whose three relations are all ``>`` or
    ``=``; it is rotated to start at the lowest-sorted candidate with a strict outgoing edge.

    Parameters
    ----------
    margin : numpy.ndarray, shape (n, n), optional
        Probability margin of each pair (see ``pair_relations``). When given, the edge with the
        smallest margin is reported as the weakest edge: the likeliest judge error, whose
        reversal breaks the cycle.

    Returns
    -------
    DataFrame
        ``cand_1, cand_2, cand_3``, ``rel_12, rel_23, rel_31``, ``kind``, and with ``margin``
        ``weakest_edge`` (``"x > y"``) and ``weakest_margin``.
    """
    cols = ["cand_1", "cand_2", "cand_3", "rel_12", "rel_23", "rel_31", "kind"]
    if margin is not None:
        cols += ["weakest_edge", "weakest_margin"]
    return pd.DataFrame(violation_arrays(names, R, known, margin), columns=cols)


def violation_arrays(names: Sequence[str], R: np.ndarray, known: np.ndarray,
                      margin: np.ndarray | None = None, *,
                      kinds: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Column arrays of :func:`violating_triples` (no DataFrame, for speed in loops)."""
    if kinds is None:
        kinds = bad_triple_tensor(R, known, kinds=True)
    n = len(names)
    a, b, c = np.nonzero(kinds)
    keep = (a < b) & (b < c)
    a, b, c = a[keep], b[keep], c[keep]
    R = R.astype(np.int64)
    fwd = (R[a, b] >= 0) & (R[b, c] >= 0) & (R[c, a] >= 0)
    v = np.column_stack([a, np.where(fwd, b, c), np.where(fwd, c, b)]).reshape(-1, 3)
    e = np.column_stack([R[v[:, 0], v[:, 1]], R[v[:, 1], v[:, 2]], R[v[:, 2], v[:, 0]]]).reshape(-1, 3)
    start = np.argmin(np.where(e != 0, v, n + 1), axis=1)
    rows = np.arange(len(v))
    order = (start[:, None] + np.arange(3)[None, :]) % 3
    v, e = v[rows[:, None], order], e[rows[:, None], order]
    nm = np.asarray(names, dtype=object)
    rel = np.array(["=", ">"], dtype=object)
    out = {"cand_1": nm[v[:, 0]], "cand_2": nm[v[:, 1]], "cand_3": nm[v[:, 2]],
           "rel_12": rel[e[:, 0]], "rel_23": rel[e[:, 1]], "rel_31": rel[e[:, 2]],
           "kind": np.array(KINDS, dtype=object)[kinds[a, b, c] - 1]}
    if margin is not None:
        m = np.column_stack([margin[v[:, 0], v[:, 1]], margin[v[:, 1], v[:, 2]],
                             margin[v[:, 2], v[:, 0]]]).reshape(-1, 3)
        w = np.argmin(m, axis=1) if len(m) else np.zeros(0, dtype=int)
        src = nm[v[rows, w]]
        dst = nm[v[rows, (w + 1) % 3]]
        out["weakest_edge"] = np.array([f"{s} {r} {d}" for s, r, d in zip(src, rel[e[rows, w]], dst)],
                                       dtype=object)
        out["weakest_margin"] = m[rows, w]
    return out
