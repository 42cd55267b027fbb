"""Where and at what precision an encoder runs: the ``fast`` / ``full`` modes, the CPU's
native bfloat16, and out-of-memory errors.

Precision: ``fast`` and ``full``
--------------------------------
``full`` runs the model in float32. ``fast`` runs it in bfloat16 (weights and activations; the
pooling and normalisation stay float32), which halves the CPU time on processors that compute
bfloat16 natively (x86 AVX512-BF16 or AMX) and keeps every MT-Bench vector within cosine
0.9999 of the float32 one (``bench/embed.py`` measures it). ``auto`` (the default) is ``fast``
for the default all-MiniLM-L6-v2 on such a CPU, where that agreement and an unchanged audit were
measured, and ``full`` everywhere else (other models, GPUs, CPUs without native bfloat16). The
precision is part of the cache key, so fast and full vectors never mix.
"""

from __future__ import annotations

import logging
import os

__all__ = ["ENCODER_MODES", "MODE_ENV", "default_encoder_mode", "cpu_has_native_bf16"]

# One logger for every part of the encoder, under the name of its public module.
_log = logging.getLogger("puaudit.embed.encoders")

#: ``fast`` (bfloat16), ``full`` (float32) or ``auto`` (see *Precision* in the module notes)
ENCODER_MODES = ("auto", "fast", "full")
#: environment variable holding the mode used when none is given (a deployment setting)
MODE_ENV = "PUAUDIT_ENCODER_MODE"
_MODE_DTYPE = {"fast": "bfloat16", "full": "float32"}


def default_encoder_mode() -> str:
    """``$PUAUDIT_ENCODER_MODE`` when it is one of :data:`ENCODER_MODES`, else ``"auto"``."""
    raw = os.environ.get(MODE_ENV, "").strip().lower()
    if raw and raw not in ENCODER_MODES:
        _log.warning("%s=%r is not one of %s; using 'auto'", MODE_ENV, raw, ", ".join(ENCODER_MODES))
        return "auto"
    return raw or "auto"


_CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})  # x86 AVX512/AMX; Arm FEAT_BF16


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bfloat16 in hardware (x86 ``avx512_bf16`` / ``amx_bf16``, Arm
    ``bf16``), read from ``/proc/cpuinfo``. False where that cannot be read (not Linux): there
    bfloat16 would be emulated, which is slower than float32, so ``auto`` stays at ``full``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    return not _CPU_BF16_FLAGS.isdisjoint(value.split())
    except OSError:
        pass
    return False


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
