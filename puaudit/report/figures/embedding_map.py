"""Embedding-map page builder: a 2-D scatter of the difference embeddings coloured by score,
with P, validation and unlabelled rows drawn with different symbols."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from puaudit.report.figures.text import plotly_texts
from puaudit.errors import PUAuditError

__all__ = ["SPLIT_SYMBOLS", "map_frame", "embedding_scatter"]

SPLIT_SYMBOLS = {"P": "star", "validation": "diamond", "unlabelled": "circle", "excluded": "x"}


def _short(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def map_frame(xy: np.ndarray, result, table) -> pd.DataFrame:
    """Coordinates plus what the hover shows: row, split, type, score, verdicts, prompt."""
    xy = np.asarray(xy, dtype=float)
    t = table
    if xy.shape != (len(t), 2):
        raise PUAuditError(f"The projection has shape {xy.shape}; expected ({len(t)}, 2).")
    return pd.DataFrame({
        "x": xy[:, 0], "y": xy[:, 1], "row": np.arange(1, len(t) + 1),
        "split": result.split.astype(str), "question_type": t.question_type,
        "score": np.asarray(result.score, dtype=float),
        "judge": [("" if v is None else v) for v in t.judge],
        "human": [("" if v is None else v) for v in t.human],
        "adjusted": [("" if v is None else v) for v in result.adjusted],
        "prompt": [_short(p) for p in t.prompt],
    })


def embedding_scatter(xy: np.ndarray, result, table, *, method: str = "pca") -> go.Figure:
    """Scatter coloured by score (one colour scale for all splits; unscored rows grey),
    one trace per split so each has its own symbol and legend entry."""
    df = map_frame(xy, result, table)
    finite = df["score"][np.isfinite(df["score"])]
    cmin, cmax = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    fig = go.Figure()
    first_coloured = True
    for split, symbol in SPLIT_SYMBOLS.items():
        for scored in (True, False):
            sel = df[(df["split"] == split) & (np.isfinite(df["score"]) == scored)]
            if sel.empty:
                continue
            marker = dict(symbol=symbol, size=5 if split == "unlabelled" else 7, opacity=0.8,
                          line=dict(width=0))
            if scored:
                marker.update(color=sel["score"], colorscale="Viridis", cmin=cmin, cmax=cmax,
                              showscale=first_coloured, colorbar=dict(title="score"))
                first_coloured = False
            else:
                marker.update(color="#9a9a9a")
            name = f"{split} ({len(sel)})" if scored else f"{split}, no score ({len(sel)})"
            fig.add_trace(go.Scattergl(
                x=sel["x"], y=sel["y"], mode="markers", name=name, marker=marker,
                # types and prompts are data: escaped so the hover builds no link from them
                customdata=np.stack([sel["row"], plotly_texts(sel["question_type"]),
                                     sel["score"].round(3), sel["judge"], sel["human"],
                                     sel["adjusted"], plotly_texts(sel["prompt"])], axis=1),
                hovertemplate=("row %{customdata[0]} · %{customdata[1]}<br>score %{customdata[2]}"
                               "<br>judge %{customdata[3]} · human %{customdata[4]} · audited "
                               "%{customdata[5]}<br>%{customdata[6]}<extra></extra>")))
    fig.update_layout(xaxis_title=f"{method.upper()} 1", yaxis_title=f"{method.upper()} 2",
                      legend=dict(orientation="h", y=-0.15), height=560,
                      margin=dict(l=10, r=10, t=30, b=10))
    return fig
