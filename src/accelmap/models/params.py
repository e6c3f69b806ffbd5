"""Exact parameter counts from a ModelSpec, as a tree with slash keys.

Counts follow the reference implementations' module shapes (Hugging Face ``transformers`` and the
papers' own descriptions), matrix by matrix, so that totals equal what ``model.num_parameters()``
prints for the published checkpoints (e.g. Llama-2-7B = 6,738,415,616). Formulas:

- attention (MHA/GQA/MQA): Wq d x (h*hd), Wk and Wv d x (kv*hd), Wo (h*hd) x d, optional biases;
- MLA (DeepSeek-V2 arXiv:2405.04434 sec. 2.1): W_DQ d x r_q, norm r_q, W_UQ r_q x h*(d_nope+d_rope),
  W_DKV+W_KR d x (r_kv + d_rope), norm r_kv, W_UK,W_UV r_kv x h*(d_nope+d_v), Wo h*d_v x d;
- FFN: plain 2*d*f (+ f + d biases), gated 3*d*f (+ 2f + d biases);
- MoE layer: router d x E, E routed experts, shared experts, optional shared-expert gate d x 1,
  optional per-expert routing bias (DeepSeek-V3 ``e_score_correction_bias``);
- norms: RMSNorm d, LayerNorm 2d (d without bias);
- embeddings V x d, learned positions (max_len + offset) x d, untied LM head V x d (+ V bias).

*Active* parameters per token count top_k routed experts (plus shared ones) instead of all E,
and everything else once, as Mixtral ("12.9B active") and DeepSeek-V3 ("37B activated") do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelmap.models.schema import FFNKind, ModelSpec, NormKind, PositionKind


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer block, split so reports can show shapes and shares."""

    attention: int
    norms: int
    ffn: int  # all FFN parameters stored (all experts for MoE)
    ffn_active: int  # FFN parameters one token touches
    moe: bool

    @property
    def total(self) -> int:
        return self.attention + self.norms + self.ffn

    @property
    def active(self) -> int:
        return self.attention + self.norms + self.ffn_active


@dataclass(frozen=True)
class ParamCount:
    total: int
    active: int
    embedding: int  # token (+ position) embeddings: no FLOPs per token beyond a lookup
    lm_head: int  # 0 when tied
    layers: tuple[LayerParams, ...]
    breakdown: dict[str, int] = field(default_factory=dict)

    @property
    def non_embedding(self) -> int:
        """Parameters that do matmul work per token (Kaplan et al. 2020's N excludes embeddings)."""
        return self.total - self.embedding


def norm_params(spec: ModelSpec, dim: int) -> int:
    """One normalization layer over ``dim`` features."""
    if spec.norm is NormKind.LAYERNORM and spec.norm_bias:
        return 2 * dim
    return dim


def attention_params(spec: ModelSpec) -> int:
    d = spec.d_model
    h = spec.n_heads
    if spec.mla is not None:
        mla = spec.mla
        hq = h * mla.qk_head_dim
        if mla.q_lora_rank is None:
            q = d * hq
        else:
            q = d * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * hq  # RMSNorm in between
        kv = d * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
        kv += mla.kv_lora_rank * h * (mla.qk_nope_head_dim + mla.v_head_dim)
        out = h * mla.v_head_dim * d
        return q + kv + out + (d if spec.attn_out_bias else 0)
    hd = spec.head_size
    kvh = spec.kv_heads
    q_width, kv_width = h * hd, kvh * hd
    weights = d * q_width + 2 * d * kv_width + q_width * d
    biases = (q_width + 2 * kv_width if spec.qkv_bias else 0) + (d if spec.attn_out_bias else 0)
    qk_norm = 2 * hd if spec.qk_norm else 0  # one RMSNorm weight over head_dim for q and for k
    return weights + biases + qk_norm


def ffn_params(spec: ModelSpec, hidden: int, bias: bool | None = None) -> int:
    d = spec.d_model
    use_bias = spec.mlp_bias if bias is None else bias
    if spec.ffn_kind is FFNKind.GATED:
        return 3 * d * hidden + ((2 * hidden + d) if use_bias else 0)
    return 2 * d * hidden + ((hidden + d) if use_bias else 0)


def layer_params(spec: ModelSpec, layer: int) -> LayerParams:
    attn = attention_params(spec)
    norms = spec.norms_per_layer * norm_params(spec, spec.d_model)
    moe = spec.moe
    if moe is None or not spec.is_moe_layer(layer):
        f = ffn_params(spec, spec.ffn_dim)
        return LayerParams(attention=attn, norms=norms, ffn=f, ffn_active=f, moe=False)
    d = spec.d_model
    expert = ffn_params(spec, moe.expert_ffn_dim)
    shared = moe.num_shared_experts * ffn_params(spec, moe.shared_ffn)
    router = d * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    gate = d if moe.shared_expert_gate and moe.num_shared_experts else 0
    total = router + gate + shared + moe.num_experts * expert
    active = router + gate + shared + moe.top_k * expert
    return LayerParams(attention=attn, norms=norms, ffn=total, ffn_active=active, moe=True)


def count_params(spec: ModelSpec) -> ParamCount:
    d = spec.d_model
    embedding = spec.vocab_size * d
    if spec.position is PositionKind.LEARNED:
        embedding += (spec.max_seq_len + spec.learned_position_offset) * d
    lm_head = 0 if spec.tied_embeddings else spec.vocab_size * d
    if spec.lm_head_bias:
        lm_head += spec.vocab_size
    extra_norms = (norm_params(spec, d) if spec.final_norm else 0) + (
        norm_params(spec, d) if spec.embedding_norm else 0
    )
    layers = tuple(layer_params(spec, i) for i in range(spec.n_layers))
    body = sum(lp.total for lp in layers)
    body_active = sum(lp.active for lp in layers)
    breakdown = {
        "embedding": embedding,
        "layers/attention": sum(lp.attention for lp in layers),
        "layers/norms": sum(lp.norms for lp in layers),
        "layers/ffn": sum(lp.ffn for lp in layers if not lp.moe),
        "layers/moe": sum(lp.ffn for lp in layers if lp.moe),
        "final_norms": extra_norms,
        "lm_head": lm_head,
    }
    total = embedding + body + extra_norms + lm_head
    active = embedding + body_active + extra_norms + lm_head
    return ParamCount(
        total=total,
        active=active,
        embedding=embedding,
        lm_head=lm_head,
        layers=layers,
        breakdown={k: v for k, v in breakdown.items() if v},
    )
