"""Which encoders a dashboard visitor may choose, read from the environment (never from visitors).

``PUAUDIT_ENCODERS``
    Local Hugging Face model folders a dashboard visitor may choose from, separated by the OS path
    separator (``:`` on Linux). The default encoder is always offered. Visitors cannot type paths.
    (The embedding cache folder, ``PUAUDIT_CACHE_DIR``, is read by :mod:`puaudit.embed.encoder_cache`.)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["encoder_choices", "DEFAULT_ENCODER_LABEL"]

DEFAULT_ENCODER_LABEL = "all-MiniLM-L6-v2"


def encoder_choices() -> dict[str, str | None]:
    """Label -> model path (``None`` for the default) for every encoder the dashboard may offer.

    Only folders that exist and hold a ``config.json`` are listed.
    """
    out: dict[str, str | None] = {DEFAULT_ENCODER_LABEL: None}
    for raw in os.environ.get("PUAUDIT_ENCODERS", "").split(os.pathsep):
        raw = raw.strip()
        if not raw:
            continue
        path = Path(raw).expanduser()
        if (path / "config.json").is_file():
            label = path.name
            while label in out:
                label += "'"
            out[label] = str(path)
    return out
