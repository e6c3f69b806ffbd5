"""What one (tp, ep, cp, micro-batch, recompute) choice costs on one device: the sharded
operator graph (models/geometry.py, ops/) timed by the roofline (cost/roofline.py), summarized
per average layer plus the embedding (first stage) and the head and loss (last stage). The
pipeline and data-parallel composition (engine/train.py) and the planner reuse one profile for
every pp, dp, vpp, ZeRO stage and offload choice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from accelmap.cost.energy import op_energy_j
from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.host import host_pass
from accelmap.cost.roofline import Device, OpTime, time_ops
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping
from accelmap.memory.budget import activation_bytes, optimizer_state_bytes_per_param
from accelmap.memory.stack import MEGATRON, memory_stack
from accelmap.models.flops import forward_flops_per_token
from accelmap.models.geometry import Geometry
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.adapters import adapt_forward, adapter_params
from accelmap.ops.graph import Op, Shape, Stage, causal_shape_context, forward_ops
from accelmap.ops.recipes import training_formats
from accelmap.ops.sparsity import sparse_training_ops
from accelmap.ops.step import training_precision
from accelmap.ops.training import backward_ops, recompute_ops
from accelmap.units import DType
from accelmap.workload import Adapters, Sparsity, Training


@dataclass(frozen=True)
class LayerProfile:
    """What one (tp, ep, cp, micro-batch, recompute) choice costs: per average layer of the
    sharded model, plus the embedding (first stage) and head + loss (last stage). Everything the
    pipeline/data-parallel composition needs, computed once from the operator graph."""

    T: float  # tokens per micro-batch per rank
    layer_fwd_s: float
    layer_bwd_s: float  # backward + recompute
    layer_wgrad_s: float  # the weight-gradient part of layer_bwd_s (ZB-H1's W pass)
    layer_gemm_s: float  # forward + backward GEMM time (what TP comm overlap hides behind)
    layer_attn_s: float  # attention-core time (what the CP ring hides behind)
    embed_fwd_s: float
    embed_bwd_s: float
    head_fwd_s: float
    head_bwd_s: float
    layer_recompute_flops: float  # FLOPs run again, one layer, in the model-FLOPs convention
    layer_params: float  # one rank's share of an average layer
    embed_params: float
    head_params: float
    layer_act_bytes: float  # kept per layer per micro-batch under the recompute policy
    working_bytes: float  # full recompute: one layer's activations while recomputed
    embed_act_bytes: float  # saved by the embedding's ops, per micro-batch
    head_act_bytes: float  # head input and final norm saved on the last stage, per micro-batch
    logits_bytes: float  # the loss's logits at its peak on the last stage (workload.Loss)
    layer_energy_j: float  # forward + backward op energy of one layer, one micro-batch
    ends_energy_j: float
    kv_width: int
    n_layers: int
    n_moe_layers: int
    top_k: int
    d_model: int
    model_flops_per_token: float  # PaLM convention: 3 x forward, full attention
    optimizer_bytes_per_param: float  # fp32 states + master copy (memory.budget)
    forward: tuple[OpTime, ...]
    backward: tuple[OpTime, ...]
    # LoRA/QLoRA: the *_params above are the trainable adapters; the frozen base weights are
    # bytes held (and, under ZeRO-3, gathered) but never reduced or updated
    layer_frozen_bytes: float = 0.0
    embed_frozen_bytes: float = 0.0
    head_frozen_bytes: float = 0.0
    host_notes: tuple[str, ...] = ()  # host- or device-bound, per pass (cost/host.py)
    # TP comm overlap: seconds one layer's GEMMs lose, per micro-batch, to the SMs its
    # communication kernels hold (cost/overlap.py, 4.; _tp_overlap_s)
    layer_tp_overlap_s: float = 0.0
    # the GEMM time each of a layer's 8 TP collectives (forward and dgrad: the all-gather into
    # the attention and the feed-forward block, the reduce-scatter out of each) can hide behind
    # under TP comm overlap, per micro-batch (cost/overlap.py, 4.; _tp_pairs)
    layer_tp_pairs: tuple[float, ...] = ()
    # TP collectives of a layer in all-reduces of T x d (tp_collectives): forward, backward
    tp_forward_collectives: float = 2.0
    tp_backward_collectives: float = 2.0


def tp_collectives(spec: ModelSpec) -> tuple[float, float]:
    """A layer's tensor-parallel reductions, forward and backward, in all-reduces of its
    activations (an all-gather plus a reduce-scatter under sequence parallelism is one).
    Sequential attention and MLP blocks reduce each block's output in the forward and each
    block's input gradient in the backward: 2 + 2 (Shoeybi et al. 2019 sec. 3, the f and g
    operators). A parallel block sums the two branches' outputs before one reduction (PaLM,
    Chowdhery et al. 2022 sec. 2 "Parallel Layers": "the MLP and Attention input matrix
    multiplications can be fused"; GPT-NeoX reduces the summed branches once,
    ``gpt_j_residual``): 1 forward; its input gradients meet in one reduction when one norm
    feeds both branches (GPT-J, PaLM), else one per branch's norm (GPT-NeoX, Falcon's two
    norms): 1 or 2 backward."""
    if not spec.parallel_block:
        return 2.0, 2.0
    return 1.0, (1.0 if spec.norms_per_layer == 1 else 2.0)


def is_layer(n: str) -> bool:
    return n.startswith("layers/")


def is_embed(n: str) -> bool:
    return n.startswith("embedding")


def is_head(n: str) -> bool:
    return not (is_layer(n) or is_embed(n) or n.startswith("optimizer"))


def layer_profile(spec: ModelSpec, dev: Device, fw: FrameworkProfile, wl: Training, m: Mapping,
                  imbalance: float = 1.0) -> LayerProfile:
    """One layer's (and the ends') times, bytes and FLOPs for ``m``'s tp, ep, expert tp, cp,
    micro-batch, sequence parallelism and recompute policy: the Mapping is the one owner of
    them (the planner passes one per candidate group; pp, dp, ZeRO and the rest are
    ``compose``'s)."""
    s = wl.seq_len
    shard, shape, fwd, bwd = _passes(spec, fw, wl, m, imbalance)
    recompute = m.policy
    T = shape.tokens
    tf, tb = time_ops(fwd, dev, fw), time_ops(bwd, dev, fw)
    L = spec.n_layers
    # an eager stack's host dispatches every op of the pass while the device runs it
    # (cost/host.py): where the host is behind, the pass stretches to the host's time
    hp = {id(tf): host_pass(tf, dev, fw), id(tb): host_pass(tb, dev, fw, backward=True)}

    def part(times: list[OpTime], pick: Any) -> float:
        h = hp.get(id(times))
        k = h.host_s / h.device_s if h is not None and h.host_bound and h.device_s else 1.0
        return k * float(sum(float(t.total_s) for t in times if pick(t.op.name)))

    def saved(pick: Any) -> float:
        return float(sum(float(o.saved) * o.count for o in fwd if pick(o.name)))

    a = wl.storage_dtype.bytes
    layer_ops = [o for o in fwd if is_layer(o.name)]
    # full recompute keeps each layer's input: its sequence shard under sequence parallelism
    T_in = shape.outside_tokens
    fp8 = wl.dtype.bytes < 2  # DeepSeek-V3's policy keeps the SwiGLU input in FP8
    kept = activation_bytes(layer_ops, recompute, shard, T_in, a, working_set=False,
                            fp8_cache=fp8)
    working = activation_bytes(layer_ops, recompute, shard, T_in, a, fp8_cache=fp8) - kept
    pc = count_params(shard)
    gemm = [t for t in tf + tb if t.op.gemm is not None and is_layer(t.op.name)]
    attn = [t for t in tf + tb if "attention/core" in t.op.name]
    mem_kind = dev.acc.device_memory.kind
    layer_params = sum(lp.total for lp in pc.layers) / L
    # the LM head and the final norm(s) sit on the last stage
    head_params = float(pc.total - sum(lp.total for lp in pc.layers) - pc.embedding)
    embed_params = float(pc.embedding)
    frozen = (0.0, 0.0, 0.0)
    model_flops = 3.0 * forward_flops_per_token(spec, s, causal=False)
    if wl.adapters is not None:
        ad = wl.adapters
        base = ad.base_bytes_per_param or a  # QLoRA: the block matrices in NF4
        frozen = (layer_params * base, embed_params * a, head_params * a)
        adapters = adapter_params(shard, ad.targets, ad.rank)
        layer_params, embed_params, head_params = adapters / L, 0.0, 0.0
        model_flops = finetune_model_flops_per_token(spec, s, ad)
    tp_fwd, tp_bwd = tp_collectives(spec)
    return LayerProfile(
        T=T, layer_tp_overlap_s=_tp_overlap_s(gemm, dev, fw, int(m.tp)) / L,
        tp_forward_collectives=tp_fwd, tp_backward_collectives=tp_bwd,
        layer_tp_pairs=tuple(g / L for g in _tp_pairs(gemm)),
        layer_fwd_s=part(tf, is_layer) / L, layer_bwd_s=part(tb, is_layer) / L,
        layer_wgrad_s=float(sum(float(t.total_s) for t in tb if is_layer(t.op.name)
                                and t.op.stage is Stage.BACKWARD_WGRAD)) / L,
        layer_gemm_s=float(sum(float(t.total_s) for t in gemm)) / L,
        layer_attn_s=float(sum(float(t.total_s) for t in attn)) / L,
        embed_fwd_s=part(tf, is_embed), embed_bwd_s=part(tb, is_embed),
        head_fwd_s=part(tf, is_head), head_bwd_s=part(tb, is_head),
        layer_recompute_flops=_recompute_flops(spec, s, fwd + bwd, wl.flash_attention) / L,
        layer_params=layer_params, embed_params=embed_params, head_params=head_params,
        layer_act_bytes=float(kept) / L, working_bytes=float(working),
        embed_act_bytes=saved(is_embed), head_act_bytes=saved(is_head),
        logits_bytes=wl.loss.bytes_per_logit * T * shard.vocab,
        layer_energy_j=float(op_energy_j([o for o in fwd + bwd if is_layer(o.name)],
                                         mem_kind)) / L,
        ends_energy_j=float(op_energy_j([o for o in fwd + bwd if not is_layer(o.name)],
                                        mem_kind)),
        kv_width=shard.kv_width, n_layers=L, n_moe_layers=spec.n_moe_layers,
        top_k=spec.moe.top_k if spec.moe else 0, d_model=spec.d_model,
        model_flops_per_token=model_flops,
        optimizer_bytes_per_param=optimizer_state_bytes_per_param(spec, wl),
        forward=tuple(tf), backward=tuple(tb), layer_frozen_bytes=frozen[0],
        embed_frozen_bytes=frozen[1], head_frozen_bytes=frozen[2],
        host_notes=tuple(h.sentence(w) for w, h in (("forward", hp[id(tf)]),
                                                    ("backward", hp[id(tb)])) if h))


def _passes(spec: ModelSpec, fw: FrameworkProfile, wl: Training, m: Mapping,
            imbalance: float) -> tuple[Geometry, Shape, list[Op], list[Op]]:
    """One rank's share of the model (expert tensor parallelism as the mapping says:
    Megatron-Core's ``--expert-tensor-parallel-size``, tp when left out), the micro-batch's
    shape and the forward and backward operators in the workload's recipe."""
    s, mb, cp, tp = wl.seq_len, m.micro_batch, m.cp, m.tp
    T = mb * s / cp
    shard = Geometry.of(spec).shard(tp, m.ep, etp=m.expert_tp)
    shape = Shape(tokens=T, **causal_shape_context(spec, float(s), wl.flash_attention),
                  kv_tokens=mb * s, sequences=mb, logits_tokens=T, dropout=wl.dropout,
                  sp_tokens=T / tp if (m.sequence_parallel and tp > 1) else None)
    stack = memory_stack(fw.name)
    precision = training_precision(wl)
    if wl.dtype.bytes < 2 and stack.fp8_saved_input is not None:  # what FP8 GEMMs keep
        # a stack that keeps the quantized copy keeps it in the recipe's format (NVFP4, MXFP8)
        kept = wl.dtype if stack.fp8_saved_input.bytes < 2 else stack.fp8_saved_input
        precision = replace(precision, saved_gemm_input=kept)
    if wl.dtype is DType.FP8 and stack.fp8_dynamic_scaling:  # torchao: casts of their own
        precision = replace(precision, fp8_dynamic_scaling=True)
    fwd = forward_ops(shard, shape, precision, flash=wl.flash_attention,
                      imbalance=imbalance, training=True)
    if wl.adapters is not None:
        fwd = adapt_forward(fwd, shard, wl.adapters, wl.storage_dtype)
    bwd = recompute_ops(fwd, m.policy, wl.flash_attention) + backward_ops(fwd, wl.grad_dtype)
    # block-scaled recipes: each GEMM in its format, the head and a share of layers in bf16;
    # FP8 row-wise scaling: the rescale of each gradient GEMM's fp32 output
    fwd, bwd = training_formats(fwd, bwd, wl)  # ops/recipes.py
    if wl.sparsity is not Sparsity.NONE and wl.adapters is not None \
            and wl.adapters.quantized_base:
        raise InputError("2:4 sparsity and a QLoRA base do not combine: the NF4 weights are "
                         "dequantized to dense 16-bit matrices for every matmul; drop one")
    if wl.sparsity is not Sparsity.NONE:  # forward and dgrad on 2:4 weights (ops/sparsity.py)
        fwd, bwd = sparse_training_ops(fwd, bwd, precision)
    return shard, shape, fwd, bwd


# Transformer Engine's userbuffers overlap (Megatron-Core / NeMo --tp-comm-overlap; TE
# ``initialize_ub`` defaults): the "pipeline" reduce-scatter overlaps of the forward's
# proj/fc2 GEMMs and the "bulk" overlaps of the qkv/fc1 dgrad and wgrad GEMMs run their
# communication kernels on 16 SMs and start the GEMM with that margin (``num_sm = 16``,
# ``set_sm_margin``); the "ring_exchange" all-gathers (qkv/fc1 forward, proj/fc2 dgrad) copy on
# the copy engines with one SM. The GEMMs' names in ops.graph:
UB_SM_MARGIN = 16
_UB_MARGIN_GEMMS = {Stage.FORWARD: ("attention/out", "mlp/down"),
                    Stage.RECOMPUTE: ("attention/out", "mlp/down"),
                    Stage.BACKWARD_DGRAD: ("attention/qkv", "mlp/up"),
                    Stage.BACKWARD_WGRAD: ("attention/qkv", "mlp/up")}


def _tp_overlap_s(gemm: list[OpTime], dev: Device, fw: FrameworkProfile, tp: int) -> float:
    """Seconds one layer's GEMMs lose, per micro-batch, to a TP comm overlap's SM margin
    (Transformer Engine stacks; cost/overlap.py, 4.): the margin GEMMs run on SMs - 16."""
    units = dev.acc.compute_units.count.value if dev.acc.compute_units else 0.0
    if tp <= 1 or memory_stack(fw.name) is not MEGATRON or units <= UB_SM_MARGIN:
        return 0.0
    margin = sum(float(t.total_s) for t in gemm
                 if any(k in t.op.name for k in _UB_MARGIN_GEMMS.get(t.op.stage, ())))
    return margin * (units / (units - UB_SM_MARGIN) - 1.0)


def _tp_pairs(gemm: list[OpTime]) -> list[float]:
    """The layers' GEMM seconds paired with each TP collective of a micro-batch, forward and
    dgrad: a block's (attention, feed-forward) input GEMMs consume its all-gather, its output
    GEMM (``out``, ``down``) produces its reduce-scatter; in the dgrad pass the roles swap, with
    the same pairs. Empty when the layers have no such blocks."""
    pairs: list[float] = []
    for stage in (Stage.FORWARD, Stage.BACKWARD_DGRAD):
        for block in ("layers/attention/", ("layers/mlp/", "layers/moe/")):
            times = [t for t in gemm if t.op.stage is stage and t.op.name.startswith(block)]
            is_out = [t.op.name.removesuffix("/dgrad").endswith(("/out", "/down")) for t in times]
            if not any(is_out) or all(is_out):
                return []
            pairs += [sum(float(t.total_s) for t, o in zip(times, is_out, strict=True) if not o),
                      sum(float(t.total_s) for t, o in zip(times, is_out, strict=True) if o)]
    return pairs


def _recompute_flops(spec: ModelSpec, seq_len: int, ops: list[Op], flash: bool) -> float:
    """The layers' FLOPs executed beyond the model FLOPs -- recomputed forwards (Stage.RECOMPUTE
    ops carry model_flops 0) and the score recompute inside FlashAttention's backward (2.5x
    forward, 2x model) -- in the model-FLOPs convention, so that hardware FLOPs = model FLOPs +
    recompute (Korthikanti et al. 2022 sec. 6: HFU counts the recomputed forward on top of the
    model FLOPs, both with the full s x s attention of PaLM App. B; Narayanan et al. 2021
    eq. 3 is the full-recompute case). The graph runs causal attention where flash skips masked
    blocks; its attention FLOPs are scaled to the full-attention convention of the model FLOPs,
    so HFU >= MFU holds by construction."""
    from accelmap.models.flops import attention_flops_per_token

    executed = attention_flops_per_token(spec, seq_len, causal=True, masked=not flash)
    to_model = attention_flops_per_token(spec, seq_len, causal=False) / executed \
        if executed else 1.0
    extra = 0.0
    for o in ops:
        if not is_layer(o.name) or o.model_flops is None:
            continue
        e = (float(o.flops) - float(o.model_flops)) * o.count
        extra += e * (to_model if o.attention_core else 1.0)
    return extra


def finetune_model_flops_per_token(spec: ModelSpec, seq_len: int, ad: Adapters) -> float:
    """Model FLOPs per token of a LoRA/QLoRA step, in the PaLM convention (full attention):
    3 x forward, less the weight gradients the frozen matrices never form (2 per frozen
    matmul parameter, the output head included), plus 6 per adapter parameter (forward,
    dgrad, wgrad). NeMo reports LoRA "model TFLOP/s" this way (its fine-tuning table: 4 x
    rather than 6 x the base parameters). In an MoE model a token runs through the adapters of
    its top_k routed experts only, as through their weights."""
    whole = Geometry.of(spec)
    pc = count_params(whole)
    matmul = float(pc.active - pc.embedding)  # what one token multiplies (MoE: its experts)
    if spec.tied_embeddings:
        matmul += spec.vocab_size * spec.d_model  # the tied head still multiplies
    adapters = adapter_params(whole, ad.targets, ad.rank,
                              top_k=spec.moe.top_k if spec.moe else None)
    return (3.0 * forward_flops_per_token(spec, seq_len, causal=False) - 2.0 * matmul
            + 6.0 * adapters)
