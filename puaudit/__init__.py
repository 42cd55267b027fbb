"""PUAudit: audit LLM-as-a-judge pairwise verdicts against scarce human labels.

Core library (no Streamlit): reading tables, frozen encoders, the PUAudit audit (docs/method.md),
TrustJudge consistency analysis (docs/method.md, "TrustJudge") and annotator audits.
"""

from puaudit.errors import PUAuditError

__version__ = "0.1.0"
__all__ = ["PUAudit", "PUAuditError", "load_comparisons", "read_table"]

# lazy: `import puaudit` stays light for the CLI and the dashboard
_LAZY = {"PUAudit": "puaudit.audit.estimator", "load_comparisons": "puaudit.data.schema",
         "read_table": "puaudit.data.io"}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'puaudit' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__():
    return sorted([*globals(), *_LAZY])
