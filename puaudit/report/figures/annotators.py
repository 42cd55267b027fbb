"""Tables and figures for the Annotators page: pure functions of an :class:`AnnotatorReport`.

No Streamlit here: every function returns a DataFrame or a plotly figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from puaudit.report.figures.text import plotly_texts
from puaudit.annotators.agreement import AnnotatorReport
from puaudit.annotators.consensus import consensus_labels
from puaudit.data.schema import COLUMN_ALIASES, ComparisonTable

__all__ = ["annotator_table", "agreement_figure", "bias_scatter", "disagreements_table",
           "no_annotator_note", "interval_text", "dot_whisker", "METRIC_LABELS", "JUDGE_COLOR", "PERSON_COLOR",
           "FLAGGED_COLOR"]

METRIC_LABELS = {
    "agree_judge": "Agreement with the judge",
    "agree_peers": "Agreement with other people",
    "pick_a_share": "Share of strict votes for the first-shown response",
    "tie_share": "Share of ties",
    "longer_share": "Share of strict votes for the longer response",
}
JUDGE_COLOR = "#d62728"
PERSON_COLOR = "#1f77b4"
FLAGGED_COLOR = "#ff7f0e"


def no_annotator_note(*, from_data_page: bool) -> str:
    """The note for a table without an annotator column (optional: the audit does not need
    it), saying where to name it."""
    names = ", ".join(f"`{n}`" for n in COLUMN_ALIASES["annotator"])
    where = ("map it as *Annotator* in the Column mapping on the Data page, or pick it under "
             "*Annotator column* in the sidebar" if from_data_page else
             "pick it under *Annotator column* in the sidebar")
    return ("This table has no annotator column, so there is no one to audit here: the page "
            "compares the people who voted, one id per vote. If a column holds the annotator "
            f"ids, {where}. Columns looked for: {names}.")


def _frame(report: AnnotatorReport | pd.DataFrame) -> pd.DataFrame:
    return report.annotators if isinstance(report, AnnotatorReport) else report


def interval_text(lo, hi) -> list[str]:
    """Each interval as ``[lo, hi]`` text with two decimals, ``""`` where a bound is missing."""
    return ["" if (pd.isna(a) or pd.isna(b)) else f"[{a:.2f}, {b:.2f}]" for a, b in zip(lo, hi)]


def annotator_table(report: AnnotatorReport | pd.DataFrame) -> pd.DataFrame:
    """Display table: numeric columns stay numbers (sortable), intervals as ``[lo, hi]`` text.

    Columns: Annotator, Role (``judge`` / ``person``), Votes, Strict, then for each share its
    value (rounded to 3 decimals) and a ``95% CI`` text column, then Flags (reasons joined by
    ``"; "``).
    """
    df = _frame(report)
    out = pd.DataFrame({
        "Annotator": df["annotator"].astype(str).to_numpy(),
        "Role": np.where(df["is_judge"], "judge", "person"),
        "Votes": df["n_votes"].to_numpy(),
        "Strict": df["n_strict"].to_numpy(),
    })
    for col, label, n_col in (("agree_judge", "Agree judge", "n_agree_judge"),
                              ("agree_peers", "Agree peers", "n_peer_votes"),
                              ("pick_a_share", "Pick A", None),
                              ("tie_share", "Ties", None),
                              ("longer_share", "Longer", "n_unequal_length")):
        out[label] = df[col].astype(float).round(3).to_numpy()
        out[f"{label} 95% CI"] = interval_text(df[f"{col}_lo"], df[f"{col}_hi"])
        if n_col:
            out[f"{label} n"] = df[n_col].to_numpy()
    out["Flags"] = ["; ".join(f) if isinstance(f, (list, tuple)) else str(f) for f in df["flags"]]
    return out


def agreement_figure(report: AnnotatorReport | pd.DataFrame, *, metric: str = "agree_peers",
                     min_n: int = 0, median: float | None = None) -> go.Figure:
    """Dot-and-whisker chart of one share per annotator, sorted, the judge highlighted.

    Parameters
    ----------
    metric : str
        A share column (see :data:`METRIC_LABELS`); whiskers are its interval.
    min_n : int
        Leave out annotators with fewer strict votes.
    median : float, optional
        Draw a dashed reference line (e.g. the people's median).
    """
    if metric not in METRIC_LABELS:
        raise ValueError(f"metric must be one of {list(METRIC_LABELS)}")
    df = _frame(report)
    df = df[df[metric].notna() & ((df["n_strict"] >= min_n) | df["is_judge"])]
    df = df.sort_values(metric)
    people = ~df["is_judge"].to_numpy()
    fig = dot_whisker(df, metric, ((people, "people", PERSON_COLOR, "circle"),
                                   (~people, "LLM judge", JUDGE_COLOR, "diamond")),
                      ["n_votes", "n_strict"],
                      "%{y}: %{x:.3f}<br>votes %{customdata[0]}, strict %{customdata[1]}",
                      METRIC_LABELS[metric] + " (95% interval)", [0, 1.02])
    if median is not None and not pd.isna(median):
        fig.add_vline(x=median, line_dash="dash", line_color="grey",
                      annotation_text=f"people's median {median:.2f}")
    return fig


def dot_whisker(df: pd.DataFrame, stat: str, groups, custom: list[str], hover: str,
                x_title: str, x_range: list) -> go.Figure:
    """One row per annotator in ``df``'s order, a marker per group (``(mask, name, colour,
    symbol)``; the judge's larger) with the ``stat_lo``–``stat_hi`` whiskers; ``custom``: the
    columns ``hover`` reads as ``customdata``."""
    fig = go.Figure()
    for mask, name, color, symbol in groups:
        d = df[mask]
        if d.empty:
            continue
        fig.add_trace(go.Scatter(
            x=d[stat], y=plotly_texts(d["annotator"]), mode="markers", name=name,
            marker=dict(color=color, symbol=symbol, size=12 if name == "LLM judge" else 8),
            error_x=dict(type="data", symmetric=False, array=d[f"{stat}_hi"] - d[stat],
                         arrayminus=d[stat] - d[f"{stat}_lo"], color=color),
            customdata=np.column_stack([d[c] for c in custom]),
            hovertemplate=hover + "<extra></extra>"))
    fig.update_layout(xaxis_title=x_title, yaxis_title=None, height=max(300, 18 * len(df) + 120),
                      margin=dict(l=10, r=10, t=30, b=40),
                      yaxis=dict(categoryorder="array", categoryarray=plotly_texts(df["annotator"])))
    fig.update_xaxes(range=x_range)
    return fig

def bias_scatter(report: AnnotatorReport | pd.DataFrame, *, min_n: int = 0) -> go.Figure:
    """Position bias (``pick_a_share``) against length bias (``longer_share``), with intervals.

    People in blue, flagged people in orange, the judge as a red diamond; dashed lines at 0.5.
    """
    df = _frame(report)
    df = df[df["pick_a_share"].notna() & ((df["n_strict"] >= min_n) | df["is_judge"])]
    flagged = np.array([bool(f) for f in df["flags"]], dtype=bool)
    fig = go.Figure()
    groups = ((~df["is_judge"].to_numpy() & ~flagged, "people", PERSON_COLOR, "circle"),
              (~df["is_judge"].to_numpy() & flagged, "flagged", FLAGGED_COLOR, "circle"),
              (df["is_judge"].to_numpy(), "LLM judge", JUDGE_COLOR, "diamond"))
    for mask, name, color, symbol in groups:
        d = df[mask]
        if d.empty:
            continue
        fig.add_trace(go.Scatter(
            x=d["pick_a_share"], y=d["longer_share"], mode="markers", name=name,
            text=plotly_texts(d["annotator"]),
            marker=dict(color=color, symbol=symbol, size=12 if name == "LLM judge" else 8),
            error_x=dict(type="data", symmetric=False,
                         array=d["pick_a_share_hi"] - d["pick_a_share"],
                         arrayminus=d["pick_a_share"] - d["pick_a_share_lo"], color=color,
                         thickness=1),
            error_y=dict(type="data", symmetric=False,
                         array=d["longer_share_hi"] - d["longer_share"],
                         arrayminus=d["longer_share"] - d["longer_share_lo"], color=color,
                         thickness=1),
            hovertemplate="%{text}<br>pick A %{x:.2f}<br>longer %{y:.2f}<extra></extra>"))
    fig.add_vline(x=0.5, line_dash="dash", line_color="grey")
    fig.add_hline(y=0.5, line_dash="dash", line_color="grey")
    fig.update_layout(xaxis_title=METRIC_LABELS["pick_a_share"],
                      yaxis_title=METRIC_LABELS["longer_share"], height=500,
                      margin=dict(l=10, r=10, t=30, b=40))
    fig.update_xaxes(range=[0, 1])
    fig.update_yaxes(range=[0, 1])
    return fig


def disagreements_table(table: ComparisonTable, annotator: str, *,
                        judge_name: str = "LLM judge") -> pd.DataFrame:
    """The rows where ``annotator`` and the judge gave different strict verdicts.

    For a person: their strict votes on rows where the judge's strict verdict differs. For
    ``judge_name``: one row per item (its first) where the people's consensus is strict and
    differs from the judge's. Columns: ``row`` (1-based data row), ``question_type``, ``prompt``,
    ``response_a``, ``response_b``, ``vote`` (the annotator's, or the consensus for the judge),
    ``judge``, ``consensus`` (people's item consensus in that row's A/B order).
    """
    cons = consensus_labels(table)
    strict = lambda x: np.isin(x.astype(object), ["A", "B"])  # noqa: E731
    judge = np.asarray(table.judge, dtype=object)
    if annotator == judge_name:
        seen: set = set()
        first = np.array([not (it in seen or seen.add(it)) for it in table.item_id])
        vote = cons
        mask = first & strict(cons) & strict(judge) & (cons != judge)
    else:
        if table.annotator is None:
            raise ValueError("the table has no annotator column")
        ann = np.array([str(a).strip() if a is not None else "" for a in table.annotator])
        vote = np.asarray(table.human, dtype=object)
        mask = (ann == str(annotator)) & strict(vote) & strict(judge) & (vote != judge)
    idx = np.flatnonzero(mask)
    return pd.DataFrame({
        "row": idx + 1,
        "question_type": table.question_type[idx],
        "prompt": table.prompt[idx],
        "response_a": table.response_a[idx],
        "response_b": table.response_b[idx],
        "vote": vote[idx],
        "judge": judge[idx],
        "consensus": cons[idx],
    })
