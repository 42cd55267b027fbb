"""The operator's limits on one dashboard upload, read from the environment (never from visitors).

``PUAUDIT_MAX_UPLOAD_MB``, ``PUAUDIT_MAX_UPLOAD_ROWS``, ``PUAUDIT_MAX_UPLOAD_COLUMNS``
    Limits on one dashboard upload, checked while it is decompressed and parsed (see
    :func:`upload_limits`). The browser's ``server.maxUploadSize`` only caps the *compressed*
    size; these cap what the server actually has to hold and audit. ``PUAUDIT_MAX_UPLOAD_MB``
    is the upload's decoded budget (:class:`puaudit.data.read_limits.DecodedBudget`): a gzip's
    decompressed bytes (counted before any is kept), a Parquet file's values as Arrow holds them
    (refused from the footer before any page is read when it says so), JSON values once parsed.
    Larger files go through the command line, which has higher limits of its own
    (:mod:`puaudit.cli.input_limits`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

__all__ = ["UploadLimits", "DEFAULT_UPLOAD_LIMITS", "upload_limits"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadLimits:
    """What one dashboard upload may hold once decompressed (see :func:`upload_limits`)."""

    max_mb: int
    max_rows: int
    max_columns: int

    @property
    def max_bytes(self) -> int:
        return self.max_mb * 1024 * 1024


# Defaults chosen so that one upload cannot take the server past ~3 GB (measured with
# bench/hostile_memory.py --case upload, see docs/safety.md): the audit costs ~43 KB per row with
# the default 384-dimension encoder and scorer (embeddings, difference vectors, the automatic
# scorer choice), so 20,000 rows peak near 0.9 GB; reading the file, the table and the texts to
# embed cost a few times the decompressed size on top.
DEFAULT_UPLOAD_LIMITS = UploadLimits(max_mb=200, max_rows=20_000, max_columns=30_000)


def _positive_int(var: str, default: int) -> int:
    raw = os.environ.get(var, "").strip().replace("_", "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        _log.warning("%s=%r is not a positive whole number; using %d", var, raw, default)
        return default
    return value


def upload_limits() -> UploadLimits:
    """The operator's limits on one dashboard upload.

    ``PUAUDIT_MAX_UPLOAD_MB`` (decompressed and decoded size, default 200),
    ``PUAUDIT_MAX_UPLOAD_ROWS``
    (default 20,000) and ``PUAUDIT_MAX_UPLOAD_COLUMNS`` (default 30,000), read from the
    environment on each call; a value that is not a positive integer is ignored (with a logged
    warning) in favour of the default.
    """
    d = DEFAULT_UPLOAD_LIMITS
    return UploadLimits(max_mb=_positive_int("PUAUDIT_MAX_UPLOAD_MB", d.max_mb),
                        max_rows=_positive_int("PUAUDIT_MAX_UPLOAD_ROWS", d.max_rows),
                        max_columns=_positive_int("PUAUDIT_MAX_UPLOAD_COLUMNS", d.max_columns))
