"""Mappers for GPT-2-descended and other pre-Llama architectures: GPT-2, GPT-J, GPT-NeoX,
Falcon, MPT, OPT, BLOOM."""

from __future__ import annotations

from typing import Any

from accelmap.models.hf_config import HFConfig, register
from accelmap.models.mappers.common import (
    _activation,
    _bool,
    _int_or_null,
    _notes,
    _refuse,
    _require_hidden_size,
)


@register("gpt2")
def gpt2(cfg: HFConfig) -> dict[str, Any]:
    """GPT2Config: learned positions (``n_positions``), LayerNorm with bias, Conv1D projections with
    biases everywhere, plain MLP of ``n_inner`` (default 4 * ``n_embd``), tied LM head."""
    _require_hidden_size(cfg, "n_embd", "hidden_size")
    if _bool(cfg, "add_cross_attention", False):
        raise _refuse(
            cfg,
            "add_cross_attention=true adds cross-attention blocks, which a decoder-"
            "only ModelSpec cannot express",
        )
    d = cfg.int("n_embd", "hidden_size", default=768)
    return {
        "n_layers": cfg.int("n_layer", "num_hidden_layers", default=12),
        "d_model": d,
        "n_heads": cfg.int("n_head", "num_attention_heads", default=12),
        "ffn_dim": cfg.int("n_inner", default=4 * d),
        "ffn_kind": "plain",
        "activation": _activation(cfg, "activation_function", "gelu_new"),
        "vocab_size": cfg.int("vocab_size", default=50257),
        "max_seq_len": cfg.int("n_positions", "max_position_embeddings", default=1024),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", True),
        "position": "learned",
        "norm": "layernorm",
        "qkv_bias": True,
        "attn_out_bias": True,
        "mlp_bias": True,
        "notes": _notes(cfg),
    }


@register("gptj")
def gptj(cfg: HFConfig) -> dict[str, Any]:
    """GPTJConfig: one LayerNorm per block feeding attention and MLP in parallel, bias-free q/k/v/
    out projections, biased MLP of ``n_inner`` (default 4 * ``n_embd``), partial RoPE over
    ``rotary_dim`` channels per head, untied LM head with a bias."""
    _require_hidden_size(cfg, "n_embd", "hidden_size")
    d = cfg.int("n_embd", "hidden_size", default=4096)
    heads = cfg.int("n_head", "num_attention_heads", default=16)
    rotary_dim = _int_or_null(cfg, "rotary_dim", 64)  # null: rotate the whole head
    head = d // heads if heads else d
    fraction = 1.0 if rotary_dim is None else rotary_dim / head
    if not 0 < fraction <= 1:
        raise _refuse(cfg, f"rotary_dim {rotary_dim} does not fit the head size {head}")
    return {
        "n_layers": cfg.int("n_layer", "num_hidden_layers", default=28),
        "d_model": d,
        "n_heads": heads,
        "ffn_dim": cfg.int("n_inner", default=4 * d),
        "ffn_kind": "plain",
        "activation": _activation(cfg, "activation_function", "gelu_new"),
        "vocab_size": cfg.int("vocab_size", default=50400),
        "max_seq_len": cfg.int("n_positions", "max_position_embeddings", default=2048),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", False),
        "position": "rope",
        "rope_fraction": fraction,
        "norm": "layernorm",
        "norms_per_layer": 1,
        "parallel_block": True,
        "mlp_bias": True,
        "lm_head_bias": True,
        "notes": _notes(cfg),
    }


def _neox_rope_fraction(cfg: HFConfig) -> float:
    if cfg.has("rotary_pct"):
        return float(cfg.get("rotary_pct"))
    for key in ("rope_parameters", "rope_scaling"):
        nested = cfg.get(key, default=None)
        if isinstance(nested, dict) and nested.get("partial_rotary_factor") is not None:
            return float(nested["partial_rotary_factor"])
    return float(cfg.get("partial_rotary_factor", default=0.25))


@register("gpt_neox")
def gpt_neox(cfg: HFConfig) -> dict[str, Any]:
    """GPTNeoXConfig: two LayerNorms per layer, fused query_key_value and dense with biases
    (``attention_bias``, default true), biased MLP, partial RoPE (``rotary_pct``, default 0.25),
    ``use_parallel_residual`` blocks, untied ``embed_out`` head without bias."""
    _require_hidden_size(cfg, "hidden_size")
    bias = _bool(cfg, "attention_bias", True)
    return {
        "n_layers": cfg.int("num_hidden_layers", default=44),
        "d_model": cfg.int("hidden_size", default=6144),
        "n_heads": cfg.int("num_attention_heads", default=64),
        "ffn_dim": cfg.int("intermediate_size", default=24576),
        "ffn_kind": "plain",
        "activation": _activation(cfg, "hidden_act", "gelu"),
        "vocab_size": cfg.int("vocab_size", default=50432),
        "max_seq_len": cfg.int("max_position_embeddings", default=2048),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", False),
        "position": "rope",
        "rope_fraction": _neox_rope_fraction(cfg),
        "norm": "layernorm",
        "parallel_block": _bool(cfg, "use_parallel_residual", True),
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": True,
        "notes": _notes(cfg),
    }


@register("falcon")
def falcon(cfg: HFConfig) -> dict[str, Any]:
    """FalconConfig: fused query_key_value whose width follows ``new_decoder_architecture``
    (``num_kv_heads`` groups), ``multi_query`` (one K/V head) or plain MHA; ``bias`` on every
    linear layer; LayerNorms with bias: two per layer unless ``parallel_attn`` with a single shared
    norm (``num_ln_in_parallel_attn``, default 2 for the new architecture); RoPE unless ``alibi``;
    MLP of ``ffn_hidden_size`` (default 4 * hidden); LM head tied by default."""
    _require_hidden_size(cfg, "hidden_size", "n_embed")
    d = cfg.int("hidden_size", "n_embed", default=4544)
    heads = cfg.int("num_attention_heads", "n_head", default=71)
    new_arch = _bool(cfg, "new_decoder_architecture", False)
    multi_query = _bool(cfg, "multi_query", True)
    parallel = _bool(cfg, "parallel_attn", True)
    if new_arch:
        kv = cfg.int("num_kv_heads", "n_head_kv", default=heads)
    elif multi_query:
        kv = 1
    else:
        kv = heads  # query_key_value is 3 * hidden_size wide whatever num_kv_heads says
    n_ln = cfg.int("num_ln_in_parallel_attn", default=2 if new_arch else None)
    norms = 2 if (not parallel or n_ln == 2) else 1
    bias = _bool(cfg, "bias", False)
    alibi = _bool(cfg, "alibi", False)
    return {
        "n_layers": cfg.int("num_hidden_layers", "n_layer", default=32),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": kv,
        "ffn_dim": cfg.int("ffn_hidden_size", default=4 * d),
        "ffn_kind": "plain",
        "activation": _activation(cfg, "activation", "gelu"),
        "vocab_size": cfg.int("vocab_size", default=65024),
        "max_seq_len": cfg.int("max_position_embeddings", default=2048),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", True),
        "position": "alibi" if alibi else "rope",
        "norm": "layernorm",
        "norms_per_layer": norms,
        "parallel_block": parallel or new_arch,
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": bias,
        "notes": _notes(cfg),
    }


@register("mpt")
def mpt(cfg: HFConfig) -> dict[str, Any]:
    """MptConfig as transformers implements it: ALiBi attention (``attn_config``), bias-free
    Wqkv/out_proj/up/down (``no_bias``), LayerNorms without bias, plain GELU MLP of
    ``expansion_ratio`` * ``d_model``, tied LM head, no position table.

    Configs the transformers port cannot represent (learned positions instead of ALiBi, biases,
    QK LayerNorm, grouped-query attention) are refused rather than miscounted.
    """
    _require_hidden_size(cfg, "d_model", "hidden_size")
    attn = cfg.get("attn_config", default={})
    if not isinstance(attn, dict):
        raise _refuse(cfg, f"field 'attn_config' should be an object, got {attn!r}")
    if attn.get("alibi", True) is not True:
        raise _refuse(
            cfg,
            "attn_config.alibi=false means a learned position table (wpe), which "
            "transformers' MPT does not build; this mapper follows transformers",
        )
    if attn.get("qk_ln", False):
        raise _refuse(
            cfg, "attn_config.qk_ln=true adds q/k LayerNorms that ModelSpec cannot express for MPT"
        )
    if attn.get("attn_type", "multihead_attention") != "multihead_attention":
        raise _refuse(
            cfg,
            f"attn_config.attn_type {attn.get('attn_type')!r} is not supported by "
            "transformers' MPT (multihead_attention only)",
        )
    if not _bool(cfg, "no_bias", True):
        raise _refuse(
            cfg,
            "no_bias=false gives bias vectors that transformers' MPT port does not "
            "have, so its parameter count cannot be matched",
        )
    d = cfg.int("d_model", "hidden_size", default=2048)
    ratio = float(cfg.get("expansion_ratio", default=4))
    if int(ratio * d) != ratio * d:
        raise _refuse(cfg, f"expansion_ratio {ratio} x d_model {d} is not a whole FFN width")
    return {
        "n_layers": cfg.int("n_layers", "num_hidden_layers", default=24),
        "d_model": d,
        "n_heads": cfg.int("n_heads", "num_attention_heads", default=16),
        "ffn_dim": int(ratio * d),
        "ffn_kind": "plain",
        "activation": "gelu",
        "vocab_size": cfg.int("vocab_size", default=50368),
        "max_seq_len": cfg.int("max_seq_len", default=2048),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", True),
        "position": "alibi",
        "norm": "layernorm",
        "norm_bias": False,
        "notes": _notes(cfg),
    }


@register("opt")
def opt(cfg: HFConfig) -> dict[str, Any]:
    """OPTConfig: learned positions with OPT's offset of 2 rows, LayerNorms with bias (final one
    only when ``do_layer_norm_before`` and not ``_remove_final_layer_norm``), q/k/v/out and
    fc1/fc2 biases per ``enable_bias``, ReLU MLP of ``ffn_dim``, tied LM head.

    A ``word_embed_proj_dim`` different from ``hidden_size`` (OPT-350M) adds project_in/out
    matrices, and ``layer_norm_elementwise_affine=false`` makes the norms parameter-free; ModelSpec
    cannot express either, so both are refused.
    """
    _require_hidden_size(cfg, "hidden_size")
    d = cfg.int("hidden_size", default=768)
    proj = cfg.int("word_embed_proj_dim", default=d)
    if proj != d:
        raise _refuse(
            cfg,
            f"word_embed_proj_dim {proj} differs from hidden_size {d}, so OPT adds "
            "project_in/project_out layers, which ModelSpec cannot express",
        )
    if not _bool(cfg, "layer_norm_elementwise_affine", True):
        raise _refuse(
            cfg,
            "layer_norm_elementwise_affine=false makes OPT's LayerNorms "
            "parameter-free, which ModelSpec cannot express",
        )
    pre_norm = _bool(cfg, "do_layer_norm_before", True)
    bias = _bool(cfg, "enable_bias", True)
    return {
        "n_layers": cfg.int("num_hidden_layers", default=12),
        "d_model": d,
        "n_heads": cfg.int("num_attention_heads", default=12),
        "ffn_dim": cfg.int("ffn_dim", default=3072),
        "ffn_kind": "plain",
        "activation": _activation(cfg, "activation_function", "relu"),
        "vocab_size": cfg.int("vocab_size", default=50272),
        "max_seq_len": cfg.int("max_position_embeddings", default=2048),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", True),
        "position": "learned",
        "learned_position_offset": 2,
        "norm": "layernorm",
        "final_norm": pre_norm and not _bool(cfg, "_remove_final_layer_norm", False),
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": bias,
        "notes": _notes(cfg),
    }


@register("bloom")
def bloom(cfg: HFConfig) -> dict[str, Any]:
    """BloomConfig: ALiBi, LayerNorm after the embedding plus two per layer and a final one (all
    with bias), fused query_key_value / dense / MLP with biases, MLP 4 * hidden (BloomMLP ignores
    ``n_inner``), tanh-GELU, tied LM head. ``n_embed`` is the legacy name of ``hidden_size``."""
    _require_hidden_size(cfg, "hidden_size", "n_embed")
    d = cfg.int("n_embed", "hidden_size", default=64)
    return {
        "n_layers": cfg.int("n_layer", "num_hidden_layers", default=2),
        "d_model": d,
        "n_heads": cfg.int("n_head", "num_attention_heads", default=8),
        "ffn_dim": 4 * d,
        "ffn_kind": "plain",
        "activation": "gelu_tanh",
        "vocab_size": cfg.int("vocab_size", default=250880),
        # BloomConfig has no context length (ALiBi); BLOOM was trained on 2048-token sequences.
        "max_seq_len": cfg.int("seq_length", "max_position_embeddings", default=2048),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", True),
        "position": "alibi",
        "norm": "layernorm",
        "embedding_norm": True,
        "qkv_bias": True,
        "attn_out_bias": True,
        "mlp_bias": True,
        "notes": _notes(
            cfg,
            "BloomConfig has no context length (ALiBi); max_seq_len is BLOOM's training "
            "sequence length, 2048, unless the config gives seq_length",
        ),
    }
