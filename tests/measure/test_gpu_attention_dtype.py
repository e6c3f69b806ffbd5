"""GPU calibration right by default (issue 23): `measure attention` measures in the device's
dtype, and `calibrate` does not put fp32 attention curves into a bf16 GPU profile."""

from __future__ import annotations

from accelmap.catalog import load_catalog
from accelmap.measure.attention import device_dtype
from accelmap.measure.calibrate import attention_curves, calibrate
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.units import DType


def _m(kind: Kind, value: float, dtype: str | None, run: str,
       settings: dict[str, object] | None = None) -> Measurement:
    env = Environment(backend="torch", device="cuda:0", device_name="NVIDIA H200",
                      accelerator_id="h200-sxm")
    return Measurement(kind, env, dtype, "x", value, "FLOP/s", value, 0.0, 5,
                       settings or {}, run_id=run)


def _attention(dtype: str, run: str, kernel: str) -> list[Measurement]:
    return [_m(Kind.ATTENTION, 3e14, dtype, run, {"pass": p, "head_dim": 128,
                                                 "keys": 1024.5, "kernel": kernel})
            for p in ("forward", "backward")]


def _base() -> list[Measurement]:
    return [_m(Kind.MATMUL, 8.35e14, "bf16", "mm", {"m": 8192, "n": 8192, "k": 8192}),
            _m(Kind.BANDWIDTH, 4.17e12, None, "bw", {"kernel": "copy"})]


def test_default_dtype_is_the_devices() -> None:
    assert device_dtype("cuda") is DType.BF16
    assert device_dtype("cpu") is DType.FP32


def test_fp32_only_attention_is_left_out_of_a_bf16_gpu_profile_and_said() -> None:
    acc = load_catalog().accelerators["h200-sxm"]
    ms = [*_base(), *_attention("fp32", "a32", "memory-efficient (cuda)")]
    prof = calibrate(ms, acc, "gpu")
    assert not prof.attention_curve
    assert "attention measured in fp32 only" in prof.source


def test_bf16_attention_is_preferred_over_a_newer_fp32_run() -> None:
    acc = load_catalog().accelerators["h200-sxm"]
    ms = [*_base(), *_attention("bf16", "a16", "flash (cuda)"),
          *_attention("fp32", "a32", "memory-efficient (cuda)")]
    curves, kernel, dtype = attention_curves(ms, acc, want=(DType.BF16,))
    assert dtype is DType.BF16 and kernel == "flash (cuda)" and curves
    prof = calibrate(ms, acc, "gpu")
    assert prof.attention_dtype is DType.BF16
