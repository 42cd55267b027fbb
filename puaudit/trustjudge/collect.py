"""From an input table to judge requests, and from the judge's responses to TrustJudge tables.

Two input shapes, answers (one row per question and candidate) and comparisons (a PUAudit
table, one row per comparison): see :mod:`.judge_plan`.

:func:`plan_judging` (:mod:`.judge_plan`) builds the requests; :func:`assemble`
(:mod:`.judge_tables`, reading each response with :mod:`.judge_responses`) turns the cached
responses into the pairwise table (``verdict_1``, ``verdict_2``, ``p1_A`` … ``p2_tie``,
``ppl_1``, ``ppl_2``, ``token_logprobs_1``, ``token_logprobs_2``, ``rationale_1``, ``rationale_2``; see
:func:`puaudit.trustjudge.io.read_pairwise`) and the single-score table (``score``,
``p_<low>`` … ``p_<high>``, ``ppl``, ``token_logprobs``; see
:func:`puaudit.trustjudge.io.read_scores`).
"""

from puaudit.trustjudge.judge_plan import (ANSWER_ALIASES, JudgePlan, detect_input_kind,
                                           plan_judging)
from puaudit.trustjudge.judge_responses import usable_tokens
from puaudit.trustjudge.judge_tables import WINNER_RULES, JudgeTables, assemble

__all__ = ["JudgePlan", "JudgeTables", "plan_judging", "assemble", "usable_tokens",
           "ANSWER_ALIASES", "WINNER_RULES", "detect_input_kind"]
