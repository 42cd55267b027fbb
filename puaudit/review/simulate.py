"""Does the review queue help? A simulation on fully annotated data.

One seeded audit splits the annotated items into P and validation. The validation rows play the
rows nobody has checked: the queue (or a random order) picks items among them, and a simulated
reviewer answers with the held-back human verdict of the item's first row. After ``k`` reviews
the reviewed rows join P (each reviewed item gives one vote, like one reviewer; its other rows
are set aside so that no item straddles P and validation) and the audit reruns with the same
configuration. Measured on the original validation rows (a fixed set, the same for both orders):

``cons_final``
    agreement with people of the final labels: the reviewer's verdict on reviewed items (on each
    of the item's rows, in that row's A/B orientation), the rerun audit's adjusted verdict
    elsewhere.
``cons_remaining``, ``judge_remaining``
    on the validation rows not reviewed: the rerun audit's adjusted verdicts and the judge's own
    (their difference is the audit's lift there, free of which rows were taken out).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from puaudit.audit.config import AuditConfig
from puaudit.audit.stages import audit_table, human_labels
from puaudit.audit.splits import prepare_split
from puaudit.audit.splits import SPLIT_EXCLUDED, SPLIT_P, SPLIT_VAL
from puaudit.review.queue import ORDERS, review_order

__all__ = ["simulate_review", "summarise_simulation"]

REVIEWED_REASON = "reviewed item (its first row joined P)"


def _strict_agree(a, b) -> np.ndarray:
    return np.asarray([x == y for x, y in zip(a, b)], dtype=bool)


def simulate_review(table, embeddings, config: AuditConfig | None = None, *,
                    budgets=(50, 100, 200, 400), orders=ORDERS, seeds=(0,),
                    progress=None) -> pd.DataFrame:
    """One line per (seed, order, budget), budget 0 included; see the module docstring.

    Columns: ``seed``, ``order``, ``budget``, ``n_reviewed`` (items), ``n_validation``,
    ``cons_final``, ``n_remaining``, ``cons_remaining``, ``judge_remaining``, ``n_p``,
    ``n_reversed``, ``fixed_by_review`` (reviewed rows where the judge was wrong).
    """
    config = config or AuditConfig()
    rows = []
    for seed in seeds:
        cfg = config.replace(random_state=int(seed))
        human = human_labels(table, cfg, embeddings)
        prep0 = prepare_split(table, embeddings, cfg, human=human)
        res0 = audit_table(table, embeddings, cfg, prep=prep0)
        hum = np.asarray(prep0.human, dtype=object)
        judge = np.asarray(prep0.judge, dtype=object)
        val = np.flatnonzero(prep0.split == SPLIT_VAL)
        items = np.asarray(table.item_id, dtype=object)
        texts = (np.asarray(table.response_a, dtype=object), np.asarray(table.response_b, dtype=object))
        rows.append(_measure(seed, "none", 0, val, np.array([], dtype=np.int64), res0, hum, judge,
                             set()))
        for order in orders:
            ranked = review_order(res0.p_judge_right, res0.group, val, order=order,
                                  random_state=int(seed))
            first = ~pd.Series(items[ranked]).duplicated().to_numpy()
            reps = ranked[first]  # one row per item, in review order
            for k in budgets:
                k = int(min(k, len(reps)))
                chosen = reps[:k]
                done = set(items[chosen].tolist())
                split = prep0.split.copy()
                reason = prep0.reason.copy()
                mates = np.flatnonzero(np.isin(items, list(done)) & (split == SPLIT_VAL))
                split[mates] = SPLIT_EXCLUDED
                reason[mates] = REVIEWED_REASON
                split[chosen] = SPLIT_P
                reason[chosen] = ""
                p = split == SPLIT_P
                prep = dataclasses.replace(prep0, split=split, reason=reason,
                                           m_estimate=float(np.mean(judge[p] == hum[p])))
                res = audit_table(table, embeddings, cfg, prep=prep)
                rows.append(_measure(seed, order, k, val, chosen, res, hum, judge, done,
                                     items=items, texts=texts))
                if progress:
                    progress(rows[-1])
        # budget 0 is the same audit for every order
    out = pd.DataFrame(rows)
    zero = out[out["order"] == "none"]
    extra = [zero.assign(order=o) for o in orders]
    out = pd.concat([out[out["order"] != "none"], *extra], ignore_index=True)
    return out.sort_values(["seed", "order", "budget"]).reset_index(drop=True)


def _measure(seed, order, k, val, chosen, res, hum, judge, done, *, items=None,
             texts=None) -> dict:
    final = np.asarray(res.adjusted, dtype=object).copy()
    if len(chosen):
        # every validation row of a reviewed item ends with the reviewer's verdict, read in the
        # row's own orientation (an item's rows may show the two answers in either order)
        rep = dict(zip(items[chosen].tolist(), chosen.tolist()))
        ra, rb = texts
        for i in val:
            r = rep.get(items[i])
            if r is None:
                continue
            if ra[i] == ra[r] and rb[i] == rb[r]:
                final[i] = hum[r]
            elif ra[i] == rb[r] and rb[i] == ra[r]:
                final[i] = {"A": "B", "B": "A"}.get(hum[r], hum[r])
        reviewed = np.isin(items[val], list(done))
    else:
        reviewed = np.zeros(len(val), dtype=bool)
    remaining = val[~reviewed]
    agree_final = _strict_agree(final[val], hum[val])
    agree_rem = _strict_agree(np.asarray(res.adjusted, dtype=object)[remaining], hum[remaining])
    judge_rem = _strict_agree(judge[remaining], hum[remaining])
    return {
        "seed": int(seed), "order": order, "budget": int(k), "n_reviewed": int(len(chosen)),
        "n_validation": int(len(val)),
        "cons_final": float(agree_final.mean()) if len(val) else float("nan"),
        "n_remaining": int(len(remaining)),
        "cons_remaining": float(agree_rem.mean()) if len(remaining) else float("nan"),
        "judge_remaining": float(judge_rem.mean()) if len(remaining) else float("nan"),
        "n_p": int(np.sum(np.asarray(res.split) == SPLIT_P)),
        "n_reversed": int(np.sum(np.asarray(res.group) == "negative")),
        "fixed_by_review": int(np.sum(judge[chosen] != hum[chosen])) if len(chosen) else 0,
    }


def summarise_simulation(sim: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per budget: final-label consistency and gain for each order, and the
    queue's advantage (``queue_minus_random``)."""
    g = sim.groupby(["order", "budget"]).agg(
        cons_final=("cons_final", "mean"), cons_final_sd=("cons_final", "std"),
        cons_remaining=("cons_remaining", "mean"), judge_remaining=("judge_remaining", "mean"),
        fixed=("fixed_by_review", "mean"), n_reviewed=("n_reviewed", "mean")).reset_index()
    wide = g.pivot(index="budget", columns="order")
    out = pd.DataFrame(index=wide.index)
    for o in sorted(set(sim["order"])):
        out[f"{o}_cons_final"] = wide[("cons_final", o)]
        out[f"{o}_fixed"] = wide[("fixed", o)]
        out[f"{o}_lift_remaining"] = wide[("cons_remaining", o)] - wide[("judge_remaining", o)]
    if {"value", "random"} <= set(sim["order"]):
        out["queue_minus_random"] = out["value_cons_final"] - out["random_cons_final"]
    return out.reset_index()
