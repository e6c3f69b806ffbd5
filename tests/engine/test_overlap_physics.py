"""What overlapping and quantizing cost a training step, by stack: FP8 casts of torchao's dynamic
scaling vs Transformer Engine's delayed scaling, and TP comm overlap on the copy engines with
Transformer Engine's SM margin (cost/overlap.py, 4.; engine/profile.py)."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.framework import Framework
from accelmap.cost.roofline import Device
from accelmap.engine import estimate
from accelmap.engine.profile import UB_SM_MARGIN, layer_profile
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping, ZeroStage
from accelmap.models.geometry import Geometry
from accelmap.ops.graph import Shape, forward_ops
from accelmap.ops.op import Precision, Stage
from accelmap.units import DType
from accelmap.workload import Recompute, Training

CAT = load_catalog()
L8 = CAT.models["llama-3.1-8b"]
H100 = CAT.accelerators["h100-sxm5-80gb"]


def _casts(dynamic: bool) -> list[bool]:
    p = Precision(compute=DType.FP8, fp8_dynamic_scaling=dynamic)
    shape = Shape(tokens=8192.0, context=4096.0, kv_tokens=8192.0, sequences=1.0,
                  logits_tokens=8192.0)
    ops = forward_ops(Geometry.of(L8), shape, p, training=True)
    return [o.fusable for o in ops if o.name.endswith("/fp8_cast")]


def test_dynamic_scaling_casts_are_kernels_of_their_own() -> None:
    """Delayed scaling (TE) knows the scale before the producer writes: the cast folds into
    it. Dynamic scaling (torchao) needs the whole tensor's amax first: a pass of its own."""
    assert _casts(False) and all(_casts(False))
    assert _casts(True) and not any(_casts(True))


def _fp8_step(framework: Framework) -> float:
    cluster = parse_cluster("1x8xh100-sxm5-80gb", CAT)
    wl = Training(batch=16, seq_len=8192, dtype=DType.FP8, recompute=Recompute.FULL)
    m = Mapping(dp=8, zero=ZeroStage.PARAMETERS, micro_batch=2, recompute=Recompute.FULL)
    e = estimate(L8, cluster, wl, m, framework=framework)
    return sum(v for k, v in e.time.items() if k.endswith("/fp8_cast"))


def test_torchao_fp8_pays_its_casts_under_a_fusing_compiler() -> None:
    """torch-compile fuses elementwise work, and folded every cast into its producer (0 s);
    on the PyTorch memory stack (torchao Float8Linear, dynamic scaling) the casts now cost
    their memory pass: read 16 bits, write the FP8 copy and its transpose."""
    assert _fp8_step(Framework.TORCH_COMPILE) > 0.0


def _profile(framework: Framework, tp: int) -> tuple[float, float]:
    from accelmap.cost.framework import profile as framework_profile

    fw = framework_profile(framework)
    dev = Device.of(H100)
    wl = Training(batch=8, seq_len=4096)
    m = Mapping(dp=8 // tp, tp=tp, tp_comm_overlap=tp > 1, sequence_parallel=tp > 1)
    prof = layer_profile(L8, dev, fw, wl, m)
    margin = sum(float(t.total_s) for t in prof.forward + prof.backward
                 if t.op.name.startswith("layers/") and t.op.gemm is not None
                 and ((t.op.stage in (Stage.FORWARD, Stage.RECOMPUTE)
                       and any(k in t.op.name for k in ("attention/out", "mlp/down")))
                      or (t.op.stage in (Stage.BACKWARD_DGRAD, Stage.BACKWARD_WGRAD)
                          and any(k in t.op.name for k in ("attention/qkv", "mlp/up")))))
    return prof.layer_tp_overlap_s, margin / L8.n_layers


def test_transformer_engine_tp_overlap_costs_its_sm_margin() -> None:
    """TE's pipelined and bulk overlaps run the proj/fc2 forward and the qkv/fc1 dgrad and wgrad
    GEMMs on SMs - 16 (initialize_ub defaults): by hand, their time x 16 / (132 - 16)."""
    cost, margin = _profile(Framework.MEGATRON, 8)
    sms = H100.compute_units.count.value  # type: ignore[union-attr]
    assert sms == 132 and margin > 0
    assert cost == pytest.approx(margin * UB_SM_MARGIN / (sms - UB_SM_MARGIN), rel=1e-9)
    # no overlap without tp; PyTorch's async TP copies on the copy engines, no margin
    assert _profile(Framework.MEGATRON, 1)[0] == 0.0
    assert _profile(Framework.TORCH_COMPILE, 8)[0] == 0.0


def test_tp_comm_hidden_by_the_overlap_adds_no_nccl_contention() -> None:
    """The overlapped TP collectives are peer-to-peer copies on the copy engines: the step's
    contention term comes from the data-parallel collectives alone, so it is the same with
    and without the TP overlap (the overlap's own price is the SM margin above)."""
    cluster = parse_cluster("1x8xh100-sxm5-80gb", CAT)
    wl = Training(batch=8, seq_len=4096)
    times = [estimate(L8, cluster, wl, Mapping(dp=1, tp=8, sequence_parallel=True,
                                               tp_comm_overlap=o),
                      framework=Framework.MEGATRON).time for o in (False, True)]
    assert times[0].get("contention", 0.0) == pytest.approx(times[1].get("contention", 0.0))
    assert times[1]["exposed_comm/tp"] < times[0]["exposed_comm/tp"]


def test_each_tp_collective_hides_only_behind_its_own_gemm() -> None:
    """An overlapped all-gather feeds its block's input GEMMs and a reduce-scatter drains its
    output GEMM: per layer 8 pairs (forward and dgrad, attention and MLP), each collective
    exposed beyond its partner. Llama 3.1 8B at tp 8: the attention's output GEMM (4096 x 512
    per rank) is shorter than its reduce-scatter, so the overlap leaves TP time exposed where
    hiding behind the sum of the GEMMs left none."""
    from accelmap.cost.framework import profile as framework_profile

    prof = layer_profile(L8, Device.of(H100), framework_profile(Framework.MEGATRON),
                         Training(batch=8, seq_len=4096),
                         Mapping(dp=1, tp=8, tp_comm_overlap=True, sequence_parallel=True))
    pairs = prof.layer_tp_pairs
    assert len(pairs) == 8 and sum(pairs) == pytest.approx(
        sum(float(t.total_s) for t in prof.forward + prof.backward
            if t.op.gemm is not None and t.op.name.startswith("layers/")
            and t.op.stage in (Stage.FORWARD, Stage.BACKWARD_DGRAD)) / L8.n_layers)
    attn_in, attn_out, mlp_in, mlp_out = pairs[:4]
    assert attn_out < attn_in < mlp_out < mlp_in  # out 4096x512, qkv 4096x768, up 4096x3584
    cluster = parse_cluster("1x8xh100-sxm5-80gb", CAT)
    e = estimate(L8, cluster, Training(batch=8, seq_len=4096),
                 Mapping(dp=1, tp=8, tp_comm_overlap=True, sequence_parallel=True),
                 framework=Framework.MEGATRON)
    margin = 8 * L8.n_layers * prof.layer_tp_overlap_s  # 8 micro-batches of 1 sequence
    assert e.time["exposed_comm/tp"] > 1.05 * margin


def _fsdp_pp(framework: Framework, batch: int) -> tuple[float, float]:
    """Seconds of data-parallel traffic per step (all, exposed) of Llama 3.1 70B under FSDP
    (ZeRO-3) with pp 4 on 32 H100, one micro-batch of one sequence each."""
    cluster = parse_cluster("4x8xh100-sxm5-80gb", CAT)
    wl = Training(batch=batch, seq_len=4096, dtype=DType.BF16, recompute=Recompute.FULL)
    m = Mapping(dp=4, tp=2, pp=4, zero=ZeroStage.PARAMETERS, micro_batch=1,
                recompute=Recompute.FULL)
    e = estimate(CAT.models["llama-3.1-70b"], cluster, wl, m, framework=framework)
    return float(e.metrics["communication_s"]["dp"]), float(e.time["exposed_comm/dp"])


def test_pytorch_fsdp_under_pp_gathers_once_a_step() -> None:
    """PyTorch FSDP keeps a pipeline stage's parameters gathered across its micro-batches
    (torchtitan: no reshard after forward with pp; gradients synced on the last micro-batch):
    its data-parallel traffic is one all-gather and one reduce-scatter a step, whatever the
    micro-batch count, as the memory it is charged (the stage held gathered) says. ZeRO-3
    without that (the Megatron profile) gathers every micro-batch: traffic grows with them."""
    once_8, once_16 = _fsdp_pp(Framework.FSDP, 32), _fsdp_pp(Framework.FSDP, 64)
    each_8, each_16 = _fsdp_pp(Framework.MEGATRON, 32), _fsdp_pp(Framework.MEGATRON, 64)
    assert once_8[0] == pytest.approx(once_16[0], rel=1e-9)
    assert once_8[1] == pytest.approx(once_16[1], rel=1e-9)
    assert each_16[0] == pytest.approx(2 * each_8[0], rel=1e-6)
    # one gather + one reduce-scatter a step, against two gathers + one per micro-batch
    assert once_8[0] < each_8[0] / 8
