"""The audit card: every number of a report as one JSON-ready dict, and the CI gate on it.

:func:`build_card` collects the numbers of :class:`~puaudit.report.parts.ReportParts`;
``card["audit"]`` is exactly the object ``puaudit audit --json`` prints for the same input and
settings (``AuditResult.summary()`` plus ``delta_over_seeds``), so a pipeline can read either.
:func:`gate` checks the judge's agreement with people against a floor.
"""

from __future__ import annotations

import datetime as _dt
import math

from puaudit.data.jsonsafe import to_jsonable
from puaudit.report.parts import ReportParts

__all__ = ["build_card", "gate", "agreement", "report_command", "CARD_KIND", "SPREAD_KEYS"]

CARD_KIND = "puaudit audit card"
#: what ``puaudit audit --json`` keeps of the change over seeded splits
SPREAD_KEYS = ("mean", "min", "max", "n")


def _finite(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def agreement(summary: dict | None) -> dict | None:
    """The judge's and the audited verdicts' agreement with people on validation rows, with
    the audit's 95% intervals: ``{"judge": {"value", "lo", "hi"}, "audited": {...},
    "n_validation"}``; None without an audit."""
    if not summary:
        return None

    def one(key: str) -> dict:
        lo, hi = summary.get(f"{key}_ci") or (None, None)
        return {"value": _finite(summary.get(key)), "lo": _finite(lo), "hi": _finite(hi)}

    return {"judge": one("cons_orig"), "audited": one("cons_adj"),
            "n_validation": int(summary.get("n_validation") or 0)}


def _audit_summary(parts: ReportParts) -> dict | None:
    """``puaudit audit --json``'s object: the summary and ``delta_over_seeds``."""
    if parts.result is None:
        return None
    summary = parts.result.summary()
    spread = parts.spread
    summary["delta_over_seeds"] = ({k: spread[k] for k in SPREAD_KEYS} if spread else None)
    return summary


def _rankings(parts: ReportParts) -> dict | None:
    from puaudit.rankings.leaderboard_limits import TOP_MODELS

    r = parts.rankings
    if r is None:
        return None
    out = r.to_dict(top=TOP_MODELS)
    out["available"] = r.available()
    if "ppi" in out["available"] and "judge" in out["available"]:
        dis = r.disagreements()
        out["judge_vs_people"] = dis.to_dict(orient="records")
    return out


def _annotators(parts: ReportParts) -> dict | None:
    a = parts.annotators
    if a is None:
        return None
    out = a.to_dict()
    out["flagged"] = [{"annotator": str(r["annotator"]), "flags": list(r["flags"])}
                      for r in out["annotators"] if r.get("flags")]
    return out


def _trustjudge(parts: ReportParts) -> dict | None:
    if parts.trust_before is None:
        return None
    return {"before": parts.trust_before.to_dict(violations=False),
            "after": (parts.trust_after or parts.trust_before).to_dict(violations=False)}


def _m_curve(parts: ReportParts) -> dict | None:
    """The audit's reversals vs m: ``m`` and ``n_reversed`` (same order), ``current_m`` (the
    audit's, one of ``m``), ``range`` (the Audit page's m slider), ``n_audited`` and ``rule``."""
    from puaudit.audit.m_curve import M_RANGE

    if parts.result is None or parts.m_curve is None:
        return None
    points = parts.m_curve
    # the pinned point at the audit's m has no n_audited: the others all carry the same one
    n_audited = next((c["n_audited"] for c in points if "n_audited" in c), None)
    return {"m": [c["m"] for c in points], "n_reversed": [c["n_reversed"] for c in points],
            "current_m": float(parts.result.m), "range": list(M_RANGE), "n_audited": n_audited,
            "rule": parts.result.params.get("rule")}


def report_command(input_name: str, config, *, output: str = "audit.html",
                   split: str | None = None) -> str:
    """``puaudit report INPUT -o OUTPUT`` with every setting of ``config`` (an
    :class:`~puaudit.audit.config.AuditConfig`) and the dataset ``split`` read (when one was);
    column mappings and other input options are the caller's to add."""
    import shlex

    picked = [] if split is None else ["--split", split]
    return " ".join(shlex.quote(str(w)) for w in
                    ["puaudit", "report", input_name, "-o", output, *picked, *config.to_cli()])


def _reproduce(parts: ReportParts) -> dict:
    from puaudit.audit.manifest import reproduce_command

    params = parts.result.params if parts.result is not None else parts.config.to_dict()
    return {"audit": reproduce_command(params, split=parts.source.get("split")),
            "report": parts.command}


def build_card(parts: ReportParts, *, created: str | None = None) -> dict:
    """The audit card of a report (JSON-ready: NaN and infinities become None).

    Keys: ``kind``, ``version``, ``created``; ``input`` (file name, sha256, split read, content
    hash, rows, columns used, judge column); ``data`` (the table's summary and
    ``judge_tendencies``); ``config``, ``encoder``, ``seeds``; ``audit`` (as ``puaudit audit
    --json``), ``agreement`` (:func:`agreement`), ``m_curve`` (:func:`_m_curve`), ``rankings``,
    ``annotators``, ``trustjudge`` (None where missing), ``notes`` (part -> why it is missing)
    and ``reproduce`` (the ``puaudit audit`` and ``puaudit report`` commands).
    """
    from puaudit import __version__

    table, summary = parts.table, _audit_summary(parts)
    info = parts.result.input if parts.result is not None else None
    return to_jsonable({
        "kind": CARD_KIND, "version": __version__,
        "created": created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "input": {"name": parts.source.get("name", ""), "sha256": parts.source.get("sha256"),
                  "split": parts.source.get("split"),
                  "content_hash": info.content_hash if info else table.content_hash(),
                  "n_rows": len(table), "columns": dict(table.columns),
                  "judge_column": table.judge_column},
        "data": {**table.summary(), "judge_tendencies": parts.tendencies},
        "config": parts.config.to_dict(), "encoder": parts.encoder,
        "seeds": {"random_state": parts.config.random_state, "spread": parts.spread_seeds},
        "audit": summary,
        "agreement": agreement(summary),
        "m_curve": _m_curve(parts),
        "rankings": _rankings(parts),
        "annotators": _annotators(parts),
        "trustjudge": _trustjudge(parts),
        "notes": dict(parts.notes),
        "reproduce": _reproduce(parts),
    })


def gate(card: dict, floor: float) -> tuple[bool, str]:
    """Whether the judge's agreement with people is shown to be at least ``floor``.

    The lower end of the 95% interval the audit reports for Cons_orig (validation rows) is
    compared with ``floor``; with no validation rows nothing is shown, and the gate fails.

    Returns
    -------
    (passed, one line saying why)
    """
    judge = ((card.get("agreement") or {}).get("judge")) or {}
    n = int((card.get("agreement") or {}).get("n_validation") or 0)
    lo = judge.get("lo")
    if lo is None:
        why = (card.get("notes") or {}).get("audit") or "no validation rows measure it"
        return False, (f"FAIL: the judge's agreement with people cannot be measured ({why}); "
                       f"it must be shown to be at least {floor:g}.")
    words = (f"the judge's agreement with people on {n:,} validation rows is "
             f"{judge['value']:.3f} (95% interval {lo:.3f}-{judge['hi']:.3f})")
    if lo < floor:
        return False, f"FAIL: {words}; its lower bound {lo:.3f} is below {floor:g}."
    return True, f"PASS: {words}; its lower bound {lo:.3f} is at least {floor:g}."
