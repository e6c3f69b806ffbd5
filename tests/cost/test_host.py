"""The host-bound regime (cost/host.py) and the eager memory passes (cost/eager_passes.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from accelmap.cost.eager_passes import RMSNORM_FWD, bytes_per_element, eager_factor
from accelmap.cost.framework import Framework, profile
from accelmap.cost.host import DEFAULT_DISPATCH_S, HostPass, Launch, stretch
from accelmap.units import DType

pos = st.floats(1e-7, 10.0)


@given(pos, pos, pos)
def test_pass_takes_the_larger_plus_sync(device: float, host: float, sync: float) -> None:
    hp = HostPass(device, host, 100, host / 100, Launch.EAGER, sync)
    assert hp.total_s == max(device, host) + sync
    assert hp.host_bound == (host > device)
    assert ("host-bound" in hp.sentence("x")) == hp.host_bound


@given(pos, pos)
def test_stretch_adds_up_to_the_host(device: float, host: float) -> None:
    hp = HostPass(device, host, 10, host / 10, Launch.EAGER)
    parts = {"a": device / 4, "b": 3 * device / 4}
    out = stretch(parts, hp)
    assert abs(sum(out.values()) - max(device, host)) <= 1e-9 * max(device, host)


def test_eager_gpu_overlaps_and_cpu_is_in_series() -> None:
    assert profile(Framework.EAGER).launch is Launch.EAGER
    assert profile(Framework.EAGER_CPU).launch is Launch.IN_SERIES
    assert profile(Framework.VLLM).launch is Launch.GRAPH
    assert DEFAULT_DISPATCH_S["backward"] > DEFAULT_DISPATCH_S["forward"]


def test_rmsnorm_written_out_counts_its_passes() -> None:
    # bf16 inference: x.float() 2+4, pow 4+4, mean 4, x.float() 2+4, mul 4+4, to 4+2,
    # * weight 2+2; autocast's cast is a no-op (compute = stream)
    assert bytes_per_element(RMSNORM_FWD, DType.BF16, DType.BF16) == 42
    # fp32 stream under autocast: the .float()/.to() are no-ops; pow 8, mean 4, mul 8,
    # * weight 8, the cast for the GEMM 4+2
    assert bytes_per_element(RMSNORM_FWD, DType.FP32, DType.BF16) == 34
    assert eager_factor("layers/attention/norm", False, DType.BF16, DType.BF16) == 42 / 4
    assert eager_factor("layers/attention/qkv", False, DType.BF16, DType.BF16) == 1.0


def test_decode_estimate_says_host_bound() -> None:
    from accelmap.catalog import load_catalog
    from accelmap.cost.roofline import Device
    from accelmap.engine import System, estimate
    from accelmap.workload import Inference

    cat = load_catalog()
    h100 = Device.of(cat.accelerators["h100-sxm5-80gb"])
    est = estimate(cat.models["llama-3.2-1b"], System.on(h100),
                   Inference(batch=1, prompt_len=128, output_len=8), framework=Framework.EAGER)
    said = [a for a in est.assumptions if a.startswith("decode step host-bound")]
    assert said and "dispatched ops x 9.07 us" in said[0]
    # the step is the host's time, not the device's
    assert est.metrics["tpot_s"] > 1e-2


def test_replayed_kernel_cost_from_a_replay_and_a_one_node_graph() -> None:
    import pytest

    from accelmap.measure.overhead import per_replayed_kernel

    # 200 nodes replayed in 210 us, a one-node graph in 10 us: 1 us per further node
    assert per_replayed_kernel(210e-6, 10e-6, 201) == pytest.approx(1e-6)
    assert per_replayed_kernel(5e-6, 10e-6, 200) == 0.0  # noise never goes negative
    with pytest.raises(ValueError):
        per_replayed_kernel(1e-5, 1e-6, 1)


def test_replay_seconds_prefers_the_measured_figure() -> None:
    from dataclasses import replace

    from accelmap.catalog import load_catalog
    from accelmap.cost.calibration import CalibrationProfile
    from accelmap.cost.host import REPLAY_S_PER_KERNEL, replay_seconds
    from accelmap.cost.roofline import Device

    acc = load_catalog().accelerators["h200-sxm"]
    assert replay_seconds(Device.of(acc))[0] == REPLAY_S_PER_KERNEL
    prof = replace(CalibrationProfile(name="g", accelerator_id=acc.id),
                   dispatch_s={"graph-replay": 2e-6})
    assert replay_seconds(Device.of(acc, profile=prof)) == (
        2e-6, "measured (measure overhead, CUDA graph replay)")
