"""When an audit's numbers will be ready: the first look (evidence only) and the full audit.

The first numbers come from the evidence-only audit (:mod:`puaudit.audit.scorers.evidence`),
which embeds nothing; the full audit waits for every distinct text not yet in the embedding
cache. The estimate is

.. math:: t_{first} = t_0 + c\\,n_{rows}, \\qquad
          t_{full} = t_{first} + t_{load} + n_{embed} / r_{mode}

with the rates measured on a quiet 2-core machine with native bfloat16 (docs/encoders.md):
:math:`r` = 18.7 texts/s in mode ``fast``, 9.0 in ``full`` (float32; CPUs without AVX512 are
slower); :math:`t_0` = 2 s (imports), :math:`c` = 1.2 ms per row (the evidence-only audit of the
3,355-row MT-Bench file took 3.9 s), :math:`t_{load}` = 6 s (loading the model in float32; the
dashboard loads it at start). A rough guide, not a promise: a loaded machine is slower.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from puaudit.data.schema import ComparisonTable
from puaudit.embed.text import distinct_pairs

__all__ = ["ReadyEstimate", "estimate_ready", "TEXTS_PER_SECOND"]

#: texts per second by encoder mode, on a quiet 2-core machine (docs/encoders.md)
TEXTS_PER_SECOND = {"fast": 18.7, "full": 9.0}
_START_S = 2.0
_PER_ROW_S = 1.2e-3
_LOAD_S = 6.0


@dataclass(frozen=True)
class ReadyEstimate:
    """Seconds until the first numbers and the full audit, and what they rest on."""

    n_texts: int          # distinct prompt-response texts of the table
    n_cached: int         # of them already in the encoder's cache
    mode: str | None      # the encoder's mode (None: not a PUAudit encoder, no rate known)
    first_s: float
    full_s: float | None  # None: no rate known for this encoder

    @property
    def n_to_embed(self) -> int:
        return self.n_texts - self.n_cached

    def text(self) -> str:
        """The estimate in one sentence."""
        out = (f"First numbers (judge evidence only) in about {_duration(self.first_s)}; the full "
               f"audit ")
        if self.n_to_embed == 0:
            return out + f"right after (all {self.n_texts:,} distinct texts are cached)."
        what = (f"{self.n_to_embed:,} of {self.n_texts:,} distinct texts to embed"
                + (f", {self.n_cached:,} cached" if self.n_cached else ""))
        if self.full_s is None:
            return out + f"when the texts are embedded ({what})."
        dtype = "bfloat16" if self.mode == "fast" else "float32"
        return out + (f"in about {_duration(self.full_s)} ({what} at about "
                      f"{TEXTS_PER_SECOND[self.mode]:g} texts/s, {dtype}; longer on a busy "
                      "machine).")


def _duration(seconds: float) -> str:
    s = int(np.ceil(seconds / 5) * 5) if seconds >= 10 else int(np.ceil(seconds))
    if s < 60:
        return f"{s} s"
    return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")


def estimate_ready(table: ComparisonTable, encoder=None) -> ReadyEstimate:
    """When the first numbers and the full audit of ``table`` will be ready with ``encoder``
    (a :class:`puaudit.embed.hf_encoder.HFEncoder`; its cache is looked up, its model is not
    loaded). Another encoder (or None): the texts are counted, no rate is known."""
    texts, _ = distinct_pairs([*table.prompt, *table.prompt],
                              [*table.response_a, *table.response_b])
    first = _START_S + _PER_ROW_S * len(table)
    mode, n_cached = None, 0
    if encoder is not None and hasattr(encoder, "_resolve"):
        from puaudit.embed.encoder_cache import encoder_cache
        from puaudit.embed.text import embedding_key

        encoder._resolve()
        mode = encoder.mode_
        cache = encoder_cache(encoder)
        if cache is not None and texts:
            n_cached = int(cache.get([embedding_key(t) for t in texts])[1].sum())
    if mode not in TEXTS_PER_SECOND:
        return ReadyEstimate(len(texts), n_cached, mode, first, None)
    to_embed = len(texts) - n_cached
    full = first + (_LOAD_S + to_embed / TEXTS_PER_SECOND[mode] if to_embed else 0.0)
    return ReadyEstimate(len(texts), n_cached, mode, first, full)
