"""Mapper for ``model_type`` llama (LlamaConfig): the template the RoPE family follows."""

from __future__ import annotations

from typing import Any

from accelmap.models.hf_config import HFConfig, register
from accelmap.models.mappers.common import (
    _attention_bias,
    _bool,
    _llama_like,
    _notes,
    _require_hidden_size,
)


@register("llama")
def llama(cfg: HFConfig) -> dict[str, Any]:
    """LlamaConfig: RoPE, RMSNorm, gated MLP with ``hidden_act`` (silu), GQA via
    ``num_key_value_heads`` (null = MHA), optional ``attention_bias`` and ``mlp_bias``."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg,
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=None,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    fields.update(_attention_bias(cfg), mlp_bias=_bool(cfg, "mlp_bias", False))
    fields["notes"] = _notes(cfg)
    return fields
