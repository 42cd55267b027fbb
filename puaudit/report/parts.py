"""What one audit report is made of: the audit and everything computed beside it.

:func:`assemble_report` runs the label-free analyses (the judge's tendencies, its TrustJudge
consistency, its model ranking) and, when the table allows, the labelled ones (the ranking four
ways, the annotator audit); a part the table cannot give is left out with the reason in
:attr:`ReportParts.notes`. :mod:`puaudit.report.card` turns the parts into numbers and
:mod:`puaudit.report.html` into a page.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from puaudit.audit.config import AuditConfig
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError

__all__ = ["ReportParts", "assemble_report", "judge_tendencies", "file_sha256", "JUDGE_NAME",
           "FIRST_SHOWN", "REFERENCE"]

#: the judge's name as one more annotator (as on the Annotators page)
JUDGE_NAME = "LLM judge"
#: what response A is (``judge_tendencies()["response_a"]``): the one the judge saw first, or
#: AlpacaEval's reference model (``output_1``; AlpacaEval randomises the order shown to the judge)
FIRST_SHOWN, REFERENCE = "first shown", "AlpacaEval reference (output_1)"
#: bootstrap draws of the ranking intervals (the Models page's default)
RANKING_RESAMPLES = 500


@dataclass
class ReportParts:
    """Everything a report shows; a part that could not be computed is None and
    :attr:`notes` says why (key: the part's name).

    Attributes
    ----------
    table : ComparisonTable
    config : AuditConfig
        The audit's settings (also when the audit could not run).
    result : AuditResult or None
    m_curve : list of dict or None
        The audit's reversals vs m (:func:`puaudit.audit.m_curve.audit_with_m_curve`), None
        when they could not be computed.
    spread : dict or None
        The change over seeded splits (:func:`puaudit.audit.evaluate.delta_over_seeds`), None
        when not measured.
    spread_seeds : list of int
        The seeds of the splits the spread was asked for.
    rankings : ModelRankings or None
    annotators : AnnotatorReport or None
    trust_before, trust_after : TrustJudgeReport or None
        Baseline relation, and the best aggregation the table allows.
    tendencies : dict
        :func:`judge_tendencies`.
    source : dict
        ``name`` (as given), ``sha256`` of the file's bytes (None when unknown).
    encoder : str
        The embeddings' source.
    command : str
        The ``puaudit report`` command that rebuilds this report.
    notes : dict
        Part name -> why it is missing.
    """

    table: ComparisonTable
    config: AuditConfig
    result: object = None
    m_curve: list | None = None
    spread: dict | None = None
    spread_seeds: list = field(default_factory=list)
    rankings: object = None
    annotators: object = None
    trust_before: object = None
    trust_after: object = None
    tendencies: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)
    encoder: str = ""
    command: str = ""
    notes: dict = field(default_factory=dict)


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (a large file is never held whole)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _share(k: int, n: int) -> dict:
    """``{"share", "lo", "hi", "k", "n"}`` with the Wilson 95% interval (None where n = 0)."""
    from puaudit.stats.proportions import wilson_interval

    if n == 0:
        return {"share": None, "lo": None, "hi": None, "k": 0, "n": 0}
    lo, hi = wilson_interval(k, n)
    return {"share": k / n, "lo": float(lo), "hi": float(hi), "k": int(k), "n": int(n)}


def judge_tendencies(table: ComparisonTable) -> dict:
    """The judge's habits, read without any human label.

    Returns
    -------
    dict
        ``position``: share of its A/B verdicts that pick response A (0.5 is no preference);
        ``longer``: share of its A/B verdicts on rows of unequal lengths that pick the longer;
        ``ties``: share of its verdicts that are ties. Each is ``{"share", "lo", "hi", "k",
        "n"}`` with a Wilson 95% interval; ``response_a``: :data:`FIRST_SHOWN`, or for
        AlpacaEval annotations :data:`REFERENCE` (its judge saw a randomised order).
    """
    from puaudit.data.formats import alpaca_eval

    judge = np.asarray(table.judge, dtype=object)
    strict = (judge == "A") | (judge == "B")
    len_a = np.fromiter((len(str(t)) for t in table.response_a), dtype=np.int64, count=len(table))
    len_b = np.fromiter((len(str(t)) for t in table.response_b), dtype=np.int64, count=len(table))
    longer = np.where(len_a > len_b, "A", np.where(len_b > len_a, "B", ""))
    unequal = strict & (longer != "")
    decided = strict | (judge == "tie")
    a_is = REFERENCE if alpaca_eval.looks_like(table.frame.columns) else FIRST_SHOWN
    return {"position": _share(int((judge[strict] == "A").sum()), int(strict.sum())),
            "longer": _share(int((judge[unequal] == longer[unequal]).sum()), int(unequal.sum())),
            "ties": _share(int((judge[decided] == "tie").sum()), int(decided.sum())),
            "response_a": a_is}


def _try(notes: dict, name: str, build):
    """``build()``, or None with the reason in ``notes[name]`` when the table cannot give it."""
    try:
        return build()
    except PUAuditError as exc:
        notes[name] = str(exc)
        return None


def _trustjudge(table: ComparisonTable, notes: dict, name: str):
    """(before, after): the baseline relation and the best aggregation the table's columns
    allow (both orders' probabilities, else perplexities, else the baseline again)."""
    from puaudit.trustjudge import analyse, read_pairwise

    pairs = _try(notes, "trustjudge", lambda: read_pairwise(table.frame, name=name))
    if pairs is None:
        return None, None
    method = ("bidirectional" if pairs.attrs.get("has_probabilities") else
              "weighted" if pairs.attrs.get("has_perplexity") else "baseline")
    before = _try(notes, "trustjudge", lambda: analyse(pairs, None, method="baseline"))
    if before is None or method == "baseline":
        return before, before
    return before, _try(notes, "trustjudge", lambda: analyse(pairs, None, method=method))


def assemble_report(table: ComparisonTable, config: AuditConfig, result=None, *,
                    m_curve: list[dict] | None = None, spread: dict | None = None,
                    no_audit: str | None = None, source: dict | None = None, encoder: str = "",
                    command: str = "", ranking_resamples: int = RANKING_RESAMPLES) -> ReportParts:
    """The parts of a report on ``table`` audited as ``result`` (None: not audited, and
    ``no_audit`` says why); the other parameters are the :class:`ReportParts` fields of the
    same names, ``ranking_resamples`` the bootstrap draws of the ranking intervals."""
    from puaudit.annotators.agreement import annotator_report
    from puaudit.rankings.estimate import table_rankings

    notes: dict = {}
    if result is None:
        notes["audit"] = no_audit or "The audit was not run."
    elif m_curve is None:
        notes["m_curve"] = "The reversals vs m could not be computed for this audit."
    audited = None if result is None else result.adjusted
    seed = 0 if config.random_state is None else int(config.random_state)
    rankings = _try(notes, "rankings", lambda: table_rankings(
        table, audited=audited, n_resamples=ranking_resamples, random_state=seed))
    annotators = None
    if table.n_annotated:
        annotators = _try(notes, "annotators",
                          lambda: annotator_report(table, judge_name=JUDGE_NAME))
    else:
        notes["annotators"] = "No human verdicts: there is no annotator to audit."
    before, after = _trustjudge(table, notes, str((source or {}).get("name") or "table"))
    return ReportParts(table=table, config=config, result=result, m_curve=m_curve,
                       spread=spread,
                       spread_seeds=list((spread or {}).get("seeds") or []),
                       rankings=rankings, annotators=annotators, trust_before=before,
                       trust_after=after, tendencies=judge_tendencies(table),
                       source=dict(source or {}), encoder=encoder, command=command, notes=notes)
