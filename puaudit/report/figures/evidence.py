"""Verdict evidence on screen: which signals the evidence scorer leaned on, and their values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from puaudit.report.figures.text import plotly_texts

__all__ = ["SIGNAL_LABELS", "evidence_info", "evidence_weights_frame", "evidence_weights_figure",
           "evidence_note"]

#: Plain words for each signal (features of the evidence model; ``agrees_*`` and ``type=*``
#: are labelled from their names).
SIGNAL_LABELS = {
    "position_first": "judge picked the first-shown answer",
    "log_length_ratio": "log length ratio, chosen / rejected",
    "structure_gap": "markdown structure, chosen − rejected",
    "bt_gap": "judge's own strength gap (Bradley–Terry)",
    "bt_favourite": "verdict picks the judge's favourite model",
    "bt_upset": "surprise under the judge's own model",
    "bt_gap_type": "judge's strength gap within the question type",
    "order_consistent": "same verdict with the answers swapped",
    "p_chosen": "judge's probability of its verdict",
    "p_entropy": "entropy of the judge's probabilities",
    "log_perplexity": "log perplexity of the judgment",
}


def _label(feature: str) -> str:
    missing = feature.startswith("missing:")
    name = feature.removeprefix("missing:")
    if name.startswith("agrees_"):
        text = f"agreement with judge '{name[len('agrees_'):]}'"
    elif name.startswith("type="):
        text = f"question type {name[5:]}"
    elif name.startswith("scorer:"):
        text = f"embedding scorer {name[7:]} (its calibrated P)"
    else:
        text = SIGNAL_LABELS.get(name, name)
    return f"{text} — value missing" if missing else text


def evidence_info(result) -> dict:
    """The evidence diagnostics of an audit: the fitted model's when the evidence scorer was
    fitted (``coef`` present), else the signals computed (empty dict: none)."""
    diag = result.diagnostics or {}
    fitted = (diag.get("auto") or {}).get("evidence")
    return fitted or diag.get("evidence") or {}


def evidence_weights_frame(result) -> pd.DataFrame:
    """One row per feature of the evidence model: its label, coefficient on the standardised
    scale (positive: the judge is more likely right) and its 2.5–97.5% range over the
    cross-fitting fold fits, largest |coefficient| first."""
    coef = evidence_info(result).get("coef") or []
    cols = ["feature", "signal", "coef", "lo", "hi", "direction"]
    if not coef:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(coef)
    df["signal"] = [_label(f) for f in df["feature"]]
    steady = np.sign(df["lo"]) == np.sign(df["hi"])
    df["direction"] = np.where(~steady, "unsure (sign changes across folds)",
                               np.where(df["coef"] > 0, "judge more likely right",
                                        "judge more likely wrong"))
    return df[cols].reset_index(drop=True)


def evidence_weights_figure(result, *, top: int = 15) -> go.Figure:
    """Horizontal bars of the ``top`` largest coefficients with their fold ranges."""
    df = evidence_weights_frame(result).head(top).iloc[::-1]
    fig = go.Figure(go.Bar(
        x=df["coef"], y=plotly_texts(df["signal"]), orientation="h",
        marker_color=np.where(df["coef"] >= 0, "#2a9d8f", "#e76f51"),
        error_x={"type": "data", "symmetric": False, "array": (df["hi"] - df["coef"]).clip(lower=0),
                 "arrayminus": (df["coef"] - df["lo"]).clip(lower=0)},
        hovertemplate="%{y}<br>coefficient %{x:+.3f}<extra></extra>"))
    fig.update_layout(
        height=120 + 26 * len(df), margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis_title="coefficient on the standardised scale (bars: range over fold fits)",
        title="What the evidence scorer leaned on (right: judge more likely right)")
    fig.add_vline(x=0, line_color="#888")
    return fig


def evidence_note(result) -> str | None:
    """One sentence on the evidence: what was used, and whether auto chose it."""
    info = evidence_info(result)
    signals = info.get("signals") or []
    if not signals:
        return None
    used = (result.params or {}).get("scorer_used")
    head = (f"{len(signals)} verdict-evidence signal{'s' if len(signals) != 1 else ''} "
            f"({', '.join(signals)})")
    if used == "evidence":
        return (f"{head} and the embedding scorers' probabilities feed the evidence scorer, "
                "which gives this audit's P(judge right).")
    if info.get("coef"):
        return (f"{head} were tried in the evidence scorer; it did not beat {used} on P, so "
                "they do not move this audit's probabilities.")
    return f"{head} are exported beside the audit; the chosen scorer does not use them."
