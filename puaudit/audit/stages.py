r"""The audit's stages in order (:func:`audit_table`), and :class:`StageCache`, which keeps
each stage under the :class:`AuditConfig` fields it reads.

A slider step on the dashboard, or ``set_params(m=...)`` and ``fit(..., stages=est.stages_)``,
changes one or two fields; every stage that reads none of them is reused:

=============  ================================================  =============================
stage          reads (besides the stages above it)               recomputed by an ``m`` step
=============  ================================================  =============================
human          ``human_source`` (``crowdlab``: every field)      no (``crowdlab``: yes)
evidence       ``evidence``, ``other_judges`` (label-free,      no
               split-independent)
split          ``p_ratio``, ``random_state``, human              no
fit            one scorer's cross-fitting: :data:`FIT_FIELDS`;   only ``pot`` (it transports
               ``m`` too when the scorer uses it                 ``m``; ``prior-ot`` transports
               (:attr:`ScorerSpec.uses_m`)                       P's rate, ``auto`` reads no m)
choice         ``scorer`` and the fits it compares (``auto``,    when a fit it compares uses
               ``evidence``) or the one fit                      ``m``
relabel        prior shift to ``m``, ``rule``, ``margin``,       yes
               ``review_band``: groups, metrics, per type
certify        ``target_agreement``, ``risk``                    yes (when set)
=============  ================================================  =============================

A field no stage names counts as read by every stage, so a new field can never make a stale
stage be reused. Every stage runs exactly the functions a fresh :func:`audit_table` runs, in the
same order with the same seeds, so a cached audit equals a fresh one bit for bit.
``checkpoint``: a callable run between stages and before each scoring job (the dashboard's job
runner pauses background work there, and cancels it by raising); it never changes a result.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
import weakref
from collections import Counter, OrderedDict
from typing import Callable

import numpy as np

from puaudit.audit.scorers.scoring import score_split
from puaudit.audit.config import AuditConfig
from puaudit.audit.scorers.crossfit import ScoredSplit, apply_prior, crossfit_scorer
from puaudit.audit.relabel import GROUP_NEG, relabel_split
from puaudit.audit.result import AuditResult, InputInfo
from puaudit.audit.scorers import AUTO_CANDIDATES, SCORER_SPECS
from puaudit.audit.splits import PreparedSplit, prepare_split
from puaudit.data.schema import ComparisonTable
from puaudit.embed.pairs import PairEmbeddings
from puaudit.errors import PUAuditError

__all__ = ["StageCache", "STAGE_FIELDS", "FIT_FIELDS", "scoring_uses_m", "stage_key",
           "audit_table", "human_labels"]

#: the fields one scorer's cross-fitting reads (denoising, folds, calibration, solver, seed)
FIT_FIELDS = ("alpha1", "alpha2", "per_type", "ot_method", "reg", "n_folds", "calibration",
              "cv_repeats", "calibration_bags", "random_state")
#: each stage's own fields (``m`` joins ``fit`` for the scorers that use it)
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "human": ("human_source",),
    "evidence": ("evidence", "other_judges"),
    "split": ("p_ratio", "random_state", "human_source"),
    "fit": FIT_FIELDS,
    "choice": ("scorer",),
    "relabel": ("m", "rule", "margin", "review_band", "per_type"),
    "certify": ("target_agreement", "risk", "certificate"),
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


def human_labels(table: ComparisonTable, config: AuditConfig,
                 embeddings: PairEmbeddings | None = None) -> np.ndarray | None:
    """The human verdicts the audit uses: the table's votes, item majority, or a latent-truth
    model's consensus (``ds``; ``crowdlab`` needs ``embeddings``: it audits the single votes
    first for its probabilities)."""
    if config.human_source == "consensus":
        from puaudit.annotators.consensus import consensus_labels

        return consensus_labels(table)
    if config.human_source in ("ds", "crowdlab"):
        from puaudit.annotators import model_consensus_labels

        if config.human_source == "ds":
            return model_consensus_labels(table, model="ds")
        if embeddings is None and config.texts:
            raise PUAuditError("human_source='crowdlab' needs the embeddings: it runs the audit "
                               "once on single votes first.")
        # CROWDLAB's model is this audit on single votes: out of fold on P, fitted without the
        # validation labels elsewhere (the annotator models get the probabilities, not the audit)
        first = audit_table(table, embeddings, config.replace(human_source="votes"))
        return model_consensus_labels(table, model="crowdlab", p_judge_right=first.p_judge_right,
                                      random_state=0 if config.random_state is None
                                      else int(config.random_state))
    return None


class _StageLog:
    """Seconds and the process's peak resident memory after each stage of one audit."""

    def __init__(self):
        self.rows: list[dict] = []
        self._t = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.rows.append({"stage": stage, "seconds": round(now - self._t, 3),
                          "peak_rss_mb": _peak_rss_mb()})
        self._t = now


def _peak_rss_mb() -> float | None:
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 if sys.platform != "darwin" else 1024 * 1024), 1)


def audit_table(table: ComparisonTable, embeddings: PairEmbeddings, config: AuditConfig, *,
                prep: PreparedSplit | None = None, scored: ScoredSplit | None = None,
                map_fn: Callable | None = None, relabelled: dict | None = None,
                input_info: InputInfo | None = None) -> AuditResult:
    """One audit: split, score, relabel, certify and measure (the functional form of
    :class:`PUAudit`).

    ``prep``, ``scored``: the split (:func:`prepare_split`) and its scores
    (:func:`score_split` of ``prep`` with ``config``) when the caller already has them, e.g. to
    draw :func:`reversals_vs_m` from the very scores of this audit
    (:func:`puaudit.audit.m_curve.audit_with_m_curve`); given scores are not timed in
    ``diagnostics["stages"]``. ``map_fn``: runs the scoring jobs (see :func:`score_split`; the
    Ray backend's tasks). ``relabelled``: :func:`relabel_split` of ``prep`` and ``scored``
    with ``config`` when the caller has it (certification at another target reuses it).
    ``input_info``: :meth:`InputInfo.of` ``(table)`` when the caller has it (hashing the texts
    is a fifth of an ``m`` step on MT-Bench). ``config.texts`` False: the evidence-only audit
    (:mod:`puaudit.audit.scorers.evidence`); ``embeddings`` is not read and may be None.
    """
    stages = _StageLog()
    if prep is None:
        prep = prepare_split(table, embeddings, config,
                             human=human_labels(table, config, embeddings))
    stages.done("split + evidence")
    if scored is None:
        scored = score_split(prep, config, map_fn=map_fn)
        stages.done("score + cross-fit" + (" (auto)" if config.scorer == "auto" else ""))
    rel = relabel_split(prep, scored, config) if relabelled is None else relabelled
    stages.done("relabel + measure")
    certification = None
    if config.target_agreement is not None:
        from puaudit.audit.certify.judge import certify_split

        certification = certify_split(prep, scored, config,
                                      reversed_rows=rel["group"] == GROUP_NEG)
        stages.done("certify")
    params = {**config.to_dict(), "m_used": scored.m, "scorer_used": scored.scorer,
              "encoder": None if embeddings is None else embeddings.encoder}
    diagnostics = {**scored.diagnostics, "split": prep.split_log, "stages": stages.rows}
    if prep.evidence is not None:
        diagnostics.setdefault("evidence", {"signals": prep.evidence.names,
                                            "sources": prep.evidence.sources,
                                            "messages": list(prep.evidence.messages)})
    return AuditResult(
        input=InputInfo.of(table) if input_info is None else input_info, split=prep.split, reason=prep.reason, score=scored.score,
        p_judge_right=scored.p_judge_right, group=rel["group"], adjusted=rel["adjusted"],
        in_p_prime=scored.in_p_prime, m=scored.m, m_estimate=prep.m_estimate,
        metrics=rel["metrics"], per_type=rel["per_type"], expected=rel["expected"],
        thresholds=rel["thresholds"], params=params, diagnostics=diagnostics,
        certification=certification,
        evidence={} if prep.evidence is None else dict(prep.evidence.values),
        _table_ref=weakref.ref(table))


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
        Runs the scoring jobs (:func:`~puaudit.audit.scorers.scoring.score_split`; the Ray backend).

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
        self._input_info: InputInfo | None = None

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
        if config.human_source == "votes":
            return None
        return self._get(self.human_key(config),
                         lambda: human_labels(self.table, config, self.embeddings))

    def evidence(self, config: AuditConfig):
        from puaudit.audit.evidence import verdict_evidence

        if config.evidence == "none":
            return None
        return self._get(stage_key(config, "evidence"),
                         lambda: verdict_evidence(self.table, signals=config.evidence,
                                                  other_judges=config.other_judges))

    def split_key(self, config: AuditConfig) -> tuple:
        return (stage_key(config, "split", self.human_key(config)),
                stage_key(config, "evidence"))

    def split(self, config: AuditConfig, *, checkpoint: Callable | None = None
              ) -> PreparedSplit:
        """:func:`~puaudit.audit.splits.prepare_split` of ``config`` (its evidence from the
        split-independent evidence stage)."""
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
        """:func:`~puaudit.audit.scorers.scoring.score_split` of ``config``: the fits (and the
        automatic choice) before the prior shift are cached; the shift to ``m`` is applied to
        a copy (a few vector operations)."""
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
        """The audit of ``config``: equal to :func:`audit_table`
        of the same table, embeddings and config, with every unchanged stage reused."""
        def relabelled():
            scored = self.scored(config, checkpoint=checkpoint)
            _check(checkpoint)
            return scored, relabel_split(self.split(config), scored, config)

        def compute():
            # relabelling reads no certification field: Certify and its sliders reuse it
            plain = config.replace(target_agreement=None, risk=AuditConfig.risk)
            scored, rel = self._get(self.audit_key(plain, "relabel"), relabelled)
            _check(checkpoint)
            if self._input_info is None:  # the table does not change under its cache
                self._input_info = InputInfo.of(self.table)
            return audit_table(self.table, self.embeddings, config, prep=self.split(config),
                               scored=scored, map_fn=self.map_fn, relabelled=rel,
                               input_info=self._input_info)

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
