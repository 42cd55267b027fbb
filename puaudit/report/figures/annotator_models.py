"""Tables and figures of a latent-truth annotator model: pure functions of a
:class:`puaudit.annotators.ModelReport`.

No Streamlit here: every function returns a DataFrame or a plotly figure. Annotator names are
data: they go into figures through :func:`puaudit.report.figures.text.plotly_texts`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from puaudit.report.figures.annotators import (FLAGGED_COLOR, JUDGE_COLOR, PERSON_COLOR,
                                               dot_whisker, interval_text)
from puaudit.report.figures.text import plotly_text, plotly_texts
from puaudit.annotators import LABELS, MODEL_NAMES, ModelReport

__all__ = ["STAT_LABELS", "model_table", "skill_figure", "confusion_figure",
           "consensus_changes", "consensus_summary"]

STAT_LABELS = {
    "skill": "Skill: strict votes naming the true winner (balanced; chance 0.5)",
    "position_bias": "Position bias: strict votes for the first-shown response, given the truth",
    "length_bias": "Length bias: strict votes for the longer response, given the truth",
    "tie_given_strict": "Tie habit: ties when the truth is strict",
    "cohen_kappa": "Cohen's kappa against the others' consensus",
}


def model_table(report: ModelReport) -> pd.DataFrame:
    """Display table: numbers stay numbers (sortable), intervals as ``[lo, hi]`` text.

    Columns: Annotator, Role, In model, Votes, Strict; Skill, Position bias, Length bias,
    P(A | truth B), P(B | truth A), Ties | strict truth, Ties | tie truth, Cohen's kappa (each
    with its ``95% CI``); Competence (MACE) or Weight (CROWDLAB) when the model has them; Model
    flags (reasons joined by ``"; "``).
    """
    df = report.annotators
    conf = int(round(100 * report.params.get("confidence", 0.95)))
    out = pd.DataFrame({
        "Annotator": df["annotator"].astype(str).to_numpy(),
        "Role": np.where(df["is_judge"], "judge", "person"),
        "In model": df["in_model"].to_numpy(),
        "Votes": df["n_votes"].to_numpy(),
        "Strict": df["n_strict"].to_numpy(),
    })
    for col, label in (("skill", "Skill"), ("position_bias", "Position bias"),
                       ("length_bias", "Length bias"), ("p_a_given_b", "P(A | truth B)"),
                       ("p_b_given_a", "P(B | truth A)"), ("tie_given_strict", "Ties | strict truth"),
                       ("tie_given_tie", "Ties | tie truth"), ("cohen_kappa", "Cohen's kappa"),
                       ("competence", "Competence")):
        if col not in df.columns:
            continue
        out[label] = df[col].astype(float).round(3).to_numpy()
        out[f"{label} {conf}% CI"] = interval_text(df[f"{col}_lo"], df[f"{col}_hi"])
    if "weight" in df.columns:
        out["Weight"] = df["weight"].astype(float).round(3).to_numpy()
    out["Model flags"] = ["; ".join(f) for f in df["model_flags"]]
    return out


def skill_figure(report: ModelReport, *, stat: str = "skill", min_n: int = 0) -> go.Figure:
    """Dot-and-whisker chart of one model statistic per annotator, sorted, with its interval.

    The judge is a red diamond, flagged people orange; dashed lines mark chance (0.5) and, for
    ``skill``, the flag bar.

    Parameters
    ----------
    stat : str
        A key of :data:`STAT_LABELS`.
    min_n : int
        Leave out people with fewer strict votes (the judge always shows).
    """
    if stat not in STAT_LABELS:
        raise ValueError(f"stat must be one of {list(STAT_LABELS)}")
    df = report.annotators
    df = df[df[stat].notna() & ((df["n_strict"] >= min_n) | df["is_judge"])].sort_values(stat)
    flagged = np.array([bool(f) for f in df["model_flags"]], dtype=bool)
    people = ~df["is_judge"].to_numpy()
    model = MODEL_NAMES.get(report.overall["model"], report.overall["model"])
    fig = dot_whisker(df, stat, ((people & ~flagged, "people", PERSON_COLOR, "circle"),
                                 (people & flagged, "flagged", FLAGGED_COLOR, "circle"),
                                 (~people, "LLM judge", JUDGE_COLOR, "diamond")),
                      ["n_strict", f"{stat}_lo", f"{stat}_hi"],
                      "%{y}: %{x:.3f} [%{customdata[1]:.2f}, %{customdata[2]:.2f}]"
                      "<br>strict votes %{customdata[0]}",
                      f"{STAT_LABELS[stat]} ({model}, 95% interval)",
                      [-0.2 if stat == "cohen_kappa" else 0, 1.02])
    if stat != "cohen_kappa":
        fig.add_vline(x=0.5, line_dash="dot", line_color="grey", annotation_text="chance / none")
    bar = report.params.get("skill_bar") if stat == "skill" else None
    if bar is not None:
        fig.add_vline(x=bar, line_dash="dash", line_color=FLAGGED_COLOR,
                      annotation_text=f"flag bar {bar:.2f}", annotation_position="bottom")
    return fig

def confusion_figure(report: ModelReport, annotator: str) -> go.Figure:
    """Heatmap of one annotator's P(vote | truth) in the orientation they saw, with intervals.

    Rows: the truth (A won, B won, tie); columns: their vote. Each cell shows the probability
    and its interval, and the expected number of their votes on items with that truth.
    """
    names = report.annotators["annotator"].astype(str).tolist()
    if annotator not in names:
        raise ValueError(f"unknown annotator {annotator!r}")
    j = names.index(annotator)
    p, lo, hi = report.confusion[j], report.confusion_lo[j], report.confusion_hi[j]
    counts = report.counts[j]
    text = [[("n/a" if np.isnan(p[t, v]) else
              f"{p[t, v]:.2f}<br>[{lo[t, v]:.2f}, {hi[t, v]:.2f}]") for v in range(3)]
            for t in range(3)]
    rows = [f"truth {x} (~{counts[t].sum():.0f} votes)" for t, x in enumerate(LABELS)]
    fig = go.Figure(go.Heatmap(
        z=np.nan_to_num(p, nan=0.0), x=[f"says {x}" for x in LABELS], y=rows, text=text,
        texttemplate="%{text}", zmin=0, zmax=1, colorscale="Blues", showscale=False,
        hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=plotly_text(f"{annotator}: P(vote | truth), as shown"),
                      yaxis=dict(autorange="reversed"), height=320,
                      margin=dict(l=10, r=10, t=40, b=30))
    return fig


def consensus_changes(report: ModelReport, table=None) -> pd.DataFrame:
    """The items whose model consensus differs from majority vote.

    Columns: ``row`` (1-based first row of the item, whose A/B order the labels use), ``votes``
    (people's), ``majority``, ``model`` (the model's consensus), ``confidence``, ``judge``, and
    ``prompt`` when ``table`` is given. Most confident first.
    """
    c = report.consensus
    d = c[c["differs"]].sort_values("confidence", ascending=False)
    out = pd.DataFrame({"row": d["row"].to_numpy() + 1, "votes": d["n_votes"].to_numpy(),
                        "majority": d["majority"].to_numpy(), "model": d["consensus"].to_numpy(),
                        "confidence": d["confidence"].astype(float).round(3).to_numpy(),
                        "judge": d["judge"].to_numpy()})
    if table is not None:
        out["prompt"] = [str(table.prompt[r]) for r in d["row"]]
    return out


def consensus_summary(report: ModelReport) -> pd.DataFrame:
    """Majority vote against the model's consensus: ties, strict labels, agreement with the judge.

    One row per consensus: ``consensus`` (name), ``items``, ``ties``, ``agree_judge`` (over items
    where it and the judge are strict), ``n_judge``, ``agree_judge_common`` (over the items
    where both consensuses and the judge are strict, the same for both rows), ``n_common``.
    """
    c = report.consensus
    ov = report.overall
    recs = []
    for col, key, name in (("majority", "majority", "majority vote"),
                           ("consensus", "consensus",
                            MODEL_NAMES.get(ov["model"], ov["model"]))):
        recs.append({"consensus": name, "items": int(len(c)),
                     "ties": int((c[col] == "tie").sum()),
                     "agree_judge": ov[f"{key}_agree_judge"], "n_judge": ov[f"{key}_n_judge"],
                     "agree_judge_common": ov[f"{key}_agree_judge_common"],
                     "n_common": ov["n_judge_common"]})
    return pd.DataFrame(recs)
