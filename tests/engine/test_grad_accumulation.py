"""A stack's gradient-accumulation pass (workload.GradAccumulation): its bytes, its time in a
step, and the Megatron-DeepSpeed stack that runs it (validate/stacks.py)."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.engine import estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping
from accelmap.ops.graph import ByteKind
from accelmap.ops.training import grad_accumulation_ops
from accelmap.units import DType
from accelmap.validate.stacks import Stack, defaults_for, training_stack
from accelmap.workload import GradAccumulation, Recompute, Training

CAT = load_catalog()


@pytest.mark.parametrize(("acc", "per_param"), [(GradAccumulation.FUSED, 0.0),
                                                (GradAccumulation.AUTOGRAD, 6.0),
                                                (GradAccumulation.FP32_COPY, 18.0)])
def test_pass_bytes(acc: GradAccumulation, per_param: float) -> None:
    ops = grad_accumulation_ops(1e9, Training(grad_accumulation=acc))
    moved = sum(op.bytes[ByteKind.GRADIENTS] for op in ops)
    assert moved == per_param * 1e9


def _step(acc: GradAccumulation, batch: int) -> object:
    cl = parse_cluster("2x8xa100-sxm4-80gb", CAT)
    wl = Training(batch=batch, seq_len=2048, grad_accumulation=acc, recompute=Recompute.FULL,
                  flash_attention=False)
    return estimate(CAT.models["gpt3-13b"], cl, wl, Mapping(tp=8, pp=2, micro_batch=1),
                    framework=framework_profile(Framework.MEGATRON))


def test_the_pass_runs_once_per_micro_batch_at_memory_speed() -> None:
    """16 micro-batches of a 13B model on pp 2 x tp 8 (~0.8 B parameters a device): the bf16
    optimizer's pass moves 18 B a parameter per micro-batch at the A100's achievable
    bandwidth; autograd's skips the first micro-batch, so one micro-batch costs nothing."""
    fused, copy = _step(GradAccumulation.FUSED, 16), _step(GradAccumulation.FP32_COPY, 16)
    extra = copy.metrics["step_time_s"] - fused.metrics["step_time_s"]  # type: ignore[attr-defined]
    tree = copy.metrics["time_breakdown_s"]  # type: ignore[attr-defined]
    assert tree["grad_accumulation"] > 0
    assert sum(tree.values()) == pytest.approx(copy.metrics["step_time_s"], rel=1e-9)  # type: ignore[attr-defined]
    # the pass on the critical stage (16 of them) plus its share of the pipeline bubble
    assert extra == pytest.approx(tree["grad_accumulation"] * 17 / 16, rel=0.05)
    params = 13e9 / 16
    per_mb = tree["grad_accumulation"] / 16
    assert 18 * params / per_mb == pytest.approx(1.7e12, rel=0.35)  # ~A100 achievable
    one_fused = _step(GradAccumulation.FUSED, 1).metrics["step_time_s"]  # type: ignore[attr-defined]
    one_auto = _step(GradAccumulation.AUTOGRAD, 1).metrics["step_time_s"]  # type: ignore[attr-defined]
    assert one_auto == pytest.approx(one_fused, rel=1e-12)


def test_megatron_deepspeed_stack_by_release_and_precision() -> None:
    assert training_stack("Megatron-DeepSpeed (BigScience fork)") is Stack.MEGATRON_DEEPSPEED
    assert training_stack("DeepSpeed + Megatron") is Stack.MEGATRON_DEEPSPEED
    assert training_stack("Megatron-LM (Jan 2021)") is Stack.MEGATRON_LM
    old, note = defaults_for(Stack.MEGATRON_DEEPSPEED, "0.6.1")
    new, _ = defaults_for(Stack.MEGATRON_DEEPSPEED, "0.6.2")
    assert note is not None and "0.5.4 to 0.6.1" in note
    # before PR #1801: autograd's 16-bit accumulation, reduced in 16 bits
    assert old.accumulation(DType.BF16) is GradAccumulation.AUTOGRAD
    assert old.gradient_dtype(DType.BF16) is DType.BF16
    assert old.gradient_dtype(DType.FP16) is DType.FP16
    # from it: bf16 through BF16_Optimizer's fp32 copies; fp16 as before
    assert new.accumulation(DType.BF16) is GradAccumulation.FP32_COPY
    assert new.gradient_dtype(DType.BF16) is DType.FP32
    assert new.accumulation(DType.FP16) is GradAccumulation.AUTOGRAD
    assert new.framework is Framework.MEGATRON and not new.sequence_parallel
    mid_2021 = defaults_for(Stack.MEGATRON_DEEPSPEED, year=2021)[0]
    assert mid_2021.accumulation(DType.BF16) is GradAccumulation.AUTOGRAD
    assert defaults_for(Stack.MEGATRON_DEEPSPEED, "0.5.3")[0] is mid_2021
    assert defaults_for(Stack.MEGATRON_DEEPSPEED, year=2022)[0] is new
