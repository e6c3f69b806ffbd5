"""What `accelmap measure` adds for a CPU and `calibrate` turns into the profile: SDPA attention
curves, seconds per eager dispatch, skinny-GEMM curves, the threads and the CPU's facts; the
fastest-repetition statistic. Synthetic measurements, except one attention run of a fraction of
a second that checks only its structure."""

from __future__ import annotations

import pytest

from accelmap.hardware.local import local_cpu
from accelmap.measure.calibrate import (
    attention_curves,
    calibrate,
    dispatch_seconds,
    matmul_curves,
    skinny_curves,
)
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.timing import Timing
from accelmap.units import DType


def _env() -> Environment:
    return Environment(backend="torch", device="cpu", device_name="test CPU",
                       accelerator_id=local_cpu().id, threads=2)


def _m(kind: Kind, value: float, dtype: str | None = "fp32", run: str = "r1",
       settings: dict[str, object] | None = None, **more: object) -> Measurement:
    return Measurement(kind, _env(), dtype, "x", value, "FLOP/s", value, 0.0, 5,
                       {**(settings or {}), **more}, run_id=run)


def _flat(points: tuple[tuple[float, float], ...]) -> list[float]:
    return [x for p in points for x in p]


def test_calibrate_collects_the_cpu_figures() -> None:
    acc = local_cpu()
    peak = acc.vector[DType.FP32].value
    ms = [
        _m(Kind.MATMUL, 0.6 * peak, m=512, n=512, k=512),
        _m(Kind.MATMUL, 0.1 * peak, m=4, n=768, k=256, phase="skinny"),
        _m(Kind.MATMUL, 0.2 * peak, m=4, n=1024, k=1024, phase="skinny"),
        _m(Kind.BANDWIDTH, 2e10, kernel="copy"),
        _m(Kind.OVERHEAD, 2e-6, None),
        _m(Kind.OVERHEAD, 3e-6, None, settings={"pass": "forward", "dispatches": 33}),
        _m(Kind.OVERHEAD, 5e-6, None, settings={"pass": "backward", "dispatches": 97}),
        _m(Kind.ATTENTION, 0.2 * peak, run="old", settings={
            "pass": "forward", "head_dim": 64, "keys": 64.5, "kernel": "math (cpu)"}),
        *[_m(Kind.ATTENTION, e * peak, run="new", settings={
            "pass": p, "head_dim": 64, "keys": k, "kernel": "flash (cpu)"})
          for p, k, e in (("forward", 64.5, 0.25), ("forward", 128.5, 0.3),
                          ("backward", 64.5, 0.2))],
    ]
    curves, kernel, dtype = attention_curves(ms, acc)
    assert kernel == "flash (cpu)" and dtype is DType.FP32  # the newest run only
    assert _flat(curves["forward/64"]) == pytest.approx([64.5, 0.25, 128.5, 0.3])
    assert _flat(curves["backward/64"]) == pytest.approx([64.5, 0.2])
    assert dispatch_seconds(ms, acc) == {"forward": 3e-6, "backward": 5e-6}
    skinny = skinny_curves(ms, acc)[DType.FP32]
    assert _flat(skinny[4]) == pytest.approx([768 * 256, 0.1, 1024 * 1024, 0.2])
    # the square shapes' curve leaves the skinny ones out
    assert [f for f, _ in matmul_curves(ms, acc)[DType.FP32]] == [2.0 * 512**3]
    prof = calibrate(ms, acc, "p")
    assert prof.kernel_overhead_s == 2e-6 and prof.threads == 2
    assert prof.attention_kernel == "flash (cpu)" and prof.dispatch_s["forward"] == 3e-6
    assert acc.compute_units is not None and prof.device is not None
    assert prof.device["cpu"]["cores"] == acc.compute_units.count.value
    assert "eager dispatch" in prof.source and "attention flash (cpu)" in prof.source


def test_fastest_repetition_statistic() -> None:
    t = Timing(times=(3.0, 1.0, 2.0), inner=1, warmup=1)
    assert t.seconds() == 2.0 and t.seconds(fastest=True) == 1.0


def test_attention_measurement_structure() -> None:
    pytest.importorskip("torch")
    from accelmap.measure.attention import measure_attention
    from accelmap.measure.backends import get_backend

    r = measure_attention(get_backend("cpu", "torch"), local_cpu(), DType.FP32, budget=0.3,
                          reps=1)
    assert r.kernel.endswith("(cpu)") and r.points
    assert {p.head_dim for p in r.points} <= {64, 128}
    for m in r.measurements:
        assert m.kind is Kind.ATTENTION and m.settings["pass"] in ("forward", "backward")
        assert m.value > 0 and m.settings["keys"] == (m.settings["seq"] + 1) / 2
