r"""The audit's stages, each cached under the :class:`AuditConfig` fields it reads.

A slider step on the dashboard, or ``set_params(m=...)`` and a new ``fit`` of the same table,
changes one or two fields; every stage that reads none of them is reused:

=============  ================================================  =============================
stage          reads (besides the stages above it)               recomputed by an ``m`` step
=============  ================================================  =============================
human          ``human_source`` (``crowdlab``: every field)      no (``crowdlab``: yes)
evidence       ``evidence`` (label-free, split-independent)      no
split          ``p_ratio``, ``random_state``, human              no
fit            one scorer's cross-fitting: :data:`FIT_FIELDS`;   only scorers that transport
               ``m`` too when the scorer uses it                 ``m`` (``prior-ot``, ``pot``)
               (:attr:`ScorerSpec.uses_m`)
choice         ``scorer`` and the fits it compares (``auto``,    when a fit it compares uses
               ``evidence``) or the one fit                      ``m``
relabel        prior shift to ``m``, ``rule``, ``margin``,       yes
               ``review_band``: groups, metrics, per type
certify        ``target_agreement``, ``risk``                    yes (when set)
=============  ================================================  =============================

A field no stage names (one added to :class:`AuditConfig` later) counts as read by every
stage, so a new field can never make a stale stage be reused. Every stage runs exactly the
functions a fresh :func:`~puaudit.audit.estimator.audit_table` runs, in the same order with the
same seeds, so a cached audit equals a fresh one bit for bit (``tests/test_audit_stages.py``).

``checkpoint``: a callable run between stages and before each scoring job (the dashboard's job
runner pauses background work there while a slider answer is computed, and cancels it by
raising); it never changes a result.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter, OrderedDict
from typing import Callable

from puaudit.audit.config import AuditConfig
from puaudit.audit.crossfit import ScoredSplit, apply_prior, crossfit_scorer
from puaudit.audit.result import AuditResult
from puaudit.audit.scorers import AUTO_CANDIDATES, SCORER_SPECS
from puaudit.audit.splits import PreparedSplit
from puaudit.data.schema import ComparisonTable
from puaudit.embed.pairs import PairEmbeddings

__all__ = ["StageCache", "STAGE_FIELDS", "FIT_FIELDS", "scoring_uses_m", "stage_key"]

#: the fields one scorer's cross-fitting reads (denoising, folds, calibration, solver, seed)
FIT_FIELDS = ("alpha1", "alpha2", "per_type", "ot_method", "reg", "n_folds", "calibration",
              "cv_repeats", "calibration_bags", "random_state")
#: each stage's own fields (``m`` joins ``fit`` for the scorers that use it)
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "human": ("human_source",),
    "evidence": ("evidence",),
    "split": ("p_ratio", "random_state", "human_source"),
    "fit": FIT_FIELDS,
    "choice": ("scorer",),
    "relabel": ("m", "rule", "margin", "review_band", "per_type"),
    "certify": ("target_agreement", "risk"),
}
_ALL = tuple(f.name for f in dataclasses.fields(AuditConfig))
#: fields no stage declares: every stage reads them (safe for fields added later)
_UNDECLARED = tuple(sorted(set(_ALL) - {f for fs in STAGE_FIELDS.values() for f in fs}))


def stage_key(config: AuditConfig, stage: str, *extra) -> tuple:
    """The values of ``stage``'s fields (and of every undeclared field) in ``config``."""
    names = STAGE_FIELDS[stage] + _UNDECLARED
    return (stage, *((n, _hashable(getattr(config, n))) for n in names), *extra)


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v


def scoring_uses_m(config: AuditConfig) -> bool:
    """Whether the scores themselves (not only their prior shift) depend on ``m``: the scorer
    transports ``m`` as mass, or ``auto``/``evidence`` compares one that does."""
    if config.scorer in SCORER_SPECS:
        return SCORER_SPECS[config.scorer].uses_m
    return any(SCORER_SPECS[c].uses_m for c in AUTO_CANDIDATES)


class StageCache:
    """The stages of audits of one table and its embeddings, reused across configurations.

    Parameters
    ----------
    table : ComparisonTable
    embeddings : PairEmbeddings
    max_entries : int, default 48
        Stage results kept (least recently used dropped first); a stage result holds a few
        arrays aligned with the rows.
    map_fn : callable, optional
        Runs the scoring jobs (:func:`~puaudit.audit.choice.score_split`; the Ray backend).

    Attributes
    ----------
    calls : collections.Counter
        How many times each stage was computed (not reused): ``human``, ``evidence``,
        ``split``, ``fit`` (one per scorer cross-fitted), ``choice``, ``relabel`` (the prior
        shift, relabelling and metrics), ``audit`` (certification, the result assembled).

    Thread-safe: two threads asking for one stage compute it once (the second waits).
    """

    def __init__(self, table: ComparisonTable, embeddings: PairEmbeddings, *,
                 max_entries: int = 48, map_fn: Callable | None = None):
        self.table = table
        self.embeddings = embeddings
        self.max_entries = int(max_entries)
        self.map_fn = map_fn
        self.calls: Counter = Counter()
        self._store: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._busy: dict = {}

    def __getstate__(self) -> dict:  # a fitted PUAudit pickles; locks and events do not
        return {**self.__dict__, "_lock": None, "_busy": {}, "_store": OrderedDict()}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._store

    def _get(self, key: tuple, compute: Callable):
        while True:
            with self._lock:
                if key in self._store:
                    self._store.move_to_end(key)
                    return self._store[key]
                event = self._busy.get(key)
                if event is None:
                    event = self._busy[key] = threading.Event()
                    break
            event.wait()  # another thread computes it: take its result (or compute on failure)
        try:
            value = compute()
            self.calls[key[0]] += 1
            with self._lock:
                self._store[key] = value
                while len(self._store) > self.max_entries:
                    self._store.popitem(last=False)
            return value
        finally:
            with self._lock:
                self._busy.pop(key, None)
            event.set()

    # --- the stages -----------------------------------------------------------------------
    def human_key(self, config: AuditConfig) -> tuple:
        if config.human_source == "crowdlab":  # it audits single votes with this very config
            return ("human", *((n, _hashable(getattr(config, n))) for n in _ALL))
        return stage_key(config, "human")

    def human(self, config: AuditConfig):
        from puaudit.audit.estimator import human_labels

        if config.human_source == "votes":
            return None
        return self._get(self.human_key(config),
                         lambda: human_labels(self.table, config, self.embeddings))

    def evidence(self, config: AuditConfig):
        from puaudit.audit.evidence import verdict_evidence

        if config.evidence == "none":
            return None
        return self._get(stage_key(config, "evidence"),
                         lambda: verdict_evidence(self.table, signals=config.evidence))

    def split_key(self, config: AuditConfig) -> tuple:
        return (stage_key(config, "split", self.human_key(config)),
                stage_key(config, "evidence"))

    def split(self, config: AuditConfig, *, checkpoint: Callable | None = None
              ) -> PreparedSplit:
        """:func:`~puaudit.audit.splits.prepare_split` of ``config`` (its evidence from the
        split-independent evidence stage)."""
        from puaudit.audit.splits import prepare_split

        def compute():
            human = self.human(config)
            _check(checkpoint)
            prep = prepare_split(self.table, self.embeddings, config, human=human,
                                 with_evidence=False)
            return dataclasses.replace(prep, evidence=self.evidence(config))

        return self._get(("split", self.split_key(config)), compute)

    def _fit_fn(self, split_key: tuple, checkpoint: Callable | None) -> Callable:
        """:func:`crossfit_scorer` that reuses each scorer's fit (``m`` in its key only when
        the scorer uses it)."""
        def fit(prep, config, scorer, *, m_used, denoise, **kw):
            uses_m = SCORER_SPECS[scorer].uses_m
            key = ("fit", split_key, stage_key(config, "fit"), scorer, bool(denoise),
                   tuple(sorted((k, v) for k, v in kw.items() if k != "map_fn")),
                   float(m_used) if uses_m else None)
            _check(checkpoint)
            kw["map_fn"] = _checked_map(kw.get("map_fn"), checkpoint)
            out = self._get(key, lambda: crossfit_scorer(prep, config, scorer, m_used=m_used,
                                                         denoise=denoise, **kw))
            # a copy: the choice writes its diagnostics and the prior shift its arrays on it
            return dataclasses.replace(out, diagnostics=dict(out.diagnostics), m=m_used)
        return fit

    def choice_key(self, config: AuditConfig) -> tuple:
        m = None
        if scoring_uses_m(config):
            m = config.m if config.m is not None else "estimate"
        return ("choice", self.split_key(config), stage_key(config, "fit"),
                stage_key(config, "choice"), m)

    def scored(self, config: AuditConfig, *, checkpoint: Callable | None = None
               ) -> ScoredSplit:
        """:func:`~puaudit.audit.choice.score_split` of ``config``: the fits (and the
        automatic choice) before the prior shift are cached; the shift to ``m`` is applied to
        a copy (a few vector operations)."""
        from puaudit.audit.choice import score_split

        prep = self.split(config, checkpoint=checkpoint)
        # scores that do not read m are fitted once, at P's rate (m None: no shift), and shifted
        uses_m = scoring_uses_m(config)
        fit_config = config if uses_m else config.replace(m=None)
        fit = self._fit_fn(self.split_key(config), checkpoint)

        def compute():
            return score_split(prep, fit_config, crossfit=fit,
                               map_fn=_checked_map(self.map_fn, checkpoint))

        base = self._get(self.choice_key(config), compute)
        out = dataclasses.replace(base, diagnostics=dict(base.diagnostics))
        if uses_m:
            return out
        out.m = prep.m_estimate if config.m is None else float(config.m)
        return apply_prior(prep, out, config.m)

    def audit(self, config: AuditConfig, *, checkpoint: Callable | None = None) -> AuditResult:
        """The audit of ``config``: equal to :func:`~puaudit.audit.estimator.audit_table`
        of the same table, embeddings and config, with every unchanged stage reused."""
        from puaudit.audit.estimator import audit_table

        def relabelled():
            from puaudit.audit.relabel import relabel_split

            scored = self.scored(config, checkpoint=checkpoint)
            _check(checkpoint)
            return scored, relabel_split(self.split(config), scored, config)

        def compute():
            # relabelling reads no certification field: Certify and its sliders reuse it
            plain = config.replace(target_agreement=None, risk=AuditConfig.risk)
            scored, rel = self._get(self.audit_key(plain, "relabel"), relabelled)
            _check(checkpoint)
            return audit_table(self.table, self.embeddings, config, prep=self.split(config),
                               scored=scored, map_fn=self.map_fn, relabelled=rel)

        return self._get(self.audit_key(config), compute)

    def audit_key(self, config: AuditConfig, stage: str = "audit") -> tuple:
        return (stage, *((n, _hashable(getattr(config, n))) for n in _ALL))

    def has_scores(self, config: AuditConfig) -> bool:
        """Whether an audit of ``config`` would only relabel (its split and scores are here):
        the dashboard answers those in the page's own thread, at once."""
        return self.audit_key(config) in self or (
            ("split", self.split_key(config)) in self and self.choice_key(config) in self)


def _check(checkpoint: Callable | None) -> None:
    if checkpoint is not None:
        checkpoint()


def _checked_map(map_fn: Callable | None, checkpoint: Callable | None) -> Callable | None:
    """``map_fn`` (or running the jobs here) with ``checkpoint`` before each job."""
    if checkpoint is None:
        return map_fn
    if map_fn is not None:
        def mapped(fn, prep, jobs):
            checkpoint()
            return map_fn(fn, prep, jobs)
        return mapped

    def serial(fn, prep, jobs):
        out = []
        for job in jobs:
            checkpoint()
            out.append(fn(prep, job))
        return out
    return serial
