"""Triple classification, NTR_k counting (exact and Monte-Carlo), cycle listing and ranking."""

import itertools
import math
import time

import numpy as np
import pandas as pd
import pytest

from puaudit.errors import PUAuditError
from puaudit.trustjudge import (
    analyse,
    bad_triple_tensor,
    classify_triple,
    count_nontransitive,
    pool_counts,
    rank_candidates,
    relation_matrix,
    violating_triples,
)

S, T, E = "strict_cycle", "tie_cycle", "equivalence_contradiction"

# (a vs b, b vs c, a vs c) -> kind, None when a weak order agrees. Written by hand.
EXPECTED = {
    (">", ">", ">"): None, (">", ">", "<"): S, (">", "<", ">"): None, (">", "<", "<"): None,
    ("<", ">", ">"): None, ("<", ">", "<"): None, ("<", "<", ">"): S, ("<", "<", "<"): None,
    ("=", ">", ">"): None, ("=", ">", "<"): T, ("=", "<", ">"): T, ("=", "<", "<"): None,
    (">", "=", ">"): None, (">", "=", "<"): T, ("<", "=", ">"): T, ("<", "=", "<"): None,
    (">", ">", "="): T, (">", "<", "="): None, ("<", ">", "="): None, ("<", "<", "="): T,
    ("=", "=", ">"): E, ("=", "=", "<"): E, ("=", ">", "="): E, ("=", "<", "="): E,
    (">", "=", "="): E, ("<", "=", "="): E,
    ("=", "=", "="): None,
}


def test_expectation_table_covers_all_27_patterns():
    assert set(EXPECTED) == set(itertools.product(">=<", repeat=3))


@pytest.mark.parametrize("pattern", sorted(EXPECTED))
def test_classify_triple(pattern):
    assert classify_triple(*pattern) == EXPECTED[pattern]


@pytest.mark.parametrize("pattern", sorted(EXPECTED))
def test_tensor_agrees_with_table_in_every_ordering(pattern):
    names, R, known = relation_matrix(["a", "b", "a"], ["b", "c", "c"], list(pattern))
    kinds = bad_triple_tensor(R, known, kinds=True)
    expected = 0 if EXPECTED[pattern] is None else 1 + [S, T, E].index(EXPECTED[pattern])
    for p in itertools.permutations(range(3)):
        assert kinds[p] == expected
    assert not kinds[0, 0, 1] and not kinds[1, 1, 1]


def test_incomplete_triple_is_never_bad():
    names, R, known = relation_matrix(["a", "b"], ["b", "c"], [">", ">"], candidates=["a", "b", "c"])
    assert not bad_triple_tensor(R, known).any()


@pytest.mark.parametrize("ci, cj, rel, cands, rels, kind", [
    (["a", "b", "c"], ["b", "c", "a"], [">", ">", ">"], ["a", "b", "c"], [">", ">", ">"], S),
    (["a", "b", "a"], ["b", "c", "c"], [">", ">", "<"], ["a", "b", "c"], [">", ">", ">"], S),
    (["a", "b", "a"], ["b", "c", "c"], ["<", "<", ">"], ["a", "c", "b"], [">", ">", ">"], S),
    # a = b > c > a, read from b: b > c > a = b
    (["a", "b", "a"], ["b", "c", "c"], ["=", ">", "<"], ["b", "c", "a"], [">", ">", "="], T),
    # a = b, b = c, a > c
    (["a", "b", "a"], ["b", "c", "c"], ["=", "=", ">"], ["a", "c", "b"], [">", "=", "="], E),
])
def test_violating_triples_are_oriented_as_cycles(ci, cj, rel, cands, rels, kind):
    names, R, known = relation_matrix(ci, cj, rel)
    v = violating_triples(names, R, known)
    assert len(v) == 1
    row = v.iloc[0]
    assert [row.cand_1, row.cand_2, row.cand_3] == cands
    assert [row.rel_12, row.rel_23, row.rel_31] == rels
    assert row.kind == kind


def test_weakest_edge_has_smallest_margin():
    names, R, known = relation_matrix(["a", "b", "c"], ["b", "c", "a"], [">", ">", ">"])
    margin = np.array([[np.inf, 0.8, 0.3], [0.8, np.inf, 0.05], [0.3, 0.05, np.inf]])
    v = violating_triples(names, R, known, margin)
    assert v.iloc[0].weakest_edge == "b > c"
    assert v.iloc[0].weakest_margin == pytest.approx(0.05)


def _random_relations(n, rng, p_missing=0.0, p_tie=0.2):
    ci, cj, rel = [], [], []
    for a, b in itertools.combinations(range(n), 2):
        if rng.random() < p_missing:
            continue
        ci.append(f"c{a:03d}")
        cj.append(f"c{b:03d}")
        rel.append("=" if rng.random() < p_tie else (">" if rng.random() < 0.5 + 0.02 * (b - a) else "<"))
    return relation_matrix(ci, cj, rel, candidates=[f"c{i:03d}" for i in range(n)])


def _brute_force(R, known, k):
    bad = elig = 0
    for sub in itertools.combinations(range(len(R)), k):
        if not all(known[x, y] for x, y in itertools.combinations(sub, 2)):
            continue
        elig += 1
        bad += any(classify_triple(*(({1: ">", -1: "<", 0: "="})[int(R[x, y])] for x, y in
                                     ((a, b), (b, c), (a, c)))) is not None
                   for a, b, c in itertools.combinations(sub, 3))
    return bad, elig


@pytest.mark.parametrize("k", [3, 4, 5])
def test_exact_count_matches_brute_force_with_missing_pairs(k):
    names, R, known = _random_relations(9, np.random.default_rng(k), p_missing=0.1)
    got = count_nontransitive(bad_triple_tensor(R, known), known, k)
    bad, elig = _brute_force(R, known, k)
    assert got["exact"] and (got["nontransitive"], got["eligible"]) == (bad, elig)
    assert got["total"] == math.comb(9, k)


def test_monte_carlo_estimate_brackets_exact_count():
    rng = np.random.default_rng(1)
    names, R, known = _random_relations(30, rng, p_tie=0.08)
    bad = bad_triple_tensor(R, known)
    exact = count_nontransitive(bad, known, 5, max_exact_subsets=10**6)
    assert exact["exact"] and exact["eligible"] == math.comb(30, 5)
    truth = exact["nontransitive"] / exact["eligible"]
    mc = count_nontransitive(bad, known, 5, max_exact_subsets=1000, n_samples=20_000, random_state=7)
    assert not mc["exact"]
    pooled = pool_counts([mc])
    lo, hi = pooled["ci"]
    assert lo <= truth <= hi
    assert hi - lo < 0.02
    assert abs(pooled["ntr"] - truth) < 0.01
    again = count_nontransitive(bad, known, 5, max_exact_subsets=1000, n_samples=20_000, random_state=7)
    assert again["nontransitive"] == mc["nontransitive"]


def test_monte_carlo_with_missing_pairs_uses_ratio_interval():
    names, R, known = _random_relations(25, np.random.default_rng(2), p_missing=0.05, p_tie=0.1)
    bad = bad_triple_tensor(R, known)
    exact = count_nontransitive(bad, known, 4, max_exact_subsets=10**6)
    truth = exact["nontransitive"] / exact["eligible"]
    pooled = pool_counts([count_nontransitive(bad, known, 4, max_exact_subsets=0, n_samples=20_000,
                                              random_state=3), exact])
    full = (exact["nontransitive"] * 2) / (exact["eligible"] * 2)
    assert pooled["ci"][0] <= full <= pooled["ci"][1]
    assert truth == pytest.approx(full)


def test_pool_counts_exact_gives_point_interval_and_none_when_empty():
    res = pool_counts([{"nontransitive": 2.0, "eligible": 10.0, "exact": True},
                       {"nontransitive": 1.0, "eligible": 10.0, "exact": True}])
    assert res["ntr"] == pytest.approx(0.15) and res["ci"] == (0.15, 0.15) and res["exact"]
    assert pool_counts([{"nontransitive": 0.0, "eligible": 0.0, "exact": True}])["ntr"] is None


def test_k_too_large_has_no_subsets_and_ntr_is_none():
    df = pd.DataFrame({"question_id": ["q"] * 3, "candidate_i": ["a", "a", "b"],
                       "candidate_j": ["b", "c", "c"], "verdict_1": ["A", "A", "A"]})
    rep = analyse(df, k=(3, 4))
    assert rep.ntr[3] == 0.0 and rep.ntr[4] is None and rep.cr is None


def test_hundred_candidates_per_question_returns_in_seconds():
    rng = np.random.default_rng(0)
    rows = []
    for q in range(3):
        skill = rng.normal(size=100)
        for a, b in itertools.combinations(range(100), 2):
            d = skill[a] - skill[b] + rng.normal(0, 0.5)
            rows.append((f"q{q}", f"m{a}", f"m{b}", "A" if d > 0.2 else ("B" if d < -0.2 else "tie")))
    df = pd.DataFrame(rows, columns=["question_id", "candidate_i", "candidate_j", "verdict_1"])
    start = time.perf_counter()
    rep = analyse(df, k=(3, 4, 5))
    elapsed = time.perf_counter() - start
    assert elapsed < 20
    assert rep.ntr_exact[3] and not rep.ntr_exact[4] and not rep.ntr_exact[5]
    lo, hi = rep.ntr_ci[5]
    assert lo <= rep.ntr[5] <= hi and 0 < rep.ntr[3] < rep.ntr[4] < rep.ntr[5]


# wins[a, b] of four candidates, fractional (ties count half); every pair compared
_WINS = np.array([[0, 3, 1, 2], [1, 0, 2, 0.5], [1, 1, 0, 2], [0, 1.5, 1, 0]], dtype=float)


def _relations(wins: np.ndarray, *, question: str = "q", judge: str = "j") -> pd.DataFrame:
    """Relation rows whose probabilities add up to twice ``wins`` (row a beats column b)."""
    rows = []
    for a, b in itertools.combinations(range(len(wins)), 2):
        n = wins[a, b] + wins[b, a]
        if n > 0:
            # a row is one comparison: 2n rows with probabilities wins / n are the pair's wins,
            # doubled (every n here is a multiple of 1/2)
            for _ in range(int(n * 2)):
                rows.append((judge, question, "all", f"c{a}", f"c{b}", wins[a, b] / n,
                             wins[b, a] / n, 0.0))
    return pd.DataFrame(rows, columns=["judge", "question_id", "category", "candidate_i",
                                       "candidate_j", "prob_i", "prob_j", "prob_tie"])


def _strengths(ranking: pd.DataFrame) -> np.ndarray:
    by_name = dict(zip(ranking["candidate"], ranking["strength"]))
    return np.array([by_name[f"c{k}"] for k in range(len(by_name))])


def test_rank_candidates_strengths_solve_the_likelihood_equations():
    """Without pseudo-wins the strengths are the maximum-likelihood estimate: each candidate's
    expected wins under the model equal its observed wins (Zermelo's equations)."""
    theta = _strengths(rank_candidates(_relations(_WINS), prior=0.0))
    assert theta.sum() == pytest.approx(0, abs=1e-9)
    pi = np.exp(theta)
    # each pair appears 2n times with wins/n each, i.e. twice the wins
    n = 2 * (_WINS + _WINS.T)
    expected_wins = (n * pi[:, None] / (pi[:, None] + pi[None, :])).sum(axis=1)
    np.testing.assert_allclose(expected_wins, 2 * _WINS.sum(axis=1), rtol=1e-6)


def test_rank_candidates_pseudo_wins_keep_a_sweep_finite_and_questions_apart():
    """A candidate that wins every comparison gets a finite strength from the pseudo-wins, and
    a question's strengths do not depend on the other questions fitted with it."""
    sweep = np.array([[0, 2, 2], [0, 0, 1], [0, 1, 0]], dtype=float)
    both = pd.concat([_relations(sweep, question="q"), _relations(_WINS, question="r")])
    ranked = rank_candidates(both, prior=0.1)
    q = _strengths(ranked[ranked["question_id"] == "q"])
    assert np.isfinite(q).all() and q[0] > q[1] == pytest.approx(q[2], abs=1e-9)
    alone = rank_candidates(_relations(_WINS, question="r"), prior=0.1)
    np.testing.assert_allclose(_strengths(ranked[ranked["question_id"] == "r"]),
                               _strengths(alone), atol=1e-9)


def test_rank_candidates_refuses_a_negative_prior():
    with pytest.raises(PUAuditError, match="prior .* must be >= 0"):
        rank_candidates(_relations(_WINS), prior=-1.0)


def test_rankings_follow_a_transitive_tournament_and_cycles_tie():
    df = pd.DataFrame({"question_id": ["q"] * 3 + ["r"] * 3,
                       "candidate_i": ["a", "a", "b", "a", "b", "a"],
                       "candidate_j": ["b", "c", "c", "b", "c", "c"],
                       "verdict_1": ["A", "A", "A", "A", "A", "B"],
                       "verdict_2": ["B", "B", "B", "B", "B", "A"]})
    rep = analyse(df)
    q = rep.rankings[rep.rankings["question_id"] == "q"]
    assert list(q["candidate"]) == ["a", "b", "c"] and list(q["rank"]) == [1, 2, 3]
    r = rep.rankings[rep.rankings["question_id"] == "r"]
    assert list(r["rank"]) == [1, 1, 1]  # a > b > c > a: all equally strong
    assert rep.triples["strict_cycle"] == 1 and rep.ntr[3] == pytest.approx(0.5)
    v = rep.violations.iloc[0]
    assert (v.question_id, v.candidates, v.relations) == ("r", "a, b, c", "a > b > c > a")
