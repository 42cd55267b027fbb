"""The "verdicts reversed vs m" curve: the Audit page draws it beside its m slider, the report
under the reversals (pure function, no Streamlit)."""

from __future__ import annotations

import plotly.graph_objects as go

from puaudit.audit.m_curve import M_RANGE

__all__ = ["m_curve_figure"]


def m_curve_figure(curve: list[dict], *, current_m: float | None = None) -> go.Figure:
    """Audited rows the guarded rule would reverse at each ``m`` (from
    :func:`puaudit.audit.m_curve.reversals_vs_m`) over the slider's whole range
    (:data:`~puaudit.audit.m_curve.M_RANGE`), with the current value marked and its count
    labelled."""
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
    # the slider's range, not Plotly's guess from the data; automargin on both axes, whatever
    # the template (Streamlit's has none): room for the tick labels and the titles beside them
    fig.update_xaxes(range=list(M_RANGE), automargin=True)
    fig.update_yaxes(rangemode="tozero", automargin=True)
    return fig
