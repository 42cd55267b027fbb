r"""Certified trust or escalate: the verdicts that meet an agreement target, with a guarantee
(docs/method.md, "Certified trust or escalate": the procedure, why this sequence, the
assumption).

From calibrated probabilities :math:`q_i` that the judge is right, on annotated items whose own
outcome the probability never saw (P out of fold; validation by the audit's fit on P), choose
the largest share :math:`s` such that, with probability at least :math:`1 - \delta` (``risk``),
the agreement among the most confident share :math:`s` is at least the target :math:`\alpha`.
Audited rows in that share are *trusted*; the others are *escalated* to people.

Fixed-sequence testing (Learn-then-Test; "Trust or Escalate", Jung et al. 2024) over a grid of
shares fixed before any outcome is seen (:mod:`puaudit.audit.certify.sequence`); candidate
:math:`s_j` is rejected when the exact one-sided lower bound reaches the target,

.. math:: L_j = \mathrm{Beta}^{-1}(\delta;\; k_j,\; n_j - k_j + 1) \ge \alpha,

items counted once (:math:`k_j` the share of each item's votes that agree). Cross-certification:
every row is dealt by item into :data:`CERTIFY_FOLDS` folds; fold :math:`f`'s audited rows are
trusted by the threshold certified on P and the *other* folds' validation items at
:math:`\delta / K` (union bound), so no row's outcome chooses its own threshold. Without
validation items the one test on P is made at :math:`\delta`. The rows escalated to the next
judge: :mod:`puaudit.audit.certify.escalation`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from puaudit.audit.config import check_risk, check_target
from puaudit.audit.scorers.calibration import out_of_fold_probabilities
from puaudit.audit.certify.sequence import (SHARE_STEP, START_SHARE, choose_share_sorted,
                                            item_outcomes, sorted_items, two_sided_interval)
from puaudit.audit.splits import SPLIT_VAL
from puaudit.errors import PUAuditError

__all__ = ["AUDIT", "CONFIDENCE", "CHOSEN", "choose_certificate", "CERTIFY_FOLDS", "certify_folds",
           "realised_agreement", "Certification", "certify_split",
           "with_target"]


#: The candidate certificates: the audit's calibrated P(judge right), and the judge's own
#: probability of its verdict (the threshold Trust or Escalate certifies). ``CHOSEN``: per fold
#: the one that trusts more of the fold's rows (:func:`choose_certificate`).
AUDIT, CONFIDENCE, CHOSEN = "audit", "confidence", "chosen"
CERTIFICATE_ORDER = (CONFIDENCE, AUDIT, CHOSEN)

#: Folds for cross-certification: the rows of each fold are trusted by a threshold certified on
#: P and the other folds' validation items at ``risk / CERTIFY_FOLDS``. With two halves,
#: one half certifying nothing (its start set's bound at 0.8998 against 0.90) halved a seed's
#: coverage; over 20 seeds on MT-Bench GPT-4 at 0.90 the coverage sd was 0.118 with 2 folds,
#: 0.086-0.095 with 3-5 (0.085 with 5) at the same mean (0.55-0.57).
CERTIFY_FOLDS = 5


def certify_folds(groups: np.ndarray, *, n_folds: int = CERTIFY_FOLDS,
                  random_state: int | None = 0) -> np.ndarray:
    """(n,) int: each row's certification fold, 0 .. ``n_folds - 1``, by item, the distinct
    items dealt evenly at random (drawn from ``random_state`` and the item names only, never
    from an outcome)."""
    items, inv = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    rng = np.random.default_rng(random_state)
    fold = np.zeros(len(items), dtype=np.int64)
    fold[rng.permutation(len(items))] = np.arange(len(items)) % n_folds
    return fold[inv]


def realised_agreement(prob: np.ndarray, correct: np.ndarray, threshold: float, *,
                       groups: np.ndarray | None = None) -> dict:
    """Agreement with people among rows with ``prob >= threshold`` (items counted once), with
    its exact 95% interval: ``{"n", "agreement", "ci"}``."""
    prob = np.asarray(prob, dtype=np.float64)
    sel = np.isfinite(prob) & (prob >= threshold)
    _, share, _ = item_outcomes(prob[sel], np.asarray(correct)[sel],
                                None if groups is None else np.asarray(groups)[sel])
    n, k = len(share), float(share.sum())
    return {"n": int(n), "agreement": k / n if n else float("nan"),
            "ci": two_sided_interval(k, n)}


@dataclass
class Certification:
    """One certification of an audit, and what is needed to certify it again at another target.

    Arrays ``p_*`` are over P rows (``p_prob``: out-of-fold calibrated probabilities), ``u_*``
    over audited rows (``u_prob``: the audit's calibrated probabilities before any prior shift,
    ``u_val``: validation rows among them); ``p_fold`` / ``u_fold``: each row's certification
    fold (:func:`certify_folds`). ``choice["folds"]`` holds, per fold, :func:`choose_share`'s
    answer on P and the validation items of the *other* folds at ``risk / n_folds``: the one
    that trusts that fold's rows (see the module's docstring); the rest of ``choice`` sums them
    up (``share``: their mean; ``lower``: the smallest bound certified; ``message``: why no fold
    certified anything).
    """

    n_rows: int
    p_rows: np.ndarray
    p_prob: np.ndarray
    p_correct: np.ndarray
    p_groups: np.ndarray
    u_rows: np.ndarray
    u_prob: np.ndarray
    u_val: np.ndarray
    u_correct: np.ndarray        # judge == human on audited rows (meaningful where u_val)
    u_groups: np.ndarray
    #: audited rows the relabel rule reverses: never trusted (their own probability says the
    #: judge is more likely wrong, whatever the set above the threshold does)
    u_reversed: np.ndarray | None = None
    choice: dict = field(default_factory=dict)
    #: raw scores of the audited rows: break ties of ``u_prob`` (a calibrator's flat steps)
    u_raw: np.ndarray | None = None
    #: certification folds of the P and the audited rows; None: dealt by :func:`certify_folds`
    #: over both, from a seed of 0
    p_fold: np.ndarray | None = None
    u_fold: np.ndarray | None = None
    #: audited rows from the most confident down (probability, then raw score, then row);
    #: filled once from ``u_prob`` and ``u_raw``, and carried by :meth:`at`, so certifying again
    #: at each target of a curve does not sort the audited rows again
    u_order: np.ndarray | None = field(default=None, repr=False)
    #: which probabilities these are: :data:`AUDIT` (the audit's P(judge right)),
    #: :data:`CONFIDENCE` (the judge's own probability of its verdict) or :data:`CHOSEN` (per
    #: fold the candidate that trusts more of the fold's rows, :func:`choose_certificate`)
    name: str = "audit"
    #: the walk ends before a share whose probabilities fall below it: 0.5 for a calibrated
    #: P(judge right) (a verdict more likely wrong than right is never trusted); 0 for the
    #: judge's own confidence, which is no calibrated probability (its best guess among A, B
    #: and tie may hold 0.4)
    floor: float = 0.5
    #: with :data:`CHOSEN`: the candidates, each certified at ``risk / len(candidates)``, and
    #: the one chosen for each fold
    candidates: dict | None = field(default=None, repr=False)
    chosen: tuple | None = None

    def __post_init__(self) -> None:
        if self.u_order is None:
            prob = np.nan_to_num(self.u_prob, nan=-np.inf)
            raw = (np.zeros(len(prob)) if self.u_raw is None
                   else np.nan_to_num(np.asarray(self.u_raw, dtype=np.float64), nan=-np.inf))
            self.u_order = np.lexsort((np.arange(len(prob)), -raw, -prob))
        if self.p_fold is None or self.u_fold is None:
            fold = certify_folds(np.r_[np.asarray(self.p_groups).astype(str),
                                       np.asarray(self.u_groups).astype(str)])
            self.p_fold, self.u_fold = fold[:len(self.p_rows)], fold[len(self.p_rows):]

    @property
    def n_folds(self) -> int:
        return max(1, int(max(self.p_fold.max(initial=-1), self.u_fold.max(initial=-1)) + 1))

    def _sources(self, leave_out: int):
        """P (every item) and the validation items outside fold ``leave_out``."""
        v = np.asarray(self.u_val, bool) & (self.u_fold != leave_out)
        return [(self.p_prob, self.p_correct, self.p_groups),
                (self.u_prob[v], self.u_correct[v], np.asarray(self.u_groups)[v])]

    def _fold_sources(self) -> list:
        """Each fold's sources collapsed to items and sorted (:func:`sorted_items`), once per
        instance (a :meth:`curve` certifies the same instance at every target; an instance
        made with other arrays, by :func:`dataclasses.replace` too, sorts its own)."""
        cache = self.__dict__.get("_fold_sources_cache")
        if cache is None:
            cache = self.__dict__["_fold_sources_cache"] = [
                [sorted_items(*src) for src in self._sources(f)] for f in range(self.n_folds)]
        return cache

    @property
    def _has_validation(self) -> bool:
        return bool(np.isfinite(self.u_prob[np.asarray(self.u_val, bool)]).any())

    def _certified_folds(self) -> list:
        return [f for f in self.choice.get("folds", []) if f["share"] > 0]

    @property
    def threshold(self) -> float:
        """The lowest threshold any fold certified for its audited rows (``inf``: none)."""
        thr = [f["thresholds"][1 if self._has_validation else 0] for f in self._certified_folds()]
        return float(min(thr)) if thr else math.inf

    @property
    def share(self) -> float:
        """The certified share, averaged over the folds (0 when nothing is certified)."""
        return float(self.choice.get("share", 0.0))

    @property
    def u_threshold(self) -> float:
        """Lowest probability among the trusted audited rows (``inf`` when none)."""
        top = self._u_top()
        return float(np.min(self.u_prob[top])) if top.any() else math.inf

    def at(self, target: float, risk: float, *, log: bool = False) -> "Certification":
        """The same inputs certified at another target / risk (cheap: no refitting)."""
        target, risk = check_target(target), check_risk(risk)
        if self.candidates:
            share = risk / len(self.candidates)
            return choose_certificate({n: c.at(target, share, log=log)
                                       for n, c in self.candidates.items()}, risk=risk)
        k = self.n_folds
        # fold f's rows are trusted by P and the other folds, at risk / K each (union bound);
        # without validation items every fold's test is the same test on P, one event: risk
        risk_f = risk / k if self._has_validation else risk
        srcs = self._fold_sources()
        folds = [dict(choose_share_sorted(srcs[f], target=target, risk=risk_f,
                                     floor=self.floor, start_share=START_SHARE, step=SHARE_STEP,
                                     log=log), fold=f) for f in range(k)]
        done = [f for f in folds if f["share"] > 0]
        head = min(done, key=lambda f: f["lower"]) if done else folds[0]
        choice = {"target": target, "risk": risk, "folds": folds,
                  "share": float(np.mean([f["share"] for f in folds])),
                  "lower": head["lower"] if done else float("nan"),
                  "n": head["n"] if done else 0, "n_items": folds[0]["n_items"],
                  "n_items_by_source": [folds[0]["n_items_by_source"][0],
                                        int(len(np.unique(np.asarray(self.u_groups)[
                                            np.asarray(self.u_val, bool)
                                            & np.isfinite(self.u_prob)])))],
                  "n_needed": head["n_needed"], "n_start": head["n_start"],
                  "n_tested": head["n_tested"], "n_folds_certified": len(done),
                  "message": ""}
        if not done:
            choice["message"] = head["message"] if risk_f == risk else head["message"].replace(
                f"at risk {risk_f:g}",
                f"at risk {risk:g} ({risk_f:g} in each of {k} certification folds)")
        choice["n_items"] = int(sum(choice["n_items_by_source"]))
        return dataclasses.replace(self, choice=choice)

    def _fold_thresholds(self, source: int) -> np.ndarray:
        """(n_folds,) each fold's certified threshold on ``source`` (0: P, 1: validation)."""
        thr = np.full(self.n_folds, math.inf)
        for f in self.choice.get("folds", []):
            thr[f["fold"]] = f["thresholds"][source]
        return thr

    def _u_top(self) -> np.ndarray:
        """(n_U,) bool: audited rows at or above their fold's threshold (validation's
        probability at the fold's certified share); without validation items, each fold's top
        share of its audited rows with a probability, at or above P's threshold."""
        prob = np.nan_to_num(self.u_prob, nan=-np.inf)
        if self._has_validation:
            return prob >= self._fold_thresholds(1)[self.u_fold]
        top = np.zeros(len(self.u_prob), bool)
        p_thr = self._fold_thresholds(0)
        for f in self.choice.get("folds", []):
            rows = self.u_order[(self.u_fold[self.u_order] == f["fold"])
                                & np.isfinite(self.u_prob[self.u_order])]
            top[rows[:int(math.floor(f["share"] * len(rows) + 1e-9))]] = True
        return top & (prob >= p_thr[self.u_fold])

    def _u_trusted(self) -> np.ndarray:
        top = self._u_top()
        return top if self.u_reversed is None else top & ~self.u_reversed

    def _p_thresholds(self) -> np.ndarray:
        return self._fold_thresholds(0)[self.p_fold]

    @property
    def trusted(self) -> np.ndarray:
        """(n,) object: True / False on audited rows (their probability against their fold's
        threshold) and P rows (their out-of-fold probability against their fold's threshold on
        P), None on excluded rows."""
        out = np.full(self.n_rows, None, dtype=object)
        with np.errstate(invalid="ignore"):
            out[self.p_rows] = self.p_prob >= self._p_thresholds()
        out[self.u_rows] = self._u_trusted()
        return out

    def distance_below(self) -> np.ndarray:
        """(n,) threshold minus probability (> 0: escalated; NaN where none), each row against
        its fold's threshold; where a fold certified nothing its threshold is taken as 1, so
        the order is by probability."""
        out = np.full(self.n_rows, np.nan)
        tp = self._p_thresholds()
        out[self.p_rows] = np.where(np.isfinite(tp), tp, 1.0) - self.p_prob
        if self._has_validation:
            tu = self._fold_thresholds(1)[self.u_fold]
            below = np.where(np.isfinite(tu), tu, 1.0) - self.u_prob
        else:
            tu = self.u_threshold if math.isfinite(self.u_threshold) else 1.0
            below = tu - self.u_prob
        # an escalated row at or above its threshold (cut by rank, or reversed) is still below
        out[self.u_rows] = np.where(self._u_trusted(), np.minimum(below, 0.0),
                                    np.maximum(below, 1e-12))
        return out

    def coverage(self) -> float:
        """Share of audited rows trusted."""
        if len(self.u_rows) == 0:
            return float("nan")
        return float(np.mean(self._u_trusted()))

    def realised(self) -> dict:
        """Agreement among trusted validation rows (items once) with its exact 95% interval:
        each fold trusted by a threshold certified without its outcomes, so it is held out, and
        by the same threshold as the fold's unlabelled rows."""
        v = self.u_val & self._u_trusted()
        return realised_agreement(self.u_prob[v], self.u_correct[v], -np.inf,
                                  groups=self.u_groups[v])

    def curve(self, targets, *, risk: float | None = None) -> list[dict]:
        """Coverage, certified threshold and realised validation agreement for each target."""
        risk = self.choice["risk"] if risk is None else risk
        rows = []
        for tg in targets:
            c = self.at(float(tg), risk)
            r = c.realised()
            rows.append({"target": float(tg), "risk": float(risk), "threshold": c.threshold,
                         "coverage": c.coverage(), "certified_lower": c.choice["lower"],
                         "realised": r["agreement"], "realised_ci": r["ci"],
                         "n_validation_trusted": r["n"]})
        return rows

    @property
    def certificate_used(self) -> str:
        """The certificate whose rule trusts the rows: :data:`AUDIT`, :data:`CONFIDENCE`, or
        both names joined by ``+`` when the folds chose differently."""
        if not self.chosen:
            return self.name
        return "+".join(dict.fromkeys(sorted(self.chosen, key=CERTIFICATE_ORDER.index)))

    def candidate_summary(self) -> dict:
        """Per candidate (one: this certification): its coverage on its own, its risk and the
        folds that chose it."""
        cands = self.candidates or {self.name: self}
        return {n: {"coverage": c.coverage(), "risk": c.choice.get("risk"),
                    "n_folds_chosen": (self.n_folds if not self.chosen
                                       else sum(ch == n for ch in self.chosen))}
                for n, c in cands.items()}

    def summary(self) -> dict:
        """The summary fields: ``coverage``, ``certified_lower``, ``threshold`` and the rest
        under ``certification``."""
        c, r = self.choice, self.realised()
        trusted = self._u_trusted()
        n_trusted = int(np.sum(trusted))
        by_source = c["n_items_by_source"]
        info = {"target": c["target"], "risk": c["risk"], "threshold": self.threshold,
                "threshold_audited": self.u_threshold, "certified_share": self.share,
                "certified_lower": c["lower"], "coverage": self.coverage(),
                "n_trusted": n_trusted, "n_escalated": int(len(self.u_rows) - n_trusted),
                # escalated rows with no human verdict yet: the ones a person still has to see
                # (the others are validation rows, already labelled)
                "n_escalated_unlabelled": int(np.sum(~trusted & ~np.asarray(self.u_val, bool))),
                "n_certified_items": c["n"], "n_items": c["n_items"],
                "n_p_items": by_source[0], "n_validation_items": by_source[1],
                "n_needed": c["n_needed"], "n_start": c["n_start"], "n_tested": c["n_tested"],
                "n_folds": len(c.get("folds", [])), "n_folds_certified": c["n_folds_certified"],
                "folds": [
                    {"fold": f["fold"], "share": f["share"], "certified_lower": f["lower"],
                     "risk": f["risk"], "threshold": f["thresholds"][1],
                     "threshold_p": f["thresholds"][0], "n_certified_items": f["n"],
                     "n_items": f["n_items"], "message": f["message"]}
                    for f in c.get("folds", [])],
                "realised": r["agreement"], "realised_ci": r["ci"],
                "n_validation_trusted": r["n"], "message": c["message"],
                "certificate": self.certificate_used, "certificates": self.candidate_summary()}
        for row, f in zip(info["folds"], c.get("folds", [])):
            row["certificate"] = f.get("certificate", self.name)
        return {"coverage": info["coverage"], "certified_lower": info["certified_lower"],
                "threshold": info["threshold"], "certification": info}


def _p_probabilities(prep, scored, config) -> tuple[np.ndarray, np.ndarray]:
    """P rows with a cross-fitted score and their out-of-fold probability, averaged over every
    cross-fitting repetition: each repetition's probability of a row comes from fits (scorer and
    calibrator) that never saw it, so their mean never saw it either, and it ranks P's items
    with less noise than one draw of the folds (MT-Bench GPT-4, target 0.90, 20 seeds: mean
    coverage 0.36 from the first repetition alone, 0.41 from the mean of three)."""
    items = np.asarray(prep.item_id).astype(str)
    reps, fold_sets = scored.cv_repeat_scores, scored.cv_repeat_folds
    p_rows = np.asarray(prep.p_rows, dtype=np.int64)
    if (reps is None or fold_sets is None or scored.calibrator is None
            or len(scored.cv_rows) == 0):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    correct = np.asarray(prep.judge[p_rows] == prep.human[p_rows], dtype=np.float64)
    q = np.full(reps.shape, np.nan)
    for r, folds in enumerate(fold_sets):
        ok = np.isfinite(reps[r])
        q[r, ok] = out_of_fold_probabilities(
            reps[r][ok], correct[ok], folds[ok], groups=items[p_rows][ok],
            method=config.calibration, bags=config.calibration_bags,
            random_state=config.random_state)
    keep = np.isfinite(q).any(axis=0)
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(q[:, keep], axis=0) if keep.any() else np.zeros(0)
    return p_rows[keep], mean


def certify_split(prep, scored, config, *, reversed_rows: np.ndarray | None = None,
                  log: bool = False) -> Certification:
    """Certify one audit's split (a ``PreparedSplit``) and scores (a ``ScoredSplit``) at
    ``config.target_agreement`` / ``config.risk``.

    P rows: their out-of-fold scores of every cross-fitting repetition, calibrated out of fold
    (:func:`out_of_fold_probabilities`, the audit's ``calibration`` and ``calibration_bags``)
    and averaged over the repetitions. Audited rows: the audit's calibrator on their scores,
    before any prior shift (the guarantee rests on P's outcomes, not on a belief about m; a
    prior shift is monotone, so it would not change which rows are the most confident). Both
    are certified on (:func:`choose_share`); every row is dealt into a fold from
    ``config.random_state`` (:func:`certify_folds`), and a fold's rows are trusted by the
    threshold certified on P and the other folds' validation items (see the module's
    docstring). ``reversed_rows`` (n,) bool: rows the
    relabel rule reversed, never trusted.
    """
    target, risk = check_target(config.target_agreement), check_risk(config.risk)
    n = len(prep.split)
    u = prep.u_rows
    judge, human = np.asarray(prep.judge, dtype=object), np.asarray(prep.human, dtype=object)
    items = np.asarray(prep.item_id).astype(str)
    u_prob = np.full(len(u), np.nan)
    if scored.calibrator is not None and len(u):
        u_prob = scored.calibrator.predict(scored.score[u])
    p_rows, p_prob = _p_probabilities(prep, scored, config)
    u_val = np.asarray(prep.split)[u] == SPLIT_VAL
    # every row of the audit dealt into folds by item (P items and audited items are disjoint)
    fold = (certify_folds(items, n_folds=CERTIFY_FOLDS, random_state=config.random_state)
            if prep.folds is None else np.asarray(prep.folds, dtype=np.int64))
    cert = Certification(
        n_rows=n, p_rows=p_rows, p_prob=p_prob,
        p_correct=np.asarray(judge[p_rows] == human[p_rows], dtype=bool), p_groups=items[p_rows],
        u_rows=u, u_prob=u_prob, u_val=u_val, p_fold=fold[p_rows], u_fold=fold[u],
        u_correct=np.asarray(judge[u] == human[u], dtype=bool), u_groups=items[u],
        u_reversed=None if reversed_rows is None else np.asarray(reversed_rows, dtype=bool)[u],
        u_raw=np.asarray(scored.score, dtype=np.float64)[u])
    conf = (None if config.certificate == AUDIT
            else confidence_candidate(cert, prep, fold))
    if conf is not None and config.certificate == "auto" and len(np.unique(
            np.r_[conf.p_prob, conf.u_prob][np.isfinite(np.r_[conf.p_prob, conf.u_prob])])) < 2:
        # one value (two answer orders that agree: probability 1 everywhere) trusts all rows or
        # none, a set the audit's own sequence tests last: no share of the risk is spent on it
        # (read from the probabilities alone, never an outcome)
        conf = None
    if conf is None:
        if config.certificate == CONFIDENCE:
            raise PUAuditError("certificate='confidence' needs the judge's own probabilities "
                               "(columns <judge column>_p_A, _p_B; p_A / p_B for the default "
                               "judge): this table has none for its judge. Use 'auto' or "
                               "'audit'.")
        return cert.at(target, risk, log=log)
    if config.certificate == CONFIDENCE:
        return conf.at(target, risk, log=log)
    return choose_certificate({AUDIT: cert.at(target, risk / 2, log=log),
                               CONFIDENCE: conf.at(target, risk / 2, log=log)}, risk=risk)


def choose_certificate(candidates: dict, *, risk: float) -> Certification:
    r"""Per fold, the candidate certificate that trusts more of the fold's audited rows.

    Each candidate of ``candidates`` (name -> :class:`Certification`, same rows and folds) was
    certified at ``risk / J`` (:math:`J` candidates), so with probability at least
    :math:`1 - \delta` every candidate's every fold meets the target together (union bound over
    :math:`J K` tests), and then so does any rule that picks, per fold, one of them. The pick
    for fold :math:`f` reads the number of fold :math:`f`'s audited rows each candidate trusts:
    thresholds certified without fold :math:`f`'s outcomes, probabilities of its rows, never an
    outcome of the fold, so its trusted validation rows stay a held-out measurement. Ties go to
    the first candidate in ``candidates``' order.

    Returns a :class:`Certification` named :data:`CHOSEN` whose rows of fold :math:`f` carry
    the chosen candidate's probabilities and fold answer (``choice["folds"][f]["certificate"]``);
    :meth:`Certification.at` certifies the candidates again and chooses again.
    """
    names = list(candidates)
    first = candidates[names[0]]
    k = first.n_folds
    cover = {}
    for n, c in candidates.items():
        if c.u_rows.shape != first.u_rows.shape or not np.array_equal(c.u_rows, first.u_rows):
            raise PUAuditError("Candidate certificates must cover the same audited rows.")
        t = c._u_trusted()
        cover[n] = [int(t[c.u_fold == f].sum()) for f in range(k)]
    chosen = [max(names, key=lambda n: (cover[n][f], -names.index(n))) for f in range(k)]
    # audited rows: each fold's rows take the chosen candidate's probabilities
    u_prob = np.array(first.u_prob, dtype=np.float64, copy=True)
    u_raw = np.zeros(len(u_prob)) if first.u_raw is None else np.array(first.u_raw, float)
    # P rows: the union of the candidates' P rows, each fold by its chosen candidate
    n = first.n_rows
    p_prob, p_correct = np.full(n, np.nan), np.zeros(n, bool)
    p_groups, p_fold = np.full(n, "", dtype=object), np.full(n, -1)
    has_p = np.zeros(n, bool)
    for c in candidates.values():
        has_p[c.p_rows] = True
        p_correct[c.p_rows], p_groups[c.p_rows], p_fold[c.p_rows] = (
            c.p_correct, np.asarray(c.p_groups, dtype=object), c.p_fold)
    folds = []
    for f, name in enumerate(chosen):
        c = candidates[name]
        mine = c.u_fold == f
        u_prob[mine] = c.u_prob[mine]
        if c.u_raw is not None:
            u_raw[mine] = np.asarray(c.u_raw, float)[mine]
        p_here = c.p_rows[c.p_fold == f]
        p_prob[p_fold == f] = np.nan
        p_prob[p_here] = c.p_prob[c.p_fold == f]
        folds.append(dict(c.choice["folds"][f], certificate=name))
    p_rows = np.flatnonzero(has_p)
    base = candidates[chosen[0]].choice
    done = [f for f in folds if f["share"] > 0]
    head = min(done, key=lambda f: f["lower"]) if done else folds[0]
    choice = {**base, "risk": risk, "folds": folds,
              "share": float(np.mean([f["share"] for f in folds])),
              "lower": head["lower"] if done else float("nan"),
              "n": head["n"] if done else 0, "n_needed": head["n_needed"],
              "n_start": head["n_start"], "n_tested": head["n_tested"],
              "n_folds_certified": len(done),
              "message": "" if done else candidates[names[0]].choice["message"]}
    return dataclasses.replace(
        first, p_rows=p_rows, p_prob=p_prob[p_rows], p_correct=p_correct[p_rows],
        p_groups=p_groups[p_rows].astype(str), p_fold=p_fold[p_rows], u_prob=u_prob,
        u_raw=u_raw, u_order=None, choice=choice, name=CHOSEN,
        candidates=dict(candidates), chosen=tuple(chosen))


def confidence_candidate(cert: Certification, prep, fold: np.ndarray) -> Certification | None:
    """The judge's own confidence as a certificate over the same rows and folds as ``cert``
    (the audit's): P rows and audited rows by ``prep.confidence`` (which no outcome chose, so
    every P row can be certified on, out of fold or not); ``fold``: every row's certification
    fold, as dealt for ``cert``. None when the judge gives no probability on the annotated
    rows."""
    conf = None if prep.confidence is None else np.asarray(prep.confidence, dtype=np.float64)
    if conf is None:
        return None
    items = np.asarray(prep.item_id).astype(str)
    judge, human = np.asarray(prep.judge, dtype=object), np.asarray(prep.human, dtype=object)
    p_all = np.asarray(prep.p_rows, dtype=np.int64)
    p_rows = p_all[np.isfinite(conf[p_all])]
    u = cert.u_rows
    if not len(p_rows) and not np.isfinite(conf[u][cert.u_val]).any():
        return None
    return Certification(
        n_rows=cert.n_rows, p_rows=p_rows, p_prob=conf[p_rows],
        p_correct=np.asarray(judge[p_rows] == human[p_rows], dtype=bool),
        p_groups=items[p_rows], u_rows=u, u_prob=conf[u], u_val=cert.u_val,
        u_correct=cert.u_correct, u_groups=cert.u_groups, u_reversed=cert.u_reversed,
        u_raw=conf[u], p_fold=fold[p_rows], u_fold=cert.u_fold, name=CONFIDENCE, floor=0.0)


def with_target(result, target: float, risk: float):
    """An ``AuditResult`` certified again at ``target`` / ``risk`` (same scores, no refitting)."""
    cert = getattr(result, "certification", None)
    if cert is None:
        raise PUAuditError("This audit was run without certification: set target_agreement.")
    params = {**result.params, "target_agreement": check_target(target), "risk": check_risk(risk)}
    return dataclasses.replace(result, certification=cert.at(target, risk), params=params)
