"""How often the audit's adjusted verdict contradicts each person's votes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from puaudit.annotators.agreement import share_columns
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError

__all__ = ["annotator_score_disagreement"]


def annotator_score_disagreement(table: ComparisonTable, score: np.ndarray,
                                 adjusted: np.ndarray, *, ci_method: str = "wilson",
                                 confidence: float = 0.95) -> pd.DataFrame:
    r"""How often the audit's adjusted verdict disagrees with each person's votes.

    For person :math:`p`, over their strict votes on the rows the audit scored (``score`` not NaN
    and ``adjusted`` in {A, B}): ``n_scored`` rows; ``audit_disagree`` the share with
    ``adjusted != vote`` (with interval); and, among those rows where the judge's verdict is
    strict, the mean score where their vote differs from the judge's
    (``mean_score_disagree_judge``, over ``n_disagree_judge`` rows) and where it equals it
    (``mean_score_agree_judge``, over ``n_agree_judge`` rows). People without such rows are left
    out.

    Parameters
    ----------
    table : ComparisonTable
    score : ndarray of float, one per row (NaN where not scored)
    adjusted : ndarray of {"A", "B", None}, one per row
    """
    if table.annotator is None:
        raise PUAuditError("No annotator column: pass --annotator-col (CLI) or "
                           "columns={'annotator': 'COLUMN'} (Python).")
    score = np.asarray(score, dtype=float)
    adjusted = np.asarray(adjusted, dtype=object)
    if len(score) != len(table) or len(adjusted) != len(table):
        raise PUAuditError(f"score and adjusted need one value per row ({len(table)}); got "
                           f"{len(score)} and {len(adjusted)}.")
    d = pd.DataFrame({"annotator": [("" if a is None else str(a).strip()) for a in table.annotator],
                      "vote": table.human, "judge": table.judge, "score": score,
                      "adjusted": adjusted})
    d = d[(d["annotator"] != "") & d["vote"].isin(["A", "B"]) & d["score"].notna()
          & d["adjusted"].isin(["A", "B"])]
    recs = []
    for name, g in d.groupby("annotator", sort=True):
        jj = g["judge"].isin(["A", "B"])
        dis = g[jj & (g["vote"] != g["judge"])]
        agr = g[jj & (g["vote"] == g["judge"])]
        recs.append({"annotator": name, "n_scored": len(g),
                     "n_audit_disagree": int((g["adjusted"] != g["vote"]).sum()),
                     "n_disagree_judge": len(dis), "n_agree_judge": len(agr),
                     "mean_score_disagree_judge": (float(dis["score"].mean()) if len(dis)
                                                   else np.nan),
                     "mean_score_agree_judge": float(agr["score"].mean()) if len(agr) else np.nan})
    out = pd.DataFrame(recs, columns=["annotator", "n_scored", "n_audit_disagree",
                                      "n_disagree_judge", "n_agree_judge",
                                      "mean_score_disagree_judge", "mean_score_agree_judge"])
    out = out.assign(**share_columns("audit_disagree", out["n_audit_disagree"], out["n_scored"],
                                     ci_method, confidence))
    return out[["annotator", "n_scored", "audit_disagree", "audit_disagree_lo", "audit_disagree_hi",
                "n_audit_disagree", "n_disagree_judge", "mean_score_disagree_judge",
                "n_agree_judge", "mean_score_agree_judge"]]
