"""Eager PyTorch on a CPU: the framework profile ``eager-cpu`` (``cost/framework.py``), what a
CPU training step or a ``validate --local`` run on a CPU pays beyond the roofline, as named
behaviour of the stack. Nothing here is fitted to a machine: each figure is either a property of
PyTorch's eager code or measured on the user's device by ``accelmap measure`` and carried by the
calibration profile.

- **The host is the device.** On a GPU the Python thread queues kernels and runs ahead of them,
  so only launch gaps show; on a CPU the same cores dispatch and compute, so every dispatched
  aten op (views, transposes, splits and the autograd bookkeeping included) costs its dispatch
  time in series with the arithmetic. Time per graph op = roofline body + dispatches x seconds
  per dispatch.
- **Dispatches per graph op** (``dispatches``): how many aten ops eager PyTorch dispatches for
  one operator of the graph, forward and backward, as the reference eager transformer runs them
  (``measure/torch_model.py``: ``nn.Linear``, ``nn.LayerNorm`` or a written-out RMSNorm,
  ``F.scaled_dot_product_attention``, rotary written out, ``F.cross_entropy``, fused AdamW),
  counted with a ``TorchDispatchMode`` on torch 2.x; ``tests/cost/test_eager_cpu.py`` recounts
  whole models against this table.
- **Seconds per dispatch** (``CalibrationProfile.dispatch_s``): measured by ``accelmap measure
  overhead`` on a micro transformer whose arithmetic is negligible, as its step time over its
  dispatch count (forward passes under ``inference_mode``; backward and optimizer apart), so it
  holds Python, the dispatcher, allocation, autograd and the thread pool's fork/join on this
  machine. Unmeasured: ``DEFAULT_DISPATCH_S``.
- **Attention**: PyTorch's SDPA on a CPU runs ``_scaled_dot_product_flash_attention_for_cpu``
  (a blocked flash kernel, fp32/bf16, no dropout; aten/src/ATen/native/cpu/FlashAttentionKernel
  .cpp), whose efficiency is measured by ``accelmap measure attention``
  (``CalibrationProfile.attention_curve``); unmeasured, the roofline's GEMM-relative rule.
- **Cross-entropy**: ``F.cross_entropy`` on fp32 logits keeps the fp32 log-softmax and, in its
  backward, that output, the incoming and the outgoing gradient at once
  (``workload.Loss.EAGER``: three fp32 buffers of the logits' size).
- **Memory**: no CUDA context and no caching allocator. PyTorch's CPU allocator takes every
  tensor from the C library (``c10/core/impl/alloc_cpu.cpp``: ``posix_memalign``, 64-byte
  aligned) and gives it back when the last reference goes; glibc serves blocks above its mmap
  threshold with ``mmap`` and unmaps them on free (mallopt(3)), so the peak is the live tensors
  (``cost/execution.py``: class cpu). What eager execution keeps alive that a fused stack does
  not: an elementwise op's output next to its input (``memory.budget.UNFUSED_TRANSIENTS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Micro-benchmark of one small eager op on a CPU (PyTorch operator_benchmark, split 8x8 on a
# CPU: 2.3-3.4 us per forward, pytorch/pytorch#32194); used only where nothing was measured.
DEFAULT_DISPATCH_S = 3e-6
DISPATCH_SOURCE = "eager op on a CPU, ~3 us (PyTorch operator_benchmark, pytorch/pytorch#32194)"

# Dispatched aten ops per graph op, (forward, backward), for the reference eager transformer.
# Forward counts are those of a pass under ``inference_mode`` (a Linear is one ``linear``; under
# autograd it is view, t, addmm, view) and the backward counts include the AccumulateGrad of
# each parameter. Keys are graph op names, matched by their end (ops/graph.py).
LINEAR = (1, 6)  # linear; per backward GEMM (dgrad, wgrad): view, t, mm, sum, detach
DISPATCHES: dict[str, tuple[float, float]] = {
    "embedding": (1, 2),  # embedding; embedding_dense_backward, detach
    "norm": (1, 3),  # layer_norm; native_layer_norm_backward, detach x2 (weight, bias)
    "final_norm": (1, 3),
    # linear, split, view x3, transpose x3; their backward: clone/_unsafe_view/transpose x3,
    # cat (the split's backward) and the linear's
    "attention/qkv": (8, 6 + 5),
    "attention/core": (3, 8),  # sdpa, transpose, reshape; sdpa backward + copies and adds
    "attention/out": LINEAR, "mlp/up": LINEAR, "mlp/down": LINEAR, "lm_head": LINEAR,
    "mlp/act": (1, 1),  # gelu/silu; *_backward
    "residual": (1, 1),  # add; the gradient add where the branches meet
    "loss": (5, 4),  # float, flatten x2, log_softmax, nll_loss; nll/log_softmax backward
    "optimizer": (0, 6),  # fused AdamW (one kernel over all parameters), step add, zero_grad
}
RMSNORM = (10, 18)  # written out: float, pow, mean, add, rsqrt, mul, to, mul (and backward)
GATED_ACT = (3, 4)  # chunk, silu, mul; their backward
ROPE = (2 * 22, 2 * 15)  # written out for q and k: arange x2, outer, cos, sin, slices, cat ...
GQA_REPEAT = (4, 4)  # repeat_interleave of K and V
KV_CACHE = 6  # per layer in serving: slice x4, copy_ x2 (write this step's K/V, read the cache)
LEARNED_POSITIONS = (3, 2)  # arange, embedding, add
MOE_ROUTER = (10, 10)  # linear, float, softmax, topk, gather, sum, div, to, zeros_like ...
# per routed expert: (chosen == e), nonzero, index of its rows, then its MLP; after the down
# projection the routing weights are indexed, multiplied and index_add_-ed into the output
EXPERT_IN, EXPERT_OUT = (3, 3), (4, 3)
LAST_TOKEN = 2  # serving: select the last position and argmax the next token


@dataclass(frozen=True)
class Dispatches:
    """Dispatches per graph op of one model in eager PyTorch (``for_model``)."""

    table: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DISPATCHES))

    def of(self, name: str, backward: bool, serving: bool = False) -> float:
        """Aten ops dispatched for graph op ``name`` (its backward op with ``backward``)."""
        base = name.removesuffix("/backward").removesuffix("/dgrad").removesuffix("/wgrad")
        base = base.removesuffix("/recompute")
        for key in sorted(self.table, key=len, reverse=True):
            if base == key or base.endswith("/" + key) or base.startswith(key + "/"):
                fwd, bwd = self.table[key]
                if backward:
                    return bwd
                if serving and key == "attention/core":
                    return fwd + KV_CACHE
                if serving and key == "lm_head":
                    return fwd + LAST_TOKEN
                return fwd
        return 1.0 if not backward else 2.0  # an op the table does not know: one, and its grad


def for_model(spec: Any) -> Dispatches:
    """The table for ``spec``'s implementation choices: RMSNorm written out, gated MLPs, rotary
    positions, grouped K/V repeated for the scores, learned positions, QK-norm, a Python loop
    over the routed experts of an MoE layer."""
    from accelmap.models.schema import FFNKind, NormKind, PositionKind

    t = dict(DISPATCHES)
    if spec.norm is not NormKind.LAYERNORM:
        t["norm"] = t["final_norm"] = RMSNORM
    if spec.ffn_kind is FFNKind.GATED:
        t["mlp/act"] = GATED_ACT
    if spec.position is PositionKind.ROPE:
        t["attention/rope"] = ROPE
    if spec.kv_heads != spec.n_heads and spec.mla is None:
        f, b = t["attention/core"]
        t["attention/core"] = (f + GQA_REPEAT[0], b + GQA_REPEAT[1])
    if spec.position is PositionKind.LEARNED:
        f, b = t["embedding"]
        t["embedding"] = (f + LEARNED_POSITIONS[0], b + LEARNED_POSITIONS[1])
    if spec.qk_norm:  # an RMSNorm over the head dim on q and on k
        f, b = t["attention/core"]
        t["attention/core"] = (f + 2 * RMSNORM[0], b + 2 * RMSNORM[1])
    if spec.moe is not None:  # the graph's expert ops stand for all the layer's experts
        e = spec.moe.num_experts
        t["moe/router"] = MOE_ROUTER
        t["experts/up"] = (e * (LINEAR[0] + EXPERT_IN[0]), e * (LINEAR[1] + EXPERT_IN[1]))
        t["experts/act"] = (e * t["mlp/act"][0], e * t["mlp/act"][1])
        t["experts/down"] = (e * (LINEAR[0] + EXPERT_OUT[0]), e * (LINEAR[1] + EXPERT_OUT[1]))
        for part in ("up", "act", "down"):
            t[f"shared/{part}"] = t[f"mlp/{part}"]
    return Dispatches(t)

