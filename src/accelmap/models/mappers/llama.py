"""Mapper for ``model_type`` llama (LlamaConfig): the template the RoPE family follows."""

from __future__ import annotations

from typing import Any

from accelmap.models.hf import HFConfig, register


@register("llama")
def llama(cfg: HFConfig) -> dict[str, Any]:
    """LlamaConfig: RoPE, RMSNorm, SwiGLU, GQA via num_key_value_heads, optional biases."""
    bias = bool(cfg.get("attention_bias", default=False))
    return {
        "n_layers": cfg.int("num_hidden_layers"),
        "d_model": cfg.int("hidden_size"),
        "n_heads": cfg.int("num_attention_heads"),
        "n_kv_heads": cfg.int("num_key_value_heads", default=None),
        "head_dim": cfg.int("head_dim", default=None),
        "ffn_dim": cfg.int("intermediate_size"),
        "ffn_kind": "gated",
        "activation": "silu",
        "vocab_size": cfg.int("vocab_size"),
        "max_seq_len": cfg.int("max_position_embeddings"),
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", default=False)),
        "position": "rope",
        "norm": "rmsnorm",
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": bool(cfg.get("mlp_bias", default=False)),
    }


# ----------------------------------------------------------------------------------------------
# Shared helpers. Each mapper below passes its own configuration class's defaults explicitly, so
# a reviewer can compare one function with one `configuration_<type>.py` file.
# ----------------------------------------------------------------------------------------------

# transformers' ACT2FN names -> the schema's activations (gelu_new / gelu_pytorch_tanh / gelu_fast
# are all the tanh approximation; "gelu" is the exact erf form).
