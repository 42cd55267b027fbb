"""The "verdicts reversed vs m" curve shown beside the m slider (pure function, no Streamlit)."""

from __future__ import annotations

import plotly.graph_objects as go

__all__ = ["m_curve_figure"]


def m_curve_figure(curve: list[dict], *, current_m: float | None = None) -> go.Figure:
    """Audited rows the guarded rule would reverse at each ``m`` (from
    :func:`puaudit.audit.estimator.reversals_vs_m`), with the slider's current value marked."""
    ms = [c["m"] for c in curve]
    n = [c["n_reversed"] for c in curve]
    fig = go.Figure(go.Scatter(x=ms, y=n, mode="lines+markers", name="reversed",
                               hovertemplate="m %{x:.2f}: %{y:,} rows reversed<extra></extra>",
                               line={"color": "#E45756"}))
    if current_m is not None:
        fig.add_vline(x=float(current_m), line_dash="dot", line_color="#4C78A8",
                      annotation_text="current m", annotation_position="top")
    fig.update_layout(height=220, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      xaxis_title="m (share of audited verdicts believed right)",
                      yaxis_title="rows reversed", showlegend=False)
    fig.update_yaxes(rangemode="tozero")
    return fig
