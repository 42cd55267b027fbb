"""Run manifests: everything needed to reproduce an audit result."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import platform

__all__ = ["run_manifest", "reproduce_command"]


def run_manifest(result, *, input_name: str = "", input_sha256: str | None = None) -> dict:
    """Parameters, encoder, seed, data fingerprint and metrics of one audit, JSON-ready."""
    import numpy
    import pandas

    from puaudit import __version__

    s = result.summary()
    return {
        "tool": "puaudit",
        "version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "input": {"name": input_name, "sha256": input_sha256,
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
        "reproduce": reproduce_command(result.params),
    }


def reproduce_command(params: dict) -> str:
    """``puaudit audit INPUT -o OUTPUT`` with every :class:`AuditConfig` field of ``params``."""
    import shlex

    from puaudit.audit.config import AuditConfig

    fields = {f.name for f in dataclasses.fields(AuditConfig)}
    cfg = AuditConfig(**{k: v for k, v in params.items() if k in fields})
    return " ".join(["puaudit", "audit", "INPUT", "-o", "OUTPUT",
                     *(shlex.quote(a) for a in cfg.to_cli())])
