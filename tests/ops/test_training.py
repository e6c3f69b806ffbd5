"""Backward operators: byte counts checked by hand on Llama 2 13B's fused QKV projection."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.ops.graph import ByteKind
from accelmap.ops.step import training_ops
from accelmap.ops.training import optimizer_ops
from accelmap.units import DType
from accelmap.workload import Optimizer, Training


@pytest.mark.parametrize("dtype", [DType.BF16, DType.FP8])
def test_wgrad_accumulates_one_gradient_per_parameter(catalog: Catalog, dtype: DType) -> None:
    # Llama 2 13B: hidden 5120, 40 heads of 128, no GQA -> QKV weight 5120 x 15360 parameters.
    # wgrad reads and writes the fp32 accumulator once per parameter: 2 x 4 B x 78,643,200.
    # FP8 training keeps bf16 weights, so the count must not change with the compute dtype.
    ops = {o.name: o for o in training_ops(catalog.models["llama-2-13b"],
                                           Training(batch=1, seq_len=4096, dtype=dtype))}
    wgrad = next(o for name, o in ops.items() if name.endswith("attention/qkv/wgrad"))
    assert wgrad.bytes[ByteKind.GRADIENTS] == pytest.approx(2 * 4 * 5120 * 15360)


@pytest.mark.parametrize(("optimizer", "master", "want"), [
    # mixed precision (bf16 weights, fp32 master): AdamW 2 states x 8 + master 8 + copy 2 + grad 4
    (Optimizer.ADAMW, DType.FP32, 16 + 10 + 4),
    (Optimizer.SGD, DType.FP32, 8 + 10 + 4),
    # pure bf16 (no master copy): AdamW states 16 + weights read/write 4 + grad 4
    (Optimizer.ADAMW, DType.BF16, 16 + 4 + 4),
])
def test_optimizer_step_bytes_per_parameter(optimizer: Optimizer, master: DType,
                                            want: float) -> None:
    wl = Training(batch=1, seq_len=1, optimizer=optimizer, master_dtype=master)
    (op,) = optimizer_ops(1000.0, wl)
    assert op.bytes[ByteKind.OPTIMIZER] == pytest.approx(want * 1000)
