"""Tables and figures for the Models page: pure functions of a
:class:`~puaudit.rankings.estimate.ModelRankings`.

No Streamlit here: every function returns a DataFrame, a pandas Styler or a plotly figure. Model
names come from the data: in figures they are HTML-escaped (Plotly renders a subset of HTML in
labels, legends and hover text), so a name such as ``<a href=...>`` shows as typed. Every view
covers the first ``top`` models of the leaderboard (default
:data:`~puaudit.rankings.limits.TOP_MODELS`): a table or figure of 10,000 models shows nothing a
reader can use, and the heatmap grows with the square of the number.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from puaudit.rankings.estimate import SOURCE_LABELS, SOURCES, ModelRankings
from puaudit.rankings.limits import TOP_MODELS

__all__ = ["STAT_LABELS", "SOURCE_COLORS", "SHORT_LABELS", "rank_table", "style_rank_table",
           "interval_figure", "rank_figure", "win_probability_figure"]

STAT_LABELS = {"bt": "Bradley–Terry strength (log-odds, mean 0)",
               "winrate": "Win rate against the field",
               "lc_winrate": "Length-controlled win rate"}
SHORT_LABELS = {"judge": "Judge", "audited": "Audited", "human": "Human", "ppi": "PPI"}
SOURCE_COLORS = {"judge": "#d62728", "audited": "#ff7f0e", "human": "#1f77b4", "ppi": "#2ca02c"}
UP, DOWN = "#d9f0d3", "#f8d7da"


def _text(value) -> str:
    """A data-derived string for a Plotly label: ``&``, ``<`` and ``>`` as entities."""
    return html.escape(str(value), quote=False)


def _available(rankings: ModelRankings, sources) -> list[str]:
    have = rankings.available()
    return [s for s in (SOURCES if sources is None else sources) if s in have]


def _head(rankings: ModelRankings, top: int) -> pd.DataFrame:
    return rankings.frame.head(max(int(top), 1))


def rank_table(rankings: ModelRankings, *, statistic: str = "winrate",
               against: str = "ppi", top: int = TOP_MODELS) -> pd.DataFrame:
    """The four rankings side by side, one row per model in leaderboard order (the first
    ``top``).

    Columns: ``Model``, ``Comparisons``, ``Human votes``; for each available source its rank
    (``"<Source> rank"``, 1 = strongest by Bradley–Terry) and the shift against the judge's rank
    (``"<Source> vs judge"``: positive = the model ranks higher than the judge says); then
    ``statistic`` per source with its interval as ``[lo, hi]`` text; last ``Judge vs people``:
    ``"judge higher"`` / ``"judge lower"`` when the judge's ``statistic`` lies outside the
    ``against`` interval (see :meth:`ModelRankings.disagreements`).
    """
    f = _head(rankings, top)
    avail = _available(rankings, None)
    out = pd.DataFrame({"Model": f["model"].astype(str).to_numpy(),
                        "Comparisons": f["n"].to_numpy(), "Human votes": f["n_human"].to_numpy()})
    for s in avail:
        out[f"{SHORT_LABELS[s]} rank"] = f[f"rank_{s}"].astype("Int64").to_numpy()
    for s in avail:
        if s != "judge" and "judge" in avail:
            out[f"{SHORT_LABELS[s]} vs judge"] = (f["rank_judge"] - f[f"rank_{s}"]).astype(
                "Int64").to_numpy()
    for s in avail:
        col = f"{statistic}_{s}"
        if col not in f.columns:
            continue
        out[f"{SHORT_LABELS[s]} {statistic}"] = f[col].astype(float).round(3).to_numpy()
        out[f"{SHORT_LABELS[s]} 95% CI"] = [
            "" if (pd.isna(a) or pd.isna(b)) else f"[{a:.3f}, {b:.3f}]"
            for a, b in zip(f[f"{col}_lo"], f[f"{col}_hi"])]
    verdict = np.full(len(f), "", dtype=object)
    if against in avail and "judge" in avail and f"{statistic}_{against}" in f.columns:
        dis = rankings.disagreements(against=against, statistic=statistic)
        where = dict(zip(dis["model"].astype(str), dis["direction"]))
        verdict = np.array([where.get(m, "") for m in out["Model"]], dtype=object)
    out["Judge vs people"] = verdict
    return out


def style_rank_table(table: pd.DataFrame):
    """A pandas Styler of :func:`rank_table`: shifts up green, down red; disagreements shaded."""
    shift_cols = [c for c in table.columns if c.endswith(" vs judge")]

    def shift_color(v):
        if pd.isna(v) or v == 0:
            return ""
        return f"background-color: {UP if v > 0 else DOWN}"

    def verdict_color(v):
        return f"background-color: {DOWN}" if v else ""

    styler = table.style
    apply = getattr(styler, "map", None) or styler.applymap  # pandas < 2.1 has applymap only
    styler = apply(shift_color, subset=shift_cols) if shift_cols else styler
    apply = getattr(styler, "map", None) or styler.applymap
    styler = apply(verdict_color, subset=["Judge vs people"])
    return styler.format(precision=3, na_rep="")


def interval_figure(rankings: ModelRankings, *, statistic: str = "bt",
                    sources=None, top: int = TOP_MODELS) -> go.Figure:
    """Forest plot: one row per model (the first ``top`` in leaderboard order, strongest on top),
    one marker per source with its 95% interval, sources offset vertically so the intervals stay
    readable."""
    f = _head(rankings, top)
    avail = [s for s in _available(rankings, sources) if f"{statistic}_{s}" in f.columns]
    models = [_text(m) for m in f["model"]]
    y_base = np.arange(len(models))[::-1].astype(float)
    fig = go.Figure()
    offsets = np.linspace(0.24, -0.24, max(len(avail), 1)) if len(avail) > 1 else [0.0]
    for s, off in zip(avail, offsets):
        est = f[f"{statistic}_{s}"].to_numpy(float)
        lo = f[f"{statistic}_{s}_lo"].to_numpy(float)
        hi = f[f"{statistic}_{s}_hi"].to_numpy(float)
        rank = f[f"rank_{s}"].to_numpy(float)
        fig.add_trace(go.Scatter(
            x=est, y=y_base + off, mode="markers", name=SOURCE_LABELS[s],
            marker=dict(color=SOURCE_COLORS[s], size=8),
            error_x=dict(type="data", symmetric=False, array=hi - est, arrayminus=est - lo,
                         thickness=1.5, width=3),
            customdata=np.column_stack([models, lo, hi, rank]),
            hovertemplate=("%{customdata[0]}<br>" + SHORT_LABELS[s] + ": %{x:.3f} "
                           "[%{customdata[1]:.3f}, %{customdata[2]:.3f}]<br>rank "
                           "%{customdata[3]:.0f}<extra></extra>")))
    fig.update_layout(
        xaxis_title=STAT_LABELS.get(statistic, statistic),
        yaxis=dict(tickmode="array", tickvals=y_base, ticktext=models,
                   range=[-0.6, len(models) - 0.4]),
        height=max(300, 36 * len(models) + 140),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        margin=dict(l=10, r=10, t=60, b=10))
    return fig


def rank_figure(rankings: ModelRankings, *, sources=None, top: int = TOP_MODELS) -> go.Figure:
    """The rankings side by side: one column per source, a line per model (the first ``top`` of
    the leaderboard) joining its ranks (rank 1 on top); lines of models whose rank differs from
    the judge's are drawn bold."""
    f = _head(rankings, top)
    avail = _available(rankings, sources)
    x = [SHORT_LABELS[s] for s in avail]
    fig = go.Figure()
    n_models = len(f)
    for _, row in f.iterrows():
        ranks = [row[f"rank_{s}"] for s in avail]
        moved = "judge" in avail and any(r != row["rank_judge"] for r in ranks)
        fig.add_trace(go.Scatter(
            x=x, y=ranks, mode="lines+markers", name=_text(row["model"]),
            text=[_text(row["model"])] * len(x),
            line=dict(width=3.5 if moved else 1.2), opacity=1.0 if moved else 0.45,
            hovertemplate="%{text}: rank %{y} (%{x})<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title="Rank (1 = strongest)",
                     dtick=1 if n_models <= 20 else None)
    fig.update_layout(height=max(300, 22 * n_models + 140), showlegend=n_models <= 25,
                      margin=dict(l=10, r=10, t=30, b=10))
    return fig


def win_probability_figure(rankings: ModelRankings, *, source: str = "ppi",
                           max_models: int = 40) -> go.Figure:
    """Heatmap of Bradley–Terry win probabilities P(row beats column) for one source, models in
    leaderboard order (the first ``max_models`` when there are more), values written in cells
    when they fit."""
    p = rankings.win_probability(source, top=max_models)
    labels = [_text(m) for m in p.index]
    z = p.to_numpy(float)
    text = np.where(np.isnan(z), "", np.vectorize(lambda v: f"{v:.2f}")(np.nan_to_num(z)))
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, zmin=0, zmax=1, colorscale="RdBu", reversescale=False,
        text=text if len(labels) <= 15 else None,
        texttemplate="%{text}" if len(labels) <= 15 else None,
        colorbar=dict(title="P(row wins)"),
        hovertemplate="%{y} beats %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"{SOURCE_LABELS[source]}: P(row beats column)",
                      yaxis=dict(autorange="reversed"), height=max(360, 26 * len(labels) + 160),
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig
