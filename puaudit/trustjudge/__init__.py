"""TrustJudge: score–comparison conflicts and non-transitive pairwise judgments.

Reads pairwise-verdict and single-score tables, computes pair relations (baseline or
likelihood-aware), the Conflict Ratio, NTR_k with each violating triple classified, a
Bradley–Terry ranking per question and the weakest edge of every cycle. ``puaudit judge``
(:mod:`.runner`, :mod:`.judge_tables`, :mod:`.prompts`) collects such tables from any
OpenAI-compatible endpoint. See ``docs/trustjudge.md`` and ``docs/method.md`` ("TrustJudge").
"""

from puaudit.trustjudge.conflict import attach_scores, conflict_ratio, expected_relation
from puaudit.trustjudge.demo import make_demo
from puaudit.trustjudge.io import normalise_verdict, read_pairwise, read_scores
from puaudit.trustjudge.candidate_ranking import rank_candidates
from puaudit.trustjudge.likelihood import (confidence_weights, perplexity,
                                           score_distribution_from_logprobs,
                                           verdict_probabilities)
from puaudit.trustjudge.relations import (METHODS, aggregate_probabilities, pair_distribution,
                                          pair_relations, relation_baseline,
                                          relation_bidirectional, relation_ppl,
                                          relation_weighted, weighted_distribution)
from puaudit.trustjudge.report import TrustJudgeReport, analyse
from puaudit.trustjudge.scores import (SCORE_METHODS, score_baseline, score_distribution,
                                       score_geval, score_scale, score_table)
from puaudit.trustjudge.transitivity import (KIND_LABELS, KINDS, bad_triple_tensor,
                                             classify_triple, count_nontransitive, pool_counts,
                                             relation_matrix, violating_triples)

__all__ = [
    "METHODS", "SCORE_METHODS", "KINDS", "KIND_LABELS", "TrustJudgeReport", "analyse",
    "read_pairwise", "read_scores", "normalise_verdict", "make_demo",
    "relation_baseline", "relation_bidirectional", "relation_ppl", "relation_weighted",
    "weighted_distribution", "aggregate_probabilities", "pair_distribution", "pair_relations",
    "perplexity", "confidence_weights", "verdict_probabilities", "score_distribution_from_logprobs",
    "score_baseline", "score_geval", "score_distribution", "score_scale", "score_table",
    "expected_relation", "conflict_ratio", "attach_scores",
    "classify_triple", "relation_matrix", "bad_triple_tensor", "count_nontransitive",
    "pool_counts", "violating_triples", "rank_candidates",
]
