"""The PUAudit estimator and :func:`audit_table`, the pipeline's stages in order.

======================  =====================================  =========================
stage                   function                               module
======================  =====================================  =========================
pair embeddings         :func:`embed_table` (slow; cached)     :mod:`puaudit.embed.pairs`
split + evidence        :func:`prepare_split`                  :mod:`puaudit.audit.splits`
                                                               :mod:`puaudit.audit.evidence`
denoise, score,         :func:`score_split`                    :mod:`puaudit.audit.scorers.scoring`
cross-fit, calibrate,                                          :mod:`puaudit.audit.scorers.crossfit`
automatic choice                                               :mod:`puaudit.audit.scorers`
relabel + measure       :func:`relabel_split`                  :mod:`puaudit.audit.relabel`
certify (optional)      :func:`certify_split`                  :mod:`puaudit.audit.certify.judge`
result + export         :class:`AuditResult`                   :mod:`puaudit.audit.result`
======================  =====================================  =========================

:func:`audit_table` runs them in order and :class:`~puaudit.audit.stages.StageCache` keeps each
one under the fields it reads (both in :mod:`puaudit.audit.stages`).

Every stage takes the :class:`AuditConfig`; the dashboard reruns only the stages a widget
changed (docs/method.md; docs/development.md draws the pipeline).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable

import pandas as pd
from sklearn.base import BaseEstimator

from puaudit.audit.config import AuditConfig
from puaudit.audit.stages import StageCache
from puaudit.data.schema import ComparisonTable, load_comparisons
from puaudit.embed.pairs import PairEmbeddings, embed_table
from puaudit.errors import PUAuditError

__all__ = ["PUAudit"]

_FIELDS = tuple(f.name for f in dataclasses.fields(AuditConfig))


class PUAudit(BaseEstimator):
    """Audit an LLM judge's pairwise verdicts against scarce human labels (docs/method.md).

    A scikit-learn estimator: its parameters are ``config``, ``encoder``, ``backend`` and every
    field of :class:`AuditConfig` (``get_params``, ``set_params`` and ``sklearn.base.clone``
    work; values are validated by :meth:`fit`).

    Parameters
    ----------
    config : AuditConfig, optional
        A whole configuration: it gives every field not passed by name, here and in
        ``set_params(config=...)``.
    encoder : str or TextEncoder, optional
        Model name or local Hugging Face directory; default all-MiniLM-L6-v2.
    backend : {"local", "ray"}
        ``ray``: embed the distinct texts with Ray Data and run the scoring and cross-fitting
        jobs as Ray tasks on the connected cluster (a local one is started when none is), same
        result as ``local`` (:mod:`puaudit.scale`, ``pip install -e .[ray]``, docs/ray.md).
    **params
        Any :class:`AuditConfig` field (``PUAudit(scorer="probe")``).

    Attributes (after :meth:`fit`)
    ------------------------------
    config_ : AuditConfig
        The configuration used.
    result_ : AuditResult
    split_, scores_, p_judge_right_, groups_, adjusted_, m_, m_estimate_, metrics_, per_type_
        Shortcuts into ``result_``.
    table_, embeddings_ : ComparisonTable, PairEmbeddings
        The fitted input (references, not copies) — :meth:`to_frame` uses ``table_``.
    stages_ : StageCache
        Every stage of this fit (:mod:`puaudit.audit.stages`); pass it to a later
        ``fit(..., stages=est.stages_)`` to reuse each stage whose fields did not change.
    """

    def __init__(self, config: AuditConfig | None = None, *, encoder=None,
                 backend: str = "local", **params):
        unknown = sorted(set(params) - set(_FIELDS))
        if unknown:
            raise PUAuditError(f"Unknown audit parameter(s) {unknown}.")
        self.config = config
        self.encoder = encoder
        self.backend = backend
        base = AuditConfig() if config is None else config
        for name in _FIELDS:
            setattr(self, name, params[name] if name in params else getattr(base, name))

    def set_params(self, **params) -> "PUAudit":
        """Set parameters; ``config=`` sets every field it holds that is not passed by name."""
        if "config" in params:
            base = AuditConfig() if params["config"] is None else params["config"]
            params = {**{name: getattr(base, name) for name in _FIELDS}, **params}
        return super().set_params(**params)

    def resolved_config(self) -> AuditConfig:
        """The parameters as a validated :class:`AuditConfig`."""
        return AuditConfig(**{name: getattr(self, name) for name in _FIELDS})

    def fit(self, table, embeddings: PairEmbeddings | None = None, *,
            stages: StageCache | None = None, progress: Callable | None = None,
            show_progress: bool = False) -> "PUAudit":
        """Run the audit on ``table`` (a DataFrame or :class:`ComparisonTable`).

        ``stages``: a :class:`StageCache` of this table (an earlier ``stages_``): the stages
        whose fields did not change are reused (after ``set_params(m=0.8)`` only the prior
        shift, the relabelling, certification and the transport scorers are computed again).
        Sets ``config_``, ``result_`` (:class:`AuditResult`), ``stages_`` and the shortcuts
        ``split_``, ``scores_``, ``p_judge_right_``, ``groups_``, ``adjusted_``, ``m_``,
        ``m_estimate_``, ``metrics_``, ``per_type_``, ``table_``, ``embeddings_``.
        """
        cfg = self.resolved_config()
        if self.backend not in ("local", "ray"):
            raise PUAuditError(f"Unknown backend {self.backend!r}: choose 'local' or 'ray'.")
        if isinstance(table, pd.DataFrame):
            table = load_comparisons(table)
        if stages is not None:
            _check_stages(stages, table, embeddings, texts=cfg.texts)
        else:
            map_fn = None
            if self.backend == "ray":
                from puaudit.scale.ray_embed import embed_table_ray
                from puaudit.scale.ray_score import RayMap

                if embeddings is None and cfg.texts:
                    embeddings = embed_table_ray(table, self.encoder, progress=progress,
                                                 show_progress=show_progress)
                map_fn = RayMap()
            if embeddings is None and cfg.texts:  # texts=False: no encoder, no embeddings
                embeddings = embed_table(table, self.encoder, progress=progress,
                                         show_progress=show_progress)
            stages = StageCache(table, embeddings, map_fn=map_fn)
        self.config_ = cfg
        self.stages_ = stages
        self.result_ = stages.audit(cfg)
        r = self.result_
        self.table_, self.embeddings_ = stages.table, stages.embeddings
        self.split_, self.scores_, self.p_judge_right_ = r.split, r.score, r.p_judge_right
        self.groups_, self.adjusted_ = r.group, r.adjusted
        self.m_, self.m_estimate_ = r.m, r.m_estimate
        self.metrics_, self.per_type_ = r.metrics, r.per_type
        return self

    def to_frame(self) -> pd.DataFrame:
        """The fitted table with the ``puaudit_*`` columns (:meth:`AuditResult.to_frame`)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "result_", msg="Call fit(table) before to_frame().")
        return self.result_.to_frame(self.table_)


def _check_stages(stages: StageCache, table: ComparisonTable, embeddings, *, texts: bool):
    """A stage cache given to :meth:`PUAudit.fit` must hold this table and these embeddings."""
    if not isinstance(stages, StageCache):
        raise PUAuditError(f"stages must be a StageCache (an earlier fit's stages_), got "
                           f"{type(stages).__name__}.")
    if table.content_hash() != stages.table.content_hash():
        raise PUAuditError("stages hold the stages of another table (or of this one before it "
                           "was edited): fit without stages.")
    if embeddings is not None and embeddings is not stages.embeddings:
        raise PUAuditError("stages were computed with other embeddings: fit without stages, or "
                           "leave embeddings out to use the ones the stages hold.")
    if texts and stages.embeddings is None:
        raise PUAuditError("stages come from an evidence-only fit (texts=False) and hold no "
                           "embeddings: fit without stages to embed the texts.")


# scikit-learn reads an estimator's parameters from the signature of its __init__: every
# AuditConfig field is a keyword parameter, its default the one AuditConfig declares.
PUAudit.__init__.__signature__ = inspect.Signature(
    [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("config", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
     inspect.Parameter("encoder", inspect.Parameter.KEYWORD_ONLY, default=None),
     inspect.Parameter("backend", inspect.Parameter.KEYWORD_ONLY, default="local")]
    + [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
       for f in dataclasses.fields(AuditConfig)])
