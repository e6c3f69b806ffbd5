"""Operator graph: FLOPs and bytes of every operator of one model step, never time.

One :class:`Op` stands for ``count`` identical kernels (the same op in every layer of a layer
group). Sizes (tokens, context) may be numpy arrays; every field is then an array of the same
shape, so one graph evaluates many workloads at once. Every dimension and weight shape comes from
:mod:`accelmap.models.geometry`: the whole model's, or one rank's share under tensor and expert
parallelism (``Geometry.of(spec).shard(tp, ep, etp)``), whose GEMMs are that rank's matrices.

Conventions (per occurrence):
- a GEMM ``[m x k] @ [k x n]`` costs 2*m*n*k FLOPs and moves k*n weights plus m*k inputs and m*n
  outputs (each read or written once: the roofline's compulsory traffic);
- vector ops (norms, activations, softmax, residual adds, rotary, the optimizer step) move their
  inputs and outputs; their FLOPs per element are small constants (below);
- attention: scores 2*T*C*h*d_qk, context 2*T*C*h*d_v, where T queries see C keys each (C is the
  mean causal context for prefill/training, the cached length for decode). Flash attention
  (Dao et al. 2022) keeps the T x C scores on chip; the naive form writes and reads them.
- ``saved`` is the activation memory an op keeps for its backward pass without recomputation;
  summed over a GPT layer it reproduces Korthikanti et al. 2022 eq. (1), 34*s*b*h + 5*a*s^2*b
  bytes with dropout (sec. 4.1), and with tensor and sequence parallelism eq. (4),
  s*b*h*(34/t + 5*a*s/(h*t)): the column-parallel GEMMs fed by a norm (QKV, MLP up) keep only
  their rank's sequence shard of the input and all-gather it again in backward (sec. 4.2.2;
  Megatron-LM tensor_parallel/layers.py, Transformer Engine module/linear.py). With flash
  attention the output O that the kernel keeps for backward is the very tensor the output
  projection keeps as its input, so it is counted once (tested). Under FP8 the GEMMs may keep
  an FP8 copy of their input instead (``Precision.saved_gemm_input``: Transformer Engine).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from accelmap.models.flops import causal_mean_keys
from accelmap.models.geometry import Geometry, Group, Tensor
from accelmap.models.schema import MLAConfig, ModelSpec
from accelmap.ops.op import ByteKind as ByteKind
from accelmap.ops.op import Op as Op
from accelmap.ops.op import Precision as Precision
from accelmap.ops.op import Stage as Stage
from accelmap.ops.op import Unit as Unit
from accelmap.ops.sparsity import sparse_weights
from accelmap.units import DType, Num
from accelmap.workload import Sparsity

FP32 = DType.FP32.bytes  # logits and softmax statistics are kept in fp32

# Weight-only GEMMs (W4A16/W8A16) convert weights to 16 bits in registers, tile by tile (Frantar
# et al. 2024, "MARLIN: Mixed-Precision Auto-Regressive Parallel Inference on Large Language
# Models", sec. 3: each thread block dequantizes the weight tile it loads, overlapped with the
# loads and the tensor-core MMAs). A weight is converted once per row tile of the activations;
# per conversion a scale multiply and a conversion (lookup/shift of the 4-bit code):
DEQUANT_FLOPS = 2.0
DEQUANT_ROW_TILE = 128  # activation rows per thread-block tile (Marlin's and CUTLASS's M tile)


# FLOPs per element of vector ops (counted as the reference implementations compute them):
NORM_FLOPS = 5.0  # RMSNorm: square, mean, rsqrt, scale, weight (LayerNorm ~ 7; both tiny)
ACT_FLOPS = 8.0  # SiLU/GELU incl. the exp/tanh (Megatron counts activations as ~free)
SOFTMAX_FLOPS = 5.0  # max, subtract, exp, sum, divide
ROPE_FLOPS = 3.0  # two multiplies and an add per element
LOSS_FLOPS = 6.0  # log-softmax + NLL over the vocabulary


@dataclass(frozen=True)
class Shape:
    """How many tokens flow through the step and what each query attends to."""

    tokens: Num  # T: query tokens in this step (batch x seq for prefill/train, batch for decode)
    context: Num  # C: mean number of keys per query
    kv_tokens: Num  # tokens whose K/V are read per step (batch x cached length for decode)
    sequences: Num  # batch size (sequences)
    logits_tokens: Num  # rows through the LM head (all tokens in training, last per seq in prefill)
    decode: bool = False
    dropout: bool = False
    # C on sliding-window layers; None = min(context, window), right for decode where every
    # query sees the cached length. Prefill/training: see ``causal_shape_context``.
    window_context: Num | None = None
    # Tokens seen by ops outside the tensor-parallel regions (norms, residuals, dropout): T/tp
    # with sequence parallelism (Korthikanti et al. 2022 sec. 4.2.2), T without; None = tokens.
    sp_tokens: Num | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    # DP attention (mapping.plan.Mapping.dp_attention): the share of the step's tokens and
    # sequences whose attention this rank runs (its own requests, 1/G of the tp group's, or
    # ceil(B/G)/B on the busiest rank); None = all. The rest of the layer sees all tokens.
    attention_share: Num | None = None

    @property
    def outside_tokens(self) -> Num:
        return self.tokens if self.sp_tokens is None else self.sp_tokens

    def for_attention(self) -> Shape:
        """The shape the attention block (its norm, projections and core) runs on this rank:
        under DP attention only its own requests' tokens, sequences and cached keys."""
        f = self.attention_share
        if f is None:
            return self
        return replace(self, tokens=self.tokens * f, kv_tokens=self.kv_tokens * f,
                       sequences=self.sequences * f,
                       sp_tokens=None if self.sp_tokens is None else self.sp_tokens * f,
                       attention_share=None)


def causal_shape_context(model: ModelSpec | Geometry, seq_len: Num, flash: bool
                         ) -> dict[str, Num]:
    """``context`` and ``window_context`` of a prefill or training step over sequences of
    ``seq_len``: flash attention skips masked blocks, so a query sees its causal mean (and the
    window's, ``models.flops.causal_mean_keys``); naive attention computes the full s x s score
    matrix and masks it afterwards, on sliding-window layers too."""
    if not flash:
        return {"context": seq_len * 1.0, "window_context": seq_len * 1.0}
    geo = Geometry.of(model)
    window = geo.sliding_window
    return {"context": causal_mean_keys(seq_len),
            "window_context": causal_mean_keys(seq_len, window, geo.chunked) if window else None}


def _gemm(name: str, m: Num, n: int, k: int, p: Precision, count: int, weight_bytes: Num = None,
          saved: bool = True, saved_rows: Num = None, rows_per_weight: Num = None) -> Op:
    """``saved_rows``: rows of the input kept for backward when not all ``m`` (the local
    sequence shard of a column-parallel GEMM under sequence parallelism); ``rows_per_weight``:
    the rows each weight multiplies when ``m`` spans several weight copies (routed experts)."""
    a = p.act.bytes
    wb = k * n * p.wbytes if weight_bytes is None else weight_bytes
    kept = (p.saved_gemm_input or p.act).bytes
    rows = m if saved_rows is None else saved_rows
    # weights streamed / stored bytes per weight = the weights this GEMM converts
    tiles = np.ceil(np.maximum(m if rows_per_weight is None else rows_per_weight, 1.0)
                    / DEQUANT_ROW_TILE)
    dequant = DEQUANT_FLOPS * wb / p.wbytes * tiles if p.weight_only else 0.0
    return Op(
        name=name, unit=Unit.MATRIX, dtype=p.compute, count=count,
        flops=2.0 * m * n * k,
        bytes={ByteKind.WEIGHTS: wb, ByteKind.ACTIVATIONS: (m * k + m * n) * a},
        gemm=(m, n, k),
        saved=rows * k * kept if saved else 0.0,
        weight_dtype=p.weight,
        dequant_flops=dequant,
    )


def _vector(name: str, elems: Num, flops_per: float, p: Precision, count: int, saved: Num = 0.0,
            extra_bytes: Num = 0.0, fusable: bool = True) -> Op:
    return Op(
        name=name, unit=Unit.VECTOR, dtype=p.act, count=count,
        flops=flops_per * elems,
        bytes={ByteKind.ACTIVATIONS: 2.0 * elems * p.act.bytes + extra_bytes},
        saved=saved, fusable=fusable,
    )


def _weight_gemm(name: str, m: Num, w: Tensor, p: Precision, count: int) -> Op:
    """``[m x rows] @ w``: one weight matrix of the geometry."""
    return _gemm(name, m, w.cols, w.rows, p, count)


def _norm(name: str, geo: Geometry, s: Shape, p: Precision, count: int) -> Op:
    d = geo.d_model
    t = s.outside_tokens
    op = _vector(name, t * d, NORM_FLOPS, p, count, saved=t * d * p.act.bytes)
    return replace(op, bytes={**op.bytes, ByteKind.WEIGHTS: geo.norm_params * p.act.bytes})


def _attention_core(geo: Geometry, s: Shape, p: Precision, count: int, flash: bool,
                    sliding: bool, absorbed: bool = False) -> list[Op]:
    """Scores and context over the keys each query sees. Sliding-window layers see at most the
    window; chunked layers (Llama 4) at most the chunk: in decode ``min(context, chunk)`` is the
    bound (a query sees (position mod chunk) + 1 keys, chunk/2 on average over a long output).
    ``absorbed``: MLA decode in the latent space (:func:`_mla_absorbed`), where every head's
    query has r_kv + d_rope values against the one shared latent+RoPE key, and the context is
    r_kv wide. Attention sinks (gpt-oss) add one logit per head and row to the softmax
    denominator: h exponentials per query against 2 h d C FLOPs, below 0.1 % at any C >= 8
    with d = 64, so no op is charged for them."""
    h = geo.heads
    d_qk, d_v = geo.qk_head_dim, geo.v_head_dim
    mla = geo.mla
    if absorbed and mla is not None:
        d_qk, d_v = mla.kv_lora_rank + mla.qk_rope_head_dim, mla.kv_lora_rank
    # K and V kept for backward: MLA expands the latent to one K and V per query head
    kv_heads = h if geo.mla is not None else geo.kv_heads
    ctx = s.context
    kv_tokens = s.kv_tokens
    window = geo.sliding_window
    if sliding and window is not None:
        ctx = (s.window_context if s.window_context is not None
               else np.minimum(ctx, window))
        kv_tokens = np.minimum(kv_tokens, s.sequences * window)
    width = geo.kv_width
    dsa = geo.model.dsa
    if dsa is not None:  # MLA over the indexer's top-k tokens only (_dsa_indexer scores all)
        ctx = np.minimum(ctx, dsa.index_topk)
        kv_tokens = np.minimum(kv_tokens, s.sequences * dsa.index_topk)
        width -= dsa.index_head_dim
    a, T = p.act.bytes, s.tokens
    q_bytes = T * h * d_qk * a
    o_bytes = T * h * d_v * a
    kv_read = kv_tokens * width * (p.kv.bytes if s.decode else a)
    kv_kind = ByteKind.KV_CACHE if s.decode else ByteKind.ACTIVATIONS
    score_flops = 2.0 * T * ctx * h * d_qk
    ctx_flops = 2.0 * T * ctx * h * d_v
    kv_saved = T * 2 * kv_heads * d_qk * a  # K and V of this step, kept for backward
    dropout_mask = T * ctx * h * 1.0 if s.dropout else 0.0  # one byte per score
    if flash:
        # FlashAttention keeps scores on chip; saves Q, K, V, O and the softmax statistics.
        return [Op(
            name="layers/attention/core", unit=Unit.MATRIX, dtype=p.attention, count=count,
            flops=score_flops + ctx_flops, attention_keys=ctx, head_dim=d_qk,
            bytes={ByteKind.ACTIVATIONS: q_bytes + o_bytes, kv_kind: kv_read},
            saved=q_bytes + kv_saved + o_bytes + T * h * FP32,  # fp32 logsumexp per row
            attention_core=True,
        )]
    scores = T * ctx * h  # elements of the attention matrix
    return [
        Op(name="layers/attention/scores", unit=Unit.MATRIX, dtype=p.attention, count=count,
           flops=score_flops, attention_keys=ctx,
           bytes={ByteKind.ACTIVATIONS: q_bytes + scores * a, kv_kind: kv_read / 2},
           saved=q_bytes + kv_saved / 2, attention_core=True),
        # Korthikanti et al. eq. (1): softmax output 2as^2b, its dropout mask as^2b and the dropout
        # output 2as^2b are kept for backward.
        Op(name="layers/attention/softmax", unit=Unit.VECTOR, dtype=p.act, count=count,
           flops=SOFTMAX_FLOPS * scores, bytes={ByteKind.ACTIVATIONS: 2.0 * scores * a},
           saved=scores * a + dropout_mask + (scores * a if s.dropout else 0.0),
           selective_dropped=scores * a + dropout_mask + (scores * a if s.dropout else 0.0),
           attention_core=True),
        Op(name="layers/attention/context", unit=Unit.MATRIX, dtype=p.attention, count=count,
           flops=ctx_flops, attention_keys=ctx,
           bytes={ByteKind.ACTIVATIONS: scores * a + o_bytes, kv_kind: kv_read / 2},
           saved=kv_saved / 2, attention_core=True),
    ]


def _dsa_indexer(geo: Geometry, g: Group, s: Shape, p: Precision, count: int) -> list[Op]:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp, inference/model.py
    ``Indexer``; tech report sec. 2.1): per token, q = wq_b(compressed q) over H_I heads of
    d_I, one key k = LayerNorm(wk(x)) cached per token, head weights w = weights_proj(x); the
    score of a cached token is sum_h w_h ReLU(q_h . k), so 2 T C H_I d_I FLOPs (one multiply-add
    per head and key dimension; ReLU and the weighting are O(T C H_I)) over every key C a query
    sees, reading each cached index key once (d_I values per token). The top-k selection is a
    vector pass over the T x C scores. Not modelled: FP8 rounding of the indexer (DeepSeek runs
    it in FP8 with a per-token scale: charged at the KV dtype here), the top-k kernel's own cost
    beyond that pass, and the indexer's training-only KL loss. Decode context is the cached
    length; prefill's is the causal mean."""
    dsa = geo.model.dsa
    assert dsa is not None
    T, ih, idim = s.tokens, dsa.index_n_heads, dsa.index_head_dim
    ctx = s.context
    keys = s.kv_tokens * idim * (p.kv.bytes if s.decode else p.act.bytes)
    q_bytes = T * ih * idim * p.act.bytes
    moved = ({ByteKind.KV_CACHE: keys, ByteKind.ACTIVATIONS: q_bytes} if s.decode
             else {ByteKind.ACTIVATIONS: keys + q_bytes})
    return [
        _weight_gemm("layers/attention/indexer_q", T, g.tensor("indexer_wq"), p, count),
        _weight_gemm("layers/attention/indexer_k", T, g.tensor("indexer_wk"), p, count),
        _weight_gemm("layers/attention/indexer_w", T, g.tensor("indexer_weights"), p, count),
        Op(name="layers/attention/indexer_scores", unit=Unit.MATRIX, dtype=p.attention,
           count=count, flops=2.0 * T * ctx * ih * idim, attention_keys=ctx, head_dim=idim,
           bytes=moved, attention_core=True),
        _vector("layers/attention/indexer_topk", T * ctx, 1.0, p, count),
    ]


def _mla_absorbed(geo: Geometry, mla: MLAConfig, T: Num, p: Precision, count: int,
                  which: str) -> Op:
    """MLA decode with the up-projections absorbed (DeepSeek-V2 arXiv:2405.04434 sec. 2.1.2:
    "W^UK can be absorbed into W^Q, and W^UV into W^O"; the FlashMLA decode kernel and vLLM's
    MLA backend run it so): the cached latent is never expanded. Per head, the query's nope part
    (d_nope) is mapped into the latent (r_kv) by that head's slice of W^UK (``q_absorb``), the
    scores and the context run over the r_kv + d_rope wide cache (:func:`_attention_core`), and
    the r_kv wide context goes back to d_v by W^UV (``v_absorb``). Each is a batched GEMM over
    the h local heads: 2 T h d_nope r_kv (resp. 2 T h r_kv d_v) FLOPs, reading that head-slice
    of ``wkv_b`` once."""
    h, r = geo.heads, mla.kv_lora_rank
    d_in, d_out = (mla.qk_nope_head_dim, r) if which == "q_absorb" else (r, mla.v_head_dim)
    return _gemm(f"layers/attention/{which}", T * h, d_out, d_in, p, count,
                 weight_bytes=h * d_in * d_out * p.wbytes)


def _attention(geo: Geometry, g: Group, s: Shape, p: Precision, flash: bool) -> list[Op]:
    h, T, n = geo.heads, s.tokens, g.count
    ops: list[Op] = []
    mla = geo.mla
    absorbed = mla is not None and s.decode
    if mla is not None:
        if mla.q_lora_rank is None:
            ops.append(_weight_gemm("layers/attention/q", T, g.tensor("wq"), p, n))
        else:
            ops.append(_weight_gemm("layers/attention/q_down", T, g.tensor("wq_a"), p, n))
            ops.append(_weight_gemm("layers/attention/q_up", T, g.tensor("wq_b"), p, n))
        ops.append(_weight_gemm("layers/attention/kv_down", T, g.tensor("wkv_a"), p, n))
        if absorbed:
            ops.append(_mla_absorbed(geo, mla, T, p, n, "q_absorb"))
        else:
            ops.append(_weight_gemm("layers/attention/kv_up", T, g.tensor("wkv_b"), p, n))
        if geo.model.dsa is not None:
            ops += _dsa_indexer(geo, g, s, p, n)
        rope_elems = T * (h + 1) * mla.qk_rope_head_dim
    else:
        hd, kv = geo.head_dim, geo.kv_heads
        q, k, v = (g.tensor(x) for x in ("wq", "wk", "wv"))
        ops.append(replace(_gemm("layers/attention/qkv", T, q.cols + k.cols + v.cols, q.rows,
                                 p, n, saved_rows=s.outside_tokens),
                           parts=(q.cols, k.cols, v.cols)))
        rope_elems = T * (h + kv) * hd * geo.rope_fraction
    if geo.rope:
        ops.append(_vector("layers/attention/rope", rope_elems, ROPE_FLOPS, p, n))
    ops += _attention_core(geo, s, p, n, flash, g.sliding, absorbed)
    if absorbed and mla is not None:
        ops.append(_mla_absorbed(geo, mla, T, p, n, "v_absorb"))
    out = _weight_gemm("layers/attention/out", T, g.tensor("wo"), p, n)
    if flash and p.saved_gemm_input is None:  # its input is the O flash already keeps
        out = replace(out, saved=0.0)
    ops.append(out)
    if s.dropout:  # dropout after the output projection keeps a 1-byte mask: s*b*h
        t = s.outside_tokens
        d = geo.d_model
        ops.append(_vector("layers/attention/dropout", t * d, 1.0, p, n, saved=t * d))
    return ops


def _mlp(geo: Geometry, g: Group, s: Shape, p: Precision, prefix: str, key: str,
         tokens: Num, copies: int = 1, weight_copies: Num = None) -> list[Op]:
    """``copies`` identical MLPs over ``tokens`` tokens each, from the group's ``key`` gate, up
    and down matrices; stored copies not run one by one (shared experts) run as one MLP that
    many times wider."""
    down = g.tensor(f"{key}down")
    d, hidden = down.cols, down.rows * down.copies // copies
    up_width = 2 * hidden if geo.gated else hidden
    count = g.count
    wc = copies if weight_copies is None else weight_copies
    # the dense MLP's up projection is column-parallel after the norm: under sequence
    # parallelism it keeps its rank's sequence shard of the input (experts see routed tokens)
    up = _gemm(f"{prefix}/up", tokens * copies, up_width, d, p, count,
               weight_bytes=wc * d * up_width * p.wbytes,
               saved_rows=s.outside_tokens if prefix == "layers/mlp" else None,
               rows_per_weight=tokens)
    if geo.gated:  # w1 (gate) then w3 (up), as a PyTorch SwiGLU block calls them
        up = replace(up, parts=(hidden, hidden))
    # activation input (2 x hidden for gated: gate and up halves) is kept for backward, and its
    # output is the input of the down projection (saved by that GEMM).
    act = _vector(f"{prefix}/act", tokens * copies * hidden, ACT_FLOPS, p, count,
                  saved=tokens * copies * up_width * p.act.bytes)
    down_op = _gemm(f"{prefix}/down", tokens * copies, d, hidden, p, count,
                    weight_bytes=wc * hidden * d * p.wbytes, rows_per_weight=tokens)
    return [up, act, down_op]


def _moe(geo: Geometry, g: Group, s: Shape, p: Precision, imbalance: float) -> list[Op]:
    T, E, k = s.tokens, geo.experts, geo.top_k
    ops = [_weight_gemm("layers/moe/router", T, g.tensor("router"), p, g.count)]
    # Balanced routing: T*k/E tokens per expert; the slowest expert sets the time, so the
    # per-expert load is scaled by the imbalance factor (1.0 = perfectly balanced). On one rank
    # of ep, E is its E/ep local experts: T*k/(E/ep) = ep*T*k/E, every rank routing its tokens
    # over all experts.
    # The rank's routed tokens: the tensor-parallel group's T tokens split over its tp / etp
    # ranks that hold whole (or etp-sliced) experts. etp = tp (Megatron-Core's default): each
    # rank computes its slice of the experts on all T; etp < tp: each of the tp / etp rank
    # groups routes its own share (Megatron-Core MoE parallel folding, Liu et al. 2025,
    # arXiv:2504.14960 sec. 3; vLLM's expert parallelism, ep = tp / etp, where every rank
    # holds the same T tokens and each local expert receives T * k / (E * ep) of them).
    routed = T * geo.etp / geo.tp
    per_expert = routed * k / E * imbalance
    # Distinct experts hit by the routed tokens choosing k of E uniformly:
    # E * (1 - (1 - k/E)^T). (Under expert parallelism E is the local expert count and k/E
    # is capped at 1.)
    touched = E * (1.0 - (1.0 - min(k / E, 1.0)) ** routed)
    ops += _mlp(geo, g, s, p.for_experts, "layers/moe/experts", "expert_", per_expert,
                copies=E, weight_copies=touched)
    if geo.shared_experts:
        ops += _mlp(geo, g, s, p, "layers/moe/shared", "shared_", T)
    return ops


def forward_ops(model: Geometry | ModelSpec, s: Shape, p: Precision, flash: bool = True,
                imbalance: float = 1.0, training: bool = False) -> list[Op]:
    """All forward operators of one step, grouped by identical layers, for the whole model or
    one rank's share (``Geometry.of(spec).shard(...)``)."""
    geo = Geometry.of(model)
    d, T = geo.d_model, s.tokens
    ops: list[Op] = [Op(
        name="embedding", unit=Unit.VECTOR, dtype=p.act, flops=0.0,
        bytes={ByteKind.WEIGHTS: T * d * p.act.bytes, ByteKind.ACTIVATIONS: T * d * p.act.bytes},
    )]
    sa = s.for_attention()  # DP attention: this rank's own requests only
    for g in geo.groups:
        n = g.count
        ops.append(_norm("layers/attention/norm", geo, sa, p, n))
        ops += _attention(geo, g, sa, p, flash)
        ops.append(_vector("layers/residual", s.outside_tokens * d, 1.0, p, 2 * n))
        ops.append(_norm("layers/mlp/norm", geo, s, p, n))
        if g.moe:
            ops += _moe(geo, g, s, p, imbalance)
        else:
            ops += _mlp(geo, g, s, p, "layers/mlp", "", T)
        if s.dropout:
            t = s.outside_tokens
            ops.append(_vector("layers/mlp/dropout", t * d, 1.0, p, n, saved=t * d))
    if geo.final_norm:
        ops.append(_norm("final_norm", geo, s, p, 1))
    L, V = s.logits_tokens, geo.vocab  # the head is a V x d GEMM, tied to the embedding or not
    head = _gemm("lm_head", L, V, d, p, 1)
    ops.append(replace(head, bytes={**head.bytes, ByteKind.ACTIVATIONS:
                                    L * d * p.act.bytes + L * V * FP32}))
    if training:  # fp32 logits -> log-softmax -> loss (Megatron fuses this cross-entropy)
        ops.append(_vector("loss", L * V, LOSS_FLOPS, p, 1,
                           extra_bytes=L * V * FP32, fusable=False))
    if p.sparsity is not Sparsity.NONE and not training:
        ops = sparse_weights(ops, p)
    return _with_fp8_casts(ops, p, training)


# FP8 GEMMs take FP8 inputs: Transformer Engine quantizes each GEMM's 16-bit input (amax,
# scale, cast) in a kernel of its own, and in training writes the transposed FP8 copy that the
# weight-gradient GEMM reads ("cast_transpose", transformer_engine/pytorch/module/linear.py);
# the backward does the same to the incoming gradient (ops/training.py derives it from this op
# at twice the traffic). Weights are cast once per step (is_first_microbatch) and not counted.
# Stacks that fuse elementwise work fold the cast into its producer (``fusable``) when the scale
# is known beforehand (TE's delayed scaling: last steps' amax history). With dynamic per-tensor
# scaling (torchao Float8Linear, ``Precision.fp8_dynamic_scaling``) the amax reduction must end
# before the first value is scaled: a fusing compiler folds the reduction into the producer,
# but the scaled cast stays a kernel of its own (read 16 bits, write the FP8 copies).
FP8_CAST_FLOPS = 3.0  # |x| for the amax, scale, convert


def kv_per_query_head(ops: list[Op], model: Geometry | ModelSpec, p: Precision) -> list[Op]:
    """Decode attention that streams an 8-bit KV cache once per query head instead of once per
    KV head (``FrameworkProfile.decode_kv_per_query_head``): the KV-cache bytes of the attention
    core grow by the group size, heads / KV heads of the (sharded) geometry. A 16-bit cache is
    left as it is: a group's thread blocks run together and re-read it from L2, while an 8-bit
    cache is dequantized by every query head's block."""
    geo = Geometry.of(model)
    group = geo.heads / max(geo.kv_heads, 1)
    if group <= 1 or p.kv.bytes >= 2 or geo.mla is not None:
        return ops
    out = []
    for op in ops:
        if op.attention_core and ByteKind.KV_CACHE in op.bytes:
            op = replace(op, bytes={**op.bytes,
                                    ByteKind.KV_CACHE: op.bytes[ByteKind.KV_CACHE] * group})
        out.append(op)
    return out


def _with_fp8_casts(ops: list[Op], p: Precision, training: bool) -> list[Op]:
    """A quantizing cast before every GEMM that runs narrower than the activations: FP8, and
    the microscaling formats, whose cast also writes the block scales (``DType.bytes``)."""
    if p.compute.bytes >= p.act.bytes and p.for_experts.compute.bytes >= p.act.bytes:
        return ops
    out: list[Op] = []
    for op in ops:
        if op.gemm is not None and op.dtype in (p.compute, p.for_experts.compute) \
                and op.dtype.bytes < p.act.bytes:
            m, _n, k = op.gemm
            elems = m * k
            written = (2.0 if training else 1.0) * op.dtype.bytes  # FP8 (and its transpose)
            own_pass = p.fp8_dynamic_scaling and op.dtype is DType.FP8
            out.append(Op(name=f"{op.name}/fp8_cast", unit=Unit.VECTOR, dtype=p.act,
                          count=op.count, flops=FP8_CAST_FLOPS * elems,
                          bytes={ByteKind.ACTIVATIONS: elems * (p.act.bytes + written)},
                          fusable=not own_pass))
        out.append(op)
    return out
