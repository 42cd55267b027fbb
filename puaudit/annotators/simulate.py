"""Comparison tables with planted annotators and a known truth, for checking the models."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.annotators.votes import LABELS
from puaudit.errors import PUAuditError

__all__ = ["simulate_votes"]


def _shown(label: int, flip: bool) -> int:
    return label if label == 2 or not flip else 1 - label


def _plant_annotators(rng: np.random.Generator, *, n_good: int, accuracy: tuple[float, float],
                      n_random: int, n_always_a: int, n_longer: int) -> tuple[dict, dict]:
    """Annotator name -> role, and each good annotator's accuracy (drawn first, in order)."""
    roles, acc = {}, {}
    for j in range(n_good):
        name = f"good_{j + 1:02d}"
        roles[name] = "good"
        acc[name] = float(rng.uniform(*accuracy))
    for prefix, role, k in (("random", "random", n_random), ("always_a", "always_a", n_always_a),
                            ("longer", "longer", n_longer)):
        for j in range(k):
            roles[f"{prefix}_{j + 1:02d}"] = role
    return roles, acc


def _planted_confusion(roles: dict, acc: dict) -> dict:
    """Planted P(vote | truth) per annotator in the shown orientation (None for ``longer``)."""
    confusion = {}
    for name, role in roles.items():
        if role == "good":
            a = acc[name]
            confusion[name] = np.full((3, 3), (1 - a) / 2) + np.eye(3) * (a - (1 - a) / 2)
        elif role == "random":
            confusion[name] = np.full((3, 3), 1 / 3)
        elif role == "always_a":
            confusion[name] = np.tile([1.0, 0.0, 0.0], (3, 1))
        else:
            confusion[name] = None
    return confusion


def simulate_votes(n_items: int = 500, *, votes_per_item: tuple[int, int] = (3, 5),
                   n_good: int = 8, accuracy: tuple[float, float] = (0.75, 0.9),
                   n_random: int = 2, n_always_a: int = 1, n_longer: int = 1,
                   tie_share: float = 0.1, longer_better: float = 0.6,
                   judge_accuracy: float = 0.8, shuffle_order: bool = True,
                   random_state: int = 0) -> tuple[pd.DataFrame, dict]:
    """A comparison table with planted annotators and a known truth.

    Each item's truth is tie with probability ``tie_share``, else one of its two responses;
    the better one is the longer with probability ``longer_better``. Each item gets between
    ``votes_per_item[0]`` and ``votes_per_item[1]`` votes from distinct annotators drawn
    uniformly. Annotators: ``good_NN`` (vote the truth with their accuracy, drawn from
    ``accuracy``, else one of the two other labels at random), ``random_NN`` (A, B, tie
    uniformly), ``always_a_NN`` (always the first-shown response) and ``longer_NN`` (always the
    longer response). With ``shuffle_order`` every vote's row shows the pair in a random order
    (as in MT-Bench); else each item has one random order (as in LLMFAO). The judge votes the
    truth with ``judge_accuracy``, else one of the two other labels.

    Returns
    -------
    df : DataFrame
        ``question_id, category, prompt, response_a, response_b, human_winner, annotator,
        judge_winner, true_winner`` (truth in the row's order), one row per vote.
    info : dict
        ``roles`` (annotator -> role), ``accuracy`` (good annotator -> accuracy), ``confusion``
        (annotator -> planted 3x3 P(vote | truth) in the shown orientation; None for the
        ``longer`` annotators, whose votes depend on lengths), ``truth`` (item -> 0/1/2 for
        first / second response / tie).
    """
    rng = np.random.default_rng(random_state)
    roles, acc = _plant_annotators(rng, n_good=n_good, accuracy=accuracy, n_random=n_random,
                                   n_always_a=n_always_a, n_longer=n_longer)
    names = list(roles)
    lo_k, hi_k = votes_per_item
    if len(names) < hi_k:
        raise PUAuditError(f"{len(names)} annotators cannot give {hi_k} distinct votes per item.")
    truth = np.where(rng.random(n_items) < tie_share, 2, rng.integers(0, 2, n_items))
    # lengths: the better response is the longer one with probability longer_better
    short = rng.integers(200, 600, n_items)
    extra = rng.integers(50, 400, n_items)
    first_longer = np.where(truth == 2, rng.random(n_items) < 0.5,
                            np.where(rng.random(n_items) < longer_better, truth == 0, truth == 1))
    len_first = np.where(first_longer, short + extra, short)
    len_second = np.where(first_longer, short, short + extra)
    item_flip = rng.random(n_items) < 0.5
    rows = []

    def other(t):
        return int(rng.choice([x for x in range(3) if x != t]))

    for i in range(n_items):
        texts = (f"Answer one to question {i}. " + "x" * int(len_first[i]),
                 f"Answer two to question {i}. " + "y" * int(len_second[i]))
        t = int(truth[i])
        jv = t if rng.random() < judge_accuracy else other(t)
        k = int(rng.integers(lo_k, hi_k + 1))
        for name in rng.choice(names, size=k, replace=False):
            flip = bool(rng.random() < 0.5) if shuffle_order else bool(item_flip[i])
            a_text, b_text = (texts[1], texts[0]) if flip else texts
            t_shown = _shown(t, flip)
            role = roles[name]
            if role == "good":
                v = t_shown if rng.random() < acc[name] else other(t_shown)
            elif role == "random":
                v = int(rng.integers(0, 3))
            elif role == "always_a":
                v = 0
            else:
                v = 0 if len(a_text) > len(b_text) else 1
            rows.append({"question_id": i, "category": "sim", "prompt": f"Question {i}?",
                         "response_a": a_text, "response_b": b_text,
                         "human_winner": LABELS[v], "annotator": name,
                         "judge_winner": LABELS[_shown(jv, flip)],
                         "true_winner": LABELS[t_shown]})
    return pd.DataFrame(rows), {"roles": roles, "accuracy": acc,
                                "confusion": _planted_confusion(roles, acc), "truth": truth}
