"""Fused elementwise ops: folded into a neighbour (no pass, no launch) or fused into kernels of
their own (torch.compile's Inductor: one memory pass each, no launch of their own)."""

from __future__ import annotations

from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.cost.roofline import Device, time_op
from accelmap.ops.graph import ByteKind, Op, Unit
from accelmap.units import DType

ELEMS = 16384 * 4096  # a 16k-token micro-batch of an 8B model's residual stream


def _norm() -> Op:
    return Op(name="layers/mlp/norm", unit=Unit.VECTOR, dtype=DType.BF16, count=1,
              flops=4.0 * ELEMS, bytes={ByteKind.ACTIVATIONS: 2.0 * ELEMS * 2}, fusable=True)


def test_inductor_keeps_the_memory_pass_but_no_launch(catalog: Catalog) -> None:
    dev = Device.of(catalog.accelerators["h100-sxm5-80gb"])
    fw = framework_profile(Framework.TORCH_COMPILE)
    assert fw.fuses_elementwise and fw.fused_pass
    t = time_op(_norm(), dev, fw)
    assert t.fused
    assert t.memory_s == (2.0 * ELEMS * 2) / dev.bandwidth  # one read and one write per element
    assert t.time_s == t.memory_s  # no launch of its own, arithmetic hidden


def test_stacks_folding_into_neighbours_pay_nothing(catalog: Catalog) -> None:
    dev = Device.of(catalog.accelerators["h100-sxm5-80gb"])
    fw = framework_profile(Framework.TENSORRT_LLM)
    assert fw.fuses_elementwise and not fw.fused_pass
    assert time_op(_norm(), dev, fw).time_s == 0.0


def test_an_unfused_stack_pays_pass_and_launch(catalog: Catalog) -> None:
    dev = Device.of(catalog.accelerators["h100-sxm5-80gb"])
    fw = framework_profile(Framework.FSDP)
    t = time_op(_norm(), dev, fw)
    assert not t.fused and t.time_s > (2.0 * ELEMS * 2) / dev.bandwidth
