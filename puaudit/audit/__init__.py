"""The PUAudit pipeline: splits -> denoise -> scorers (transport, cross-fitting, calibration;
:mod:`puaudit.audit.scorers`) -> relabel -> metrics -> certification
(:mod:`puaudit.audit.certify`); the estimator, its configuration, repeated evaluation and
manifests.

The public names of the estimator are importable from here:
``from puaudit.audit import PUAudit, AuditConfig, PairEmbeddings, embed_table``."""

from puaudit.audit.config import AuditConfig
from puaudit.audit.result import AuditResult
from puaudit.embed.pairs import PairEmbeddings, embed_table
from puaudit.audit.estimator import PUAudit
from puaudit.audit.stages import audit_table
from puaudit.audit.splits import prepare_split
from puaudit.audit.relabel import relabel_split
from puaudit.audit.scorers.scoring import score_split

__all__ = ["AuditConfig", "AuditResult", "PairEmbeddings", "PUAudit", "audit_table", "embed_table",
           "prepare_split", "relabel_split", "score_split"]
