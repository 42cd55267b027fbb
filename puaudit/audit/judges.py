r"""Other judges beside the audited one (docs/method.md, "Other judges named as columns"): how
often each agrees with people on P items where it gave a strict verdict (items once, exact 95%
interval), and its weight in the evidence model (the coefficient of ``agrees_<judge>`` on the
standardised scale, with its 2.5–97.5% range over the fold fits).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.audit.certify.sequence import item_outcomes, two_sided_interval
from puaudit.audit.splits import SPLIT_P

__all__ = ["other_judges_frame", "OTHER_JUDGE_COLUMNS"]

OTHER_JUDGE_COLUMNS = ("judge", "signal", "n_p_items", "agreement", "agreement_lo",
                       "agreement_hi", "audited_judge_agreement", "coverage", "weight",
                       "weight_lo", "weight_hi")


def _evidence_diagnostics(result) -> dict:
    diag = result.diagnostics or {}
    return (diag.get("auto") or {}).get("evidence") or diag.get("evidence") or {}


def other_judges_frame(result, table) -> pd.DataFrame:
    """One row per other judge of an audit (:data:`OTHER_JUDGE_COLUMNS`).

    Parameters
    ----------
    result : AuditResult
    table : ComparisonTable
        The table audited (with any judge rule applied): its judge's verdicts and items.

    Returns
    -------
    DataFrame with ``judge`` (its column), ``signal``, ``n_p_items`` (P items it gave a strict
    verdict on), ``agreement`` with people on them and its exact 95% interval
    (``agreement_lo``, ``agreement_hi``), ``audited_judge_agreement`` (the audited judge's on the
    same items), ``coverage`` (share of rows with a strict judge verdict where it has one too),
    ``weight`` in the evidence model with its fold range (``weight_lo``, ``weight_hi``; NaN when
    the evidence model was not fitted). Empty when the audit read no other judge.
    """
    info = _evidence_diagnostics(result)
    sources = info.get("sources") or {}
    coef = {r["feature"]: r for r in info.get("coef") or []}
    judge = np.asarray(table.judge, dtype=object)
    items = np.asarray(table.item_id).astype(str)
    p = np.asarray(result.split) == SPLIT_P
    human = np.asarray(result.adjusted, dtype=object)  # P rows carry the people's verdict
    judge_strict = np.isin(judge, ["A", "B"])
    rows = []
    for name, values in (result.evidence or {}).items():
        if not name.startswith("agrees_"):
            continue
        v = np.asarray(values, dtype=np.float64)
        strict = np.isfinite(v) & (v != 0)
        # the other judge's verdict: the audited judge's where it agrees, the other answer where not
        other = np.where(v > 0, judge, np.where(judge == "A", "B", "A"))
        sel = p & strict & judge_strict
        _, share, _ = item_outcomes(np.zeros(sel.sum()), other[sel] == human[sel], items[sel])
        _, own, _ = item_outcomes(np.zeros(sel.sum()), judge[sel] == human[sel], items[sel])
        n, k = len(share), float(share.sum())
        lo, hi = two_sided_interval(k, n)
        w = coef.get(name, {})
        rows.append({"judge": ", ".join(map(str, sources.get(name, [name[7:]]))),
                     "signal": name, "n_p_items": int(n),
                     "agreement": k / n if n else float("nan"),
                     "agreement_lo": lo, "agreement_hi": hi,
                     "audited_judge_agreement": float(own.mean()) if n else float("nan"),
                     "coverage": float(strict[judge_strict].mean()) if judge_strict.any()
                     else float("nan"),
                     "weight": float(w.get("coef", np.nan)), "weight_lo": float(w.get("lo", np.nan)),
                     "weight_hi": float(w.get("hi", np.nan))})
    return pd.DataFrame(rows, columns=list(OTHER_JUDGE_COLUMNS))
