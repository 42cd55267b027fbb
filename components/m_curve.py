"""The "verdicts reversed vs m" curve beside the m slider: its figure and the page glue that
shows it when its background job is ready (the job: :func:`components.audit_jobs.m_curve_job`)."""

from __future__ import annotations

import plotly.graph_objects as go

# the m values live with the curve's numbers, which the audit report reads too
from puaudit.audit.m_curve import M_RANGE, m_grid

__all__ = ["M_RANGE", "M_STEP", "m_grid", "m_curve_figure", "curve_ready", "show_m_curve"]

#: the Audit page's m slider's step (its range is :data:`M_RANGE`)
M_STEP = 0.01


def m_curve_figure(curve: list[dict], *, current_m: float | None = None) -> go.Figure:
    """Audited rows the guarded rule would reverse at each ``m`` (from
    :func:`puaudit.audit.estimator.reversals_vs_m`) over the slider's whole range
    (:data:`M_RANGE`), with the current value marked and its count labelled."""
    ms = [c["m"] for c in curve]
    n = [c["n_reversed"] for c in curve]
    fig = go.Figure(go.Scatter(x=ms, y=n, mode="lines+markers", name="reversed",
                               hovertemplate="m %{x:.2f}: %{y:,} rows reversed<extra></extra>",
                               line={"color": "#E45756"}, marker={"size": 5}))
    if current_m is not None:
        here = [c["n_reversed"] for c in curve if abs(c["m"] - current_m) < 1e-9]
        fig.add_vline(x=float(current_m), line_dash="dot", line_color="#4C78A8")
        if here:
            fig.add_trace(go.Scatter(
                x=[float(current_m)], y=[here[0]], mode="markers+text", name="current m",
                marker={"size": 10, "color": "#4C78A8"},
                text=[f"m {current_m:.2f}: {here[0]:,}"], textposition="top right",
                hovertemplate="current m %{x:.3f}: %{y:,} rows reversed<extra></extra>"))
    fig.update_layout(height=240, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      xaxis_title="m (share of audited verdicts believed right)",
                      yaxis_title="rows reversed", showlegend=False)
    fig.update_xaxes(range=list(M_RANGE))  # the slider's range, not Plotly's guess from the data
    fig.update_yaxes(rangemode="tozero")
    return fig


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
