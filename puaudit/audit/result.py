"""The audit's result: every array aligned with the input rows, the summary, the export.

:class:`AuditResult` holds what one audit produced; :meth:`AuditResult.to_frame` writes every
input row and column unchanged plus the ``puaudit_*`` columns (:data:`EXPORT_COLUMNS`, then
``puaudit_trusted`` when certified and one ``puaudit_evidence_<signal>`` per verdict-evidence
signal).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from puaudit.audit.splits import SPLIT_EXCLUDED, SPLIT_P, SPLIT_U, SPLIT_VAL
from puaudit.data.jsonsafe import to_jsonable
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError
from puaudit.percents import shown_change

__all__ = ["AuditResult", "InputInfo", "EXPORT_COLUMNS", "exclusions"]

EXPORT_COLUMNS = ("puaudit_split", "puaudit_score", "puaudit_p_judge_right", "puaudit_group",
                  "puaudit_adjusted", "puaudit_reason")


#: reasons whose rows a summary counts without listing them (often many, all in the export's
#: puaudit_reason column)
UNLISTED_REASONS = ("judge tie", "human tie", "no judge verdict")


def exclusions(split: np.ndarray, reason: np.ndarray) -> dict:
    """``excluded_reasons``: {reason: count} of the excluded rows; ``excluded_rows``:
    {reason: [1-based rows]} for the reasons other than ties and a missing verdict (rows
    dropped as "identical responses" are named). An audit's and a cascade's summary both
    carry it."""
    split, reason = np.asarray(split), np.asarray(reason, dtype=object)
    ex = np.flatnonzero(split == SPLIT_EXCLUDED)
    reasons = sorted({str(r) for r in reason[ex]})
    counts = {r: int(np.sum(reason[ex] == r)) for r in reasons}
    rows = {r: (ex[reason[ex] == r] + 1).tolist() for r in reasons
            if r not in UNLISTED_REASONS}
    return {"excluded_reasons": counts, "excluded_rows": rows}


@dataclass(frozen=True)
class InputInfo:
    """What an audit keeps of its input: enough to check that a table is the one it audited.

    Attributes
    ----------
    content_hash : str
        :meth:`ComparisonTable.content_hash` of the audited table.
    n_rows : int
    columns : dict
        Role -> column name used.
    judge_column : str
    """

    content_hash: str
    n_rows: int
    columns: dict
    judge_column: str

    @classmethod
    def of(cls, table: ComparisonTable) -> "InputInfo":
        return cls(content_hash=table.content_hash(), n_rows=len(table),
                   columns=dict(table.columns), judge_column=table.judge_column)


@dataclass
class AuditResult:
    """Everything one audit produced; arrays are aligned with the input rows.

    The result does not carry the input table (a million-row table is the caller's to keep or
    drop): :meth:`to_frame` takes it and checks it against :attr:`input`.
    """

    input: InputInfo
    split: np.ndarray
    reason: np.ndarray
    score: np.ndarray
    p_judge_right: np.ndarray
    group: np.ndarray
    adjusted: np.ndarray
    in_p_prime: np.ndarray
    m: float
    m_estimate: float
    metrics: dict
    per_type: dict
    expected: dict
    thresholds: dict
    params: dict
    diagnostics: dict = field(default_factory=dict)
    #: certified trust or escalate (``target_agreement`` set):
    #: :class:`puaudit.audit.certify.judge.Certification`
    certification: object = None
    #: verdict evidence signal -> (n,) values, exported as ``puaudit_evidence_<signal>``
    evidence: dict = field(default_factory=dict)
    # a weak reference to the fitted table, only so the deprecated ``to_frame()`` keeps working
    _table_ref: object = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict:
        # a weak reference cannot be pickled (caches, worker processes): it stays behind
        return {**self.__dict__, "_table_ref": None}

    def columns(self) -> dict:
        """The ``puaudit_*`` columns (name -> array aligned with the input rows)."""
        adjusted = np.array([("" if v is None else v) for v in self.adjusted], dtype=object)
        cols = {
            "puaudit_split": self.split.astype(object),
            "puaudit_score": self.score,
            "puaudit_p_judge_right": self.p_judge_right,
            "puaudit_group": self.group.astype(object),
            "puaudit_adjusted": adjusted,
            "puaudit_reason": self.row_reasons(),
        }
        if self.certification is not None:
            cols["puaudit_trusted"] = self.certification.trusted
        for name, values in self.evidence.items():
            cols[f"puaudit_evidence_{name}"] = values
        return cols

    def row_reasons(self) -> np.ndarray:
        """Why each row ended where it did, in words (the ``puaudit_reason`` column).

        Excluded rows keep the split's reason (tie, no judge verdict, identical responses); P
        rows say their human verdict is used; every audited row gives its calibrated
        P(judge right) ``p`` against the rule's bar — guarded: reversed when
        :math:`p < 0.5 - \\text{margin}` (and its upper bound below 0.5), flagged for review
        in between; paper: the top :math:`\\lfloor m |U| \\rfloor` scores of each type kept —
        and, when certified, whether it was trusted or escalated.
        """
        rule, margin = self.params.get("rule", "guarded"), float(self.params.get("margin", 0.05))
        noise = ((self.diagnostics or {}).get("auto") or {}).get("beats_base_rate") is False
        out = np.asarray(self.reason, dtype=object).copy()
        todo = out == ""
        split, group = np.asarray(self.split), np.asarray(self.group)
        out[todo & (split == SPLIT_P)] = "verified (P): the human verdict is used"
        todo &= split != SPLIT_P
        p = np.asarray(self.p_judge_right, dtype=np.float64)
        score = np.asarray(self.score, dtype=np.float64)
        low = p < 0.5 - margin
        pp, sc = "P(judge right) {p:.2f}", "score {s:.3f}"
        if rule == "paper":
            top = f"its type's top m share (paper rule, m {self.m:.2f})"
            cases = [(group == "negative", f"reversed: {sc} below {top}; {pp}"),
                     (group == "uncertain", f"kept, for review: {sc} in the review band "
                                            f"(paper rule); {pp}"),
                     (np.ones(len(p), bool), f"kept: {sc} in {top}; {pp}")]
        else:
            cases = [(group == "negative", f"reversed: {pp} < {0.5 - margin:.2f} (guarded rule, "
                                           f"margin {margin:g}), its upper bound below 0.5 too; "
                                           f"{sc}"),
                     ((group == "uncertain") & low & noise,
                      f"kept, for review: {pp} is low, but no scorer beats the base rate on P, "
                      f"so it is noise; {sc}"),
                     ((group == "uncertain") & low, f"kept, for review: {pp} < "
                                                    f"{0.5 - margin:.2f} but its upper bound "
                                                    f"reaches 0.5; {sc}"),
                     (group == "uncertain", f"kept, for review: {pp} within {margin:g} of 0.5 "
                                            f"(guarded rule); {sc}"),
                     (np.ones(len(p), bool), f"kept: {pp} > {0.5 + margin:.2f} (guarded rule); "
                                             f"{sc}")]
        unscored = todo & ~(np.isfinite(p) & np.isfinite(score))
        out[unscored] = "kept: not scored"
        todo &= ~unscored
        for mask, template in cases:  # one str.format a row: a million rows in about a second
            rows = np.flatnonzero(todo & mask)
            out[rows] = [template.format(p=a, s=b)
                         for a, b in zip(p[rows].tolist(), score[rows].tolist())]
            todo[rows] = False
        if self.certification is not None:
            audited = (split == SPLIT_U) | (split == SPLIT_VAL)
            trusted = np.asarray(self.certification.trusted, dtype=bool)
            out[audited] = out[audited] + np.where(
                trusted[audited], "; trusted (certified)",
                "; escalated to a person (below the certified threshold)").astype(object)
        return out

    def check_table(self, table) -> None:
        """Raise :class:`PUAuditError` unless ``table`` (ComparisonTable or DataFrame) has the
        audited number of rows (and, for a ComparisonTable, the audited content)."""
        if isinstance(table, ComparisonTable) and table.extra.get("streamed_from"):
            raise PUAuditError("This table was read column by column from "
                               f"{table.extra['streamed_from']} and keeps no frame: write the "
                               "export with puaudit.data.parquet.write_export_parquet.")
        n = len(table)
        if n != self.input.n_rows:
            raise PUAuditError(f"This table has {n} rows; the audit was run on "
                               f"{self.input.n_rows}. Pass the table that was audited.")
        if isinstance(table, ComparisonTable) and table.content_hash() != self.input.content_hash:
            raise PUAuditError("This table's texts or verdicts differ from the audited table's. "
                               "Pass the table that was audited (or audit this one).")

    def to_frame(self, table=None) -> pd.DataFrame:
        """Every input row and column unchanged and in order, plus the ``puaudit_*`` columns.

        Parameters
        ----------
        table : ComparisonTable or DataFrame
            The audited input (its ``frame`` is used for a ComparisonTable).

        If the input already has a column of that name (re-auditing an export), the new column
        gets the suffix ``_new`` (repeated as needed) so no input column is overwritten.
        """
        if table is None:
            table = self._table_ref() if callable(self._table_ref) else None
            if table is None:
                raise PUAuditError("AuditResult.to_frame needs the audited table: "
                                   "result.to_frame(table) (or PUAudit.to_frame()).")
            warnings.warn("AuditResult.to_frame() without the table is deprecated; pass it: "
                          "result.to_frame(table), or use PUAudit.to_frame().",
                          DeprecationWarning, stacklevel=2)
        self.check_table(table)
        df = (table.frame if isinstance(table, ComparisonTable) else table).copy()
        for name, v in self.columns().items():
            col = name
            while col in df.columns:
                col += "_new"
            df[col] = v
        return df

    def per_type_frame(self) -> pd.DataFrame:
        """Per question type: n, Cons_orig, Cons_adj, change, reversals (validation rows)."""
        rows = []
        for t, m in self.per_type.items():
            rows.append({"question_type": t, "n_validation": m["n"], "cons_orig": m["cons_orig"],
                         "cons_adj": m["cons_adj"], "delta": m["delta"],
                         "n_reversed": m["n_reversed"], "reversal_precision": m["reversal_precision"]})
        return pd.DataFrame(rows)

    def _evidence_summary(self) -> dict | None:
        diag = self.diagnostics or {}
        info = (diag.get("auto") or {}).get("evidence") or diag.get("evidence")
        if not info:
            return None
        return {k: info[k] for k in ("signals", "messages", "coef") if k in info}

    def verdict(self) -> str:
        """The audit's outcome in plain words: whether its probabilities beat P's base rate,
        and whether its reversals helped on validation rows."""
        auto = (self.diagnostics or {}).get("auto") or {}
        n_rev = int(np.sum(self.group == "negative"))
        if auto.get("beats_base_rate") is False:
            return ("No scorer beats the base rate on P by more than noise (cross-fitted log "
                    f"loss {auto['log_loss'][auto['chosen']]:.4f} vs "
                    f"{auto['base_rate_log_loss']:.4f} for P's agreement rate alone; gain "
                    f"z = {auto.get('gain_z', float('nan')):.2f}, needs "
                    f"{auto.get('gain_z_needed', float('nan')):.2f}): nothing is reversed.")
        if n_rev == 0:
            return ("No verdict is confidently wrong (calibrated P(judge right) below 0.5 with "
                    "its upper bound too): nothing is reversed.")
        d, n_val = self.metrics.get("delta"), self.metrics.get("n", 0)
        if d is None or not np.isfinite(d) or not n_val:
            return f"{n_rev} verdicts are reversed; no validation rows measure whether that helps."
        # the change between Cons_orig and Cons_adj as their percents read beside it
        d = shown_change(self.metrics["cons_orig"], self.metrics["cons_adj"])
        word = "help" if d > 0 else ("do not change agreement" if d == 0 else "hurt")
        return (f"Reversals {word} on validation ({d:+.1f} points of agreement with "
                f"people on {n_val} rows; {n_rev} verdicts reversed in all).")

    def _exclusions(self) -> dict:
        return exclusions(self.split, self.reason)

    def summary(self) -> dict:
        """JSON-ready numbers (the CLI's ``--json`` line)."""
        counts = pd.Series(self.split).value_counts().to_dict()
        groups = pd.Series(self.group).value_counts().to_dict()
        return to_jsonable({
            "n_rows": len(self.split),
            "verdict": self.verdict(),
            "n_p": int(counts.get(SPLIT_P, 0)),
            "n_p_prime": int(self.in_p_prime.sum()),
            "n_validation": int(counts.get(SPLIT_VAL, 0)),
            "n_unlabelled": int(counts.get(SPLIT_U, 0)),
            "n_excluded": int(counts.get(SPLIT_EXCLUDED, 0)),
            # why rows were excluded: a count per reason (each row's reason: puaudit_reason), and
            # the rows (1-based, in the table's order, as in the export) of every reason but
            # the ties and blanks
            **self._exclusions(),
            "groups": {str(k): int(v) for k, v in groups.items()},
            "m": self.m,
            "m_estimate": self.m_estimate,
            "cons_orig": self.metrics["cons_orig"],
            "cons_adj": self.metrics["cons_adj"],
            "delta": self.metrics["delta"],
            "cons_orig_ci": self.metrics["cons_orig_ci"],
            "cons_adj_ci": self.metrics["cons_adj_ci"],
            "reversed_share": self.metrics["reversed_share"],
            "reversal_precision": self.metrics["reversal_precision"],
            "expected": self.expected,
            "per_type": {t: {k: v for k, v in m.items() if k in (
                "n", "cons_orig", "cons_adj", "delta", "n_reversed", "reversal_precision")}
                for t, m in self.per_type.items()},
            "params": self.params,
            # texts=False: the evidence-only audit (no text scorer; puaudit.audit.scorers.evidence)
            "evidence_only": self.params.get("texts", True) is False,
            "scorer_used": self.params.get("scorer_used", self.params.get("scorer")),
            # scorer="auto": each candidate's cross-fitted log loss / Brier score on P, the choice
            "scorer_choice": (self.diagnostics or {}).get("auto"),
            # verdict evidence: signals computed, columns left out, the model's weights if fitted
            "evidence": self._evidence_summary(),
            # target_agreement set: coverage, certified_lower, threshold and "certification"
            **(self.certification.summary() if self.certification is not None else {}),
        })
