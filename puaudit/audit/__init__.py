"""The PUAudit pipeline: splits -> denoise -> scorers (transport) -> calibration -> relabel -> metrics; the estimator, its configuration, repeated evaluation and manifests.

The public names of the estimator are importable from here: ``from puaudit.audit import PUAudit, AuditConfig, PairEmbeddings, embed_table``."""

from puaudit.audit.config import AuditConfig
from puaudit.audit.estimator import (AuditResult, PairEmbeddings, PUAudit, audit_table, embed_table,
                                     prepare_split, relabel_split, score_split)

__all__ = ["AuditConfig", "AuditResult", "PairEmbeddings", "PUAudit", "audit_table", "embed_table",
           "prepare_split", "relabel_split", "score_split"]
