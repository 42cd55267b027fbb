"""The four-way leaderboard's result: :class:`ModelRankings` and the sources it compares."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from puaudit.errors import PUAuditError
from puaudit.rankings.leaderboard_limits import TOP_MODELS

__all__ = ["SOURCES", "SOURCE_LABELS", "ModelRankings"]

SOURCES = ("judge", "audited", "human", "ppi")
SOURCE_LABELS = {"judge": "Judge (all rows)", "audited": "Audited verdicts",
                 "human": "Human votes only", "ppi": "Prediction-powered (judge + humans)"}


@dataclass
class ModelRankings:
    """Per-model results, four ways.

    Attributes
    ----------
    frame : DataFrame
        One row per model: ``model``, ``n`` (rows where it appears), ``n_human`` (of those, rows
        with a human verdict), then for each source ``s`` in :data:`SOURCES`: ``winrate_s``,
        ``winrate_s_lo``, ``winrate_s_hi``, ``bt_s``, ``bt_s_lo``, ``bt_s_hi``, ``rank_s`` (1 =
        strongest by Bradley–Terry), and with length control ``lc_winrate_s`` (+ ``_lo``, ``_hi``).
        Sorted by the ``ppi`` rank (the ``human`` or ``judge`` rank when that is missing).
    models : list of str
    strengths : dict
        Source → Bradley–Terry strengths aligned with ``models`` (NaN when unavailable).
    params : dict
        The options used.
    diagnostics : dict
        Counts (rows, units, labelled / unlabelled units), the PPI++ weights ``lambda_*`` and,
        with length control, the length coefficient ``gamma_s`` of each source.
    notes : list of str
        Plain-language caveats (a source missing, PPI equal to human-only, ...).
    """

    frame: pd.DataFrame
    models: list
    strengths: dict
    params: dict
    diagnostics: dict
    notes: list = field(default_factory=list)

    def available(self) -> list[str]:
        """Sources with at least one finite strength."""
        return [s for s in SOURCES if np.isfinite(self.strengths.get(s, np.array([np.nan]))).any()]

    def win_probability(self, source: str = "ppi", *, top: int = TOP_MODELS) -> pd.DataFrame:
        r"""Bradley–Terry win probabilities :math:`P(\text{row beats column}) =
        \sigma(\theta_r - \theta_c)` for one source (a tie counts half), in leaderboard order,
        among the first ``top`` models of the leaderboard (a top × top matrix: the full one
        grows with the square of the number of models)."""
        if source not in SOURCES:
            raise PUAuditError(f"source must be one of {list(SOURCES)}, got {source!r}.")
        if int(top) < 1:
            raise PUAuditError(f"top must be at least 1, got {top}.")
        order = self.frame["model"].tolist()[:int(top)]
        pos = {m: k for k, m in enumerate(self.models)}
        theta = np.asarray(self.strengths[source])[[pos[m] for m in order]]
        p = expit(theta[:, None] - theta[None, :])
        np.fill_diagonal(p, np.nan)
        return pd.DataFrame(p, index=order, columns=order)

    def disagreements(self, *, against: str = "ppi", statistic: str = "winrate") -> pd.DataFrame:
        """Models whose judge estimate lies outside the ``against`` interval.

        One row per such model: ``model``, ``judge`` (the judge's estimate), ``estimate``, ``lo``,
        ``hi`` (the ``against`` source's), ``direction`` (``"judge higher"`` / ``"judge lower"``);
        in leaderboard order. Empty when the source is unavailable.
        """
        if against not in SOURCES or against == "judge":
            raise PUAuditError(f"against must be one of {list(SOURCES[1:])}, got {against!r}.")
        f = self.frame
        col = f"{statistic}_{against}"
        if col not in f.columns:
            raise PUAuditError(f"No {statistic} columns here (length control off?).")
        judge, est = f[f"{statistic}_judge"], f[col]
        lo, hi = f[f"{col}_lo"], f[f"{col}_hi"]
        out = pd.DataFrame({"model": f["model"], "judge": judge, "estimate": est, "lo": lo,
                            "hi": hi})
        out["direction"] = np.where(judge > hi, "judge higher",
                                    np.where(judge < lo, "judge lower", ""))
        return out[out["direction"] != ""].reset_index(drop=True)

    def to_dict(self, *, top: int | None = None) -> dict:
        """JSON-ready: ``models`` (one object per model, the frame's columns; the first ``top``
        of the leaderboard when given), ``n_models`` (all of them), ``params``,
        ``diagnostics``, ``notes`` (with one saying how many models were left out); NaN becomes
        None."""
        def clean(v):
            if isinstance(v, (float, np.floating)):
                return None if not np.isfinite(v) else float(v)
            if isinstance(v, np.integer):
                return int(v)
            return v

        def cell(key, v):
            v = clean(v)
            return int(v) if key.startswith("rank_") and v is not None else v

        shown = self.frame if top is None else self.frame.head(int(top))
        records = [{k: cell(k, v) for k, v in r.items()}
                   for r in shown.to_dict(orient="records")]
        notes = list(self.notes)
        if len(shown) < len(self.frame):
            notes.append(self.top_note(len(shown)))
        return {"models": records, "n_models": len(self.frame), "params": dict(self.params),
                "diagnostics": {k: clean(v) for k, v in self.diagnostics.items()},
                "notes": notes}

    def top_note(self, top: int) -> str:
        """What a view of the first ``top`` models leaves out ("" when nothing)."""
        more = len(self.frame) - int(top)
        if more <= 0:
            return ""
        by = self.diagnostics.get("sorted_by", "ppi")
        return (f"Showing the top {int(top):,} of {len(self.frame):,} models (by the {by} "
                f"ranking); {more:,} more are in the full table (the CSV download, or -o).")
