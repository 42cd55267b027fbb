"""Library messages reworded for the dashboard (pure functions, no Streamlit).

:class:`puaudit.errors.PUAuditError` messages are written for every caller and often name the
command line's fix (``--judge-col NAME``, ``--p-ratio``) or Python's (``columns={...}``). A
dashboard visitor has neither: they have the Data page's column mapping and the Audit page's
controls. :func:`for_dashboard` replaces one by the other.
"""

from __future__ import annotations

import dataclasses
import re

from puaudit.audit.config import AuditConfig

__all__ = ["for_dashboard", "COLUMN_MAPPING"]

COLUMN_MAPPING = "the Column mapping on the Data page"

# "(CLI: --judge-col NAME)", "(CLI: ...; Python: columns={...})": the hint of another interface
_OTHER_UI = re.compile(r"\s*\((?:CLI|Python):[^()]*\)")
_EMB_FILE = re.compile(r"\s*\((?:or )?[^()]*--embeddings[^()]*\)")
_FLAG = re.compile(r"(--[a-z][a-z0-9-]*)(?: ([0-9][0-9.]*|[A-Z][A-Z_]*)\b)?")
_LABELS = {"m": "m slider", "p_ratio": "p_ratio slider", "target_agreement": "Target agreement "
           "slider", "risk": "Risk choice", "scorer": "Scorer choice (Advanced)", "rule":
           "Relabel rule (Advanced)", "margin": "Margin slider (Advanced)", "alpha1": "alpha1 "
           "slider (Advanced)", "alpha2": "alpha2 slider (Advanced)", "random_state": "Seed "
           "(Advanced)", "evidence": "Verdict evidence choice (Advanced)"}


def _controls() -> dict[str, str]:
    out = {}
    for f in dataclasses.fields(AuditConfig):
        flag = f.metadata.get("flag")
        if flag:
            out[flag] = f"the {_LABELS.get(f.name, f.name + ' setting')} on the Audit page"
    return out


# the library's "no human verdicts" message names command-line ways to add them
_NO_HUMAN = re.compile(r"^This file has no human verdicts \((?P<where>[^()]*)\)\. The audit compares "
                       r"the judge with people, so it needs at least (?P<n>\d+) annotated rows")


def _no_human_for_dashboard(match: re.Match) -> str:
    return (f"This table has no human verdicts ({match['where']}). The audit compares the judge "
            f"with people, so it needs at least {match['n']} annotated rows (a person chose A or "
            "B where the judge did). If a column holds them, choose it as the human column; "
            "otherwise add one (A, B or tie, empty where nobody looked) and upload the table "
            "again. Without human verdicts the Models page works on this table, and the "
            "Consistency page on a pairwise table with question ids. The columns are chosen in "
            f"{COLUMN_MAPPING}.")


def for_dashboard(message: str | BaseException) -> str:
    """``message`` with command-line and Python hints replaced by the dashboard's controls.

    A column hint becomes :data:`COLUMN_MAPPING`; an audit option's flag becomes the Audit
    page's control for it; a remark about an ``--embeddings`` file (the dashboard embeds the
    table itself) is left out. Everything else is kept word for word.
    """
    text = str(message)
    no_human = _NO_HUMAN.match(text)
    if no_human:  # its ways to add labels are the command line's: say the dashboard's
        return _no_human_for_dashboard(no_human)

    def other_ui(match: re.Match) -> str:
        return f" (in {COLUMN_MAPPING})" if "-col" in match.group(0) else ""

    text = _OTHER_UI.sub(other_ui, text)
    text = _EMB_FILE.sub("", text)
    controls = _controls()

    def flag(mt: re.Match) -> str:
        name, value = mt.group(1), mt.group(2)
        if name not in controls:
            return mt.group(0)
        return controls[name] + (f" at {value}" if value and value[0].isdigit() else "")

    text = _FLAG.sub(flag, text)
    if "is the right one." in text and COLUMN_MAPPING not in text:
        text += f" The columns are chosen in {COLUMN_MAPPING}."
    return text
