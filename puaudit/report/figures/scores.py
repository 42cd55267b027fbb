"""Scores page builders: score densities, rows sorted by score with the thresholds, and the rows
nearest each threshold (pure functions returning plotly figures and DataFrames)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from puaudit.report.figures.text import plotly_text, plotly_texts

__all__ = ["GROUP_COLOURS", "score_frame", "threshold_lines", "score_density",
           "sorted_scores_figure", "nearest_threshold_rows"]

GROUP_COLOURS = {"verified (P)": "#4C78A8", "positive": "#54A24B", "negative": "#E45756",
                 "uncertain": "#F2A93B"}


def score_frame(result, table) -> pd.DataFrame:
    """One row per scored input row: ``row`` (1-based), type, split, group, score, P(judge right),
    verdicts and texts (``table`` is the audited ComparisonTable)."""
    t = table
    score = np.asarray(result.score, dtype=float)
    ok = np.isfinite(score)
    idx = np.flatnonzero(ok)
    group = np.where(result.split[idx] == "P", "verified (P)", result.group[idx].astype(str))
    return pd.DataFrame({
        "row": idx + 1,
        "question_type": t.question_type[idx],
        "split": result.split[idx],
        "group": group,
        "score": score[idx],
        "p_judge_right": np.asarray(result.p_judge_right, dtype=float)[idx],
        "judge": t.judge[idx],
        "human": [("" if h is None else h) for h in t.human[idx]],
        "adjusted": [("" if a is None else a) for a in result.adjusted[idx]],
        "prompt": t.prompt[idx],
        "response_a": t.response_a[idx],
        "response_b": t.response_b[idx],
    })


def threshold_lines(result) -> list[dict]:
    """Thresholds to draw: ``label``, ``score``, ``question_type`` (None = all types).

    ``paper`` rule: per type, the lowest score that keeps the judge's verdict. ``guarded`` rule:
    the scores where the calibrated P(judge right) crosses 0.5 − margin (below: reversed) and
    0.5 + margin (above: kept with confidence). Infinite thresholds (nothing kept) are skipped.
    """
    out = []
    rule = result.params.get("rule", "guarded")
    for key, val in (result.thresholds or {}).items():
        qtype = None if key == "all" else str(key)
        if isinstance(val, dict):
            for name, s in val.items():
                if s is not None and math.isfinite(s):
                    out.append({"label": name.replace("_", " "), "score": float(s),
                                "question_type": qtype})
        elif val is not None and math.isfinite(val):
            out.append({"label": "lowest kept" if rule == "paper" else "threshold",
                        "score": float(val), "question_type": qtype})
    return out


def score_density(result, table, *, nbins: int = 40) -> go.Figure:
    """Overlaid score densities: verified positives P (cross-fitted scores) and the audited rows
    by final group (positive = kept, negative = reversed, uncertain)."""
    df = score_frame(result, table)
    fig = go.Figure()
    for g, colour in GROUP_COLOURS.items():
        s = df.loc[df["group"] == g, "score"]
        if s.empty:
            continue
        fig.add_trace(go.Histogram(x=s, name=f"{g} ({len(s)})", histnorm="probability density",
                                   nbinsx=nbins, opacity=0.55, marker_color=colour))
    fig.update_layout(barmode="overlay", xaxis_title="score (higher = more like verified "
                      "human preferences)", yaxis_title="density", legend_title="group",
                      margin=dict(l=10, r=10, t=30, b=10), height=360)
    return fig


def sorted_scores_figure(result, table, *, question_type: str | None = None) -> go.Figure:
    """Audited rows sorted by score, coloured by group, with the thresholds as dashed lines."""
    df = score_frame(result, table)
    df = df[df["split"] != "P"]
    if question_type is not None:
        df = df[df["question_type"] == question_type]
    df = df.sort_values("score", kind="stable").reset_index(drop=True)
    fig = go.Figure()
    for g, colour in GROUP_COLOURS.items():
        sel = df[df["group"] == g]
        if sel.empty:
            continue
        fig.add_trace(go.Scatter(
            x=sel.index, y=sel["score"], mode="markers", name=g,
            marker=dict(color=colour, size=5),
            # question types are data: escaped so the hover builds no link from them
            customdata=np.stack([sel["row"], plotly_texts(sel["question_type"]), sel["judge"]],
                                axis=1),
            hovertemplate="row %{customdata[0]} (%{customdata[1]})<br>score %{y:.3f}<br>"
                          "judge %{customdata[2]}<extra></extra>"))
    for line in threshold_lines(result):
        if question_type is not None and line["question_type"] not in (None, question_type):
            continue
        if question_type is None and line["question_type"] is not None and _n_types(table) > 6:
            continue  # too many per-type lines to read: the page offers a type filter
        fig.add_hline(y=line["score"], line_dash="dash", line_color="#555",
                      annotation_text=plotly_text(_line_name(line)),
                      annotation_position="top left")
    fig.update_layout(xaxis_title="audited rows, sorted by score", yaxis_title="score",
                      margin=dict(l=10, r=10, t=30, b=10), height=380)
    return fig


def _n_types(table) -> int:
    return len(set(table.question_type.tolist()))


def _line_name(line: dict) -> str:
    return line["label"] + ("" if line["question_type"] is None
                            else f" ({line['question_type']})")


def nearest_threshold_rows(result, table, *, k: int = 5) -> pd.DataFrame:
    """For each threshold, the ``k`` audited rows (of its type) whose scores are nearest to it.

    Columns: ``threshold``, ``distance`` (score − threshold), those of :func:`score_frame`,
    then ``evidence: <signal>`` for each verdict-evidence signal of the audit.
    """
    df = score_frame(result, table)
    df = df[df["split"] != "P"]
    parts = []
    for line in threshold_lines(result):
        sel = df if line["question_type"] is None else df[df["question_type"] == line["question_type"]]
        if sel.empty:
            continue
        dist = sel["score"] - line["score"]
        near = sel.assign(distance=dist).iloc[np.argsort(np.abs(dist.to_numpy()), kind="stable")[:k]]
        parts.append(near.assign(threshold=_line_name(line)))
    if not parts:
        return pd.DataFrame(columns=["threshold", "distance", *df.columns])
    out = pd.concat(parts, ignore_index=True)
    out = out[["threshold", "distance", *df.columns]]
    # the verdict evidence of each row (judge-oriented signals), to read beside its score
    for name, values in (getattr(result, "evidence", None) or {}).items():
        out[f"evidence: {name}"] = np.asarray(values, dtype=float)[out["row"].to_numpy() - 1]
    return out
