r"""The cascade's one guarantee: the union of every judge's trusted rows, certified by one
fixed-sequence test.

Each stage of a cascade (:mod:`puaudit.audit.cascade`) audits its judge on the rows the stages
before it escalated and certifies it on its own at risk :math:`\delta / K`: that decides who is
*asked* (the next judge sees the rows stage :math:`k` did not trust). Certifying each stage on
its own region at the target :math:`\alpha` asks every region to reach :math:`\alpha` by itself,
so a stage whose trusted rows agree well above :math:`\alpha` gives its margin away, and the
next stage, left with the hard rows, certifies little (MT-Bench, "longer answer wins" then
GPT-4, :math:`\alpha = 0.85`: the first stage's trusted validation rows agree about 0.89, GPT-4
agrees about 0.80 on the rows left, and the cascade trusted 0.53 of the rows against GPT-4
alone's 0.74). What a user is promised is about the union, so the union is what is certified.

**The rule at threshold** :math:`\tau`. Row :math:`i` has a held-out probability
:math:`q_{ki}` that judge :math:`k` is right for every judge asked about it (P rows: out of
fold; validation and unlabelled rows: the stage's calibrator, fitted on P), NaN for the others.
It takes the verdict of the *last* judge, in cascade order, whose probability reaches
:math:`\tau`, and is trusted when one does, i.e. when :math:`c_i = \max_k q_{ki} \ge \tau`:

.. math:: \text{stage}_\tau(i) = \max\{k : q_{ki} \ge \tau\}, \qquad
          y_i(\tau) = [\text{verdict of judge } \text{stage}_\tau(i) = \text{people's}].

The judges asked about a row were asked in cascade order, cheapest (and weakest) first, so the
last confident one is the strongest opinion paid for on that row (its evidence also read the
earlier verdicts). The trusted sets grow as :math:`\tau` falls (a row may move to a later
judge, never out), and they are fixed by the probabilities alone.

**Two judges that disagree cannot both be right.** On a row where people give a strict
verdict (every row the cascade routes), judges with opposite strict verdicts are right with
probabilities that sum to at most 1. A later judge's evidence read the earlier verdicts
(``agrees_<judge>``), so its :math:`q_{ki}` already knows of the disagreement and an earlier
judge's does not; each earlier judge's probability is capped by every later one asked about the
row that gave the opposite verdict (:func:`coherent_probabilities`):

.. math:: q_{ji} \leftarrow \min\bigl(q_{ji},\ 1 - q_{ki}\bigr)
          \quad\text{for } k > j \text{ asked, } v_{ki}, v_{ji} \in \{A, B\},\ v_{ki} \ne v_{ji}.

Without it a row where the strong judge doubts itself and disagrees with a confident cheap judge
would be trusted with the cheap judge's verdict at the cheap judge's optimism.

**The test** is the one of :mod:`puaudit.audit.certify` on :math:`c`: a grid of shares fixed
before any outcome is seen (0.30, 0.35, ..., 1); candidate :math:`s_j` holds every source's
:math:`\lceil s_j n_{\text{source}} \rceil` items of highest :math:`c` (with ties), each scored by
:math:`y(\tau)` at that source's threshold :math:`\tau` = its lowest :math:`c` in the set; it is
rejected when the exact one-sided Clopper–Pearson bound at level :math:`1 - \delta_f` reaches
:math:`\alpha`; testing stops at the first candidate not rejected, and before the first share at
which some source's :math:`c` falls below 0.5. Sources: P's items and the validation items, by
share; every row dealt into :math:`F` = 5 folds by item; fold :math:`f`'s rows are trusted by
the threshold certified on P and the other folds' validation items at
:math:`\delta_f = \delta / F` (union bound over the folds), so no row's outcome chooses its own
threshold and the agreement shown on trusted validation rows is a held-out measurement of
exactly the rule unlabelled rows get. Without validation items (``p_ratio`` = 1) the one test on
P is made at :math:`\delta`, and each fold's unlabelled rows are its top share by :math:`c` that
also reach P's threshold.

**The guarantee**: with probability at least :math:`1 - \delta`, the trusted rows, each with the
verdict of the judge trusted on it, agree with people at least :math:`\alpha` of the time; one
statement, one risk :math:`\delta` (the stages' own certifications at :math:`\delta / K` only
decide who is asked; they promise nothing to the user). Assumption, as for one judge: the
annotated items are exchangeable with the audited rows, here per region a judge was asked about
(each region is cut by thresholds certified without the outcomes of that fold's rows).
"""

from __future__ import annotations

import math

import numpy as np

from puaudit.audit.config import check_risk, check_target
from puaudit.audit.fixed_sequence import SHARE_STEP, START_SHARE, walk_shares
from puaudit.audit.splits import SPLIT_P, SPLIT_U, SPLIT_VAL
from puaudit.errors import PUAuditError

__all__ = ["coherent_probabilities", "union_sources", "choose_union_share", "certify_union"]


def coherent_probabilities(prob: np.ndarray, verdicts) -> np.ndarray:
    """``prob`` (K, n) with each earlier judge's probability capped by ``1 - q_k`` of every later
    judge ``k`` asked about the row that gave the opposite strict verdict (module docstring).

    ``verdicts``: K arrays of each judge's verdict per row (A, B, tie or None). A copy is
    returned; NaN (not asked) stays NaN and never caps.
    """
    prob = np.array(prob, dtype=np.float64, copy=True)
    v = [np.asarray(x, dtype=object) for x in verdicts]
    strict = [np.isin(x, ["A", "B"]) for x in v]
    asked = np.isfinite(prob)
    for j in range(len(prob) - 1):
        for k in range(j + 1, len(prob)):
            apart = asked[j] & asked[k] & strict[j] & strict[k] & (v[j] != v[k])
            prob[j, apart] = np.minimum(prob[j, apart], 1.0 - prob[k, apart])
    return prob


def union_sources(prob: np.ndarray, correct: np.ndarray, items: np.ndarray, rows: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One source's items, most confident first: ``(c, q, a)``.

    ``c`` (n_items,): the item's best probability over the judges asked; ``q`` (K, n_items):
    each judge's probability (``-inf``: not asked); ``a`` (K, n_items): the share of the item's
    votes that agree with judge k. Items without any probability are left out.
    """
    q_rows = np.nan_to_num(np.asarray(prob, dtype=np.float64)[:, rows], nan=-np.inf)
    keep = np.isfinite(q_rows).any(axis=0)
    rows, q_rows = np.asarray(rows)[keep], q_rows[:, keep]
    k = q_rows.shape[0]
    if not len(rows):
        return np.zeros(0), np.zeros((k, 0)), np.zeros((k, 0))
    _, inv = np.unique(np.asarray(items)[rows].astype(str), return_inverse=True)
    n_items = int(inv.max()) + 1
    count = np.bincount(inv, minlength=n_items).astype(float)
    # votes of one item are one pair: one probability per judge (the max guards float noise)
    q = np.full((k, n_items), -np.inf)
    for j in range(k):
        np.maximum.at(q[j], inv, q_rows[j])
    a = np.stack([np.bincount(inv, weights=np.asarray(correct, dtype=np.float64)[j, rows],
                              minlength=n_items) / count for j in range(k)])
    c = q.max(axis=0)
    order = np.argsort(-c, kind="stable")
    return c[order], q[:, order], a[:, order]


def _last_reaching(q: np.ndarray, tau: float) -> np.ndarray:
    """Index of the last judge whose probability reaches ``tau`` (columns of ``q``); -1: none."""
    hit = q[::-1] >= tau
    return np.where(hit.any(axis=0), len(q) - 1 - np.argmax(hit, axis=0), -1)


def choose_union_share(sources, *, target: float, risk: float, floor: float = 0.5,
                       start_share: float = START_SHARE, step: float = SHARE_STEP,
                       log: bool = False) -> dict:
    """The largest share of the union certified by fixed-sequence testing (module docstring).

    Parameters
    ----------
    sources : sequence of (c, q, a)
        Each source's items from :func:`union_sources`.
    target, risk, floor, start_share, step, log
        As :func:`puaudit.audit.fixed_sequence.choose_share`.

    Returns
    -------
    dict with ``share`` (0: nothing certified), ``thresholds`` (per source, its lowest ``c`` in
    the certified set; ``inf`` when none), ``lower``, ``n``, ``k``, ``n_items``,
    ``n_items_by_source``, ``n_needed``, ``n_tested``, ``stopped_at``, ``message`` and, with
    ``log``, ``path`` (share, n, k, lower, passed of every candidate tested): the walk of
    :func:`~puaudit.audit.fixed_sequence.walk_shares`, each candidate scored by the rule.
    """
    def outcome(counts) -> float:
        k = 0.0
        for m, (c, q, a) in zip(counts, sources):
            if m:  # each item scored by the verdict the rule gives it at this source's c[m-1]
                who = _last_reaching(q[:, :m], c[m - 1])
                k += float(a[who, np.arange(m)].sum())
        return k

    out = walk_shares([c for c, _, _ in sources], outcome, target=target, risk=risk,
                      floor=floor, start_share=start_share, step=step, log=log)
    if out["share"] == 0:
        out["message"] = _uncertified_message(out, floor)
    return out


def _uncertified_message(out: dict, floor: float) -> str:
    """Why no share of the union was certified (``out``: :func:`walk_shares`'s answer)."""
    target, risk, first = out["target"], out["risk"], out["first_fail"]
    if out["n_items"] < out["n_needed"]:
        return (f"Too few annotated items to certify the cascade's agreement >= {target:g} at "
                f"risk {risk:g}: at least {out['n_needed']} are needed and the judges' regions "
                f"hold {out['n_items']}.")
    return (f"No share of the cascade's trusted rows certifies agreement >= {target:g} at risk "
            f"{risk:g}" + (f": the {first[0]} most confident annotated items agree "
                           f"{first[1] / first[0]:.1%} of the time, lower bound "
                           f"{first[2]:.3f}." if first else
                           f": no share starts with a probability of at least {floor:g}.")
            + " Every row goes to people.")


def certify_union(prob, correct, role, items, folds, *, target: float, risk: float,
                  floor: float = 0.5, log: bool = False) -> dict:
    """Certify the union of a cascade's stages (module docstring).

    Parameters
    ----------
    prob : (K, n) float
        Held-out P(judge k right) per row (P: out of fold; others: the stage's calibrator);
        NaN where judge k was not asked or has no probability.
    correct : (K, n) bool or float
        Judge k's verdict equals the people's (read on P and validation rows only).
    role : (n,) str
        ``P``, ``validation``, ``unlabelled`` or anything else (never trusted).
    items, folds : (n,)
        Each row's item, and its certification fold (dealt by item before any outcome is read).
    target, risk : float
        :math:`\\alpha` and :math:`\\delta`.

    Returns
    -------
    dict with ``stage`` (n,) int (the judge trusted on each P, validation and unlabelled row,
    -1: people), ``folds`` (each fold's :func:`choose_union_share` answer, with ``fold`` and
    ``risk``), ``share`` (their mean), ``lower`` (the smallest bound certified), ``risk_fold``,
    ``n_folds_certified`` and ``message`` (why no fold certified anything, or "").
    """
    target, risk = check_target(target), check_risk(risk)
    prob = np.atleast_2d(np.asarray(prob, dtype=np.float64))
    correct = np.atleast_2d(np.asarray(correct, dtype=np.float64))
    role, folds = np.asarray(role).astype(str), np.asarray(folds)
    n = prob.shape[1]
    if correct.shape != prob.shape or not (len(role) == len(items) == len(folds) == n):
        raise PUAuditError(f"certify_union: prob {prob.shape}, correct {correct.shape}, role "
                           f"{len(role)}, items {len(items)} and folds {len(folds)} disagree.")
    c = np.nan_to_num(prob, nan=-np.inf).max(axis=0)
    is_p, is_v = role == SPLIT_P, role == SPLIT_VAL
    audited = is_v | (role == SPLIT_U)
    p_src = union_sources(prob, correct, items, np.flatnonzero(is_p))
    has_val = bool((is_v & np.isfinite(c)).any())
    n_folds = int(folds.max(initial=-1)) + 1 if n else 0
    risk_f = risk / n_folds if has_val and n_folds > 1 else risk
    stage = np.full(n, -1)
    answers = []
    shared = None if has_val else choose_union_share([p_src], target=target, risk=risk_f,
                                                     floor=floor, log=log)
    for f in range(n_folds):
        if has_val:
            v_src = union_sources(prob, correct, items, np.flatnonzero(is_v & (folds != f)))
            ans = choose_union_share([p_src, v_src], target=target, risk=risk_f, floor=floor,
                                     log=log)
        else:
            ans = dict(shared, thresholds=list(shared["thresholds"]) + [math.inf])
        answers.append(dict(ans, fold=f, risk=risk_f))
        if ans["share"] <= 0:
            continue
        tau_p, tau_v = ans["thresholds"][0], ans["thresholds"][1]
        mine = folds == f
        p_rows = np.flatnonzero(mine & is_p & (c >= tau_p))
        stage[p_rows] = _last_reaching(prob[:, p_rows], tau_p)
        if has_val:
            u_rows = np.flatnonzero(mine & audited & (c >= tau_v))
            stage[u_rows] = _last_reaching(prob[:, u_rows], tau_v)
        else:
            cand = np.flatnonzero(mine & audited & np.isfinite(c))
            cand = cand[np.argsort(-c[cand], kind="stable")]
            top = cand[:int(math.floor(ans["share"] * len(cand) + 1e-9))]
            top = top[c[top] >= tau_p]
            stage[top] = _last_reaching(prob[:, top], tau_p)
    done = [a for a in answers if a["share"] > 0]
    return {"stage": stage, "folds": answers, "risk_fold": risk_f,
            "share": float(np.mean([a["share"] for a in answers])) if answers else 0.0,
            "lower": min(a["lower"] for a in done) if done else float("nan"),
            "n_folds_certified": len(done),
            "message": "" if done else (answers[0]["message"] if answers else
                                        "No annotated row reaches the cascade.")}
