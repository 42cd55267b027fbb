"""Content keys: a row is known by what it shows, not by where it sits in a file.

The key hashes the prompt, both responses and, when the table maps them, the model names, the
question id and the turn. Re-uploading the same file, the file with rows added or removed, or
its rows in another order gives every unchanged row the same key, so earlier review decisions
are found again. Swapping A and B gives another key (a verdict names a side).
"""

from __future__ import annotations

import hashlib

import numpy as np

from puaudit.data.cells import id_text

__all__ = ["row_keys", "key_of", "KEY_ROLES"]

#: Roles (besides prompt and the responses) that enter the key when the table maps them.
KEY_ROLES = ("model_a", "model_b", "question_id", "turn")


def key_of(prompt, response_a, response_b, **extra) -> str:
    """The key of one row from its texts (and optional ``model_a``, ``model_b``,
    ``question_id``, ``turn``)."""
    h = hashlib.sha256()
    parts = [id_text(v, strip=False) for v in (prompt, response_a, response_b)]
    parts += [f"{r}={id_text(extra[r], strip=False)}" for r in KEY_ROLES if r in extra]
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


def row_keys(table) -> np.ndarray:
    """The content key of every row of a :class:`~puaudit.data.schema.ComparisonTable`.

    Cached in ``table.extra["review_keys"]`` (a table is never changed in place).
    """
    cached = table.extra.get("review_keys")
    if cached is not None and len(cached) == len(table):
        return cached
    cols = {r: table.frame[table.columns[r]].tolist() for r in KEY_ROLES if r in table.columns}
    keys = np.empty(len(table), dtype=object)
    for i in range(len(table)):
        keys[i] = key_of(table.prompt[i], table.response_a[i], table.response_b[i],
                         **{r: v[i] for r, v in cols.items()})
    table.extra["review_keys"] = keys
    return keys
