"""Generated demo data: pairwise comparisons with a biased judge and selective human labels.

Everything here is produced by code from small word lists (no copied texts), so a new user can try
every page and command with no data of their own. The hidden truth is in ``true_winner``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["generate_demo", "DEMO_JUDGE_COLUMNS"]

DEMO_JUDGE_COLUMNS = ("judge_winner", "judge_winner_padded")

_TOPICS = {
    "coding": (["reverse a linked list", "parse a CSV file", "merge two sorted arrays",
                "count word frequencies", "validate an email address", "compute a moving average",
                "deduplicate a list while keeping order", "find the longest common prefix"],
               "Write a Python function to {t}."),
    "math": (["the sum of the first 50 odd numbers", "the derivative of x^3 sin x",
              "the probability of two sixes in three dice rolls", "the area of a triangle with sides 5, 6, 7",
              "the remainder of 7^100 divided by 13", "the number of diagonals of a decagon"],
             "Compute {t} and explain each step."),
    "writing": (["a rainy harbour town", "a first day at a new job", "an old lighthouse keeper",
                 "a city garden in spring", "a lost letter found decades later"],
                "Write a short, vivid paragraph about {t}."),
    "reasoning": (["three boxes labelled wrongly", "a train leaving two stations",
                   "a liar and a truth-teller at a fork", "weighing twelve coins with one fake",
                   "scheduling five meetings in three rooms"],
                  "Solve the puzzle about {t} and justify the answer."),
    "extraction": (["the dates in a meeting note", "the prices in a product list",
                    "the names in a news summary", "the cities in a travel itinerary"],
                   "Extract {t} and return them as JSON."),
    "stem": (["why the sky is blue", "how vaccines train the immune system",
              "what causes ocean tides", "how a transistor switches", "why ice floats"],
             "Explain {t} to a high-school student."),
}

_GOOD = {
    "coding": ["The function handles the empty input first.", "It runs in linear time and uses constant extra memory.",
               "Here is a tested implementation with clear variable names.", "Edge cases such as duplicates are covered by the loop invariant.",
               "A short docstring states the inputs and the return value."],
    "math": ["Step 1 sets up the formula correctly.", "Step 2 simplifies the expression without errors.",
             "The final result is checked by substituting it back.", "Each algebraic step follows from the previous one.",
             "Therefore the exact answer is stated with its units."],
    "writing": ["Salt wind drifts over slate roofs while gulls argue above the nets.",
                "The scene moves from quiet detail to a clear emotional turn.", "Concrete images carry the mood instead of adjectives.",
                "The rhythm of the sentences changes to match the tension.", "The paragraph ends on a resonant, specific image."],
    "reasoning": ["Label the boxes and test the one marked mixed first.", "Each case is eliminated with an explicit argument.",
                  "The answer follows because the remaining option is the only consistent one.", "A counterexample rules out the tempting shortcut.",
                  "The solution is verified against every constraint."],
    "extraction": ["The JSON lists every item exactly once in the original order.", "Values are normalised to ISO format.",
                   "No item is invented and none is missing.", "Keys are consistent across all entries.",
                   "The output parses as valid JSON."],
    "stem": ["Shorter wavelengths scatter more strongly, which explains the colour.", "The explanation names the mechanism and gives one everyday example.",
             "A simple analogy makes the idea concrete without distorting it.", "The key quantity and its direction of change are stated correctly.",
             "A common misconception is corrected explicitly."],
}
_BAD = ["I am not completely sure, but it might be something like this.", "The answer is probably 12, although this may be wrong.",
        "This step is skipped because it is obvious.", "There could be several answers and it depends.",
        "Some details are omitted here.", "The result contradicts the earlier step, but let us continue.",
        "This ignores the edge cases.", "It returns the wrong value for empty input."]
_FILLER = ["It is important to note that this is a very interesting and important question.",
           "Many people have wondered about this topic for a long time.",
           "In conclusion, as mentioned above, the topic is important.",
           "Let me restate the question in my own words before answering.",
           "There are many factors to consider, and each factor matters."]
_MODELS = ("atlas-7b", "borealis-13b", "cirrus-70b", "delta-chat", "ember-3b")


def _response(rng, qtype: str, quality: float, pad: int) -> str:
    n_sent = 3 + int(rng.integers(0, 3))
    sents = []
    for _ in range(n_sent):
        pool = _GOOD[qtype] if rng.random() < quality else _BAD
        sents.append(pool[int(rng.integers(0, len(pool)))])
    sents += [_FILLER[int(rng.integers(0, len(_FILLER)))] for _ in range(pad)]
    order = rng.permutation(len(sents))
    return " ".join(sents[i] for i in order)


def generate_demo(n_rows: int = 600, *, annotated_share: float = 0.8, n_annotators: int = 8,
                  random_state: int | None = 0) -> pd.DataFrame:
    """Generate a pairwise-comparison table with a biased judge and selective human labels.

    Each question gets candidate answers of latent quality ``q ~ Beta(0.4, 0.4)`` (most answers
    clearly good or clearly poor: each sentence comes from the question type's good pool with
    probability ``q``, else from a pool of wrong or evasive sentences); the true winner of a pair
    is the higher-quality answer (Bradley–Terry with a steep slope). The judge follows quality but also
    prefers longer answers (verbosity bias) and the first-shown one (position bias);
    ``judge_winner_padded`` is the same judge after a padding attack (filler added to the weaker
    answer). People label a selective subset (``annotated_share`` scaled per question type, so
    some types are labelled far more than others), mostly correctly; the default 0.8 leaves P
    large enough (about 120 rows at p_ratio 0.3) that the default audit's calibrated reversals
    are confident on 600 rows (at 0.5 it reversed none);
    one of the ``n_annotators`` prefers the first-shown answer.

    Returns
    -------
    DataFrame with columns ``question_id, category, turn, model_a, model_b, prompt, response_a,
    response_b, judge_winner, judge_winner_padded, human_winner, annotator, true_winner``.
    """
    rng = np.random.default_rng(random_state)
    types = list(_TOPICS)
    label_rate = {t: annotated_share * f for t, f in zip(types, (1.4, 1.2, 0.6, 1.0, 0.8, 1.0))}
    annotators = [f"annotator_{i + 1:02d}" for i in range(n_annotators)]
    rows = []
    qid = 0
    while len(rows) < n_rows:
        qid += 1
        qtype = types[int(rng.integers(0, len(types)))]
        topics, template = _TOPICS[qtype]
        prompt = template.format(t=topics[int(rng.integers(0, len(topics)))])
        models = rng.choice(_MODELS, size=3, replace=False)
        quality = {mname: float(rng.beta(0.4, 0.4)) for mname in models}
        pads = {mname: int(rng.integers(0, 3)) for mname in models}
        texts = {mname: _response(rng, qtype, quality[mname], pads[mname]) for mname in models}
        for i in range(3):
            for j in range(i + 1, 3):
                if len(rows) >= n_rows:
                    break
                ma, mb = (models[i], models[j]) if rng.random() < 0.5 else (models[j], models[i])
                qa, qb = quality[ma], quality[mb]
                ta, tb = texts[ma], texts[mb]
                p_true_a = 1 / (1 + np.exp(-20 * (qa - qb)))
                truth = "A" if rng.random() < p_true_a else "B"
                len_bias = 0.012 * (len(ta) - len(tb))
                logit = 3 * (qa - qb) + len_bias + 0.35
                u = rng.random()
                judge = "tie" if u < 0.05 else ("A" if rng.random() < 1 / (1 + np.exp(-logit)) else "B")
                # padding attack: filler appended to the weaker answer
                weaker_a = qa < qb
                pad_len = 260
                logit_p = logit + (0.004 * pad_len if weaker_a else -0.004 * pad_len)
                judge_p = "tie" if u < 0.05 else ("A" if rng.random() < 1 / (1 + np.exp(-logit_p)) else "B")
                human, annot = "", ""
                if rng.random() < label_rate[qtype]:
                    annot = annotators[int(rng.integers(0, n_annotators))]
                    if annot == annotators[-1] and rng.random() < 0.5:
                        human = "A"  # the position-biased annotator
                    elif rng.random() < 0.05:
                        human = "tie"
                    else:
                        human = truth if rng.random() < 0.95 else ("B" if truth == "A" else "A")
                rows.append({
                    "question_id": qid, "category": qtype, "turn": 1, "model_a": ma, "model_b": mb,
                    "prompt": prompt, "response_a": ta, "response_b": tb, "judge_winner": judge,
                    "judge_winner_padded": judge_p, "human_winner": human, "annotator": annot,
                    "true_winner": truth,
                })
    return pd.DataFrame(rows)
