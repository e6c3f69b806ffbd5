"""Mappers for the Llama-derived RoPE families: Mistral, Mixtral, Qwen2/2-MoE/3/3-MoE,
Gemma 2, Phi-3."""

from __future__ import annotations

from typing import Any

from accelmap.models.hf_config import HFConfig, register
from accelmap.models.mappers.common import (
    _attention_bias,
    _bool,
    _layer_types,
    _llama_like,
    _moe_schedule,
    _notes,
    _qwen_moe_layers,
    _qwen_windows,
    _raw,
    _refuse,
    _require_hidden_size,
    _window_fields,
)


@register("mistral")
def mistral(cfg: HFConfig) -> dict[str, Any]:
    """MistralConfig: Llama layout without biases, GQA (8 kv heads) and a sliding window on every
    layer (class default 4096; a config that writes ``sliding_window: null`` has none)."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=4096 * 32,
        tie_word_embeddings=False,
    )
    window = _raw(cfg, "sliding_window", 4096)
    fields.update(_window_fields(cfg, window, [True] * fields["n_layers"]))
    fields["notes"] = _notes(cfg)
    return fields


@register("mixtral")
def mixtral(cfg: HFConfig) -> dict[str, Any]:
    """MixtralConfig: Mistral attention, every layer a sparse MoE of ``num_local_experts`` SwiGLU
    experts (``intermediate_size`` each) with a bias-free router, top ``num_experts_per_tok``."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=4096 * 32,
        tie_word_embeddings=False,
    )
    window = _raw(cfg, "sliding_window", None)
    fields.update(_window_fields(cfg, window, [True] * fields["n_layers"]))
    fields["moe"] = {
        "num_experts": cfg.int("num_local_experts", default=8),
        "top_k": cfg.int("num_experts_per_tok", default=2),
        "expert_ffn_dim": fields["ffn_dim"],
    }
    fields["notes"] = _notes(cfg)
    return fields


def _qwen_moe(
    cfg: HFConfig, n_layers: int, *, experts: int, top_k: int, expert_ffn: int
) -> dict[str, Any] | None:
    """Routed experts of a Qwen MoE config (class defaults passed in), or None if no layer is
    sparse. Sparse layers follow ``decoder_sparse_step`` / ``mlp_only_layers``."""
    num_experts = cfg.int("num_experts", default=experts)
    moe_layers = _qwen_moe_layers(cfg, n_layers, num_experts)
    if not moe_layers:
        return None
    dense, freq = _moe_schedule(cfg, n_layers, moe_layers, "decoder_sparse_step/mlp_only_layers")
    return {
        "num_experts": num_experts,
        "top_k": cfg.int("num_experts_per_tok", default=top_k),
        "expert_ffn_dim": cfg.int("moe_intermediate_size", default=expert_ffn),
        "dense_layers": dense,
        "layer_frequency": freq,
    }


@register("qwen2")
def qwen2(cfg: HFConfig) -> dict[str, Any]:
    """Qwen2Config: Llama layout with biases on q/k/v (not on o_proj); optional sliding window on
    layers >= ``max_window_layers`` when ``use_sliding_window`` (or per ``layer_types``)."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=22016,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
    )
    fields["qkv_bias"] = True
    fields.update(_qwen_windows(cfg, fields["n_layers"], 28))
    fields["notes"] = _notes(cfg)
    return fields


@register("qwen2_moe")
def qwen2_moe(cfg: HFConfig) -> dict[str, Any]:
    """Qwen2MoeConfig: Qwen2 attention (``qkv_bias``, default true); sparse layers chosen by
    ``decoder_sparse_step`` / ``mlp_only_layers`` hold ``num_experts`` experts of
    ``moe_intermediate_size``, one shared expert of ``shared_expert_intermediate_size`` and its
    sigmoid gate (d_model -> 1); other layers a dense MLP of ``intermediate_size``."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=24,
        num_attention_heads=16,
        num_key_value_heads=16,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
    )
    fields["qkv_bias"] = _bool(cfg, "qkv_bias", True)
    n = fields["n_layers"]
    if _bool(cfg, "use_sliding_window", False):
        window = _raw(cfg, "sliding_window", 4096)
        sliding = _layer_types(cfg, n)
        if sliding is None:  # Qwen2MoeConfig's own rule: even layers below max_window_layers
            mwl = cfg.int("max_window_layers", default=28)
            sliding = [bool((i + 1) % 2) and i < mwl for i in range(n)]
        fields.update(_window_fields(cfg, window, sliding))
    moe = _qwen_moe(cfg, n, experts=60, top_k=4, expert_ffn=1408)
    if moe:
        shared = cfg.int("shared_expert_intermediate_size", default=5632)
        if shared <= 0:
            raise _refuse(
                cfg,
                "shared_expert_intermediate_size 0 leaves a parameter-free shared expert with a "
                "live gate, which ModelSpec cannot express",
            )
        moe.update(num_shared_experts=1, shared_expert_ffn_dim=shared, shared_expert_gate=True)
        fields["moe"] = moe
    fields["notes"] = _notes(cfg)
    return fields


@register("qwen3")
def qwen3(cfg: HFConfig) -> dict[str, Any]:
    """Qwen3Config: explicit ``head_dim`` (default 128), per-head RMSNorm on q and k,
    ``attention_bias`` on q/k/v/o (default false), Qwen2 sliding-window rule."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=22016,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=128,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
    )
    fields.update(qk_norm=True, **_attention_bias(cfg))
    fields.update(_qwen_windows(cfg, fields["n_layers"], 28))
    fields["notes"] = _notes(cfg)
    return fields


@register("qwen3_moe")
def qwen3_moe(cfg: HFConfig) -> dict[str, Any]:
    """Qwen3MoeConfig: Qwen3 attention (q/k norm, ``attention_bias``); sparse layers per
    ``decoder_sparse_step`` / ``mlp_only_layers`` with ``num_experts`` experts of
    ``moe_intermediate_size`` and no shared expert; dense layers use ``intermediate_size``."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=4,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
    )
    fields.update(qk_norm=True, **_attention_bias(cfg))
    n = fields["n_layers"]
    fields.update(_qwen_windows(cfg, n, 28))
    moe = _qwen_moe(cfg, n, experts=128, top_k=8, expert_ffn=768)
    if moe:
        fields["moe"] = moe
    fields["notes"] = _notes(cfg)
    return fields


@register("gemma2")
def gemma2(cfg: HFConfig) -> dict[str, Any]:
    """Gemma2Config: explicit ``head_dim`` (256), four RMSNorms per layer (pre/post attention and
    pre/post MLP), GeGLU with ``hidden_activation`` (tanh GELU), tied embeddings, and
    ``sliding_window`` on alternate layers starting with layer 0 (or per ``layer_types``).
    ``query_pre_attn_scalar`` and the soft-capping values change no parameter."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=256000,
        hidden_size=2304,
        intermediate_size=9216,
        num_hidden_layers=26,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        act_key="hidden_activation",
        act_default="gelu_pytorch_tanh",
    )
    fields.update(norms_per_layer=4, **_attention_bias(cfg))
    n = fields["n_layers"]
    cfg.int("query_pre_attn_scalar", default=256)  # validated; scaling only, no parameters
    sliding = _layer_types(cfg, n) or [bool((i + 1) % 2) for i in range(n)]
    fields.update(_window_fields(cfg, _raw(cfg, "sliding_window", 4096), sliding))
    fields["notes"] = _notes(cfg)
    return fields


@register("phi3")
def phi3(cfg: HFConfig) -> dict[str, Any]:
    """Phi3Config: fused qkv_proj and gate_up_proj (same shapes as Llama's, no biases), GQA via
    ``num_key_value_heads`` (default: MHA), optional ``partial_rotary_factor`` and a
    ``sliding_window`` applied to every layer."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=32064,
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=None,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    fields["rope_fraction"] = float(cfg.get("partial_rotary_factor", default=1.0))
    window = _raw(cfg, "sliding_window", None)
    fields.update(_window_fields(cfg, window, [True] * fields["n_layers"]))
    fields["notes"] = _notes(cfg)
    return fields
