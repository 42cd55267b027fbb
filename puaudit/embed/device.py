"""Where and at what precision an encoder runs: the ``fast`` / ``full`` modes, the CPU's
native bfloat16, and out-of-memory errors.

``full`` runs the model in float32, ``fast`` in bfloat16 (pooling and normalisation in
float32); ``auto`` is ``fast`` for the default all-MiniLM-L6-v2 on a CPU that computes bfloat16
natively and ``full`` everywhere else (docs/encoders.md, "Modes", has the measurements). The
precision is part of the cache key, so fast and full vectors never mix. PyTorch's
``ATEN_CPU_CAPABILITY`` and oneDNN's ``ONEDNN_MAX_CPU_ISA`` can cap a process below bfloat16
(``bench/cold_start.py --emulate-avx2``): the CPU then counts as one without it.
"""

from __future__ import annotations

import logging
import os

__all__ = ["ENCODER_MODES", "MODE_ENV", "default_encoder_mode", "cpu_has_native_bf16",
           "isa_capped_below_bf16", "ISA_CAP_ENV"]

_log = logging.getLogger("puaudit.embed.encoders")

#: ``fast`` (bfloat16), ``full`` (float32) or ``auto`` (see the module notes)
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
    instructions that compute bfloat16."""
    aten = os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().lower()
    return aten in _ATEN_BELOW_BF16 or bool(onednn and onednn not in _ONEDNN_BF16)


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bfloat16 in hardware (x86 ``avx512_bf16`` / ``amx_bf16``, Arm
    ``bf16`` in ``/proc/cpuinfo``) and no instruction-set cap keeps this process from it; False
    where that cannot be read (emulated bfloat16 is slower than float32)."""
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
