"""The "verdicts reversed vs m" curve beside the m slider: the page glue that shows it when its
background job is ready (the job: :func:`components.audit_jobs.m_curve_job`). The figure is
:func:`puaudit.report.figures.m_curve.m_curve_figure`, which the report draws too."""

from __future__ import annotations

# the m values live with the curve's numbers, which the audit report reads too
from puaudit.audit.m_curve import m_grid
from puaudit.report.figures.m_curve import m_curve_figure

__all__ = ["M_STEP", "curve_ready", "show_m_curve"]

#: the Audit page's m slider's step (its range is :data:`M_RANGE`)
M_STEP = 0.01


def curve_ready(table, emb, params) -> bool:
    """Whether the m curve of these settings is computed (or failed: nothing to wait for)."""
    from components.audit_jobs import m_curve_job
    from components.jobs import job_status

    return job_status(m_curve_job(table, emb, params)) != "pending"


def show_m_curve(table, emb, params, result, *, polling: bool) -> None:
    """Draw the m curve of these settings with the audit's point marked, or say it is being
    computed (its background job gives way to every slider answer). ``polling``: this runs in a
    timed fragment, which reruns the page once the curve arrives (to stop polling)."""
    import streamlit as st

    from components.audit_jobs import m_curve_job
    from components.jobs import job_status
    from puaudit.audit.m_curve import with_current_point
    from puaudit.audit.relabel import GROUP_NEG

    job = m_curve_job(table, emb, params)
    status = job_status(job)
    if status == "pending":
        st.caption("Drawing reversals vs m in the background "
                   f"({job.progress['done']} of {job.progress['total'] or len(m_grid())} "
                   "points)…")
        return
    if status == "failed" or not job.result():
        return  # a refit at some m failed: the audit stands without its curve
    current_m = float(result.m)
    points = with_current_point(job.result(), current_m, int((result.group == GROUP_NEG).sum()))
    st.plotly_chart(m_curve_figure(points, current_m=current_m), width="stretch", key="m_curve")
    st.caption(f"Rows the {result.params.get('rule', 'guarded')} rule would reverse at each m "
               "over the slider's range (higher m: more trust in the judge, fewer reversals); "
               "the marked point is the audit below.")
    if polling:
        st.rerun()
