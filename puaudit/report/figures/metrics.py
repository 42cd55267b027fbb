"""Tables and numbers of an audit for the Audit and Export pages and the report (pure functions,
no Streamlit)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.audit.metrics import MIN_TYPE_ROWS
from puaudit.data.safety import spreadsheet_safe
from puaudit.percents import percent, points_between

__all__ = ["headline_metrics", "per_type_table", "audit_note", "expected_text", "auto_choice_text",
           "auto_comparison_table", "verdict_text", "spread_text", "type_table", "type_text",
           "HURT_NOTE", "as_percent", "formula_cells", "spreadsheet_safe_copy",
           "leaderboard_table", "PER_TYPE_HEADERS", "per_type_display"]

def as_percent(df: pd.DataFrame, columns) -> pd.DataFrame:
    """A copy with the shares in ``columns`` as percents (0–100), for a fixed one-decimal
    ``"%.1f%%"`` display (Streamlit's ``"percent"`` format drops trailing zeros)."""
    out = df.copy()
    for c in columns:
        out[c] = 100 * pd.to_numeric(out[c], errors="coerce")
    return out


def headline_metrics(result) -> list[dict]:
    """Cons_orig, Cons_adj (with the change as delta), reversals and validation size.

    Each entry: ``label``, ``value`` (text), ``delta`` (text or None), ``help``.
    """
    m = result.metrics
    # the change between the two percents as shown (74.2% -> 74.6%: +0.4, not +0.3)
    delta_txt = points_between(m["cons_orig"], m["cons_adj"])
    lo, hi = m["cons_orig_ci"]
    lo2, hi2 = m["cons_adj_ci"]
    return [
        {"label": "Cons_orig", "value": percent(m["cons_orig"]), "delta": None,
         "help": f"Judge agrees with people on validation rows (95% CI {percent(lo)}–{percent(hi)})."},
        {"label": "Cons_adj", "value": percent(m["cons_adj"]), "delta": delta_txt,
         "help": f"After the audit's reversals (95% CI {percent(lo2)}–{percent(hi2)})."},
        {"label": "Reversed", "value": f"{m['n_reversed']} of {m['n']}", "delta": None,
         "help": "Validation rows whose verdict the audit reversed."},
        {"label": "Reversal precision", "value": percent(m["reversal_precision"]), "delta": None,
         "help": "Share of reversed validation rows where the judge was in fact wrong."},
    ]


#: the note on a type whose reversals lowered agreement on validation, and why its rows are
#: still reversed: validation rows only measure the audit; letting them switch reversals off
#: per type would tune the audit on the rows that grade it, and its numbers would flatter it.
HURT_NOTE = ("reversals lowered agreement here; rows of this type are still reversed, as "
             "validation rows only measure the audit and never tune it: if the change stays "
             "negative over seeds, keep the judge's verdicts for this type")


def per_type_table(result, *, min_rows: int = MIN_TYPE_ROWS) -> pd.DataFrame:
    """Per question type of an audit result: see :func:`type_table`."""
    return type_table(result.per_type, min_rows=min_rows)


def type_table(per_type: dict, *, min_rows: int = MIN_TYPE_ROWS) -> pd.DataFrame:
    """Per question type (``AuditResult.per_type``): validation rows, Cons_orig, Cons_adj,
    change (points), reversals, and a note. A type with fewer than ``min_rows`` validation rows
    keeps its counts but no percentage (:data:`TYPE_RULE`); a type where the reversals lowered
    agreement is said so. Undefined measures are NaN, never None."""
    cols = ["question_type", "n_validation", "cons_orig", "cons_adj", "delta_pts", "n_reversed",
            "reversal_precision", "note"]
    df = pd.DataFrame([{"question_type": t, "n_validation": m["n"], "cons_orig": m["cons_orig"],
                        "cons_adj": m["cons_adj"], "delta": m["delta"],
                        "n_reversed": m["n_reversed"],
                        "reversal_precision": m["reversal_precision"]}
                       for t, m in per_type.items()])
    if df.empty:
        return pd.DataFrame(columns=cols)
    for c in ("cons_orig", "cons_adj", "delta", "reversal_precision"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    df["delta_pts"] = 100 * df.pop("delta")
    small = df["n_validation"] < min_rows
    df.loc[small, ["cons_orig", "cons_adj", "delta_pts", "reversal_precision"]] = np.nan
    df["note"] = ""
    df.loc[small, "note"] = f"too few validation rows (under {min_rows}) for a percentage"
    df.loc[~small & (df["delta_pts"] < 0), "note"] = HURT_NOTE
    return df[cols].reset_index(drop=True)


def type_text(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`type_table` as the screen shows it: percents with one decimal, the change as the
    difference of the two percents shown beside it (:func:`puaudit.percents.points_between`),
    an empty cell where a number is not shown (Streamlit writes "None" in an empty number
    cell). Columns named for people; any leading columns (e.g. ``judge column``) kept."""
    out = table.drop(columns=["cons_orig", "cons_adj", "delta_pts", "reversal_precision",
                              "n_validation", "n_reversed", "note", "question_type"])
    out["question type"] = table["question_type"].astype(str)
    out["validation rows"] = table["n_validation"].astype(int)
    out["Cons_orig"] = [percent(x, missing="") for x in table["cons_orig"]]
    out["Cons_adj"] = [percent(x, missing="") for x in table["cons_adj"]]
    out["change"] = [points_between(a, b) or ("" if pd.isna(a) else "0.0 pts")
                     for a, b in zip(table["cons_orig"], table["cons_adj"])]
    out["reversed"] = table["n_reversed"].astype(int)
    out["reversal precision"] = [percent(x, missing="") for x in table["reversal_precision"]]
    out["note"] = table["note"].astype(str)
    return out


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
    """What the audit *predicts* for the rows no person labelled, kept apart from what it
    *measured* on validation rows.

    On the unlabelled audited rows :math:`j` with calibrated :math:`p_j` = P(judge right) and
    reversal indicator :math:`r_j`: predicted agreement before :math:`\\mathrm{mean}_j\\, p_j`,
    after :math:`\\mathrm{mean}_j\\, (r_j(1-p_j) + (1-r_j)p_j)`. Rows with a human label are
    left out: their agreement is measured, not predicted.
    """
    rows = np.asarray(result.split) == "unlabelled"
    if not rows.any():
        return ("Every audited row has a human label, so nothing is predicted: the measured "
                "numbers above are the audit's result.")
    p = np.asarray(result.p_judge_right, dtype=float)[rows]
    ok = np.isfinite(p)
    if not ok.any():
        return ("Predicted agreement on the rows without human labels: not available (too few "
                "verified positives to calibrate).")
    r = (np.asarray(result.group)[rows] == "negative")[ok]
    p = p[ok]
    orig, adj = float(p.mean()), float(np.mean(np.where(r, 1 - p, p)))
    return (f"Predicted, not measured — on the {int(ok.sum()):,} rows without human labels, "
            f"from calibrated P(judge right): agreement with people {percent(orig)} → {percent(adj)} "
            f"({points_between(orig, adj) or '+0.0 pts'}) after {int(r.sum()):,} reversals there.")


def verdict_text(result) -> str | None:
    """The audit's outcome in one plain sentence (``summary()["verdict"]``), or — for a result
    without one — whether the chosen scorer beat P's base rate, from the automatic choice's
    cross-fitted log losses."""
    verdict = getattr(result, "verdict", None)
    if callable(verdict):
        return verdict()
    info = (result.diagnostics or {}).get("auto") or {}
    losses, base = info.get("log_loss") or {}, info.get("base_rate_log_loss")
    chosen = info.get("chosen")
    if chosen in losses and base is not None and losses[chosen] >= base:
        return (f"No scorer beats the base rate on P (cross-fitted log loss {losses[chosen]:.4f} "
                f"vs {base:.4f} for P's agreement rate alone).")
    return None


def spread_text(spread: dict | None, verdict: str | None = None) -> str | None:
    """The change over seeded splits in words (see
    :func:`puaudit.audit.evaluate.spread_sentence`), and, when it puts the ``verdict`` shown
    above within noise, the verdict as it then reads (as the CLI prints it)."""
    from puaudit.audit.evaluate import spread_sentence, verdict_with_spread

    text = spread_sentence(spread)
    noisy = verdict_with_spread(verdict, spread)
    if text and noisy != verdict:
        text += f" So: {noisy}"
    return text


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
    """Column -> number of cells a spreadsheet would run as a formula
    (:func:`puaudit.data.safety.formula_cells`), for the columns that have one."""
    from puaudit.data.safety import formula_cells as cells

    found = cells(df)
    return {str(k): int(v) for k, v in found.groupby("column", sort=False).size().items()}


#: a copy with a leading apostrophe on every formula-like cell, so spreadsheets show it as text
spreadsheet_safe_copy = spreadsheet_safe


def leaderboard_table(leaderboard: list[dict]) -> pd.DataFrame:
    """One row per scorer × rule: Cons_orig, Cons_adj, change (mean and sd over seeds, points),
    share of validation rows reversed and the precision of those reversals; best change first."""
    df = pd.DataFrame([{
        "scorer": e["scorer"], "rule": e["rule"],
        "cons_orig": e["cons_orig_mean"], "cons_adj": e["cons_adj_mean"],
        "delta_pts": None if e["delta_mean"] is None else 100 * e["delta_mean"],
        "delta_sd_pts": None if e["delta_sd"] is None else 100 * e["delta_sd"],
        "reversed_share": e["reversed_share"], "reversal_precision": e["reversal_precision"],
    } for e in leaderboard])
    if len(df):
        df = df.sort_values("delta_pts", ascending=False, kind="stable").reset_index(drop=True)
    return df


#: :func:`per_type_table`'s columns as a reader sees them: shares in percent, the change in
#: percentage points
PER_TYPE_HEADERS = {"question_type": "Question type", "n_validation": "Validation rows",
                    "cons_orig": "Judge agrees with people (%)",
                    "cons_adj": "Audited verdicts agree (%)", "delta_pts": "Change (points)",
                    "n_reversed": "Reversed", "reversal_precision": "Reversals right (%)",
                    "note": "Note"}


def per_type_display(result, *, min_rows: int = MIN_TYPE_ROWS) -> pd.DataFrame:
    """:func:`per_type_table` in one unit under readable headers (:data:`PER_TYPE_HEADERS`):
    percentages rounded to one decimal, the change the difference of the two rounded ones (74.2
    → 74.6 reads +0.4, never +0.3) in points; a type under ``min_rows`` has empty percentages.
    """
    df = per_type_table(result, min_rows=min_rows)
    for col in ("cons_orig", "cons_adj", "reversal_precision"):
        df[col] = (100 * pd.to_numeric(df[col], errors="coerce")).round(1)
    df["delta_pts"] = (df["cons_adj"] - df["cons_orig"]).round(1)
    return df.rename(columns=PER_TYPE_HEADERS)
