"""One mapper per Hugging Face ``model_type``: config.json keys -> ModelSpec fields.

Each mapper reads exactly the keys its architecture's ``transformers`` configuration class
defines (names and defaults from that class), so the mapping is explicit and reviewable.
"""

from __future__ import annotations

from typing import Any

from accelmap.errors import InputError
from accelmap.models.hf import HFConfig, register


def _sliding(cfg: HFConfig) -> dict[str, Any]:
    window = cfg.get("sliding_window", default=None)
    if window is None or cfg.get("use_sliding_window", default=True) is False:
        return {}
    return {"sliding_window": int(window)}


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
_ACTIVATIONS: dict[str, str] = {
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
}


def _raw(cfg: HFConfig, key: str, default: Any) -> Any:
    """The value as transformers sees it: a key written as null stays None, an absent one defaults.

    (``HFConfig.get`` treats null as absent; for keys whose null means "off", such as
    ``sliding_window``, that would wrongly bring back the class default.)
    """
    return cfg.data.get(key, default)


def _bool(cfg: HFConfig, key: str, default: bool) -> bool:
    value = cfg.get(key, default=default)
    if not isinstance(value, bool):
        raise InputError(f"{cfg.origin}: field {key!r} should be true or false, got {value!r}")
    return value


def _activation(cfg: HFConfig, key: str, default: str) -> str:
    name = str(cfg.get(key, default=default))
    if name not in _ACTIVATIONS:
        raise InputError(
            f"{cfg.origin}: field {key!r} is {name!r}, which accelmap cannot map; known: "
            f"{', '.join(sorted(_ACTIVATIONS))}"
        )
    return _ACTIVATIONS[name]


def _notes(cfg: HFConfig, *extra: str) -> tuple[str, ...]:
    return (f"imported from {cfg.origin} by the {cfg.model_type!r} mapper", *extra)


def _refuse(cfg: HFConfig, why: str) -> InputError:
    return InputError(f"{cfg.origin}: {why}")


def _shortest_period(pattern: list[bool]) -> tuple[bool, ...]:
    """Smallest repeating unit p with pattern[i] == pattern[i % p] for every layer."""
    n = len(pattern)
    for p in range(1, n + 1):
        if all(pattern[i] == pattern[i % p] for i in range(n)):
            return tuple(pattern[:p])
    return tuple(pattern)  # pragma: no cover - p == n always matches


def _window_fields(cfg: HFConfig, window: Any, sliding: list[bool]) -> dict[str, Any]:
    """ModelSpec sliding-window fields from a window size and a per-layer sliding flag list."""
    if window is None or not any(sliding):
        return {}
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise _refuse(cfg, f"field 'sliding_window' should be a positive integer, got {window!r}")
    return {"sliding_window": window, "sliding_window_pattern": _shortest_period(sliding)}


def _layer_types(cfg: HFConfig, n_layers: int) -> list[bool] | None:
    """Per-layer sliding flags from an explicit ``layer_types`` list, when the config has one."""
    types = cfg.get("layer_types", default=None)
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != n_layers:
        raise _refuse(cfg, f"field 'layer_types' should list one type per layer ({n_layers})")
    return [t == "sliding_attention" for t in types]


def _qwen_windows(cfg: HFConfig, n_layers: int, max_window_layers_default: int) -> dict[str, Any]:
    """Qwen2/Qwen3 rule: with use_sliding_window, layers >= max_window_layers slide."""
    if not _bool(cfg, "use_sliding_window", False):
        return {}
    window = _raw(cfg, "sliding_window", 4096)
    sliding = _layer_types(cfg, n_layers)
    if sliding is None:
        mwl = cfg.int("max_window_layers", default=max_window_layers_default)
        sliding = [i >= mwl for i in range(n_layers)]
    return _window_fields(cfg, window, sliding)


def _moe_schedule(
    cfg: HFConfig, n_layers: int, moe_layers: list[int], keys: str
) -> tuple[int, int]:
    """(dense_layers, layer_frequency) reproducing exactly the given MoE layer indices."""
    first = moe_layers[0]
    freq = moe_layers[1] - first if len(moe_layers) > 1 else n_layers
    chosen = set(moe_layers)
    if any(((i >= first and (i - first) % freq == 0) != (i in chosen)) for i in range(n_layers)):
        raise _refuse(
            cfg,
            f"{keys} make layers {moe_layers} MoE, which is not a dense prefix followed by every "
            "n-th layer; ModelSpec (moe.dense_layers, moe.layer_frequency) cannot express that",
        )
    return first, freq


def _qwen_moe_layers(cfg: HFConfig, n_layers: int, num_experts: int) -> list[int]:
    """transformers' Qwen2-MoE / Qwen3-MoE rule for which layers get the sparse block."""
    step = cfg.int("decoder_sparse_step", default=1)
    if step < 1:
        raise _refuse(cfg, f"field 'decoder_sparse_step' should be at least 1, got {step}")
    mlp_only = cfg.get("mlp_only_layers", default=[])
    if not isinstance(mlp_only, list):
        raise _refuse(cfg, f"field 'mlp_only_layers' should be a list, got {mlp_only!r}")
    return [
        i for i in range(n_layers) if i not in mlp_only and num_experts > 0 and (i + 1) % step == 0
    ]


def _llama_like(
    cfg: HFConfig,
    *,
    vocab_size: int,
    hidden_size: int,
    intermediate_size: int,
    num_hidden_layers: int,
    num_attention_heads: int,
    num_key_value_heads: int | None,
    max_position_embeddings: int,
    tie_word_embeddings: bool,
    head_dim: int | None = None,
    act_key: str = "hidden_act",
    act_default: str = "silu",
) -> dict[str, Any]:
    """Keys every RoPE + RMSNorm + gated-MLP decoder shares; the arguments are class defaults."""
    return {
        "n_layers": cfg.int("num_hidden_layers", default=num_hidden_layers),
        "d_model": cfg.int("hidden_size", default=hidden_size),
        "n_heads": cfg.int("num_attention_heads", default=num_attention_heads),
        "n_kv_heads": cfg.int("num_key_value_heads", default=num_key_value_heads),
        "head_dim": cfg.int("head_dim", default=head_dim),
        "ffn_dim": cfg.int("intermediate_size", default=intermediate_size),
        "ffn_kind": "gated",
        "activation": _activation(cfg, act_key, act_default),
        "vocab_size": cfg.int("vocab_size", default=vocab_size),
        "max_seq_len": cfg.int("max_position_embeddings", default=max_position_embeddings),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", tie_word_embeddings),
        "position": "rope",
        "norm": "rmsnorm",
    }


def _require_hidden_size(cfg: HFConfig, *keys: str) -> None:
    """hidden_size has a class default, but a config without it is not a real checkpoint's."""
    if not any(cfg.has(k) for k in keys):
        cfg.get(*keys)  # raises the standard "field ... is missing" InputError


# ----------------------------------------------------------------------------------------------
# Llama-family (RoPE, RMSNorm, SwiGLU)
# ----------------------------------------------------------------------------------------------


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
    num_experts = cfg.int("num_experts", default=60)
    moe_layers = _qwen_moe_layers(cfg, n, num_experts)
    if moe_layers:
        shared = cfg.int("shared_expert_intermediate_size", default=5632)
        if shared <= 0:
            raise _refuse(
                cfg,
                "shared_expert_intermediate_size 0 leaves a parameter-free shared expert with a "
                "live gate, which ModelSpec cannot express",
            )
        dense, freq = _moe_schedule(cfg, n, moe_layers, "decoder_sparse_step/mlp_only_layers")
        fields["moe"] = {
            "num_experts": num_experts,
            "top_k": cfg.int("num_experts_per_tok", default=4),
            "expert_ffn_dim": cfg.int("moe_intermediate_size", default=1408),
            "num_shared_experts": 1,
            "shared_expert_ffn_dim": shared,
            "shared_expert_gate": True,
            "dense_layers": dense,
            "layer_frequency": freq,
        }
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
    bias = _bool(cfg, "attention_bias", False)
    fields.update({"qk_norm": True, "qkv_bias": bias, "attn_out_bias": bias})
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
    bias = _bool(cfg, "attention_bias", False)
    fields.update({"qk_norm": True, "qkv_bias": bias, "attn_out_bias": bias})
    n = fields["n_layers"]
    fields.update(_qwen_windows(cfg, n, 28))
    num_experts = cfg.int("num_experts", default=128)
    moe_layers = _qwen_moe_layers(cfg, n, num_experts)
    if moe_layers:
        dense, freq = _moe_schedule(cfg, n, moe_layers, "decoder_sparse_step/mlp_only_layers")
        fields["moe"] = {
            "num_experts": num_experts,
            "top_k": cfg.int("num_experts_per_tok", default=8),
            "expert_ffn_dim": cfg.int("moe_intermediate_size", default=768),
            "dense_layers": dense,
            "layer_frequency": freq,
        }
    fields["notes"] = _notes(cfg)
    return fields


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
        "q_lora_rank": cfg.int("q_lora_rank", default=1536),
        "kv_lora_rank": cfg.int("kv_lora_rank", default=512),
        "qk_nope_head_dim": cfg.int("qk_nope_head_dim", default=128),
        "qk_rope_head_dim": cfg.int("qk_rope_head_dim", default=64),
        "v_head_dim": cfg.int("v_head_dim", default=128),
    }
    n = fields["n_layers"]
    routed = cfg.int("n_routed_experts", default=256)
    first_k = cfg.int("first_k_dense_replace", default=3)
    freq = cfg.int("moe_layer_freq", default=1)
    if freq < 1:
        raise _refuse(cfg, f"field 'moe_layer_freq' should be at least 1, got {freq}")
    moe_layers = [i for i in range(n) if routed is not None and i >= first_k and i % freq == 0]
    if moe_layers:
        dense, every = _moe_schedule(cfg, n, moe_layers, "first_k_dense_replace/moe_layer_freq")
        shared = cfg.int("n_shared_experts", default=1)
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
    fields["notes"] = _notes(
        cfg,
        f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) are stored in the "
        "checkpoint but not counted: they are not part of the main model",
        "router e_score_correction_bias counted (a parameter in DeepSeek's reference code and "
        "stored in the checkpoint; transformers' native port keeps it as a buffer)",
    )
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
    bias = _bool(cfg, "attention_bias", False)
    fields.update({"norms_per_layer": 4, "qkv_bias": bias, "attn_out_bias": bias})
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


# ----------------------------------------------------------------------------------------------
# GPT-2 lineage (LayerNorm with bias, plain MLP)
# ----------------------------------------------------------------------------------------------


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
    rotary_dim = cfg.int("rotary_dim", default=64)
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
