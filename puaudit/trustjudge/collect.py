"""From an input table to judge requests, and from the judge's responses to TrustJudge tables.

Two input shapes (column names case-insensitive, common variants recognised):

answers (one row per question and candidate)
    ``question_id`` (qid, prompt_id, id; generated from the question text when absent),
    ``question`` (prompt, instruction, query, input), ``candidate`` (model, model_name, system),
    ``answer`` (response, output, completion, text), optional ``category`` (question_type, type,
    task, domain). Every pair of a question's candidates is compared.
comparisons (a PUAudit table: one row per comparison)
    ``prompt``, ``response_a``, ``response_b`` and the other columns :func:`puaudit.data.schema
    .guess_columns` recognises (``model_a``, ``model_b``, ``question_id``, ``category``, ...).
    Each row is judged as it stands (order 1 shows response_a first) and the judge's verdict is
    written to its ``judge_winner`` column, so the table goes straight to ``puaudit audit``.

:func:`plan_judging` (:mod:`.judge_plan`) builds the requests; :func:`assemble`
(:mod:`.judge_tables`, reading each response with :mod:`.judge_responses`) turns the cached
responses into the pairwise table (``verdict_1``, ``verdict_2``, ``p1_A`` … ``p2_tie``, ``ppl_1``, ``ppl_2``,
``token_logprobs_1``, ``token_logprobs_2``, ``rationale_1``, ``rationale_2``; see
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
