"""Figures and tables for the Consistency page (TrustJudge): pure functions, no Streamlit."""

from __future__ import annotations

import html
import textwrap

import networkx as nx
import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from puaudit.report.figures.text import plotly_text, plotly_texts
from puaudit.trustjudge.report import TrustJudgeReport
from puaudit.trustjudge.transitivity import KIND_LABELS

__all__ = ["metrics_table", "metrics_bar_chart", "question_violations", "weakest_edges",
           "cycle_graph", "pairwise_fit", "method_options", "score_options",
           "default_score_method", "candidate_scores", "unavailable_metrics"]

_CYCLE = "#d62728"
_PLAIN = "#7f7f7f"


def pairwise_fit(frame: pd.DataFrame, *, name: str) -> tuple[pd.DataFrame | None, str | None]:
    """Whether a table (e.g. the Data page's) can serve as the pairwise-verdict table:
    (pairs, None) when :func:`puaudit.trustjudge.read_pairwise` reads it, else (None, why)."""
    from puaudit.errors import PUAuditError
    from puaudit.trustjudge import read_pairwise

    try:
        return read_pairwise(frame, name=name), None
    except PUAuditError as exc:
        return None, str(exc)


def method_options(*, has_probabilities: bool, has_perplexity: bool) -> list[str]:
    """Pair relations a table supports, the recommended first: ``bidirectional`` needs the
    letter probabilities, ``weighted`` (exp(−γ·PPL)) and ``ppl`` the perplexities."""
    out = []
    if has_probabilities:
        out.append("bidirectional")
    if has_perplexity:
        out += ["weighted", "ppl"]
    return out + ["baseline"]


def score_options(has_distribution: bool) -> list[str]:
    """Score rules a scores table supports: G-Eval and distribution-sensitive need the judge's
    score distributions."""
    return ["distribution", "geval", "baseline"] if has_distribution else ["baseline"]


def default_score_method(method: str, has_distribution: bool) -> str:
    """The score rule :func:`puaudit.trustjudge.analyse` pairs with a relation by default."""
    return "distribution" if method != "baseline" and has_distribution else "baseline"


def candidate_scores(before: TrustJudgeReport, after: TrustJudgeReport) -> pd.DataFrame:
    """Each candidate's single score under the before and after score rules.

    Returns
    -------
    DataFrame
        ``judge``, ``question_id``, ``candidate``, ``score before (<rule>)``, ``score after
        (<rule>)``; empty without scores.
    """
    def long(rep: TrustJudgeReport) -> pd.DataFrame:
        rel = rep.relations
        if "score_i" not in rel:
            return pd.DataFrame(columns=["judge", "question_id", "candidate", "score"])
        parts = [rel[["judge", "question_id", f"candidate_{s}", f"score_{s}"]].set_axis(
            ["judge", "question_id", "candidate", "score"], axis=1) for s in ("i", "j")]
        out = pd.concat(parts, ignore_index=True).dropna(subset=["score"])
        return out.drop_duplicates(["judge", "question_id", "candidate"])

    b, a = long(before), long(after)
    if b.empty and a.empty:
        return pd.DataFrame(columns=["judge", "question_id", "candidate"])
    out = b.merge(a, on=["judge", "question_id", "candidate"], how="outer",
                  suffixes=(" before", " after"))
    out = out.rename(columns={"score before": f"score before ({before.score_method})",
                              "score after": f"score after ({after.score_method})"})
    return out.sort_values(["judge", "question_id", "candidate"], ignore_index=True)


def metrics_table(before: TrustJudgeReport, after: TrustJudgeReport, *, by: str = "judge") -> pd.DataFrame:
    """CR and NTR_k per judge or per question type, before and after aggregation.

    Parameters
    ----------
    before, after : TrustJudgeReport
        Usually ``method="baseline"`` and the chosen likelihood-aware method.
    by : {"judge", "type"}

    Returns
    -------
    DataFrame
        Long format: ``group, metric, stage, value`` (``value`` NaN where not defined, e.g. CR
        without scores); stages are ``"before (<method>)"`` and ``"after (<method>)"``.
    """
    if by not in ("judge", "type"):
        raise ValueError("by must be 'judge' or 'type'")
    rows = []
    for stage, rep in ((f"before ({before.method})", before), (f"after ({after.method})", after)):
        block = rep.per_judge if by == "judge" else rep.per_type
        for group, d in block.items():
            rows.append({"group": group, "metric": "CR", "stage": stage,
                         "value": np.nan if d["cr"] is None else d["cr"]})
            for k, v in d["ntr"].items():
                rows.append({"group": group, "metric": f"NTR_{k}", "stage": stage,
                             "value": np.nan if v is None else v})
    return pd.DataFrame(rows, columns=["group", "metric", "stage", "value"])


def unavailable_metrics(report: TrustJudgeReport, pairs: pd.DataFrame, *,
                        has_scores: bool) -> dict[str, str]:
    """Metric -> why it reads n/a and what input would fill it, for each metric of ``report``
    that is None (the Conflict Ratio needs matching single scores; NTR_k at least k candidates
    per question compared in all :math:`k(k-1)/2` pairs)."""
    out = {}
    if report.cr is None:
        out["Conflict Ratio"] = (
            "n/a because no single score matches these pairs (the scores table's question_id "
            "and candidate must name the pairs' questions and candidates)." if has_scores else
            "n/a because there are no single scores: it compares each candidate's own score "
            "with the pairwise verdicts. Upload a scores table (question_id, candidate, and "
            "score or p_1 … p_K) under Single scores in the sidebar.")
    most = _most_candidates(pairs)
    for k, v in report.ntr.items():
        if v is None:
            out[f"NTR_{k}"] = (
                f"n/a because no question has {k} candidates compared in every pair (here at "
                f"most {most} per question): it counts the sets of {k} candidates whose verdicts "
                f"admit no ranking. Judge at least {k} candidates per question in all "
                f"{k * (k - 1) // 2} pairs (e.g. puaudit judge on every pair).")
    return out


def _most_candidates(pairs: pd.DataFrame) -> int:
    """The largest number of distinct candidates of one question (and judge) in ``pairs``."""
    if not {"question_id", "candidate_i", "candidate_j"} <= set(pairs.columns) or pairs.empty:
        return 0
    keys = ["judge", "question_id"] if "judge" in pairs.columns else ["question_id"]
    long = pd.concat([pairs[keys + [c]].rename(columns={c: "candidate"})
                      for c in ("candidate_i", "candidate_j")])
    return int(long.astype(str).groupby(keys)["candidate"].nunique().max())


def metrics_bar_chart(table: pd.DataFrame, *, by: str = "judge") -> go.Figure:
    """Grouped bars (before vs after) per group, one panel per metric; values in percent."""
    # group names (judges, question types) are data: escaped so Plotly builds no link from them
    data = table.dropna(subset=["value"]).assign(percent=lambda d: 100 * d["value"],
                                                 group=lambda d: plotly_texts(d["group"]))
    metrics = [m for m in table["metric"].unique() if m in set(data["metric"])]
    fig = px.bar(data, x="group", y="percent", color="stage", barmode="group", facet_col="metric",
                 category_orders={"metric": metrics}, text_auto=".1f",
                 labels={"group": "judge" if by == "judge" else "question type", "percent": "%",
                         "stage": ""},
                 color_discrete_sequence=["#9aa5b1", "#1f77b4"])
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=-0.25), margin=dict(t=40, b=40),
                      title=f"Inconsistency per {'judge' if by == 'judge' else 'question type'} "
                            "(lower is better)")
    return fig


def _of(frame: pd.DataFrame, judge: str, question_id: str) -> pd.DataFrame:
    return frame[(frame["judge"] == judge) & (frame["question_id"] == question_id)]


def question_violations(violations: pd.DataFrame, *, judge: str, question_id: str) -> pd.DataFrame:
    """The violating triples of one judge and question, for display."""
    sel = _of(violations, judge, question_id)
    return pd.DataFrame({"triple": sel["relations"].to_numpy(),
                         "kind": sel["kind"].map(KIND_LABELS).to_numpy(),
                         "weakest edge": sel["weakest_edge"].to_numpy(),
                         "margin": sel["weakest_margin"].to_numpy(dtype=float)})


def weakest_edges(violations: pd.DataFrame, *, judge: str, question_id: str) -> pd.DataFrame:
    """Weakest edges of one question's violating triples, most often blamed first (then the
    smallest margin): the first is the suggested pair to send to a person."""
    sel = _of(violations, judge, question_id)
    if sel.empty:
        return pd.DataFrame(columns=["edge", "n_triples", "margin"])
    out = (sel.groupby("weakest_edge")
           .agg(n_triples=("kind", "size"), margin=("weakest_margin", "min"))
           .reset_index().rename(columns={"weakest_edge": "edge"}))
    return out.sort_values(["n_triples", "margin", "edge"], ascending=[False, True, True],
                           ignore_index=True)


def _fmt_probs(row: pd.Series, order: int) -> str:
    vals = [row.get(f"p{order}_{c}", np.nan) for c in ("A", "B", "tie")]
    if all(pd.isna(v) for v in vals):
        return ""
    return " (P A/B/tie " + "/".join("–" if pd.isna(v) else f"{v:.2f}" for v in vals) + ")"


def _wrap(text: str, width: int = 70, limit: int = 400) -> str:
    text = text if len(text) <= limit else text[:limit] + "…"
    return "<br>".join(textwrap.wrap(html.escape(text, quote=False), width))


def _edge_hover(row: pd.Series, *, weakest: bool) -> str:
    """Hover text of one pair: both orders' verdicts, the probabilities and the rationales."""
    ci, cj, r = row["candidate_i"], row["candidate_j"], row["relation"]
    lines = [f"<b>{html.escape(ci)} {r} {html.escape(cj)}</b>"
             + (" — suggested weakest edge" if weakest else "")]
    lines.append(f"order 1 ({html.escape(ci)} shown first): "
                 f"{plotly_text(row['verdict_1'] or 'not asked')}" + _fmt_probs(row, 1))
    lines.append(f"order 2 ({html.escape(cj)} shown first): "
                 f"{plotly_text(row['verdict_2'] or 'not asked')}" + _fmt_probs(row, 2))
    lines.append(f"aggregated P({html.escape(ci)})={row['prob_i']:.2f}, "
                 f"P({html.escape(cj)})={row['prob_j']:.2f}, P(tie)={row['prob_tie']:.2f}; "
                 f"margin {row['margin']:.2f}")
    for order in (1, 2):
        text = row.get(f"rationale_{order}", "")
        if isinstance(text, str) and text:
            lines.append(f"<i>rationale {order}:</i> {_wrap(text)}")
    return "<br>".join(lines)


def _node_trace(names: list, pos: dict, rankings: pd.DataFrame | None, *, judge: str,
                question_id: str) -> go.Scatter:
    """The candidates as labelled circles, with their Bradley–Terry rank when known."""
    ranks = {}
    if rankings is not None:
        sel = _of(rankings, judge, question_id)
        ranks = dict(zip(sel["candidate"], sel["rank"]))
    return go.Scatter(
        x=[pos[n][0] for n in names], y=[pos[n][1] for n in names], mode="markers+text",
        marker=dict(size=34, color="#eef3f8", line=dict(color="#1f77b4", width=2)),
        text=[plotly_text(n) + (f" (#{ranks[n]})" if n in ranks else "") for n in names],
        # outward from the circle: the arrows run inside it, and are drawn above the labels
        textposition=[_outward(*pos[n]) for n in names], hovertext=plotly_texts(names),
        hoverinfo="text", showlegend=False, cliponaxis=False)


def cycle_graph(relations: pd.DataFrame, violations: pd.DataFrame, *, judge: str,
                question_id: str, rankings: pd.DataFrame | None = None) -> go.Figure:
    """Directed graph of one question's pair relations: an arrow from the preferred candidate
    (``=`` dotted), edges of a violating triple red, the suggested weakest edge thicker; an
    edge's midpoint hovers both orders' verdicts, the probabilities and the rationales.

    Parameters
    ----------
    relations : DataFrame
        ``TrustJudgeReport.relations``.
    violations : DataFrame
        ``TrustJudgeReport.violations``.
    rankings : DataFrame, optional
        ``TrustJudgeReport.rankings``: adds the Bradley–Terry rank to node labels.
    """
    rel, viol = _of(relations, judge, question_id), _of(violations, judge, question_id)
    cycle_pairs = set()
    for r in viol.itertuples(index=False):
        for x, y in ((r.cand_1, r.cand_2), (r.cand_2, r.cand_3), (r.cand_3, r.cand_1)):
            cycle_pairs.add(frozenset((x, y)))
    worst = weakest_edges(violations, judge=judge, question_id=question_id)
    worst_pair = None
    if len(worst):
        parts = worst["edge"].iloc[0].split(" ")
        worst_pair = frozenset((parts[0], parts[2]))

    g = nx.DiGraph()
    names = sorted(set(rel["candidate_i"]) | set(rel["candidate_j"]))
    g.add_nodes_from(names)
    pos = nx.circular_layout(g) if len(names) > 1 else {n: np.zeros(2) for n in names}

    fig = go.Figure()
    mid_x, mid_y, mid_text, mid_color = [], [], [], []
    annotations = []
    for _, row in rel.iterrows():
        ci, cj, r = row["candidate_i"], row["candidate_j"], row["relation"]
        src, dst = (ci, cj) if r != "<" else (cj, ci)
        pair = frozenset((ci, cj))
        color = _CYCLE if pair in cycle_pairs else _PLAIN
        width = 5 if pair == worst_pair else (3 if pair in cycle_pairs else 1.5)
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        if r == "=":
            fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", hoverinfo="skip",
                                     line=dict(color=color, width=width, dash="dot"),
                                     showlegend=False))
        else:
            # stop the arrow short of the node marker
            tx, ty = x0 + 0.88 * (x1 - x0), y0 + 0.88 * (y1 - y0)
            annotations.append(dict(x=tx, y=ty, ax=x0, ay=y0, xref="x", yref="y", axref="x",
                                    ayref="y", showarrow=True, arrowhead=3, arrowsize=1,
                                    arrowwidth=width, arrowcolor=color, text=""))
        mid_x.append((x0 + x1) / 2)
        mid_y.append((y0 + y1) / 2)
        mid_text.append(_edge_hover(row, weakest=pair == worst_pair))
        mid_color.append(color)
    fig.add_trace(go.Scatter(x=mid_x, y=mid_y, mode="markers", marker=dict(size=9, color=mid_color,
                             symbol="diamond"), hovertext=mid_text, hoverinfo="text",
                             name="pair (hover)", showlegend=False))
    fig.add_trace(_node_trace(names, pos, rankings, judge=judge, question_id=question_id))
    fig.update_layout(annotations=annotations, xaxis=dict(visible=False, range=[-1.9, 1.9]),
                      yaxis=dict(visible=False, range=[-1.6, 1.6], scaleanchor="x"),
                      margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white",
                      title=f"{plotly_text(judge)} · question {plotly_text(question_id)}: "
                            f"{len(viol)} violating triple(s)")
    return fig


def _outward(x: float, y: float) -> str:
    """The Plotly text position pointing away from the layout's centre from node (x, y)."""
    if abs(y) >= abs(x) * 0.6:
        return "top center" if y >= 0 else "bottom center"
    return "middle right" if x > 0 else "middle left"
