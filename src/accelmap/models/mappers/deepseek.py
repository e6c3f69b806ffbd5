"""Mapper for ``model_type`` deepseek_v3: multi-head latent attention plus DeepSeekMoE."""

from __future__ import annotations

from typing import Any

from accelmap.models.hf_config import HFConfig, register
from accelmap.models.mappers.common import (
    _bool,
    _int_or_null,
    _llama_like,
    _moe_schedule,
    _notes,
    _refuse,
    _require_hidden_size,
)


@register("deepseek_v3")
def deepseek_v3(cfg: HFConfig) -> dict[str, Any]:
    """DeepseekV3Config: multi-head latent attention (``q_lora_rank``, ``kv_lora_rank``,
    ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``) and DeepSeekMoE: the first
    ``first_k_dense_replace`` layers dense (``intermediate_size``), then every ``moe_layer_freq``-th
    layer holds ``n_routed_experts`` routed + ``n_shared_experts`` shared experts of
    ``moe_intermediate_size``, a router d_model x E and its per-expert score-correction bias.

    The ``num_nextn_predict_layers`` multi-token-prediction module is not counted: it is not part
    of the main model (transformers skips ``model.layers.61.*`` when loading).
    """
    _require_hidden_size(cfg, "hidden_size")
    if _bool(cfg, "attention_bias", False):
        raise _refuse(
            cfg,
            "attention_bias=true adds biases to q_a_proj and kv_a_proj_with_mqa, which ModelSpec's "
            "MLA count has no field for",
        )
    fields = _llama_like(
        cfg,
        vocab_size=129280,
        hidden_size=7168,
        intermediate_size=18432,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    fields.pop("head_dim")
    fields["n_kv_heads"] = None  # MLA: K/V come from the shared latent, not kv heads
    fields["mla"] = {
        "q_lora_rank": _int_or_null(cfg, "q_lora_rank", 1536),  # null: full-rank q_proj
        "kv_lora_rank": cfg.int("kv_lora_rank", default=512),
        "qk_nope_head_dim": cfg.int("qk_nope_head_dim", default=128),
        "qk_rope_head_dim": cfg.int("qk_rope_head_dim", default=64),
        "v_head_dim": cfg.int("v_head_dim", default=128),
    }
    n = fields["n_layers"]
    routed = _int_or_null(cfg, "n_routed_experts", 256)  # null: a dense model
    first_k = cfg.int("first_k_dense_replace", default=3)
    freq = cfg.int("moe_layer_freq", default=1)
    if freq < 1:
        raise _refuse(cfg, f"field 'moe_layer_freq' should be at least 1, got {freq}")
    moe_layers = [i for i in range(n) if routed is not None and i >= first_k and i % freq == 0]
    if moe_layers:
        dense, every = _moe_schedule(cfg, n, moe_layers, "first_k_dense_replace/moe_layer_freq")
        shared = _int_or_null(cfg, "n_shared_experts", 1)  # null: no shared experts
        fields["moe"] = {
            "num_experts": routed,
            "top_k": cfg.int("num_experts_per_tok", default=8),
            "expert_ffn_dim": cfg.int("moe_intermediate_size", default=2048),
            "num_shared_experts": shared or 0,
            "router_bias": True,
            "dense_layers": dense,
            "layer_frequency": every,
        }
    mtp = cfg.int("num_nextn_predict_layers", default=1) or 0
    fields["mtp_layers"] = mtp
    fields["notes"] = _notes(
        cfg,
        f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) are stored in the "
        "checkpoint and counted apart (count_mtp_params): they are not part of the main model",
        "router e_score_correction_bias counted (a parameter in DeepSeek's reference code and "
        "stored in the checkpoint; transformers' native port keeps it as a buffer)",
    )
    return fields


@register("kimi_k2")
def kimi_k2(cfg: HFConfig) -> dict[str, Any]:
    """Kimi K2 (moonshotai/Kimi-K2-Instruct): ``model_type`` kimi_k2 with architecture
    DeepseekV3ForCausalLM and DeepseekV3Config's keys (384 routed experts, 64 heads, one dense
    layer, no MTP in the released config), so DeepSeek-V3's mapper reads it."""
    return deepseek_v3(cfg)


@register("deepseek_v32")
def deepseek_v32(cfg: HFConfig) -> dict[str, Any]:
    """DeepSeek-V3.2-Exp (``deepseek_v32``): DeepseekV3Config's keys plus DeepSeek Sparse
    Attention's lightning indexer, ``index_n_heads`` heads of ``index_head_dim`` choosing
    ``index_topk`` cached tokens per query (DeepSeek-V3.2-Exp inference/model.py)."""
    fields = deepseek_v3(cfg)
    fields["dsa"] = {"index_n_heads": cfg.int("index_n_heads", default=64),
                     "index_head_dim": cfg.int("index_head_dim", default=128),
                     "index_topk": cfg.int("index_topk", default=2048)}
    return fields
