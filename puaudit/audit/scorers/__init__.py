"""Scorers: how strongly each audited row looks like a verified positive.

Every scorer sees the verified positives P' as difference vectors oriented by the human
(winner minus loser) and the audited rows as difference vectors oriented by the judge, and
returns one score per audited row; higher means "the judge's decision looks human-consistent".

=========== ===================================================================================
``pot``     partial optimal transport (docs/method.md): ``s_j = (Γᵀ1)_j / b_j`` with total mass ``m``
``prior-ot`` prior-aware two-sided unbalanced transport (graded): P' with mass π (P's agreement
            rate), reversed P' with ``1 - π``; score = share of row j's received mass from P'
``full-ot`` balanced OT: minus the expected cost of the positives matched to row j
``centroid`` ``cos(z_j, d)`` with ``d = normalise(mean z_P')``
``probe``   logistic Bradley–Terry probe fitted on P' (label 1) and their reversals (label 0)
``knn``     share of the k nearest labelled vectors, among P' and their reversals, that are P'
=========== ===================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["ScorerSpec", "SCORER_SPECS", "SCORERS", "AUTO_CANDIDATES", "MAX_FIT_ROWS",
           "score_targets", "transport_prior", "TRANSPORT_PRIOR_FLOOR"]


def _prior_ot(zp, zu, *, m, reg, random_state, score_rows, log, **_):
    from puaudit.audit.scorers.prior_transport import prior_ot_scores

    kw = {} if reg is None else {"reg": reg}
    return prior_ot_scores(zp, zu, m, random_state=random_state, score_rows=score_rows, log=log,
                           **kw)


def _pot(zp, zu, *, m, ot_method, reg, log, **_):
    from puaudit.audit.scorers.transport import partial_ot_scores

    return partial_ot_scores(zp, zu, m, method=ot_method, reg=reg, log=log)


def _full_ot(zp, zu, *, ot_method, reg, log, **_):
    from puaudit.audit.scorers.transport import ot_scores

    method = "exact" if ot_method in ("auto", "exact", "fast") else ot_method
    return ot_scores(zp, zu, method=method, reg=reg, log=log)


def _centroid(zp, zu, **_):
    from puaudit.audit.scorers.baselines import centroid_scores

    return centroid_scores(zp, zu)


def _probe(zp, zu, *, probe_C, **_):
    from puaudit.audit.scorers.baselines import probe_scores

    return probe_scores(zp, zu, C=probe_C)


def _knn(zp, zu, *, n_neighbors, **_):
    from puaudit.audit.scorers.baselines import knn_scores

    return knn_scores(zp, zu, n_neighbors=n_neighbors)


@dataclass(frozen=True)
class ScorerSpec:
    r"""What the pipeline needs to know about one scorer, so no stage checks scorer names.

    Attributes
    ----------
    name, family : str
        ``family`` is ``"transport"`` (:mod:`~puaudit.audit.scorers.transport`,
        :mod:`~puaudit.audit.scorers.prior_transport`) or ``"baseline"``
        (:mod:`~puaudit.audit.scorers.baselines`).
    fit : callable
        ``fit(zp, zu, *, m, ot_method, reg, n_neighbors, probe_C, random_state, score_rows, log)``.
    denoise : bool
        Fitted on the denoised P' by default (else all of P, which averages noise out itself).
    uses_m : bool
        Its scores depend on ``m`` (``pot``: the transported mass), so a new ``m`` means scoring
        again. The other scorers are fitted once per split; ``m`` reaches their calibrated
        probabilities by the prior shift alone (``prior-ot`` transports P's agreement rate
        :math:`\pi`, see :func:`transport_prior`).
    whole_target : bool
        Every audited row is part of its target measure: ``score_rows`` only restricts what is
        returned (else the rows are scored one by one and only those asked for are built).
    dense_target : bool
        Reads the audited rows as one dense array (else block by block from a lazy view).
    selects_rows : bool
        Its ``fit`` returns only the ``score_rows`` asked for (else all, selected here).
    logs_transport : bool
        With ``log=True`` it returns ``(scores, transport diagnostics)``.
    max_fit_rows : int or None
        Largest P it is fitted on (a seeded sample above): bounds time and memory on tables
        with hundreds of thousands of labelled rows, far above what a labelled slice needs.
    """

    name: str
    family: str
    fit: Callable
    denoise: bool = False
    uses_m: bool = False
    whole_target: bool = False
    dense_target: bool = False
    selects_rows: bool = False
    logs_transport: bool = False
    max_fit_rows: int | None = None


SCORER_SPECS: dict[str, ScorerSpec] = {s.name: s for s in (
    ScorerSpec("prior-ot", "transport", _prior_ot, whole_target=True,
               selects_rows=True, logs_transport=True, max_fit_rows=2_000),
    ScorerSpec("pot", "transport", _pot, denoise=True, uses_m=True, whole_target=True,
               dense_target=True, logs_transport=True),
    ScorerSpec("full-ot", "transport", _full_ot, denoise=True, whole_target=True,
               dense_target=True, logs_transport=True),
    ScorerSpec("centroid", "baseline", _centroid),
    ScorerSpec("probe", "baseline", _probe, max_fit_rows=20_000),
    ScorerSpec("knn", "baseline", _knn, max_fit_rows=10_000),
)}
SCORERS = tuple(SCORER_SPECS)
#: Scorers the automatic choice compares, in this order (``pot`` is left out: its 0/1 scores
#: give the calibrated map nothing to grade, so it cannot win on log loss and only costs time).
AUTO_CANDIDATES = ("prior-ot", "probe", "knn", "centroid")
MAX_FIT_ROWS = {name: s.max_fit_rows for name, s in SCORER_SPECS.items() if s.max_fit_rows}


#: the lowest prior ``prior-ot`` transports (P's agreement rate can be 0 when the user sets m)
TRANSPORT_PRIOR_FLOOR = 0.01


def transport_prior(scorer: str, *, m: float, base_rate: float) -> float:
    r"""The mass a scorer is fitted with: ``m`` for the scorers whose scores read it
    (:attr:`ScorerSpec.uses_m`, ``pot``), else P's agreement rate :math:`\pi` (``base_rate``).

    ``prior-ot`` splits its sources' mass :math:`\pi : 1 - \pi` between the judge-right and the
    judge-wrong prototypes. Its scores are calibrated on P, whose agreement rate is
    :math:`\pi`, so the prior a calibrated probability carries is :math:`\pi` whatever mass was
    transported; a user's ``m`` then moves every scorer's probabilities by the same Bayes prior
    shift, once. Transporting ``m`` as well would count it twice, and refit the scorer at every
    ``m``: with the estimate (``m`` = None) both are the same fit.
    """
    if SCORER_SPECS[scorer].uses_m:
        return float(m)
    return float(min(1.0, max(TRANSPORT_PRIOR_FLOOR, base_rate)))


def _cap(zp: np.ndarray, spec: ScorerSpec, random_state) -> np.ndarray:
    cap = spec.max_fit_rows
    if cap is None or len(zp) <= cap:
        return zp
    rng = np.random.default_rng(None if random_state is None else random_state + 104729)
    return zp[np.sort(rng.choice(len(zp), size=cap, replace=False))]


def score_targets(scorer: str, zp: np.ndarray, zu, *, m: float, ot_method: str,
                  reg: float | None, random_state: int | None, n_neighbors: int = 15,
                  probe_C: float = 1.0, score_rows: np.ndarray | None = None, log: bool = False):
    """Score audited rows ``zu`` against verified positives ``zp``.

    Parameters
    ----------
    scorer : str
        A name of :data:`SCORER_SPECS`.
    zp : (n_p, d) array
        Normalised difference vectors of P' (human winner minus loser); above the scorer's
        ``max_fit_rows`` a seeded sample is used.
    zu : (n_u, d) array, or a lazy row view (:class:`puaudit.audit.splits.DiffRows`)
        Normalised difference vectors of the audited rows (judge winner minus loser).
    m : float in (0, 1]
        Transported mass (``pot``) / prior share of right verdicts (``prior-ot``).
    ot_method, reg
        Solver and entropic regularisation of the transport scorers.
    n_neighbors, probe_C
        ``knn``'s neighbours and ``probe``'s inverse L2 strength.
    score_rows : int array, optional
        Return scores for these rows of ``zu`` only (see :attr:`ScorerSpec.whole_target`).

    Returns
    -------
    scores : (n_u,) or (len(score_rows),) float array (higher = judge more likely right);
    with ``log=True`` also a dict of diagnostics.
    """
    zp = np.asarray(zp, dtype=np.float64)
    if len(zp) == 0:
        raise PUAuditError("No verified positives to score against: the audit needs annotated rows "
                           "(human and judge both A or B) in P.")
    if scorer not in SCORER_SPECS:
        raise PUAuditError(f"Unknown scorer '{scorer}': choose one of {list(SCORERS)}.")
    spec = SCORER_SPECS[scorer]
    n_out = len(zu) if score_rows is None else len(score_rows)
    if len(zu) == 0 or n_out == 0:
        out = np.zeros(0)
        return (out, {}) if log else out
    info: dict = {"scorer": scorer}
    zp = _cap(zp, spec, random_state)
    if not spec.whole_target and score_rows is not None:
        zu = zu[np.asarray(score_rows)]  # row-wise scorers: only the rows asked for
        score_rows = None
    if spec.dense_target:
        zu = np.asarray(zu, dtype=np.float64)
    res = spec.fit(zp, zu, m=m, ot_method=ot_method, reg=reg, n_neighbors=n_neighbors,
                   probe_C=probe_C, random_state=random_state, score_rows=score_rows, log=log)
    if spec.logs_transport:
        scores, info["transport"] = res if log else (res, None)
    else:
        scores = res
    scores = np.asarray(scores, dtype=np.float64)
    if score_rows is not None and not spec.selects_rows:
        scores = scores[np.asarray(score_rows)]
    return (scores, info) if log else scores
