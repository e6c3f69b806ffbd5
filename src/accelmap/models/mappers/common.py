"""Helpers shared by the Hugging Face mappers: typed reads with transformers' defaults,
sliding-window and MoE layer schedules, and refusals that say why."""

from __future__ import annotations

from typing import Any

from accelmap.errors import InputError
from accelmap.models.hf_config import HFConfig

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


def _int_or_null(cfg: HFConfig, key: str, default: int | None) -> int | None:
    """An integer key whose explicit null has a meaning of its own (e.g. ``q_lora_rank: null`` is a
    full-rank query projection): null stays None, absent takes the class default."""
    if key not in cfg.data:
        return default
    return cfg.int(key, default=None)


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
        # null num_key_value_heads means MHA in every *Config class (kv heads = heads)
        "n_kv_heads": _int_or_null(cfg, "num_key_value_heads", num_key_value_heads),
        "head_dim": _int_or_null(cfg, "head_dim", head_dim),
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


def _attention_bias(cfg: HFConfig, default: bool = False) -> dict[str, bool]:
    """``attention_bias``: one flag for the q/k/v and output projection biases (LlamaConfig,
    Qwen3Config, Gemma2Config; default false in each)."""
    bias = _bool(cfg, "attention_bias", default)
    return {"qkv_bias": bias, "attn_out_bias": bias}
