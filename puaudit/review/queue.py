"""Which rows are worth a human check first.

A check makes a row right, so its value is about ``min(p, 1 − p)`` (``p`` the audit's calibrated
probability that the judge is right): the queue takes the guarded rule's ``uncertain`` rows,
then the reversal candidates, then the rest, each tier closest to a coin flip first; with a
certified threshold ``t`` the escalated rows farthest below it first; rows a cascade of judges
left for people without a human verdict before all of these. ``order="random"`` is the seeded
baseline. The tiers in full: docs/review.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.audit.relabel import GROUP_NEG, GROUP_UNCERTAIN
from puaudit.audit.splits import SPLIT_U
from puaudit.errors import PUAuditError
from puaudit.review.keys import row_keys

__all__ = ["ORDERS", "TIER_NAMES", "CASCADE_TIER", "STAGE_COLUMN", "review_order",
           "review_queue", "cascade_people", "left_for_people"]

ORDERS = ("value", "random")
TIER_NAMES = {0: "uncertain", 1: "reversal candidate", 2: "other"}
CERTIFIED_TIER_NAMES = {0: "escalated", 1: "trusted"}
#: The tier of the rows a cascade of judges left for people.
CASCADE_TIER = "cascade: no judge trusted"
#: The cascade export's column naming the judge trusted on each row, or ``people``.
STAGE_COLUMN = "puaudit_cascade_stage"
# puaudit.audit.certify.cascade.PEOPLE (not imported: the cascade pulls in the audit)
PEOPLE = "people"


def _tiers(group) -> np.ndarray:
    g = np.asarray(group, dtype=object)
    return np.where(g == GROUP_UNCERTAIN, 0, np.where(g == GROUP_NEG, 1, 2))


def review_order(p_judge_right, group, candidates, *, order: str = "value",
                 random_state: int | None = 0, below=None, first=None) -> np.ndarray:
    """Indices of ``candidates`` (row indices) in review order.

    Parameters
    ----------
    p_judge_right, group : arrays over all rows (an :class:`~puaudit.audit.result.AuditResult`'s)
    candidates : int array of row indices (or a boolean mask)
    order : {"value", "random"}
    below : array over all rows, optional
        Certified threshold minus each row's probability
        (:meth:`~puaudit.audit.certify.judge.Certification.distance_below`): escalated rows
        (``> 0``) first, largest first, then trusted ones, closest to the threshold first.
    first : bool array over all rows, optional
        Rows that go before every other (the rows a cascade left for people,
        :func:`cascade_people`), each part in the order above. Ignored by ``"random"``.
    """
    if order not in ORDERS:
        raise PUAuditError(f"Unknown review order '{order}': choose one of {list(ORDERS)}.")
    cand = np.asarray(candidates)
    if cand.dtype == bool:
        cand = np.flatnonzero(cand)
    cand = cand.astype(np.int64)
    if order == "random":
        return np.random.default_rng(random_state).permutation(cand)
    # np.lexsort: the last key is the primary one
    ahead = (np.zeros(len(cand), dtype=bool) if first is None
             else np.asarray(first, dtype=bool)[cand])
    if below is not None:
        b = np.asarray(below, dtype=np.float64)[cand]
        key = np.where(np.isnan(b), np.inf, -b)
        return cand[np.lexsort((cand, key, (b > 0) == 0, ~ahead))]
    p = np.asarray(p_judge_right, dtype=np.float64)[cand]
    dist = np.where(np.isnan(p), np.inf, np.abs(p - 0.5))
    tier = _tiers(np.asarray(group, dtype=object)[cand])
    return cand[np.lexsort((cand, dist, tier, ~ahead))]


def cascade_people(table, cascade_stage=None) -> np.ndarray | None:
    """(n,) bool: the rows a cascade left for people (stage ``people``) that have no human
    verdict; None when there is no cascade.

    ``cascade_stage`` is the stage of each row (the judge trusted, ``people``, or missing where
    the cascade did not see the row); default the table's own :data:`STAGE_COLUMN` (a cascade
    export loaded as the table), else None.
    """
    if cascade_stage is None:
        if STAGE_COLUMN not in table.frame.columns:
            return None
        cascade_stage = table.frame[STAGE_COLUMN].to_numpy()
    if len(cascade_stage) != len(table):
        raise PUAuditError(f"The cascade has {len(cascade_stage)} rows but the table has "
                           f"{len(table)}: run the cascade again on this table.",
                           column=STAGE_COLUMN)
    return left_for_people(cascade_stage, table.human)


def left_for_people(cascade_stage, human) -> np.ndarray:
    """(n,) bool: stage ``people`` (any case, spaces around) and no human verdict (None)."""
    stage = np.asarray(cascade_stage, dtype=object)
    people = np.array([isinstance(v, str) and v.strip().lower() == PEOPLE for v in stage],
                      dtype=bool)
    return people & np.array([h is None for h in human], dtype=bool)


def review_queue(table, result, *, order: str = "value", random_state: int | None = 0,
                 candidates=None, question_types=None, models=None,
                 cascade_stage=None) -> pd.DataFrame:
    """The review queue of an audit, one line per distinct row content.

    Parameters
    ----------
    table : ComparisonTable
        The table the audit ran on.
    result : AuditResult
    candidates : mask or indices, optional
        Rows that may be reviewed; default the audit's unlabelled rows (a strict judge verdict and
        no human verdict).
    question_types, models : collections, optional
        Keep rows of these question types / where model A or model B is one of these.
    cascade_stage : array over the table's rows, optional
        A cascade's ``puaudit_cascade_stage`` (default the table's own column, when it has
        one): the rows it left for people without a human verdict join the candidates and come
        first, tier :data:`CASCADE_TIER` (:func:`cascade_people`).

    Returns
    -------
    DataFrame with ``rank`` (1 = first), ``row`` (0-based index into the table), ``key``,
    ``tier`` (``escalated`` / ``trusted`` when the audit certified; :data:`CASCADE_TIER` for the
    rows a cascade left for people), ``p_judge_right``, ``group``,
    ``judge``, ``question_type``, ``model_a``, ``model_b``. Rows sharing a content key appear once (the first of them).
    """
    n = len(table)
    if len(result.split) != n:
        raise PUAuditError(f"The audit has {len(result.split)} rows but the table has {n}: "
                           "rerun the audit on this table.")
    if candidates is None:
        mask = np.asarray(result.split, dtype=object) == SPLIT_U
    else:
        c = np.asarray(candidates)
        mask = c.astype(bool) if c.dtype == bool else np.isin(np.arange(n), c)
    people = cascade_people(table, cascade_stage)
    if people is not None and candidates is None:
        mask = mask | people
    keys = row_keys(table)
    ma = _model_col(table, "model_a")
    mb = _model_col(table, "model_b")
    if question_types is not None:
        mask &= np.isin(np.asarray(table.question_type, dtype=object).astype(str),
                        [str(t) for t in question_types])
    if models is not None and ma is not None:
        wanted = [str(m) for m in models]
        mask &= np.isin(ma.astype(str), wanted) | np.isin(mb.astype(str), wanted)
    # one line per content key: the first row carrying it
    first = ~pd.Series(keys).duplicated().to_numpy()
    cert = getattr(result, "certification", None)
    below = cert.distance_below() if cert is not None else None
    rows = review_order(result.p_judge_right, result.group, mask & first, order=order,
                        random_state=random_state, below=below, first=people)
    group = np.asarray(result.group, dtype=object)[rows]
    tiers = ([CERTIFIED_TIER_NAMES[int(not b > 0)] for b in below[rows]] if below is not None
             else [TIER_NAMES[t] for t in _tiers(group)])
    if people is not None:
        tiers = [CASCADE_TIER if people[r] else t for r, t in zip(rows, tiers)]
    return pd.DataFrame({
        "rank": np.arange(1, len(rows) + 1),
        "row": rows,
        "key": keys[rows],
        "tier": tiers,
        "p_judge_right": np.asarray(result.p_judge_right, dtype=np.float64)[rows],
        "group": group,
        "judge": np.asarray(table.judge, dtype=object)[rows],
        "question_type": np.asarray(table.question_type, dtype=object)[rows],
        "model_a": (ma[rows] if ma is not None else np.full(len(rows), "", dtype=object)),
        "model_b": (mb[rows] if mb is not None else np.full(len(rows), "", dtype=object)),
    })


def _model_col(table, role: str):
    col = table.columns.get(role)
    if col is None or col not in table.frame.columns:
        return None
    return np.array(["" if v is None or (isinstance(v, float) and v != v) else str(v)
                     for v in table.frame[col].tolist()], dtype=object)
