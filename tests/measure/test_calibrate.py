"""Calibration math on synthetic measurements: best efficiency per dtype, the size curve
(envelope + isotonic), bandwidth, missing dtypes, and what the roofline then uses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.roofline import Device
from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator
from accelmap.measure.calibrate import (
    calibrate,
    envelope,
    gemm_flops,
    isotonic,
    matmul_peak,
)
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.ops.graph import Unit
from accelmap.units import DType, parse_dtype

# Round numbers so the efficiencies can be checked by hand.
ACC = Accelerator.model_validate({
    "id": "test-gpu", "name": "Test GPU", "vendor": "Test", "class": "gpu",
    "release_year": 2024,
    "matrix": {"bf16": {"value": "100 TFLOP/s", "source": "T"}},
    "vector": {"fp32": {"value": "10 TFLOP/s", "source": "T"}},
    "memory": [{"name": "HBM", "kind": "HBM3", "role": "device",
                "capacity": {"value": "16 GB", "source": "T"},
                "bandwidth": {"value": "2 TB/s", "source": "T"}}],
    "sources": {"T": {"title": "synthetic test device"}},
})


def mm(flops: float, eff: float, dtype: str = "bf16", run: str = "r1", **settings: Any
       ) -> Measurement:
    """A bf16 matmul point of ``flops`` FLOPs at ``eff`` of the 100 TFLOP/s peak."""
    env = Environment("torch", "cuda:0", "Test GPU", "test-gpu", host="h",
                      versions={"torch": "2.13.0", "cuda": "13.0"})
    return Measurement(kind=Kind.MATMUL, environment=env, dtype=dtype,
                       label=f"gemm {flops:g}", value=eff * 100e12, unit="FLOP/s",
                       median=eff * 100e12, spread=0.01, repetitions=5,
                       settings={"flops": flops, **settings}, run_id=run,
                       created_at=f"2026-01-0{1 if run == 'r1' else 2}T00:00:00+00:00")


def bw(value: float, kernel: str, acc: str = "test-gpu") -> Measurement:
    env = Environment("torch", "cuda:0", "Test GPU", acc)
    return Measurement(kind=Kind.BANDWIDTH, environment=env, dtype=None,
                       label=f"{kernel} 4 GiB", value=value, unit="B/s", median=value,
                       spread=0.0, repetitions=5, run_id="bw",
                       created_at="2026-01-03T00:00:00+00:00")


POINTS = [  # (FLOPs, efficiency); B and B' fall in one half-octave bin; D is a dip
    (2.0**25, 0.30),
    (2.0**28, 0.50),
    (2.0**28 * 1.1, 0.55),
    (2.0**31, 0.90),
    (2.0**34, 0.70),
    (2.0**37, 0.85),
]


def test_isotonic_pools_adjacent_violators() -> None:
    assert isotonic([1, 3, 2, 2, 5]) == pytest.approx([1, 7 / 3, 7 / 3, 7 / 3, 5])
    assert isotonic([0.9, 0.7]) == pytest.approx([0.8, 0.8])
    assert isotonic([0.1, 0.2, 0.3]) == [0.1, 0.2, 0.3]
    assert isotonic([]) == []


def test_envelope_keeps_best_shape_per_bin_then_smooths() -> None:
    curve = envelope(POINTS)
    assert [f for f, _ in curve] == [2.0**25, 2.0**28 * 1.1, 2.0**31, 2.0**34, 2.0**37]
    assert [e for _, e in curve] == pytest.approx([0.30, 0.55, 0.80, 0.80, 0.85])


def test_calibrate_by_hand() -> None:
    ms = [mm(f, e) for f, e in POINTS]
    ms += [mm(2.0**31, 0.04, dtype="float32", run="r2")]  # fp32: 4 TFLOP/s
    ms += [bw(1.6e12, "copy"), bw(1.7e12, "read"), bw(1.9e12, "write"),
           bw(9e12, "copy", acc="other-gpu")]
    p = calibrate(ms, ACC, name="lab")
    assert p.name == "lab" and p.accelerator_id == "test-gpu"
    assert p.matmul_efficiency[DType.BF16] == pytest.approx(0.90)  # 90 of 100 TFLOP/s
    # no fp32 matrix peak: the roofline uses the fp32 vector units' peak, so must we
    assert matmul_peak(ACC, DType.FP32) == (10e12, "fp32 (vector units)")
    assert p.matmul_efficiency[DType.FP32] == pytest.approx(0.4)
    assert [e for _, e in p.matmul_curve[DType.BF16]] == pytest.approx(
        [0.30, 0.55, 0.80, 0.80, 0.85])
    assert p.bandwidth == 1.7e12  # best of copy/read; write and other devices ignored
    assert p.matmul_peak == {DType.BF16: 100e12, DType.FP32: 10e12}
    assert "cuda:0 Test GPU" in p.source and "runs bw, r1, r2" in p.source
    assert "2026-01-03" in p.source and "torch 2.13.0" in p.source


def test_profile_reproduces_the_measurement_in_the_roofline() -> None:
    p = calibrate([mm(2.0**31, 0.9), mm(2.0**31, 0.04, dtype="fp32"), bw(1.7e12, "copy")],
                  ACC)
    dev = Device.of(ACC, profile=p)
    for dtype, measured in ((DType.BF16, 90e12), (DType.FP32, 4e12)):
        peak, _ = dev.peak(dtype, Unit.MATRIX)
        eff, src = dev.matmul_efficiency(dtype)
        assert peak * eff == pytest.approx(measured) and "measured" in src
    assert dev.bandwidth == 1.7e12 and "measured profile" in dev.calibration


def test_missing_dtypes_keep_the_datasheet_default() -> None:
    p = calibrate([mm(2.0**31, 0.9)], ACC)
    assert set(p.matmul_efficiency) == {DType.BF16} and p.bandwidth is None
    assert "bandwidth not measured" in p.source
    dev = Device.of(ACC, profile=p)
    _, src = dev.matmul_efficiency(DType.FP8)
    assert "measured (profile" not in src
    assert dev.bandwidth == pytest.approx(Device.of(ACC).bandwidth)  # datasheet default


def test_bandwidth_only_profile() -> None:
    p = calibrate([bw(1.5e12, "read")], ACC)
    assert p.matmul_efficiency == {} and p.matmul_curve == {} and p.bandwidth == 1.5e12


def test_nothing_usable_is_an_input_error() -> None:
    point = mm(2.0**31, 0.9)
    other = replace(point, environment=point.environment.compared_with("other"))
    with pytest.raises(InputError, match="no matmul or copy/read bandwidth measurements of "
                                         "test-gpu"):
        calibrate([other, bw(1e12, "write")], ACC)


def test_above_peak_is_flagged() -> None:
    p = calibrate([mm(2.0**31, 1.2)], ACC)
    assert p.matmul_efficiency[DType.BF16] == pytest.approx(1.2)
    assert "above the catalog peak for bf16" in p.source


def test_gemm_flops_sources() -> None:
    base = mm(1.0, 0.5)
    assert gemm_flops(base) == 1.0
    assert gemm_flops(replace(base, settings={"m": 4, "n": 8, "k": 16})) == 2 * 4 * 8 * 16
    by_label = replace(base, settings={}, label="4096x4096x8192")
    assert gemm_flops(by_label) == 2.0 * 4096 * 4096 * 8192
    neither = replace(base, settings={}, label="best")
    assert gemm_flops(neither) is None


@pytest.mark.parametrize(("text", "dtype"), [("bf16", DType.BF16), ("bfloat16", DType.BF16),
                                             ("torch.float32", DType.FP32), ("half", DType.FP16),
                                             ("fp8", DType.FP8), ("complex64", None),
                                             (None, None)])
def test_parse_dtype(text: str | None, dtype: DType | None) -> None:
    assert parse_dtype(text) is dtype


def test_profile_dict_round_trip_and_curve_lookup() -> None:
    p = calibrate([mm(f, e) for f, e in POINTS] + [bw(1.7e12, "copy")], ACC)
    assert CalibrationProfile.from_dict(p.to_dict()) == p
    assert p.efficiency_at(DType.BF16, 2.0**25) == pytest.approx(0.30)
    assert p.efficiency_at(DType.BF16, 1.0) == pytest.approx(0.30)  # flat below the first
    assert p.efficiency_at(DType.BF16, 2.0**40) == pytest.approx(0.85)  # and above the last
    mid = p.efficiency_at(DType.BF16, np.array([2.0**35.5]))  # halfway in log between D and E
    assert mid == pytest.approx([0.825])
    assert p.efficiency_at(DType.FP8, 1e12) is None
