"""Per-op overhead: measured, carried by the profile, used only by eager stacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.framework import profile as framework_profile
from accelmap.cost.roofline import Device, time_ops
from accelmap.measure.calibrate import calibrate
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.store import Store
from accelmap.ops.graph import Precision, Shape, forward_ops

pytest.importorskip("torch")


def test_measured_overhead_is_positive_and_stored(tmp_path: Path) -> None:
    from accelmap.measure.backends import get_backend
    from accelmap.measure.overhead import measure_overhead

    be = get_backend("cpu", "torch")
    r = measure_overhead(be, "local-test", reps=3)
    assert r.device == be.environment().label  # the same label as every other measurement
    assert 1e-8 < r.seconds_per_op < 1e-2
    store = Store(tmp_path / "m.sqlite")
    run = store.add(r.measurements)
    tiny, *dispatch = store.query(kind=Kind.OVERHEAD, run_id=run)
    assert tiny.value == pytest.approx(r.seconds_per_op)
    # seconds per dispatched aten op of the micro transformer, forward and backward passes
    assert {m.settings["pass"] for m in dispatch} == {"forward", "backward"} == set(r.dispatch_s)
    for m in dispatch:
        assert 1e-8 < m.value < 1e-2 and m.settings["dispatches"] > 10


def test_profile_overhead_replaces_the_eager_default_only() -> None:
    cat = load_catalog()
    acc = cat.accelerators["h100-sxm5-80gb"]
    spec = cat.models["llama-2-7b"]
    shape = Shape(tokens=1, context=128.0, kv_tokens=128.0, sequences=1, logits_tokens=1,
                  decode=True)
    ops = forward_ops(spec, shape, Precision())
    slow = CalibrationProfile(name="p", accelerator_id=acc.id, kernel_overhead_s=50e-6)
    for fw, changes in (("eager", True), ("tensorrt-llm", False)):
        base = sum(float(t.total_s) for t in time_ops(ops, Device.of(acc),
                                                      framework_profile(fw)))
        cal = sum(float(t.total_s) for t in time_ops(ops, Device.of(acc, profile=slow),
                                                     framework_profile(fw)))
        assert (cal > base * 1.2) is changes, fw


def test_calibrate_picks_the_overhead() -> None:
    acc = load_catalog().accelerators["h100-sxm5-80gb"]
    env = Environment("torch", "cuda:0", accelerator_id=acc.id)
    m = Measurement(kind=Kind.OVERHEAD, environment=env, dtype=None,
                    label="add", value=7e-6, unit="s", median=7e-6, spread=0.0, repetitions=3)
    bw = Measurement(kind=Kind.BANDWIDTH, environment=env, dtype=None,
                     label="copy 4 GiB", value=2.5e12, unit="B/s", median=2.5e12, spread=0.0,
                     repetitions=3)
    p = calibrate([m, bw], acc)
    assert p.kernel_overhead_s == pytest.approx(7e-6)
    assert CalibrationProfile.from_dict(p.to_dict()).kernel_overhead_s == pytest.approx(7e-6)
