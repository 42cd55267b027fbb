"""Generated demo data for TrustJudge: several judges, both answer orders, probabilities,
perplexities, short rationales and score distributions. Everything is drawn from a seeded model
below; no real text is involved.

Model. Each question has candidates with a latent quality ``q_c`` (a per-candidate skill plus
question noise). A judge perceives ``q_c + ε`` (its noise level) and, for each answer order,
favours the response shown first by its position bias ``β``: with ``x`` the perceived advantage of
the first-shown response plus pair and order noise, its probabilities are
``softmax([x + β, −x, τ − |x|])`` over (A, B, tie) and its verdict is the most likely letter.
Position bias makes close pairs flip with the order, so the baseline relation (orders must
agree) fills with ``=`` and equivalence contradictions, while summing both orders' probabilities
cancels the bias. The judgment's perplexity falls with the judge's confidence. Single scores are
a distribution over 1–10 centred on the perceived quality; its most likely token ties often, its
expectation rarely.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.special import softmax

__all__ = ["make_demo", "DEMO_JUDGES"]

DEMO_JUDGES = {
    # name: (perception noise, position bias β, tie logit τ)
    "judge-large": (0.35, 0.9, 0.2),
    "judge-small": (0.8, 1.6, 0.6),
}
_CATEGORIES = ("writing", "math", "coding", "reasoning")
_NAMES = ("atlas", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath", "islet", "juniper",
          "kestrel", "lumen")
_PRAISE = ("more complete", "clearer", "more accurate", "better organised", "more helpful")
_FAULT = ("misses a step", "is vaguer", "contains an error", "wanders off topic", "is too terse")


def _rationale(verdict: str, category: str, rng: np.random.Generator) -> str:
    if verdict == "tie":
        return f"Both assistants handle this {category} question about equally well."
    win, lose = ("1", "2") if verdict == "A" else ("2", "1")
    return (f"Assistant {win}'s answer is {rng.choice(_PRAISE)}; assistant {lose}'s "
            f"{rng.choice(_FAULT)}. Verdict: [[{verdict}]]")


def make_demo(*, n_questions: int = 24, n_candidates: int = 6,
              judges: dict[str, tuple[float, float, float]] | None = None,
              random_state: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generate a pairwise table (both orders) and a single-score table.

    Parameters
    ----------
    n_questions : int, default 24
        Questions, spread over four categories.
    n_candidates : int, default 6
        Candidates per question (at most 12 names; more get numbered names).
    judges : dict, optional
        ``{name: (perception noise, position bias, tie logit)}``; default :data:`DEMO_JUDGES`.
    random_state : int, default 0

    Returns
    -------
    pairwise : DataFrame
        Canonical pairwise columns with ``p1_A … p2_tie``, ``ppl_1``, ``ppl_2`` and rationales.
    scores : DataFrame
        ``judge, question_id, category, candidate, score`` (most likely token) and ``p_1 … p_10``.
    """
    rng = np.random.default_rng(random_state)
    judges = DEMO_JUDGES if judges is None else judges
    names = list(_NAMES[:n_candidates]) + [f"cand-{i:02d}" for i in range(len(_NAMES), n_candidates)]
    skill = np.linspace(1.0, -1.0, n_candidates) + rng.normal(0, 0.2, n_candidates)
    pair_rows, score_rows = [], []
    tokens = np.arange(1, 11)
    for q in range(n_questions):
        qid = f"q{q + 1:02d}"
        category = _CATEGORIES[q % len(_CATEGORIES)]
        quality = skill + rng.normal(0, 0.6, n_candidates)
        for judge, (noise, bias, tie_logit) in judges.items():
            seen = quality + rng.normal(0, noise, n_candidates)
            for i, j in itertools.combinations(range(n_candidates), 2):
                row = {"judge": judge, "question_id": qid, "category": category,
                       "candidate_i": names[i], "candidate_j": names[j]}
                # pair-level noise (same in both orders) makes some cycles survive aggregation
                pair_eps = rng.normal(0, noise)
                for order, first, second, sign in ((1, i, j, 1), (2, j, i, -1)):
                    x = 1.5 * (seen[first] - seen[second]) + sign * pair_eps + rng.normal(0, 0.5)
                    p = softmax(np.array([x + bias, -x, tie_logit - abs(x)]))
                    verdict = ("A", "B", "tie")[int(np.argmax(p))]
                    row[f"verdict_{order}"] = verdict
                    row[f"p{order}_A"], row[f"p{order}_B"], row[f"p{order}_tie"] = np.round(p, 4)
                    row[f"ppl_{order}"] = round(1.0 + 4.0 * (1.0 - p.max()) + rng.gamma(2.0, 0.05), 4)
                    row[f"rationale_{order}"] = _rationale(verdict, category, rng)
                pair_rows.append(row)
            centre = 5.5 + 1.8 * (seen + rng.normal(0, 0.3, n_candidates))
            for c in range(n_candidates):
                p = np.exp(-0.5 * ((tokens - centre[c]) / 1.1) ** 2)
                p = np.round(p / p.sum(), 4)
                score_rows.append({"judge": judge, "question_id": qid, "category": category,
                                   "candidate": names[c], "score": int(tokens[np.argmax(p)]),
                                   **{f"p_{t}": float(v) for t, v in zip(tokens, p)}})
    cols = ["judge", "question_id", "category", "candidate_i", "candidate_j", "verdict_1",
            "verdict_2", "p1_A", "p1_B", "p1_tie", "p2_A", "p2_B", "p2_tie", "ppl_1", "ppl_2",
            "rationale_1", "rationale_2"]
    return pd.DataFrame(pair_rows)[cols], pd.DataFrame(score_rows)
