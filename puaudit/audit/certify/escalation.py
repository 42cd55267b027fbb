"""Rows escalated by a certified audit or a cascade, and a next judge's verdicts merged back:
the loop of ``puaudit judge EXPORT --only-escalated`` (docs/judge.md)."""

from __future__ import annotations

import numpy as np

from puaudit.errors import PUAuditError

__all__ = ["escalated_rows", "cascade_escalated_rows", "merge_asked_verdicts"]


def escalated_rows(frame, *, column: str = "puaudit_trusted"):
    """The escalated rows of an audit export (``column`` false), without the ``puaudit_*``
    columns: the input of the next judge of a cascade (``puaudit judge --only-escalated``).

    Rows neither trusted nor escalated (excluded from the audit, empty cells) are left out. A
    re-audit of the next judge's verdicts on these rows certifies again, on their annotated rows.
    """
    import pandas as pd

    if column not in frame.columns:
        raise PUAuditError(
            f"This table has no '{column}' column, so it does not say which rows were escalated. "
            "Pass an export of a certified audit (puaudit audit FILE -o EXPORT "
            "--target-agreement 0.9).", column=column)
    v = frame[column]
    text = v.astype(str).str.strip().str.lower()
    bad = v.notna() & ~text.isin(["true", "false", "1", "0", "1.0", "0.0", "", "nan", "none"])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise PUAuditError(f"Row {i + 1} of column '{column}' holds {v.iloc[i]!r}; expected "
                           "true, false or empty (as puaudit audit writes it).", row=i + 1,
                           column=column)
    esc = v.notna().to_numpy() & text.isin(["false", "0", "0.0"]).to_numpy()
    if not esc.any():
        raise PUAuditError(f"No row of this export is escalated ('{column}' is never false): "
                           "there is nothing to send to another judge.", column=column)
    keep = [c for c in frame.columns if not str(c).startswith("puaudit_")]
    return pd.DataFrame(frame.loc[esc, keep]).reset_index(drop=True)


def cascade_escalated_rows(frame, *, judge: str | None = None):
    """The rows of a cascade's export (``puaudit cascade``) to ask the next judge about:
    ``(rows, positions)``, the rows without the ``puaudit_*`` columns and their positions in the
    export.

    These are the rows the cascade routed to ``judge`` (``puaudit_cascade_routed_to``; with a
    budget, some rows an earlier stage certified too) when ``judge`` is a stage not asked yet
    (no column of that name; the export names it there); otherwise
    the routed rows no stage trusted (``puaudit_cascade_stage`` is ``people`` and
    ``puaudit_cascade_split`` is not ``excluded``). Either way unlabelled and validation rows,
    and the P rows of that region, so the next stage can be calibrated on its own region.
    """
    for col in ("puaudit_cascade_stage", "puaudit_cascade_split"):
        if col not in frame.columns:
            raise PUAuditError(f"This table has no '{col}' column: pass the export of puaudit "
                               "cascade.", column=col)
    routed_to = frame.get("puaudit_cascade_routed_to")
    left = None
    if judge is not None and routed_to is not None and judge not in frame.columns:
        left = routed_to.astype(str).str.strip() == str(judge)
        left = left if left.any() else None
    if left is None:
        stage = frame["puaudit_cascade_stage"].astype(str).str.strip()
        routed = frame["puaudit_cascade_split"].astype(str).str.strip() != "excluded"
        left = (stage == "people") & routed
    if not left.any():
        raise PUAuditError("No row of this cascade export is left for people: there is nothing "
                           "to send to another judge.", column="puaudit_cascade_stage")
    keep = [c for c in frame.columns if not str(c).startswith("puaudit_")]
    positions = np.flatnonzero(left.to_numpy())
    return frame.iloc[positions][keep].reset_index(drop=True), positions


def merge_asked_verdicts(export, positions, asked, *, winner_column: str):
    """The whole table again, with the next judge's answers on the rows it was asked about.

    ``export``: the cascade's export; ``positions``: the rows asked
    (:func:`cascade_escalated_rows`); ``asked``: those rows as the judge wrote them (same order).
    Every row and input column of the export is kept (the ``puaudit_*`` columns are dropped, so
    the cascade can run again on it); each column the judge added is filled on the asked rows and
    empty elsewhere. Columns other than ``winner_column`` are named ``<winner_column>_<name>``
    unless they already start with it, so the cascade counts them as that judge's and no earlier
    stage reads them (:func:`puaudit.audit.certify.cascade.judge_columns_of`).
    """
    import pandas as pd

    if len(asked) != len(positions):
        raise PUAuditError(f"{len(asked)} judged rows for {len(positions)} rows asked: they must "
                           "match one to one.")
    keep = [c for c in export.columns if not str(c).startswith("puaudit_")]
    out = pd.DataFrame(export[keep]).reset_index(drop=True)
    for c in asked.columns:
        if c in out.columns:
            continue
        name = c if (c == winner_column or str(c).startswith(f"{winner_column}_")) \
            else f"{winner_column}_{c}"
        values = pd.Series([None] * len(out), dtype=object)
        values.iloc[positions] = asked[c].to_numpy(dtype=object)
        out[name] = values
    return out
