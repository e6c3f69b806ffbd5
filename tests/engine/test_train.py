"""Distributed training estimate: constraints as results, ZeRO memory, scaling invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.catalog import load_catalog
from accelmap.engine import estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.constraints import TrainingJob, check_training
from accelmap.mapping.plan import Mapping, ZeroStage
from accelmap.memory.sharding import model_state_bytes
from accelmap.workload import Optimizer, Recompute, Training

CAT = load_catalog()
C64 = parse_cluster("64xH100", CAT)
L70 = CAT.models["llama-3.1-70b"]


# ZeRO paper (Rajbhandari et al. 2020) Table 1, "model states per device" in GB (1e9 bytes),
# K = 12 (mixed-precision Adam); the shared memory.csv rows Y0020-Y0030 quote these.
@pytest.mark.parametrize(
    ("psi", "nd", "stage", "gb"),
    [
        (7.5e9, 4, 1, 52.5), (7.5e9, 4, 2, 41.25), (7.5e9, 4, 3, 30.0),
        (128e9, 4, 1, 896.0), (128e9, 4, 2, 704.0), (128e9, 4, 3, 512.0),
        (1e12, 4, 1, 7000.0), (1e12, 4, 2, 5500.0), (1e12, 4, 3, 4000.0),
        (7.5e9, 1, 1, 120.0), (7.5e9, 16, 1, 35.625),
    ],
)
def test_zero_table_1(psi: float, nd: int, stage: int, gb: float) -> None:
    ms = model_state_bytes(psi, stage, nd)
    assert sum(ms.values()) / 1e9 == pytest.approx(gb, rel=1e-3)


def job(global_batch: int = 256, seq: int = 8192) -> TrainingJob:
    return TrainingJob(L70, C64, global_batch, seq)


@pytest.mark.parametrize(
    ("mapping", "rule"),
    [
        (Mapping(dp=8, tp=8, pp=2), "world_size"),
        (Mapping(dp=4, tp=16, pp=1), "tp_in_scale_up"),
        (Mapping(dp=16, tp=4, pp=1, micro_batch=3), "batch_divisible"),
        (Mapping(dp=64, tp=1, ep=2), "experts_divisible"),
        (Mapping(dp=2, tp=8, pp=4, virtual_stages=3), "virtual_stages"),
        (Mapping(dp=4, tp=8, pp=1, cp=2, micro_batch=1), None),
    ],
)
def test_rules(mapping: Mapping, rule: str | None) -> None:
    got = [v.rule for v in check_training(job(), mapping)]
    if rule is None:
        assert got == []
    else:
        assert rule in got


def test_violation_is_a_result_with_a_sentence() -> None:
    e = estimate(L70, C64, Training(batch=256, seq_len=8192), Mapping(dp=4, tp=16))
    assert not e.feasible and "crosses the 8-device scale-up domain" in (e.reason or "")


def test_seed_example_is_feasible_and_plausible() -> None:
    """Llama 3 70B on 64 H100, TP8 PP2 DP4 ZeRO-1, full activation checkpointing."""
    m = Mapping(dp=4, tp=8, pp=2, zero=ZeroStage.OPTIMIZER, recompute=Recompute.FULL)
    e = estimate(L70, C64, Training(batch=256, seq_len=8192,
                                             recompute=Recompute.FULL), m)
    assert e.feasible
    # per-device model states by hand: 70.55e9 / 16 params per rank ~ 4.41e9: bf16 weights
    # 8.8 GB, fp32 grads 17.6 GB, ZeRO-1 sharded master + Adam 12 B / 4 ranks = 13.2 GB
    items = e.memory.items
    assert items["weights"] / 1e9 == pytest.approx(8.8, rel=0.03)
    assert items["gradients"] / 1e9 == pytest.approx(17.6, rel=0.03)
    optimizer = items["optimizer/master_weights"] + items["optimizer/states"]
    assert optimizer / 1e9 == pytest.approx(13.2, rel=0.03)
    assert 0.2 < e.metrics["mfu"] < 0.7


def test_context_parallel_ranks_reduce_gradients_and_shard_the_optimizer() -> None:
    """Llama 2 7B at 32k on one DGX H100 as cp=8, dp=1: the 8 cp ranks hold the same weights,
    so gradients are reduced over them and ZeRO-1 shards over them (Megatron-Core's data-parallel
    group with context parallel). By hand: 6.74e9 params x 12 B (fp32 master + Adam) / 8 =
    10.1 GB of optimizer state per device, and a nonzero gradient reduce-scatter."""
    l7 = CAT.models["llama-2-7b"]
    dgx = parse_cluster("dgx-h100", CAT)
    e = estimate(l7, dgx, Training(batch=8, seq_len=32768, recompute=Recompute.FULL),
                          Mapping(dp=1, cp=8, zero=ZeroStage.OPTIMIZER,
                                  recompute=Recompute.FULL))
    optimizer = e.memory.items["optimizer/master_weights"] + e.memory.items["optimizer/states"]
    assert optimizer / 1e9 == pytest.approx(6.74 * 12 / 8, rel=0.03)
    assert e.metrics["communication_s"]["dp"] > 0


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2]))
def test_more_dp_never_raises_weight_memory_under_zero3(tp: int, pp: int) -> None:
    """At a fixed global batch, raising dp (on a larger cluster) shards ZeRO-3 weights thinner."""
    spec = CAT.models["llama-2-13b"]
    prev = None
    for nodes in (2, 4, 8):
        cl = parse_cluster(f"{nodes}x8xh100-sxm5-80gb", CAT)
        dp = cl.devices // (tp * pp)
        e = estimate(spec, cl, Training(batch=512, seq_len=4096),
                              Mapping(dp=dp, tp=tp, pp=pp, zero=ZeroStage.PARAMETERS,
                                      recompute=Recompute.FULL))
        w = e.memory.items["weights"]
        assert prev is None or w <= prev
        prev = w


def test_tp_across_nodes_is_slower_when_forced() -> None:
    spec = CAT.models["llama-2-7b"]  # 32 heads: tp=16 splits them
    wl = Training(batch=256, seq_len=4096, recompute=Recompute.FULL)
    inside = estimate(spec, C64, wl, Mapping(dp=8, tp=8, recompute=Recompute.FULL))
    across = estimate(spec, C64, wl, Mapping(dp=4, tp=16, recompute=Recompute.FULL,
                                                      force_tp_across_nodes=True))
    assert across.metrics["step_time_s"] > inside.metrics["step_time_s"]


def test_pipeline_bubble_shrinks_with_micro_batches() -> None:
    spec = CAT.models["llama-2-13b"]
    few = estimate(spec, C64, Training(batch=16, seq_len=4096),
                            Mapping(dp=2, tp=8, pp=4, recompute=Recompute.FULL))
    many = estimate(spec, C64, Training(batch=256, seq_len=4096),
                             Mapping(dp=2, tp=8, pp=4, recompute=Recompute.FULL))
    assert many.metrics["bubble_fraction"] < few.metrics["bubble_fraction"]


def test_offload_trades_memory_for_time() -> None:
    from accelmap.mapping.plan import Offload

    node = parse_cluster("dgx-h100", CAT)
    spec = CAT.models["llama-2-13b"]
    base = Mapping(dp=8, zero=ZeroStage.PARAMETERS, recompute=Recompute.FULL)
    off = Mapping(dp=8, zero=ZeroStage.PARAMETERS, recompute=Recompute.FULL,
                  offload_params=Offload.CPU, offload_optimizer=Offload.CPU)
    a = estimate(spec, node, Training(batch=64, seq_len=4096), base)
    b = estimate(spec, node, Training(batch=64, seq_len=4096), off)
    assert float(b.memory.total) < float(a.memory.total)
    assert b.metrics["step_time_s"] > a.metrics["step_time_s"]


@pytest.mark.parametrize("optimizer", list(Optimizer))
def test_one_device_and_a_one_device_cluster_are_the_same_estimate(optimizer: Optimizer) -> None:
    """One engine: an accelerator and a 1x1 cluster of it, with the same mapping, give the same
    step time and the same memory tree (the first wave's two engines differed by 2x in memory,
    and charged NCCL buffers to a device that never communicates)."""
    l7 = CAT.models["llama-2-7b"]
    one = parse_cluster("1x1xh100-sxm5-80gb", CAT)
    wl = Training(batch=4, seq_len=1024, optimizer=optimizer, recompute=Recompute.FULL)
    m = Mapping(micro_batch=2, recompute=Recompute.FULL)
    a = estimate(l7, one, wl, m)
    b = estimate(l7, one.accelerator, wl, m)
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=1e-12)
    assert a.memory.items == b.memory.items
    assert "runtime/comm_buffers" not in a.memory.items
    assert a.communication_s == {}


def test_one_device_default_is_one_micro_batch() -> None:
    """Without a mapping, one device takes the whole batch at once (no accumulation)."""
    l7 = CAT.models["llama-2-7b"]
    e = estimate(l7, CAT.accelerators["h100-sxm5-80gb"], Training(batch=4, seq_len=1024))
    assert e.micro_batches == 1 and e.mapping.micro_batch == 4


def test_data_parallel_tail_has_the_nic_to_itself() -> None:
    """ZeRO-1's reduce-scatter and all-gather run in the step's tail, when the pipeline's sends
    have drained: a dp group crossing nodes gets the whole scale-out link whether or not pp
    also crosses them. By hand (Llama 3.1 70B, tp 8): the dp collectives move the parameters
    of one stage, so with pp = 2 they take half the time of pp = 1 at the same dp, not the
    same time (which a NIC shared with pp would give)."""
    c = parse_cluster("128xH100", CAT)
    wl = Training(batch=128, seq_len=4096, recompute=Recompute.FULL)
    one = estimate(L70, c, wl, Mapping(dp=8, tp=8, pp=2, zero=ZeroStage.OPTIMIZER,
                                       recompute=Recompute.FULL))
    c64 = parse_cluster("64xH100", CAT)
    half = estimate(L70, c64, wl, Mapping(dp=8, tp=8, pp=1, zero=ZeroStage.OPTIMIZER,
                                          recompute=Recompute.FULL))
    dp2, dp1 = one.metrics["communication_s"]["dp"], half.metrics["communication_s"]["dp"]
    assert dp2 == pytest.approx(dp1 / 2, rel=0.05)
