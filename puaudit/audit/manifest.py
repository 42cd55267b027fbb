"""Run manifests: everything needed to reproduce an audit result."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import platform

__all__ = ["run_manifest", "reproduce_command"]


def run_manifest(result, *, input_name: str = "", input_sha256: str | None = None,
                 human: str | None = None, answers: str | None = None, split: str | None = None,
                 export_format: str | None = None) -> dict:
    """Parameters, encoder, seed, data fingerprint and metrics of one audit, JSON-ready.

    ``human``, ``answers`` and ``split`` are the files joined to the input and the split read
    (the command's ``--human``, ``--answers``, ``--split``), ``export_format`` its
    ``--format``: the same input file gives another table without them, so the reproduce
    command carries them (:func:`reproduce_command`)."""
    import numpy
    import pandas

    from puaudit import __version__

    s = result.summary()
    return {
        "tool": "puaudit",
        "version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "input": {"name": input_name, "sha256": input_sha256, "human": human,
                  "answers": answers, "split": split,
                  "content_hash": result.input.content_hash, "n_rows": result.input.n_rows,
                  "columns": result.input.columns, "judge_column": result.input.judge_column},
        "params": result.params,
        "metrics": {k: s[k] for k in ("cons_orig", "cons_adj", "delta", "cons_orig_ci",
                                      "cons_adj_ci", "reversed_share", "reversal_precision",
                                      "n_validation", "n_p", "n_p_prime", "n_unlabelled",
                                      "n_excluded", "m", "m_estimate", "groups", "expected")},
        "per_type": s["per_type"],
        "scorer_used": s.get("scorer_used"),
        "scorer_choice": s.get("scorer_choice"),
        # certified trust or escalate: the threshold on calibrated P(judge right), its bound
        "certification": s.get("certification"),
        "environment": {"python": platform.python_version(), "numpy": numpy.__version__,
                        "pandas": pandas.__version__},
        "reproduce": reproduce_command(result.params, human=human, answers=answers,
                                       split=split, export_format=export_format),
    }


def reproduce_command(params: dict, *, human: str | None = None, answers: str | None = None,
                      split: str | None = None, export_format: str | None = None) -> str:
    """``puaudit audit INPUT -o OUTPUT`` with every :class:`AuditConfig` field of ``params``,
    and the ``--human`` votes, ``--answers`` folder, ``--split`` and ``--format`` the audit
    was run with (paths as they were given: the input's table depends on them)."""
    import shlex

    from puaudit.audit.config import AuditConfig

    fields = {f.name for f in dataclasses.fields(AuditConfig)}
    cfg = AuditConfig(**{k: v for k, v in params.items() if k in fields})
    joined = [a for flag, value in (("--human", human), ("--answers", answers),
                                    ("--split", split), ("--format", export_format))
              if value is not None for a in (flag, str(value))]
    return " ".join(["puaudit", "audit", "INPUT", "-o", "OUTPUT",
                     *(shlex.quote(a) for a in joined + cfg.to_cli())])
