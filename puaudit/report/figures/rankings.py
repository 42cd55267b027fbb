"""Tables and figures for the Models page: pure functions of a
:class:`~puaudit.rankings.result.ModelRankings` (DataFrames, a pandas Styler, plotly figures).

Model names are data: figures escape them (:func:`~puaudit.report.figures.text.plotly_text`).
Every view covers the first ``top`` models of the leaderboard (default
:data:`~puaudit.rankings.leaderboard_limits.TOP_MODELS`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from puaudit.rankings.result import SOURCE_LABELS, SOURCES, ModelRankings
from puaudit.rankings.leaderboard_limits import TOP_MODELS
from puaudit.report.figures.text import plotly_text as _text

__all__ = ["STAT_LABELS", "SOURCE_COLORS", "SHORT_LABELS", "rank_table", "style_rank_table",
           "interval_figure", "rank_figure", "win_probability_figure", "win_probability_caption",
           "shown_note", "HEATMAP_MODELS"]

STAT_LABELS = {"bt": "Bradley–Terry strength (log-odds, mean 0)",
               "winrate": "Win rate against the field",
               "lc_winrate": "Length-controlled win rate"}
SHORT_LABELS = {"judge": "Judge", "audited": "Audited", "human": "Human", "ppi": "PPI"}
SOURCE_COLORS = {"judge": "#d62728", "audited": "#ff7f0e", "human": "#1f77b4", "ppi": "#2ca02c"}
UP, DOWN = "#d9f0d3", "#f8d7da"
# Model labels in figures: longest name shown (the hover has all of it), type size in pixels,
# and pixels of height per model so that labels of neighbouring ranks do not overlap.
LABEL_CHARS = 32
LABEL_FONT = 11
ROW_PX = 22
# Heatmaps of up to this many models name the models on both axes (and write the values).
NAMED_COLUMNS = 15
# The heatmap's size by default: 30 × 30 cells stay readable on a page-wide chart.
HEATMAP_MODELS = 30


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
        return "" if pd.isna(v) or v == 0 else f"background-color: {UP if v > 0 else DOWN}"

    styler = table.style
    if shift_cols:
        styler = styler.map(shift_color, subset=shift_cols)
    styler = styler.map(lambda v: f"background-color: {DOWN}" if v else "",
                        subset=["Judge vs people"])
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


def shown_note(rankings: ModelRankings, top: int) -> str:
    """Which models a view of the leaderboard's first ``top`` holds, in words: ``"the top N of
    M models by the <source> ranking"`` when it leaves models out, else ``"all M models"``, so a
    figure is never cut without saying so."""
    total = len(rankings.frame)
    shown = min(max(int(top), 1), total)
    if shown >= total:
        return f"all {total:,} models"
    by = rankings.diagnostics.get("sorted_by", "ppi")
    return (f"the top {shown:,} of {total:,} models by the "
            f"{SOURCE_LABELS.get(by, by)} ranking")


def _short(name: str, limit: int = LABEL_CHARS) -> str:
    """A model name cut to ``limit`` characters (an ellipsis marks the cut), then escaped; the
    full name stays in the hover text."""
    name = str(name)
    return _text(name if len(name) <= limit else name[:limit - 1] + "…")


def _end_labels(ranks: list, name: str) -> tuple[list[str], list[str]]:
    """Text and text positions for one line of :func:`rank_figure`: the name at its first
    ranked column (to the left) and its last (to the right), nothing in between, so each
    column's labels sit at distinct ranks and do not overlap."""
    finite = [k for k, r in enumerate(ranks) if pd.notna(r)]
    text, where = [""] * len(ranks), ["middle center"] * len(ranks)
    if finite:
        first, last = finite[0], finite[-1]
        text[first], where[first] = f"{name} ({ranks[first]:.0f})", "middle left"
        if last != first:
            text[last], where[last] = f"({ranks[last]:.0f}) {name}", "middle right"
    return text, where


def rank_figure(rankings: ModelRankings, *, sources=None, top: int = TOP_MODELS) -> go.Figure:
    """The rankings side by side: one column per source, a line per model (the first ``top`` of
    the leaderboard) joining its ranks (rank 1 on top).

    Every line is named where it starts and where it ends (name and rank, cut to
    :data:`LABEL_CHARS` characters): a legend of dozens of colours cannot be matched to lines.
    Each rank gets :data:`ROW_PX` pixels of height, so neighbouring labels in
    :data:`LABEL_FONT`-pixel type do not overlap; lines of models whose rank differs from the
    judge's are drawn bold. The title says which models are shown (:func:`shown_note`).
    """
    f = _head(rankings, top)
    avail = _available(rankings, sources)
    x = [SHORT_LABELS[s] for s in avail]
    fig = go.Figure()
    n_models = len(f)
    for _, row in f.iterrows():
        ranks = [row[f"rank_{s}"] for s in avail]
        moved = "judge" in avail and any(r != row["rank_judge"] for r in ranks if pd.notna(r))
        text, where = _end_labels(ranks, _short(row["model"]))
        fig.add_trace(go.Scatter(
            x=x, y=ranks, mode="lines+markers+text", name=_text(row["model"]),
            text=text, textposition=where, textfont=dict(size=LABEL_FONT), cliponaxis=False,
            customdata=[_text(row["model"])] * len(x),
            line=dict(width=3.5 if moved else 1.2), opacity=1.0 if moved else 0.55,
            hovertemplate="%{customdata}: rank %{y} (%{x})<extra></extra>"))
    # Room at each side for the longest label (about 0.6 em per character, plus the rank).
    side = int(0.6 * LABEL_FONT * (min(int(f["model"].astype(str).str.len().max()),
                                       LABEL_CHARS) + 6)) + 20 if n_models else 20
    # The labels carry the ranks and sit where the axis' numbers would: no tick labels.
    fig.update_yaxes(range=[n_models + 0.7, 0.3], showticklabels=False, zeroline=False)
    fig.update_layout(title=f"Ranks of {shown_note(rankings, top)} (1 = strongest, on top)",
                      height=max(300, ROW_PX * n_models + 140), showlegend=False,
                      margin=dict(l=side, r=side, t=60, b=10))
    return fig


def win_probability_caption(rankings: ModelRankings, *, source: str = "ppi",
                            max_models: int = TOP_MODELS) -> str:
    """What :func:`win_probability_figure` shows, in words: the source, which models (how many
    of how many, by which ranking) and what one cell means.

    Parameters
    ----------
    rankings : ModelRankings
    source : str
        One of :data:`~puaudit.rankings.result.SOURCES`.
    max_models : int
        The heatmap's size (the first ``max_models`` of the leaderboard).

    Returns
    -------
    str
    """
    shown = shown_note(rankings, max_models)
    numbered = ("" if min(int(max_models), len(rankings.frame)) <= NAMED_COLUMNS else
                " Columns are numbered by leaderboard place, as the rows are.")
    more = ("" if shown.startswith("all ") else
            " Change 'Models in the heatmap' to show more or fewer.")
    return (f"Showing {shown}, strongest first. A cell is the probability that the row's model "
            f"beats the column's model, from the Bradley–Terry strengths fitted on "
            f"{SOURCE_LABELS[source].lower()} (a tie counts half): 0.5 = an even match, blue = "
            f"the row's model is stronger, red = weaker; the diagonal is blank.{numbered}{more}")


def win_probability_figure(rankings: ModelRankings, *, source: str = "ppi",
                           max_models: int = TOP_MODELS) -> go.Figure:
    """Heatmap of Bradley–Terry win probabilities P(row beats column) for one source, models in
    leaderboard order (the first ``max_models``; the title says how many of how many), every
    model named on both axes, values written in cells when they fit."""
    p = rankings.win_probability(source, top=max_models)
    labels = [_text(m) for m in p.index]
    short = [_short(m) for m in p.index]
    z = p.to_numpy(float)
    text = np.where(np.isnan(z), "", np.vectorize(lambda v: f"{v:.2f}")(np.nan_to_num(z)))
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, zmin=0, zmax=1, colorscale="RdBu", reversescale=False,
        text=text if len(labels) <= NAMED_COLUMNS else None,
        texttemplate="%{text}" if len(labels) <= NAMED_COLUMNS else None,
        colorbar=dict(title="P(row wins)"),
        hovertemplate="%{y} beats %{x}: %{z:.3f}<extra></extra>"))
    # Every tick written out (Plotly thins crowded category ticks on its own). Rows carry the
    # names with their place; past NAMED_COLUMNS models a page-wide chart has about ten pixels
    # per column, too few for a name, so columns carry the place alone.
    places = [str(k) for k in range(1, len(labels) + 1)]
    rows = short if len(labels) <= NAMED_COLUMNS else [f"{k}. {n}" for k, n in zip(places, short)]
    cols = short if len(labels) <= NAMED_COLUMNS else places
    font = dict(size=LABEL_FONT)
    fig.update_layout(title=f"{SOURCE_LABELS[source]}: P(row beats column), "
                            f"{shown_note(rankings, max_models)}",
                      xaxis=dict(tickmode="array", tickvals=labels, ticktext=cols, tickfont=font,
                                 side="top"),
                      yaxis=dict(autorange="reversed", tickmode="array", tickvals=labels,
                                 ticktext=rows, tickfont=font),
                      height=max(360, ROW_PX * len(labels) + 200),
                      margin=dict(l=10, r=10, t=110, b=10))  # the title above the top ticks
    return fig
