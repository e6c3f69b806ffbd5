"""Backward, recompute and optimizer operators, derived from the forward graph.

- Every GEMM Y = X W has two backward GEMMs of the same FLOPs: dX = dY W^T (activation gradient,
  "dgrad") and dW = X^T dY (weight gradient, "wgrad"), so backward = 2 x forward for matmuls
  (Kaplan et al. 2020 sec. 2.1; Narayanan et al. 2021 sec. 5.1). wgrad accumulates into the
  gradient buffer (read + write in ``grad_dtype``).
- FlashAttention's backward recomputes the scores: 5 matmuls against the forward's 2, i.e. 2.5x
  the forward FLOPs of which 2x are model FLOPs (Dao 2023, FlashAttention-2, sec. 3.1.2).
- Vector ops read the output gradient and their saved input and write the input gradient: twice
  the forward traffic.
- Frozen weights (LoRA/QLoRA base, ops/adapters.py): the activation gradient still flows
  through them, but no weight gradient is formed, so their wgrad GEMM (and the embedding's
  gradient scatter) is skipped; a QLoRA dequantization runs once more for the dgrad GEMM
  (bitsandbytes ``MatMul4Bit.backward`` dequantizes the weight again).
- Recompute: selective re-runs the attention core (Korthikanti et al. 2022 sec. 5); with
  FlashAttention that is already inside the backward kernel, so it costs nothing extra; full
  recompute re-runs every layer's forward once; DeepSeek-V3's re-runs the norms, MLA's
  up-projections and the MoE SwiGLU (``norm_up_split``).
- Optimizer step, bytes per parameter: read + write each fp32 state (8 per state), read + write
  the fp32 master copy and write the 16-bit working copy (10) -- or, without a master copy,
  read + write the weights in their own dtype -- and read the gradient (g). Mixed precision:
  AdamW 26 + g, SGD-momentum and Lion 18 + g, Adafactor 10 + g. FLOPs per parameter: AdamW 12,
  Lion 6, SGD 4, Adafactor 10 (update arithmetic of each paper's algorithm box, rounded up).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelmap.ops.graph import ByteKind, Op, Stage, Unit
from accelmap.units import DType
from accelmap.workload import Optimizer, Recompute, Training

FLASH_BACKWARD_FACTOR = 2.5  # FlashAttention-2 backward: 5 matmuls vs 2 in forward

OPTIMIZER_FLOPS = {Optimizer.ADAMW: 12.0, Optimizer.SGD: 4.0, Optimizer.LION: 6.0,
                   Optimizer.ADAFACTOR: 10.0}


def backward_ops(forward: list[Op], grad_dtype: DType) -> list[Op]:
    out: list[Op] = []
    for op in forward:
        act = op.bytes.get(ByteKind.ACTIVATIONS, 0.0)
        if op.unit is Unit.MATRIX and op.gemm is not None:
            m, n, k = op.gemm
            weights = op.bytes.get(ByteKind.WEIGHTS, 0.0)
            # parameters from the bytes streamed, in the dtype the weights are stored in (bf16
            # for fp8 training: the fp8 copy is cast per step), not the compute dtype
            params = weights / (op.weight_dtype or op.dtype).bytes
            out.append(replace(op, name=f"{op.name}/dgrad", stage=Stage.BACKWARD_DGRAD,
                               gemm=(m, k, n), saved=0.0,
                               bytes={ByteKind.WEIGHTS: weights, ByteKind.ACTIVATIONS: act}))
            if op.frozen:
                continue
            grads = 2.0 * params * grad_dtype.bytes  # read-modify-write the accumulator
            out.append(replace(op, name=f"{op.name}/wgrad", stage=Stage.BACKWARD_WGRAD,
                               gemm=(k, n, m), saved=0.0,
                               bytes={ByteKind.ACTIVATIONS: act, ByteKind.GRADIENTS: grads}))
        elif op.unit is Unit.MATRIX:  # attention core (flash or naive scores/context)
            flash = op.name.endswith("/core")
            factor = FLASH_BACKWARD_FACTOR if flash else 2.0
            out.append(replace(op, name=f"{op.name}/backward", stage=Stage.BACKWARD_DGRAD,
                               flops=factor * op.flops, model_flops=2.0 * op.flops, saved=0.0,
                               bytes={k: 2.0 * v for k, v in op.bytes.items()}))
        elif op.name == "embedding" and op.frozen:
            continue
        elif op.name.endswith("/dequant"):  # dequantized again for the dgrad GEMM
            out.append(replace(op, name=f"{op.name}/backward", stage=Stage.BACKWARD_DGRAD,
                               saved=0.0))
        elif op.name == "embedding":
            rows = op.bytes.get(ByteKind.ACTIVATIONS, 0.0)
            out.append(replace(op, name="embedding/wgrad", stage=Stage.BACKWARD_WGRAD, saved=0.0,
                               bytes={ByteKind.ACTIVATIONS: rows,
                                      ByteKind.GRADIENTS: 2.0 * rows / op.dtype.bytes
                                      * grad_dtype.bytes}))
        else:
            out.append(replace(op, name=f"{op.name}/backward", stage=Stage.BACKWARD_DGRAD,
                               flops=2.0 * op.flops, saved=0.0,
                               bytes={k: 2.0 * v for k, v in op.bytes.items()}))
    return out


# routed experts run as one grouped GEMM (``torch._grouped_mm``), which is not ``aten.mm``
_GROUPED = "/experts/"


def _scaled(op: Op, share: float) -> Op:
    """The part ``share`` of a (fused) GEMM's output columns, as a recompute op."""
    gemm = None if op.gemm is None else (op.gemm[0], op.gemm[1] * share, op.gemm[2])
    return replace(op, name=f"{op.name}/recompute", stage=Stage.RECOMPUTE, saved=0.0,
                   model_flops=0.0, flops=op.flops * share, gemm=gemm, parts=None,
                   bytes={k: v * share for k, v in op.bytes.items()},
                   dequant_flops=op.dequant_flops * share)


def per_op_split(forward: list[Op], act_bytes: float) -> tuple[float, list[Op]]:
    """torchtitan's per-op selective activation checkpointing (``selective_ac_option = "op"``,
    the llama3 train configs' default; ``_apply_op_sac`` and ``_save_list`` in torchtitan's
    activation-checkpoint code): inside each transformer block the outputs of SDPA and of the
    odd-numbered ``aten.mm`` calls (the block's 1st, 3rd, ... nn.Linear: wq, wv, w1, w2 in a
    Llama block) are kept; every other op -- the even-numbered linears (wk, wo, w3), norms,
    RoPE, activation functions, grouped expert GEMMs -- re-runs in the backward. Returns the
    bytes the layer ops keep (summed over their layers; each block's checkpointed input is not
    included) and the recompute ops."""
    kept, ops = 0.0, []
    layer_ops = [o for o in forward if o.name.startswith("layers/")]
    first = layer_ops[0].name if layer_ops else ""
    count = 0
    for i, o in enumerate(layer_ops):
        if o.name == first:
            count = 0  # a new block (layer group): torchtitan's counter is per block
        if o.attention_core:
            if o.name.endswith("core"):  # SDPA's output O: the input of this block's out proj.
                out = next((x for x in layer_ops[i + 1:] if x.name.endswith("attention/out")),
                           None)
                if out is not None and out.gemm is not None:
                    kept += out.gemm[0] * out.gemm[2] * act_bytes * o.count
            continue
        if o.gemm is None or _GROUPED in o.name:
            ops.append(_scaled(o, 1.0))
            continue
        widths = o.parts or (o.gemm[1],)
        recomputed = 0.0
        for w in widths:
            count += 1
            if count % 2:  # odd: kept
                kept += o.gemm[0] * w * act_bytes * o.count
            else:
                recomputed += w
        if recomputed:
            ops.append(_scaled(o, recomputed / sum(widths)))
    return kept, ops


# GEMMs whose input is a norm's output: under DeepSeek-V3's policy the norm re-runs in the
# backward, so they keep nothing of their own (MLA's down-projections and the router read the
# norm; q is MLA without a query LoRA, qkv other attention, mlp/up and shared/up the FFNs')
_NORM_FED = ("attention/q_down", "attention/q", "attention/kv_down", "attention/qkv",
             "mlp/up", "moe/router", "moe/shared/up")
_MLA_UP = ("attention/q_up", "attention/kv_up")
_SWIGLU = ("moe/experts/act", "moe/shared/act")
_SWIGLU_FED = ("moe/experts/down", "moe/shared/down")


def norm_up_split(forward: list[Op], fp8_cache: bool = False) -> tuple[float, list[Op]]:
    """DeepSeek-V3's activation memory policy (arXiv:2412.19437): "We recompute all RMSNorm
    operations and MLA up-projections during back-propagation, thereby eliminating the need to
    persistently store their output activations" (sec. 3.2.3), and "we cache the inputs of the
    SwiGLU operator and recompute its output in the backward pass. These activations are also
    stored in FP8" (sec. 3.3.4, MoE). So the GEMMs a norm feeds keep nothing (``_NORM_FED``),
    MLA's attention keeps its output O and not the Q, K and V that the up-projections make
    from the kept latents, the MoE down-projections keep nothing and the SwiGLU input is kept
    (in FP8 with ``fp8_cache``: FP8 training); the norms' inputs and the rest are kept.
    Returns the bytes the layer ops keep (summed over their layers) and the recompute ops (the
    norms, the up-projection GEMMs and the SwiGLUs). FlashAttention's softmax statistics (fp32,
    one per head and row, under 2 % of O) are not counted."""
    kept, ops = 0.0, []
    layer_ops = [o for o in forward if o.name.startswith("layers/")]
    mla = any(o.name.endswith(_MLA_UP) for o in layer_ops)
    for i, o in enumerate(layer_ops):
        name = o.name.removeprefix("layers/")
        if name.endswith("norm"):
            ops.append(_scaled(o, 1.0))
            kept += float(o.saved) * o.count
        elif name in _NORM_FED or name in _SWIGLU_FED:
            continue
        elif name in _MLA_UP:
            ops.append(_scaled(o, 1.0))
            kept += float(o.saved) * o.count
        elif name in _SWIGLU:
            ops.append(_scaled(o, 1.0))
            # kept in FP8 under FP8 training (one byte for the activation dtype's)
            fp8 = min(DType.FP8.bytes / o.dtype.bytes, 1.0) if fp8_cache else 1.0
            kept += float(o.saved) * o.count * fp8
        elif mla and name == "attention/core":  # O only: the input of the out projection
            out = next((x for x in layer_ops[i + 1:] if x.name.endswith("attention/out")), None)
            o_bytes = (float(out.gemm[0] * out.gemm[2]) * o.dtype.bytes
                       if out is not None and out.gemm is not None else float(o.saved))
            kept += min(o_bytes, float(o.saved)) * o.count
        else:
            kept += float(o.saved) * o.count
    return kept, ops


def recompute_ops(forward: list[Op], policy: Recompute, flash: bool) -> list[Op]:
    if policy is Recompute.NONE:
        return []
    if policy is Recompute.PER_OP:
        return per_op_split(forward, 0.0)[1]
    if policy is Recompute.NORM_UP:
        return norm_up_split(forward)[1]
    if policy is Recompute.SELECTIVE:
        if flash:
            return []  # already recomputed inside the flash backward kernel
        chosen = [o for o in forward if o.attention_core]
    else:
        chosen = [o for o in forward if o.name.startswith("layers/")]
    return [replace(o, name=f"{o.name}/recompute", stage=Stage.RECOMPUTE, saved=0.0,
                    model_flops=0.0) for o in chosen]


def grad_accumulation_ops(params: Any, wl: Training) -> list[Op]:
    """One micro-batch's gradient-accumulation pass of a stack that adds gradients up in a
    kernel of its own (``workload.GradAccumulation``; none when the wgrad GEMM accumulates)."""
    per_param = wl.grad_accumulation.bytes_per_param
    if not per_param:
        return []
    return [Op(
        name=f"grad_accumulation/{wl.grad_accumulation.value}", unit=Unit.VECTOR,
        dtype=DType.FP32, flops=params, stage=Stage.BACKWARD_WGRAD,
        bytes={ByteKind.GRADIENTS: per_param * params}, model_flops=0.0,
    )]


def optimizer_ops(params: Any, wl: Training) -> list[Op]:
    states = 2 * 4.0 * wl.optimizer.fp32_states
    if wl.master_dtype is not wl.storage_dtype:
        weights = 2 * wl.master_dtype.bytes + wl.storage_dtype.bytes
    else:
        weights = 2 * wl.storage_dtype.bytes
    bytes_per_param = states + weights + wl.grad_dtype.bytes
    return [Op(
        name=f"optimizer/{wl.optimizer.value}", unit=Unit.VECTOR, dtype=DType.FP32,
        flops=OPTIMIZER_FLOPS[wl.optimizer] * params, stage=Stage.OPTIMIZER,
        bytes={ByteKind.OPTIMIZER: bytes_per_param * params}, model_flops=0.0,
    )]
