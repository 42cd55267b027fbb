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

Instruction-set caps
--------------------
PyTorch's ``ATEN_CPU_CAPABILITY`` (``default``, ``avx2``, ``avx512``) and oneDNN's
``ONEDNN_MAX_CPU_ISA`` (``AVX2``, ``AVX512_CORE``, ``AVX512_CORE_BF16``, ...) cap the kernels a
process may use. A cap below bfloat16 (``ATEN_CPU_CAPABILITY=default|avx2``, or a oneDNN ISA
without bfloat16) makes the CPU count as one without native bfloat16, so ``auto`` takes
``full``: ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` runs an AVX512-BF16 machine as
an AVX2-only one would (``bench/cold_start.py --emulate-avx2``).
"""

from __future__ import annotations

import logging
import os

__all__ = ["ENCODER_MODES", "MODE_ENV", "default_encoder_mode", "cpu_has_native_bf16",
           "isa_capped_below_bf16", "ISA_CAP_ENV"]

# One logger for every part of the encoder, under the name of its public module.
_log = logging.getLogger("puaudit.embed.encoders")

#: ``fast`` (bfloat16), ``full`` (float32) or ``auto`` (see *Precision* in the module notes)
ENCODER_MODES = ("auto", "fast", "full")
#: environment variable holding the mode used when none is given (a deployment setting)
MODE_ENV = "PUAUDIT_ENCODER_MODE"
MODE_DTYPE = {"fast": "bfloat16", "full": "float32"}


def default_encoder_mode() -> str:
    """``$PUAUDIT_ENCODER_MODE`` when it is one of :data:`ENCODER_MODES`, else ``"auto"``."""
    raw = os.environ.get(MODE_ENV, "").strip().lower()
    if raw and raw not in ENCODER_MODES:
        _log.warning("%s=%r is not one of %s; using 'auto'", MODE_ENV, raw, ", ".join(ENCODER_MODES))
        return "auto"
    return raw or "auto"


_CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})  # x86 AVX512/AMX; Arm FEAT_BF16
#: ``ATEN_CPU_CAPABILITY`` values below AVX512 (PyTorch's vectorised kernels stop there)
_ATEN_BELOW_BF16 = frozenset({"default", "avx2"})
#: ``ONEDNN_MAX_CPU_ISA`` values whose instruction sets compute bfloat16 (``ALL``/``DEFAULT``:
#: no cap); any other value caps oneDNN below bfloat16
_ONEDNN_BF16 = frozenset({"all", "default", "avx2_vnni_2", "avx512_core_bf16",
                          "avx512_core_fp16", "avx10_1_512", "avx512_core_amx",
                          "avx10_1_512_amx", "avx512_core_amx_fp16", "avx10_1_512_amx_fp16"})
#: the environment variables that cap the instruction set (set for a child process, as
#: ``bench/cold_start.py --emulate-avx2`` does)
ISA_CAP_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def isa_capped_below_bf16() -> bool:
    """True when ``ATEN_CPU_CAPABILITY`` or ``ONEDNN_MAX_CPU_ISA`` caps this process below the
    instructions that compute bfloat16 (see *Instruction-set caps* in the module notes)."""
    aten = os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().lower()
    return aten in _ATEN_BELOW_BF16 or bool(onednn and onednn not in _ONEDNN_BF16)


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bfloat16 in hardware (x86 ``avx512_bf16`` / ``amx_bf16``, Arm
    ``bf16``), read from ``/proc/cpuinfo``, and no instruction-set cap
    (:func:`isa_capped_below_bf16`) keeps this process from it. False where that cannot be read
    (not Linux): there bfloat16 would be emulated, which is slower than float32, so ``auto``
    stays at ``full``."""
    if isa_capped_below_bf16():
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    return not _CPU_BF16_FLAGS.isdisjoint(value.split())
    except OSError:
        pass
    return False


def is_oom(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
