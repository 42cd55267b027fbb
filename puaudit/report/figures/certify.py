"""Certified trust or escalate on the Audit page: the coverage-vs-target curve and the counts
(pure functions, no Streamlit)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

__all__ = ["CURVE_TARGETS", "RISK_CHOICES", "coverage_curve_figure", "certification_text",
           "certificate_phrase",
           "cascade_stage_frame", "cascade_funnel_figure"]

#: targets the curve is drawn at (each is one cheap re-certification of the same scores)
CURVE_TARGETS = tuple(float(t) for t in np.round(np.arange(0.60, 0.99, 0.01), 2))
#: risks offered by the selector (probability that the trusted set misses the target)
RISK_CHOICES = (0.01, 0.05, 0.1, 0.2)


def coverage_curve_figure(curve: list[dict], *, current_target: float | None = None
                          ) -> go.Figure:
    """Share of audited rows trusted at each target (from
    :meth:`puaudit.audit.certify.judge.Certification.curve`), with the realised agreement of the
    trusted validation rows and the line agreement = target it should stay above."""
    x = [c["target"] for c in curve]
    cov = [c["coverage"] for c in curve]
    real = [None if c["realised"] is None or not math.isfinite(c["realised"]) else c["realised"]
            for c in curve]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=cov, mode="lines+markers", name="share trusted",
                             line={"color": "#4C78A8"},
                             hovertemplate="target %{x:.2f}: %{y:.1%} of audited rows trusted"
                                           "<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=real, mode="lines+markers", name="realised agreement "
                             "(trusted validation rows)", line={"color": "#54A24B"},
                             hovertemplate="target %{x:.2f}: trusted validation rows agree "
                                           "%{y:.1%}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[x[0], x[-1]] if x else [], y=[x[0], x[-1]] if x else [],
                             mode="lines", name="agreement = target", hoverinfo="skip",
                             line={"color": "#999999", "dash": "dash", "width": 1}))
    if current_target is not None:
        fig.add_vline(x=float(current_target), line_dash="dot", line_color="#E45756",
                      annotation_text="target", annotation_position="top")
    fig.update_layout(height=280, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      xaxis_title="target agreement", yaxis_title="share",
                      legend={"orientation": "h", "y": -0.3})
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig


def certification_text(summary: dict) -> str:
    """One paragraph on the certified set (``AuditResult.summary()["certification"]``)."""
    c = summary
    if c.get("message"):
        return c["message"]
    lo, hi = c.get("realised_ci") or (None, None)
    real = c.get("realised")
    real_txt = ("no trusted validation rows" if real is None or not math.isfinite(real) else
                f"trusted validation rows agree {real:.1%} (95% interval {lo:.1%}–{hi:.1%}, "
                f"{c['n_validation_trusted']:,} items)")
    return (f"{c['n_trusted']:,} of {c['n_trusted'] + c['n_escalated']:,} audited verdicts are "
            f"trusted ({c['coverage']:.1%}; {certificate_phrase(c)}): the most confident "
            f"{c.get('certified_share', 0):.0%}, as certified on the annotated items, whose "
            f"{c['n_certified_items']:,} most confident (that share of P by held-out P(judge "
            f"right), and of validation) agree with people at least "
            f"{c['certified_lower']:.3f} ≥ {c['target']:g} with {1 - c['risk']:.0%} confidence; "
            "each validation row is trusted by a threshold certified without its own verdict, "
            f"so the check below is held out. The other "
            f"{c['n_escalated']:,} are escalated: {escalated_destination(c)}. Check: {real_txt}.")


_CERTIFICATE_WORDS = {"audit": "the audit's P(judge right)",
                      "confidence": "the judge's own confidence"}


def certificate_phrase(c: dict) -> str:
    """Which certificate trusted the rows, in words (``summary["certification"]``), with each
    candidate's coverage on its own when there were several (each certified at its share of the
    risk, so picking the one that trusts more per fold spends no extra validity)."""
    used = str(c.get("certificate") or "audit")
    names = used.split("+")
    words = " or ".join(_CERTIFICATE_WORDS.get(n, n) for n in names)
    floor = c.get("threshold_audited", c.get("threshold", math.inf))
    if len(names) > 1:
        head = f"per certification fold by {words}"
    elif used == "audit":
        head = (f"by {words} ≥ {floor:.3f}" if floor is not None and math.isfinite(floor)
                else f"by {words}: no threshold certified")
    else:
        head = f"by {words}"
    cands = c.get("certificates") or {}
    if len(cands) > 1:
        alone = ", ".join(f"{_CERTIFICATE_WORDS.get(n, n)} alone {d['coverage']:.1%} at risk "
                          f"{d['risk']:g}" for n, d in cands.items())
        head += f"; {alone}"
    return head


def escalated_destination(c: dict) -> str:
    """Where the escalated rows go, true to the Review page: it queues the rows without a human
    verdict; escalated validation rows already have one."""
    n_esc, n_open = c["n_escalated"], c.get("n_escalated_unlabelled", c["n_escalated"])
    if n_open == 0:
        return ("all of them are validation rows that people already labelled, so the Review "
                "page has none to queue")
    if n_open == n_esc:
        return "the Review page queues them first for people"
    return (f"the Review page queues the {n_open:,} without a human verdict first for people "
            f"(the other {n_esc - n_open:,} are validation rows, already labelled)")


def cascade_stage_frame(summary: dict):
    """One row per stage of a cascade (``CascadeResult.summary()``) and one for people: who,
    the share of routed rows asked, the share of audited rows trusted (and the share its own
    certification at risk / K trusted, which routed the rest, and how many of those it sent on
    as well under a budget), realised agreement with
    its exact 95% interval, and the message of a stage that certified nothing."""
    import pandas as pd

    rows = []
    for i, st in enumerate(summary["stages"], 1):
        lo, hi = st["realised_ci"]
        rows.append({"stage": f"{i}. {st['judge']}", "asked": st["asked"],
                     "trusted": st["coverage"],
                     "trusted_alone": st["coverage_alone"],
                     "n_trusted": st["n_trusted"], "n_handed_on": st["n_handed_on"],
                     "realised": st["realised"], "realised_lo": lo, "realised_hi": hi,
                     "note": st["message"]})
    n_a = summary["n_audited"]
    rows.append({"stage": "people", "asked": (summary["n_people"] / n_a) if n_a else math.nan,
                 "trusted": math.nan, "trusted_alone": math.nan,
                 "n_trusted": summary["n_people"], "n_handed_on": 0, "realised": math.nan,
                 "realised_lo": math.nan, "realised_hi": math.nan, "note": ""})
    return pd.DataFrame(rows)


def cascade_funnel_figure(summary: dict) -> go.Figure:
    """The funnel of a cascade: the share of audited rows each judge is trusted on, in order,
    then the share left for people."""
    labels = [f"{i}. {st['judge']} trusted" for i, st in enumerate(summary["stages"], 1)]
    values = [st["n_trusted"] for st in summary["stages"]]
    labels.append("people")
    values.append(summary["n_people"])
    n = max(summary["n_audited"], 1)
    fig = go.Figure(go.Bar(
        x=[v / n for v in values], y=labels, orientation="h",
        marker={"color": ["#4C78A8"] * (len(labels) - 1) + ["#E45756"]},
        text=[f"{v / n:.1%} ({v:,})" for v in values], textposition="auto",
        hovertemplate="%{y}: %{x:.1%} of audited rows<extra></extra>"))
    fig.update_layout(height=60 + 40 * len(labels), margin={"l": 10, "r": 10, "t": 10, "b": 10},
                      xaxis_title="share of audited rows", yaxis={"autorange": "reversed"})
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    return fig
