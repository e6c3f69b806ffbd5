"""ModelSpec: what a decoder-only transformer is, precisely enough to count every parameter.

The fields cover the architectures in the catalog: GPT-2/3 style (learned positions, biases,
LayerNorm), Llama style (RoPE, RMSNorm, SwiGLU, GQA), parallel attention+MLP blocks (GPT-J,
Falcon, PaLM), ALiBi models (BLOOM, MPT), multi-head latent attention (DeepSeek-V2/V3) and
mixture-of-experts (Mixtral, Qwen-MoE, DeepSeek-V3: routed and shared experts, dense first layers).

Only structure lives here; counting is in :mod:`accelmap.models.params`, FLOPs in the ops layer.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from accelmap.cited import CatalogEntry, Frozen

# Hard bounds of a model accelmap maps, far beyond any real one: they turn a typo or a hostile
# config (10^12 layers, a 10^18 vocabulary) into one clear line instead of a hang or a
# nonsense figure. Physics and plausibility are not the point; absurdity is.
MAX_LAYERS = 10_000
MAX_WIDTH = 1_000_000  # d_model, heads, head_dim, latent ranks
MAX_FFN = 10_000_000
MAX_EXPERTS = 100_000
MAX_VOCAB = 100_000_000
MAX_SEQ = 1_000_000_000
MAX_PARAMS = 1e15


class AttentionKind(StrEnum):
    MHA = "mha"  # kv_heads == heads
    GQA = "gqa"  # 1 < kv_heads < heads (Ainslie et al. 2023)
    MQA = "mqa"  # kv_heads == 1 (Shazeer 2019)
    MLA = "mla"  # multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 sec. 2.1)


class FFNKind(StrEnum):
    PLAIN = "plain"  # up, act, down: 2 matrices
    GATED = "gated"  # GLU variants (SwiGLU, GeGLU; Shazeer 2020): gate, up, down = 3 matrices


class Activation(StrEnum):
    GELU = "gelu"
    GELU_TANH = "gelu_tanh"
    RELU = "relu"
    SILU = "silu"


class NormKind(StrEnum):
    LAYERNORM = "layernorm"  # weight (+ bias unless norm_bias is false)
    RMSNORM = "rmsnorm"  # weight only (Zhang & Sennrich 2019)


class PositionKind(StrEnum):
    LEARNED = "learned"  # absolute embedding table (GPT-2/3, OPT)
    ROPE = "rope"  # rotary (Su et al. 2021): no parameters
    ALIBI = "alibi"  # linear biases (Press et al. 2022): no parameters
    NONE = "none"


class LocalAttention(StrEnum):
    """How the layers marked in ``sliding_window_pattern`` limit what a query sees."""

    SLIDING = "sliding"  # the last ``sliding_window`` keys (Mistral, Gemma 2, gpt-oss)
    # fixed blocks of ``sliding_window`` tokens: a query sees its own chunk only, from the chunk's
    # start (Llama 4's attention_chunk_size on its RoPE layers; transformers
    # modeling_llama4.py, ``chunked_attention_mask``)
    CHUNKED = "chunked"


class MLAConfig(Frozen):
    """Multi-head latent attention dimensions (DeepSeek-V2 paper, sec. 2.1.2-2.1.3)."""

    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_WIDTH,
                                    description="None: full-rank Q proj")
    kv_lora_rank: int = Field(gt=0, le=MAX_WIDTH)
    qk_nope_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    qk_rope_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    v_head_dim: int = Field(gt=0, le=MAX_WIDTH)

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


class DSAConfig(Frozen):
    """DeepSeek Sparse Attention (DeepSeek-V3.2-Exp; config keys index_n_heads, index_head_dim,
    index_topk): a lightning indexer scores every cached token with a few small heads, and MLA
    attends only to the ``index_topk`` best."""

    index_n_heads: int = Field(gt=0, le=MAX_WIDTH)
    index_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    index_topk: int = Field(gt=0, le=MAX_SEQ)


class MoEConfig(Frozen):
    """Mixture of experts (Shazeer 2017; Fedus 2021; DeepSeekMoE arXiv:2401.06066)."""

    num_experts: int = Field(gt=0, le=MAX_EXPERTS, description="routed experts per MoE layer")
    top_k: int = Field(gt=0, description="routed experts active per token")
    expert_ffn_dim: int = Field(gt=0, le=MAX_FFN, description="hidden size of one routed expert")
    num_shared_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    shared_expert_ffn_dim: int | None = Field(
        default=None, gt=0, le=MAX_FFN,
        description="hidden size of one shared expert (default expert_ffn_dim)"
    )
    shared_expert_gate: bool = Field(
        default=False, description="sigmoid gate d_model->1 on the shared expert (Qwen-MoE)"
    )
    router_bias: bool = Field(
        default=False, description="per-expert routing bias vector (DeepSeek-V3 aux-loss-free)"
    )
    dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS,
                              description="first layers that use a dense FFN")
    layer_frequency: int = Field(default=1, gt=0, le=MAX_LAYERS,
                                 description="every n-th layer is MoE")

    @model_validator(mode="after")
    def _check(self) -> MoEConfig:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k {self.top_k} exceeds num_experts {self.num_experts}")
        return self

    @property
    def shared_ffn(self) -> int:
        return self.shared_expert_ffn_dim or self.expert_ffn_dim


class ModelSpec(CatalogEntry):
    family: str
    year: int | None = Field(default=None, ge=2017, le=2035)

    n_layers: int = Field(gt=0, le=MAX_LAYERS)
    d_model: int = Field(gt=0, le=MAX_WIDTH)
    n_heads: int = Field(gt=0, le=MAX_WIDTH)
    n_kv_heads: int | None = Field(default=None, gt=0, le=MAX_WIDTH,
                                   description="default: n_heads (MHA)")
    head_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH,
                                 description="default: d_model / n_heads")
    ffn_dim: int = Field(gt=0, le=MAX_FFN, description="hidden size of the dense FFN")
    ffn_kind: FFNKind = FFNKind.GATED
    activation: Activation = Activation.SILU
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    max_seq_len: int = Field(gt=0, le=MAX_SEQ)
    tied_embeddings: bool = False

    position: PositionKind = PositionKind.ROPE
    learned_position_offset: int = Field(default=0, ge=0, le=MAX_SEQ,
                                         description="OPT adds 2 rows")
    rope_fraction: float = Field(default=1.0, gt=0, le=1, description="GPT-J/NeoX partial RoPE")

    norm: NormKind = NormKind.RMSNORM
    norm_bias: bool = Field(default=True, description="LayerNorm has a bias (MPT, PaLM: none)")
    norms_per_layer: int = Field(default=2, ge=1, le=4, description="Gemma 2 uses 4")
    final_norm: bool = True
    embedding_norm: bool = Field(default=False, description="norm after embedding (BLOOM)")
    qk_norm: bool = Field(default=False, description="per-head RMSNorm on q and k (Qwen3)")
    parallel_block: bool = Field(default=False, description="attn and MLP in parallel (GPT-J)")

    qkv_bias: bool = False
    attn_out_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False

    sliding_window: int | None = Field(default=None, gt=0, le=MAX_SEQ)
    sliding_window_pattern: tuple[bool, ...] = Field(
        default=(True,),
        description="repeating per-layer pattern, True = sliding-window layer (Gemma 2: [T, F])",
    )

    local_attention: LocalAttention = Field(
        default=LocalAttention.SLIDING,
        description="sliding window or Llama 4's chunked attention on the local layers")
    attention_sinks: bool = Field(
        default=False,
        description="one learned logit per head in each softmax's denominator (gpt-oss)")
    mtp_layers: int = Field(
        default=0, ge=0, le=MAX_LAYERS,
        description="multi-token-prediction modules shipped beside the main model (DeepSeek-V3 "
                    "num_nextn_predict_layers); not in the main model's count")

    mla: MLAConfig | None = None
    dsa: DSAConfig | None = None
    moe: MoEConfig | None = None

    source: tuple[str, ...] = Field(default=(), description="ids into sources")
    published_params: int | None = Field(
        default=None, gt=0, description="exact total published by the authors or checkpoint"
    )
    published_params_source: str | None = None
    notes: tuple[str, ...] = ()

    @field_validator("notes", "source", mode="before")
    @classmethod
    def _listify_more(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.head_dim is None and self.mla is None and self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads {self.n_heads} does not divide d_model {self.d_model}: "
                "fix the sizes or give head_dim explicitly"
            )
        kv = self.kv_heads
        if kv > self.n_heads or self.n_heads % kv:
            raise ValueError(
                f"n_kv_heads {kv} must divide n_heads {self.n_heads} (grouped-query attention)"
            )
        if self.dsa is not None and (self.mla is None or self.mla.q_lora_rank is None):
            raise ValueError("dsa (DeepSeek sparse attention) needs mla with a q_lora_rank: its "
                             "indexer reads the compressed query")
        if self.published_params is not None and not self.published_params_source:
            raise ValueError("published_params needs published_params_source")
        if self.moe and self.moe.dense_layers > self.n_layers:
            raise ValueError("moe.dense_layers exceeds n_layers")
        if not self.sliding_window_pattern:
            raise ValueError("sliding_window_pattern must have at least one entry")
        if len(self.sliding_window_pattern) > MAX_LAYERS:
            raise ValueError(f"sliding_window_pattern has more than {MAX_LAYERS:,} entries")
        size = self.size_bound()
        if size > MAX_PARAMS:
            raise ValueError(
                f"about {size:.3g} parameters, beyond the {MAX_PARAMS:.0e} accelmap maps (the "
                "largest models have ~1e12): check vocab_size, d_model, ffn_dim and n_layers")
        return self

    def size_bound(self) -> float:
        """A quick upper estimate of the parameter count (embeddings, attention and the wider
        of the dense and expert FFNs in every layer), to refuse absurd sizes before any work."""
        d, hd = float(self.d_model), float(self.head_size)
        attn = d * hd * 2 * (self.n_heads + self.kv_heads)
        if self.mla is not None:
            attn += d * (self.mla.kv_lora_rank + (self.mla.q_lora_rank or 0)) * 4
        ffn = 3 * d * self.ffn_dim
        if self.moe is not None:
            m = self.moe
            ffn = max(ffn, 3 * d * (m.num_experts * m.expert_ffn_dim
                                    + m.num_shared_experts * m.shared_ffn))
        return 2 * float(self.vocab_size) * d + self.n_layers * (attn + ffn)

    # --- derived -------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def kv_width(self) -> int:
        """Values one token adds to one layer's KV cache: the compressed latent plus the shared
        RoPE key under MLA (DeepSeek-V2, sec. 2.1.2-2.1.3) and the indexer's key under DSA,
        else K and V of every KV head."""
        if self.mla is not None:
            index = self.dsa.index_head_dim if self.dsa is not None else 0
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim + index
        return 2 * self.kv_heads * self.head_size

    @property
    def attention_kind(self) -> AttentionKind:
        if self.mla is not None:
            return AttentionKind.MLA
        if self.kv_heads == self.n_heads:
            return AttentionKind.MHA
        return AttentionKind.MQA if self.kv_heads == 1 else AttentionKind.GQA

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    def is_moe_layer(self, layer: int) -> bool:
        m = self.moe
        if m is None or layer < m.dense_layers:
            return False
        return (layer - m.dense_layers) % m.layer_frequency == 0

    def is_sliding_layer(self, layer: int) -> bool:
        if self.sliding_window is None:
            return False
        pattern = self.sliding_window_pattern
        return pattern[layer % len(pattern)]

    @property
    def n_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.n_layers))
