"""Tables and numbers for the Audit and Export pages (pure functions, no Streamlit)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["headline_metrics", "per_type_table", "audit_note", "expected_text", "auto_choice_text",
           "auto_comparison_table",
           "FORMULA_PREFIXES", "formula_cells", "spreadsheet_safe_copy", "leaderboard_table"]

from puaudit.data.safety import FORMULA_PREFIXES  # noqa: E402  (re-exported)


def _pct(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def headline_metrics(result) -> list[dict]:
    """Cons_orig, Cons_adj (with the change as delta), reversals and validation size.

    Each entry: ``label``, ``value`` (text), ``delta`` (text or None), ``help``.
    """
    m = result.metrics
    delta = m["delta"]
    delta_txt = None if delta is None or math.isnan(delta) else f"{100 * delta:+.1f} pts"
    lo, hi = m["cons_orig_ci"]
    lo2, hi2 = m["cons_adj_ci"]
    return [
        {"label": "Cons_orig", "value": _pct(m["cons_orig"]), "delta": None,
         "help": f"Judge agrees with people on validation rows (95% CI {_pct(lo)}–{_pct(hi)})."},
        {"label": "Cons_adj", "value": _pct(m["cons_adj"]), "delta": delta_txt,
         "help": f"After the audit's reversals (95% CI {_pct(lo2)}–{_pct(hi2)})."},
        {"label": "Reversed", "value": f"{m['n_reversed']} of {m['n']}", "delta": None,
         "help": "Validation rows whose verdict the audit reversed."},
        {"label": "Reversal precision", "value": _pct(m["reversal_precision"]), "delta": None,
         "help": "Share of reversed validation rows where the judge was in fact wrong."},
    ]


def per_type_table(result) -> pd.DataFrame:
    """Per question type: validation rows, Cons_orig, Cons_adj, change (points), reversals."""
    df = result.per_type_frame()
    if df.empty:
        return pd.DataFrame(columns=["question_type", "n_validation", "cons_orig", "cons_adj",
                                     "delta_pts", "n_reversed", "reversal_precision"])
    df = df.copy()
    df["delta_pts"] = 100 * df.pop("delta")
    cols = ["question_type", "n_validation", "cons_orig", "cons_adj", "delta_pts", "n_reversed",
            "reversal_precision"]
    return df[cols].reset_index(drop=True)


def audit_note(result) -> str | None:
    """A plain-language note when the audit reverses nothing or lowers consistency."""
    m = result.metrics
    n_rev_all = int(np.sum(result.group == "negative"))
    if m["n"] == 0:
        return ("There are no validation rows, so the audit's effect cannot be measured: lower "
                "p_ratio so some annotated items are kept for validation.")
    if n_rev_all == 0:
        why = ("with the guarded rule, no row's calibrated probability that the judge erred "
               "cleared 0.5 with confidence" if result.params.get("rule") == "guarded" else
               "no audited row scored low enough at these settings")
        return (f"The audit reversed no verdicts: {why}. The judge's verdicts stand. Compare "
                "scorers below to see whether any scorer finds errors on this data, or lower m "
                "(the curve above shows how many rows each m would reverse).")
    if m["delta"] < 0:
        return (f"The audit lowered consistency by {abs(100 * m['delta']):.1f} points on the "
                "validation rows: its reversals were more often wrong than right here. Keep the "
                "judge's verdicts, or raise m / the margin so fewer rows are reversed.")
    return None


def expected_text(result) -> str:
    """The expected consistency on all audited rows, with the 95% interval of the change."""
    e = result.expected
    orig, adj = e.get("expected_cons_orig"), e.get("expected_cons_adj")
    if orig is None or (isinstance(orig, float) and math.isnan(orig)):
        return "Expected consistency: not available (too few verified positives to calibrate)."
    lo, hi = e.get("expected_delta_ci", (float("nan"), float("nan")))
    return (f"Expected consistency on all audited rows: {_pct(orig)} → {_pct(adj)} "
            f"(change {100 * e['expected_delta']:+.1f} pts, 95% CI {100 * lo:+.1f} to "
            f"{100 * hi:+.1f}).")


def auto_choice_text(result) -> str | None:
    """"auto chose X because …" for an audit whose scorer was chosen automatically."""
    info = (result.diagnostics or {}).get("auto")
    if result.params.get("scorer") != "auto" or not info:
        return None
    return f"auto chose {info['chosen']}: {info['reason']}."


def auto_comparison_table(result) -> pd.DataFrame:
    """The automatic choice's comparison: cross-fitted log loss and Brier score on P per scorer."""
    info = (result.diagnostics or {}).get("auto") or {}
    losses = info.get("log_loss", {})
    if not losses:
        return pd.DataFrame(columns=["scorer", "log_loss", "brier", "chosen"])
    briers = info.get("brier", {})
    df = pd.DataFrame({"scorer": list(losses), "log_loss": list(losses.values()),
                       "brier": [briers.get(k, float("nan")) for k in losses]})
    df["chosen"] = df["scorer"] == info.get("chosen")
    return df.sort_values("log_loss", kind="stable").reset_index(drop=True)


def formula_cells(df: pd.DataFrame) -> dict[str, int]:
    """Column -> number of cells a spreadsheet would run as a formula (see
    :func:`puaudit.data.safety.formula_cells`; plain signed numbers such as ``-3`` are not formulas).

    Only columns with at least one such cell are returned; a formula-like column *name* counts
    as one cell of that column.
    """
    from puaudit.data.safety import formula_cells as cells

    found = cells(df)
    return {str(k): int(v) for k, v in found.groupby("column", sort=False).size().items()}


def spreadsheet_safe_copy(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with a leading apostrophe on every formula-like cell (OWASP CSV-injection advice),
    so spreadsheets show it as text; see :func:`puaudit.data.safety.spreadsheet_safe`."""
    from puaudit.data.safety import spreadsheet_safe

    return spreadsheet_safe(df)


def leaderboard_table(leaderboard: list[dict]) -> pd.DataFrame:
    """One row per scorer × rule: Cons_orig, Cons_adj, change (mean and sd over seeds, points),
    share of validation rows reversed and the precision of those reversals; best change first."""
    rows = []
    for e in leaderboard:
        rows.append({
            "scorer": e["scorer"], "rule": e["rule"],
            "cons_orig": e["cons_orig_mean"], "cons_adj": e["cons_adj_mean"],
            "delta_pts": None if e["delta_mean"] is None else 100 * e["delta_mean"],
            "delta_sd_pts": None if e["delta_sd"] is None else 100 * e["delta_sd"],
            "reversed_share": e["reversed_share"], "reversal_precision": e["reversal_precision"],
        })
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values("delta_pts", ascending=False, kind="stable").reset_index(drop=True)
    return df
