"""PUAudit: audit LLM-as-a-judge pairwise verdicts against scarce human labels.

Core library (no Streamlit): reading tables, frozen encoders, the PUAudit audit (docs/method.md),
TrustJudge consistency analysis (docs/method.md, "TrustJudge") and annotator audits.
"""

__version__ = "0.1.0"

from puaudit.errors import PUAuditError  # noqa: E402

__all__ = ["PUAuditError", "PUAudit", "load_comparisons", "read_table", "__version__"]


def __getattr__(name):  # lazy: keep `import puaudit` light for the CLI and the dashboard
    if name == "PUAudit":
        from puaudit.audit.estimator import PUAudit
        return PUAudit
    if name == "load_comparisons":
        from puaudit.data.schema import load_comparisons
        return load_comparisons
    if name == "read_table":
        from puaudit.data.io import read_table
        return read_table
    raise AttributeError(name)
