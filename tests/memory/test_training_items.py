"""Training memory items: how the stacks lay out model states (memory.stack), offload, FP8, the
allocator's reserve and the fits / tight / over classification."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from accelmap.catalog import Catalog
from accelmap.engine import estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping, ZeroStage
from accelmap.memory.allocator import ALLOCATOR_FRAGMENTATION, CUDA_CONTEXT_BYTES
from accelmap.memory.band import MEMORY_ERROR_BAND, MemoryFit, is_over, is_tight, memory_fit
from accelmap.memory.budget import MemoryBudget, master_bytes_per_param
from accelmap.memory.stack import MEGATRON, PYTORCH, FP8Weights, fp8_weights
from accelmap.memory.training import training_items
from accelmap.units import DType
from accelmap.workload import Loss, Training

P, LAYER = 8e9, 2e8


def items(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        params=P, layer_params=LAYER, zero=3, zero_shards=8, weight_bytes=2.0, grad_bytes=4.0,
        master_bytes=4.0, state_bytes=8.0, offload_optimizer=False, offload_params=False,
        layer_acts=1e9, working=0.0, ends_acts=0.0, logits=0.0, world=8,
        stage_layer_params=0.9 * P)
    return training_items(**{**base, **kw})


def test_fsdp_keeps_one_fp32_shard_per_parameter() -> None:
    """FSDP2 mixed precision: the sharded fp32 parameter is the master; 16 B / N in all
    (4 fp32 param + 4 fp32 grad + 8 Adam), no 16-bit shard (torchtitan parallelize_llama.py)."""
    fsdp = items(stack=PYTORCH)
    assert float(fsdp["weights"]) == 0.0
    states = sum(float(fsdp[k]) for k in ("gradients", "optimizer/master_weights",
                                          "optimizer/states"))
    assert states == pytest.approx(16 * P / 8)
    deepspeed_like = items(stack=MEGATRON)  # a 16-bit shard besides the fp32 master
    assert float(deepspeed_like["weights"]) == pytest.approx(2 * P / 8)


def test_zero_offload_moves_gradients_and_params_counted_once() -> None:
    """ZeRO-Offload (Ren et al. 2021 sec. 4.1): with the optimizer on the host the gradients go
    there too; ZeRO-Infinity keeps only the layers in use, counted once (as gathered)."""
    off = items(offload_optimizer=True)
    assert float(off["gradients"]) == 0.0 and float(off["optimizer/states"]) == 0.0
    both = items(offload_optimizer=True, offload_params=True)
    assert float(both["weights"]) == 0.0
    assert float(both["zero3/gathered_params"]) == pytest.approx(2 * LAYER * 2.0)


def test_fsdp_under_pipelining_keeps_the_stage_gathered() -> None:
    """torchtitan does not reshard after forward under PP, and the pipelining schedule defers
    the gradient reduce-scatter to the last micro-batch: the stage's layers stay gathered in
    16 bits with fp32 unsharded gradients (FSDP2 to_accumulated_grad_if_needed)."""
    pp = items(stack=PYTORCH, pp=4)
    assert float(pp["zero3/gathered_params"]) == pytest.approx(0.9 * P * 2.0)
    assert float(pp["zero3/unsharded_grads"]) == pytest.approx(0.9 * P * 4.0)
    flat = items(stack=PYTORCH, pp=1)
    assert float(flat["zero3/unsharded_grads"]) == 0.0
    assert float(flat["zero3/gathered_params"]) == pytest.approx(2 * LAYER * 2.0)
    megatron = items(stack=MEGATRON, pp=4)
    assert float(megatron["zero3/unsharded_grads"]) == 0.0


def test_transformer_engine_fp8_weight_copies() -> None:
    """TE keeps an FP8 copy and transpose per GEMM weight across micro-batches (2 B); with FP8
    primary weights the weight is FP8 and only the transpose is cached (1 B + 1 B)."""
    wl = Training(dtype=DType.FP8)
    assert fp8_weights(wl, MEGATRON) == FP8Weights(cache=2.0)
    assert fp8_weights(Training(dtype=DType.FP8, fp8_params=True), MEGATRON) == FP8Weights(
        cache=1.0, storage=1.0)
    assert fp8_weights(wl, PYTORCH) == FP8Weights()  # torchao casts per forward
    assert fp8_weights(Training(), MEGATRON) == FP8Weights()
    gemm = 0.9 * P
    cached = items(zero=1, zero_shards=1, fp8=FP8Weights(cache=2.0))
    assert float(cached["fp8/weight_cache"]) == pytest.approx(2 * gemm)
    primary = items(zero=1, zero_shards=1, fp8=FP8Weights(cache=1.0, storage=1.0))
    assert float(primary["weights"]) == pytest.approx(2 * (P - gemm) + 1 * gemm)


def test_master_copy_and_optimizer_storage() -> None:
    """fp32 master: 4 B; Apex DistributedFusedAdam's remainders: 2 B (the bf16 weight holds the
    high half); bf16 master beside FP8 weights: 2 B; none when weights are the master."""
    assert master_bytes_per_param(Training()) == 4.0
    assert master_bytes_per_param(Training(master_remainders=True)) == 2.0
    assert master_bytes_per_param(Training(dtype=DType.FP8, master_dtype=DType.BF16,
                                           fp8_params=True)) == 2.0
    assert master_bytes_per_param(Training(dtype=DType.FP32)) == 0.0
    assert Loss.FUSED.bytes_per_logit == 4.0 and Loss.EAGER.bytes_per_logit == 12.0


def test_runtime_items_are_the_cited_and_fitted_constants() -> None:
    it = items(layer_acts=10e9, logits=2e9)
    assert float(it["runtime/context"]) == CUDA_CONTEXT_BYTES
    dynamic = 10e9 + 2e9 + float(it["zero3/gathered_params"])
    assert float(it["runtime/fragmentation"]) == pytest.approx(ALLOCATOR_FRAGMENTATION
                                                               * dynamic)


def test_items_take_candidate_tables() -> None:
    zero = np.array([0, 1, 3])
    pp = np.array([1, 2, 4])
    it = items(zero=zero, pp=pp, stack=PYTORCH, offload_optimizer=np.array([False, True, False]))
    total = sum(np.broadcast_to(v, (3,)) for v in it.values())
    assert np.shape(total) == (3,)
    assert float(it["gradients"][1]) == 0.0


@pytest.mark.parametrize(("total", "fit"), [(70.0, MemoryFit.FITS), (76.0, MemoryFit.TIGHT),
                                            (84.0, MemoryFit.TIGHT), (90.0, MemoryFit.OVER)])
def test_fits_tight_over(total: float, fit: MemoryFit) -> None:
    """Within the error band of capacity either way is tight; beyond it, fits or over."""
    assert memory_fit(total, 80.0) is fit
    b = MemoryBudget(items={"x": total}, capacity=80.0)
    assert b.fit is fit and b.band == MEMORY_ERROR_BAND
    assert bool(b.over) is (fit is MemoryFit.OVER) and bool(b.tight) is (fit is MemoryFit.TIGHT)
    t = np.array([70.0, 76.0, 90.0])
    assert is_over(t, 80.0).tolist() == [False, False, True]
    assert is_tight(t, 80.0).tolist() == [False, True, False]


def test_estimate_carries_memory_fit(catalog: Catalog) -> None:
    """A plan over capacity but inside the band is tight and feasible; its JSON says so."""
    spec = catalog.models["llama-3.1-8b"]
    cl = parse_cluster("8xH100", catalog)
    e = estimate(spec, cl, Training(batch=16, seq_len=8192),
                 Mapping(dp=8, zero=ZeroStage.OPTIMIZER))
    mem = e.to_dict(ops=False)["memory"]
    assert mem["fit"] == e.memory_fit.value and mem["error_band"] == MEMORY_ERROR_BAND
    assert "Y0093" in mem["error_band_source"] and "margin_bytes" in mem
    assert e.feasible is (e.memory_fit is not MemoryFit.OVER)
