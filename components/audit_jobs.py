"""The Audit page's background jobs (:func:`components.audit_runs.runner`): the m curve, the
idle-time precompute of neighbouring slider values and the scorer comparison, each keyed by
what it depends on (docs/dashboard.md)."""

from __future__ import annotations

from components import audit_runs, state
from components.jobs import Job
from puaudit.audit.config import SCORER_CHOICES, AuditConfig
from puaudit.data.schema import ComparisonTable
from puaudit.embed.pairs import PairEmbeddings

__all__ = ["compare_job", "m_curve_job", "m_curve", "precompute_neighbours"]


def _compare(content_hash: str, encoder_label: str, config: AuditConfig, seeds: int, _table,
             _emb, _progress=None, _stages=None):
    from puaudit.audit.evaluate import evaluate

    n = len(SCORER_CHOICES)

    def step(done: int, total: int) -> None:  # evaluate reports after each scorer x seed
        if _progress is not None and done < total:
            _progress(done, total, f"Comparing scorers: {SCORER_CHOICES[done % n]}, "
                                   f"split {done // n + 1} of {seeds}")

    step(0, seeds * n)
    res = evaluate(_table, _emb, seeds=seeds, scorers=SCORER_CHOICES,
                   rules=state.RULE_CHOICES, config=config, progress=step, stages=_stages)
    return res["leaderboard"]


def compare_job(table: ComparisonTable, emb: PairEmbeddings, params: dict, *,
                seeds: int = 3) -> Job:
    """Leaderboard of every scorer × rule over ``seeds`` splits, as a background job (one per
    data + settings; newer settings cancel an older comparison)."""
    cfg = state.audit_config(params).replace(scorer=AuditConfig.scorer, rule=AuditConfig.rule,
                                       random_state=AuditConfig.random_state,
                                       target_agreement=None)
    key = ("compare", state.table_hash(table), params["encoder"], cfg, int(seeds))
    # every seed x scorer through the stage cache: stopped for a slider answer, it resumes
    cache = audit_runs.stage_cache(table, emb)
    return audit_runs.runner().submit(key, lambda job: _compare(key[1], key[2], cfg, int(seeds),
                                                                table, emb, job.report, cache),
                                      group="compare", text="Comparing scorers", priority=3)


def _curve_config(params: dict) -> AuditConfig:
    """What the m curve depends on: every setting but ``m`` and certification."""
    return state.audit_config(params).replace(m=None, target_agreement=None,
                                              risk=AuditConfig.risk)


def m_curve_job(table: ComparisonTable, emb: PairEmbeddings, params: dict) -> Job:
    """Reversals and expected consistency over :func:`~puaudit.audit.m_curve.m_grid`, as a
    background job: once per data + settings other than ``m`` (the page marks the current
    ``m`` on it from the audit it shows)."""
    from puaudit.audit.m_curve import stage_curve

    cfg = _curve_config(params)
    cache = audit_runs.stage_cache(table, emb)
    key = ("m_curve", state.table_hash(table), params["encoder"], cfg)
    return audit_runs.runner().submit(key, lambda job: stage_curve(cache, cfg,
                                                                   checkpoint=job.checkpoint,
                                                                   progress=job.report),
                                      group="m_curve", text="Reversals vs m", priority=0)


def m_curve(table: ComparisonTable, emb: PairEmbeddings, params: dict) -> list[dict]:
    """:func:`m_curve_job`'s points at :func:`~puaudit.audit.m_curve.m_grid`, waited for (the
    Export page's report; it adds the audit's own point)."""
    return audit_runs.wait_for(lambda: m_curve_job(table, emb, params), "Reversals vs m")


def precompute_neighbours(table: ComparisonTable, emb: PairEmbeddings, params: dict, *,
                          m_step: float, p_step: float, m_range: tuple[float, float],
                          p_range: tuple[float, float]) -> Job:
    """Idle-time work: the audits one slider step away (``m`` ± one and two steps, ``p_ratio``
    ± one step), nearest first, so the next step is usually instant; cancelled when the visitor
    moves to other settings (:func:`~components.audit_runs.run_audit`)."""
    cfg = state.audit_config(params)
    cache = audit_runs.stage_cache(table, emb)
    m0 = cfg.m if cfg.m is not None else cache.split(cfg).m_estimate
    m0 = round(float(m0) / m_step) * m_step  # the slider's grid (it shows the estimate rounded)
    # m first (an m step relabels; only pot, by name, refits), then p_ratio (a new split)
    todo = [cfg.replace(m=mv) for k in (1, -1, 2, -2)
            if m_range[0] <= (mv := round(float(m0) + k * m_step, 6)) <= m_range[1]]
    todo += [cfg.replace(p_ratio=pv) for k in (1, -1)
             if p_range[0] <= (pv := round(cfg.p_ratio + k * p_step, 6)) <= p_range[1]]

    def work(job: Job) -> int:
        for i, c in enumerate(todo):
            job.report(i, len(todo), "Precomputing the neighbouring slider values")
            cache.audit(c, checkpoint=job.checkpoint)
        return len(todo)

    return audit_runs.runner().submit(audit_runs.precompute_key(table, params), work,
                                      group="precompute", text="Precomputing", priority=1)
