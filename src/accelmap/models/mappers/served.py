"""Mappers for the MoE families served most in 2025-2026: ``gpt_oss`` (OpenAI gpt-oss),
``glm4_moe`` (GLM-4.5/4.6/4.7) and ``llama4`` / ``llama4_text`` (Llama 4 Scout and Maverick).
Keys and defaults follow the ``transformers`` configuration classes of the same names."""

from __future__ import annotations

from typing import Any

from accelmap.models.hf_config import HFConfig, register
from accelmap.models.mappers.common import (
    _bool,
    _layer_types,
    _llama_like,
    _moe_schedule,
    _notes,
    _raw,
    _refuse,
    _require_hidden_size,
    _window_fields,
)


@register("gpt_oss")
def gpt_oss(cfg: HFConfig) -> dict[str, Any]:
    """GptOssConfig: every layer MoE (``num_local_experts`` SwiGLU experts of
    ``intermediate_size``, biases on gate_up and down, router d -> E with bias, top
    ``num_experts_per_tok``); q/k/v/o biases (``attention_bias``, default true); one learned
    sink logit per head; ``sliding_window`` on the layers ``layer_types`` marks (class default:
    even layers from 0 slide)."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg, vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=36,
        num_attention_heads=64, num_key_value_heads=8, head_dim=64,
        max_position_embeddings=131072, tie_word_embeddings=False)
    bias = _bool(cfg, "attention_bias", True)
    fields.update(qkv_bias=bias, attn_out_bias=bias, mlp_bias=True, attention_sinks=True)
    n = fields["n_layers"]
    sliding = _layer_types(cfg, n) or [i % 2 == 0 for i in range(n)]
    fields.update(_window_fields(cfg, _raw(cfg, "sliding_window", 128), sliding))
    fields["moe"] = {
        "num_experts": cfg.int("num_local_experts", default=128),
        "top_k": cfg.int("num_experts_per_tok", "experts_per_token", default=4),
        "expert_ffn_dim": fields["ffn_dim"],
        "router_bias": True,
    }
    fields["notes"] = _notes(
        cfg, "learned attention sinks: one logit per head in each softmax (no FLOPs charged)",
        "the MXFP4 experts of the checkpoint are counted as parameters (4.25 bits each as "
        "stored; choose the weight format with --weights/--moe-weights)")
    return fields


@register("glm4_moe")
def glm4_moe(cfg: HFConfig) -> dict[str, Any]:
    """Glm4MoeConfig: GQA with ``head_dim``, biases on q/k/v only (``attention_bias``; o_proj
    has none), optional per-head QK RMSNorm (``use_qk_norm``), RoPE on ``partial_rotary_factor``
    of each head; the first ``first_k_dense_replace`` layers dense (``intermediate_size``), then
    ``n_routed_experts`` of ``moe_intermediate_size`` + ``n_shared_experts``, sigmoid routing with
    a score-correction bias; ``num_nextn_predict_layers`` MTP layers counted apart."""
    _require_hidden_size(cfg, "hidden_size")
    fields = _llama_like(
        cfg, vocab_size=151552, hidden_size=4096, intermediate_size=10944, num_hidden_layers=46,
        num_attention_heads=96, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=131072, tie_word_embeddings=False)
    fields.update(qkv_bias=_bool(cfg, "attention_bias", False),
                  qk_norm=_bool(cfg, "use_qk_norm", False),
                  rope_fraction=float(cfg.get("partial_rotary_factor", default=0.5)),
                  mtp_layers=cfg.int("num_nextn_predict_layers", default=0) or 0)
    n = fields["n_layers"]
    first_k = cfg.int("first_k_dense_replace", default=1)
    routed = cfg.int("n_routed_experts", default=128)
    moe_layers = [i for i in range(n) if i >= first_k]
    if moe_layers:
        dense, every = _moe_schedule(cfg, n, moe_layers, "first_k_dense_replace")
        fields["moe"] = {
            "num_experts": routed,
            "top_k": cfg.int("num_experts_per_tok", default=8),
            "expert_ffn_dim": cfg.int("moe_intermediate_size", default=1408),
            "num_shared_experts": cfg.int("n_shared_experts", default=1),
            "router_bias": True, "dense_layers": dense, "layer_frequency": every,
        }
    fields["notes"] = _notes(cfg)
    return fields


def _llama4_text(cfg: HFConfig) -> HFConfig:
    """A Llama 4 checkpoint's config nests the language model under ``text_config``."""
    inner = cfg.data.get("text_config")
    if inner is None:
        return cfg
    if not isinstance(inner, dict):
        raise _refuse(cfg, "field 'text_config' should be a JSON object")
    return HFConfig(inner, f"{cfg.origin} text_config")


@register("llama4", "llama4_text")
def llama4(cfg: HFConfig) -> dict[str, Any]:
    """Llama4TextConfig (under ``text_config`` of a Llama4Config; the vision tower is not
    counted): MoE on ``moe_layers`` (default every ``interleave_moe_layer_step``-th layer from
    step - 1) with ``num_local_experts`` experts of ``intermediate_size`` plus one shared expert
    of the same width, router without bias; dense layers of ``intermediate_size_mlp``;
    ``attention_chunk_size`` chunked attention on the RoPE layers (``no_rope_layers`` 1; default
    every 4th layer is NoPE with global attention); the QK L2-norm has no weight."""
    text = _llama4_text(cfg)
    _require_hidden_size(text, "hidden_size")
    fields = _llama_like(
        text, vocab_size=202048, hidden_size=5120, intermediate_size=8192, num_hidden_layers=48,
        num_attention_heads=40, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=4096 * 32, tie_word_embeddings=False)
    n = fields["n_layers"]
    fields["ffn_dim"] = text.int("intermediate_size_mlp", default=16384)
    expert_ffn = text.int("intermediate_size", default=8192)
    step = text.int("interleave_moe_layer_step", default=1)
    if step < 1:
        raise _refuse(text, f"field 'interleave_moe_layer_step' should be at least 1, got {step}")
    moe_layers = text.get("moe_layers", default=list(range(step - 1, n, step)))
    if not isinstance(moe_layers, list) or not all(isinstance(i, int) for i in moe_layers):
        raise _refuse(text, "field 'moe_layers' should be a list of layer indices")
    if moe_layers:
        dense, every = _moe_schedule(text, n, sorted(moe_layers), "moe_layers")
        fields["moe"] = {
            "num_experts": text.int("num_local_experts", default=16),
            "top_k": text.int("num_experts_per_tok", default=1),
            "expert_ffn_dim": expert_ffn, "num_shared_experts": 1,
            "shared_expert_ffn_dim": expert_ffn, "dense_layers": dense, "layer_frequency": every,
        }
    interval = text.int("no_rope_layer_interval", default=4)
    rope = text.get("no_rope_layers", default=[int((i + 1) % interval != 0) for i in range(n)])
    if not isinstance(rope, list) or len(rope) != n:
        raise _refuse(text, f"field 'no_rope_layers' should list one flag per layer ({n})")
    chunk = _raw(text, "attention_chunk_size", 8192)
    fields.update(_window_fields(text, chunk, [bool(r) for r in rope]))
    if chunk is not None:
        fields["local_attention"] = "chunked"
    fields["notes"] = _notes(cfg, "text model only: the vision encoder is not counted")
    return fields
