"""Instruction-set caps: ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA below bfloat16 make a native
bfloat16 CPU count as one without it, so ``auto`` takes float32 (bench/cold_start.py
--emulate-avx2 runs a child process so)."""

import builtins

import pytest

import puaudit.embed.device as device
from puaudit.embed.encoders import get_encoder


@pytest.fixture
def bf16_cpu(monkeypatch, tmp_path):
    """A /proc/cpuinfo with AVX512-BF16, and no cap set."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n")
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open",
                        lambda f, *a, **k: real_open(info if f == "/proc/cpuinfo" else f, *a, **k))
    for name in device.ISA_CAP_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PUAUDIT_ENCODER_MODE", raising=False)


@pytest.mark.parametrize("env, native", [
    ({}, True),
    ({"ATEN_CPU_CAPABILITY": "avx2"}, False),
    ({"ATEN_CPU_CAPABILITY": "default"}, False),
    ({"ATEN_CPU_CAPABILITY": "avx512"}, True),
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),
    ({"ONEDNN_MAX_CPU_ISA": "avx512_core"}, False),  # AVX512 without BF16
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, True),
    ({"ONEDNN_MAX_CPU_ISA": "ALL"}, True),
    (device.ISA_CAP_ENV, False),
])
def test_caps_below_bf16_turn_native_off(bf16_cpu, monkeypatch, env, native):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert device.cpu_has_native_bf16() is native
    assert device.isa_capped_below_bf16() is (not native)


def test_auto_takes_float32_under_the_avx2_cap(bf16_cpu, monkeypatch):
    assert get_encoder(None, cache_dir=None, device="cpu").mode_ == "fast"
    for k, v in device.ISA_CAP_ENV.items():
        monkeypatch.setenv(k, v)
    enc = get_encoder(None, cache_dir=None, device="cpu")
    assert (enc.mode_, enc.dtype_) == ("full", "float32")
    assert get_encoder(None, cache_dir=None, device="cpu", mode="fast").mode_ == "fast"  # asked
