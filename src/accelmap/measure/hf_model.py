"""`validate --local --impl hf`: the model as Hugging Face transformers builds it (issue 23 part
5), next to the project's own PyTorch model (:mod:`accelmap.measure.torch_model`), because the
runs people make on one GPU are transformers runs: its modules launch their own kernels (RoPE,
``repeat_kv``, the SDPA call, the separate q/k/v/o and gate/up/down linears), and its decode loops
are eager with a ``DynamicCache`` or graph-captured with a ``StaticCache`` under
``torch.compile(mode="reduce-overhead")`` (transformers docs, "Optimizing inference: static
kv-cache and torch.compile"; "Caching").

Random weights from the preset's own config (``from_config``: nothing is downloaded). Built for
the dense decoder shapes transformers' Llama family covers: ``LlamaConfig`` (RMSNorm, RoPE,
SwiGLU, GQA), ``Qwen2Config`` (q/k/v biases), ``Qwen3Config`` (per-head q/k RMSNorm) and
``MistralConfig`` (a sliding window on every layer); anything else is refused with what it has
that they do not build. Attention runs through PyTorch's SDPA (``attn_implementation="sdpa"``),
which takes the flash kernel for 16-bit inputs on a GPU.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelmap.errors import InputError
from accelmap.models.schema import (
    Activation,
    FFNKind,
    LocalAttention,
    ModelSpec,
    NormKind,
    PositionKind,
)

INSTALL = "pip install 'accelmap[hf,measure]' (transformers and PyTorch)"


def transformers_module() -> Any:
    try:
        import transformers
    except ImportError:
        raise InputError(f"--impl hf needs Hugging Face transformers: {INSTALL}") from None
    return transformers


def unbuilt(spec: ModelSpec) -> str | None:
    """What transformers' Llama family does not build for ``spec``, or None."""
    checks = (
        (spec.mla is not None, "multi-head latent attention"),
        (spec.moe is not None, "mixture-of-experts layers"),
        (spec.dsa is not None, "DeepSeek sparse attention"),
        (spec.attention_sinks, "attention sinks"),
        (spec.parallel_block, "parallel attention and MLP blocks"),
        (spec.position is not PositionKind.ROPE, f"{spec.position.value} positions"),
        (spec.norm is not NormKind.RMSNORM, f"{spec.norm.value}"),
        (spec.ffn_kind is not FFNKind.GATED or spec.activation is not Activation.SILU,
         f"a {spec.ffn_kind.value} {spec.activation.value} FFN"),
        (spec.embedding_norm or spec.norms_per_layer != 2, "extra norms"),
        (spec.rope_fraction != 1.0, "partial RoPE"),
        (spec.mlp_bias or spec.lm_head_bias, "MLP or LM-head biases"),
        (spec.local_attention is not LocalAttention.SLIDING and any(spec.sliding_window_pattern),
         "chunked local attention"),
        (spec.sliding_window is not None and spec.sliding_window_pattern
         and not all(spec.sliding_window_pattern), "a per-layer window pattern"),
    )
    found = [what for bad, what in checks if bad]
    return ", ".join(found) if found else None


def hf_config(spec: ModelSpec) -> Any:
    """The transformers config of ``spec``'s shape (see the module docstring)."""
    missing = unbuilt(spec)
    if missing:
        raise InputError(f"--impl hf builds Llama/Qwen2/Qwen3/Mistral-shaped models; {spec.id} "
                         f"has {missing}: use --impl accelmap")
    tf = transformers_module()
    common: dict[str, Any] = {
        "vocab_size": spec.vocab_size, "hidden_size": spec.d_model,
        "intermediate_size": spec.ffn_dim, "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads, "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_size, "max_position_embeddings": spec.max_seq_len,
        "tie_word_embeddings": spec.tied_embeddings,
    }
    if spec.qk_norm:
        return tf.Qwen3Config(**common, attention_bias=spec.qkv_bias)
    if spec.qkv_bias:
        if spec.attn_out_bias:
            return tf.LlamaConfig(**common, attention_bias=True)
        return tf.Qwen2Config(**common)
    if spec.sliding_window is not None:
        return tf.MistralConfig(**common, sliding_window=spec.sliding_window)
    return tf.LlamaConfig(**common, attention_bias=spec.attn_out_bias)


def build(spec: ModelSpec, device: Any, dtype: Any) -> Any:
    """A randomly initialised ``AutoModelForCausalLM`` of ``spec`` on ``device`` in ``dtype``."""
    tf = transformers_module()
    cfg = hf_config(spec)
    with device:
        model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    return model.to(dtype)


def logits(model: Any, x: Any) -> Any:
    return model(input_ids=x).logits


def _cache_kw(model: Any) -> str:
    """The forward's name for the KV cache: ``cache`` from transformers 5.x (which deprecates
    ``past_key_values``), ``past_key_values`` before."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@dataclass(frozen=True)
class Loop:
    """One prefill and the decode steps after it, on one cache: ``prefill()`` fills the cache
    from the prompt, ``step(pos)`` decodes the token at position ``pos`` (greedy)."""

    prefill: Callable[[], None]
    step: Callable[[int], None]
    state: dict[str, Any]  # "next": the last token decoded, [batch, 1]


def eager_loop(model: Any, prompt: Any, total: int) -> Loop:
    """Eager decode with a ``DynamicCache`` (the cache grows each step: transformers' default)."""
    tf = transformers_module()
    kw = _cache_kw(model)
    state: dict[str, Any] = {}

    def prefill() -> None:
        state["cache"] = tf.DynamicCache(config=model.config)
        out = model(input_ids=prompt, use_cache=True, logits_to_keep=1,
                    **{kw: state["cache"]})
        state["next"] = out.logits[:, -1].argmax(-1, keepdim=True)

    def step(pos: int) -> None:
        out = model(input_ids=state["next"], use_cache=True, **{kw: state["cache"]})
        state["next"] = out.logits[:, -1].argmax(-1, keepdim=True)

    del total  # a DynamicCache needs no length
    return Loop(prefill, step, state)


def static_loop(model: Any, prompt: Any, total: int, backend: str = "inductor") -> Loop:
    """Decode over a ``StaticCache`` of ``total`` positions (its attention spans the padded
    length every step) with the forward compiled by ``torch.compile(mode="reduce-overhead",
    fullgraph=True)``: Inductor kernels replayed as one CUDA graph per step on a GPU. The
    prefill runs eagerly, as in transformers' recipe. ``backend`` other than inductor is for
    tests of the loop on a CPU (no code generation)."""
    import torch

    tf = transformers_module()
    kw = _cache_kw(model)
    cache = tf.StaticCache(config=model.config, max_cache_len=total)
    mode = "reduce-overhead" if backend == "inductor" else None
    compiled = torch.compile(model, mode=mode, fullgraph=True, backend=backend)
    dev = prompt.device
    state: dict[str, Any] = {}

    def prefill() -> None:
        cache.reset()
        n = prompt.shape[1]
        out = model(input_ids=prompt, use_cache=True, logits_to_keep=1,
                    cache_position=torch.arange(n, device=dev), **{kw: cache})
        state["next"] = out.logits[:, -1].argmax(-1, keepdim=True)

    def step(pos: int) -> None:
        out = compiled(input_ids=state["next"], use_cache=True,
                       cache_position=torch.tensor([pos], device=dev), **{kw: cache})
        state["next"] = out.logits[:, -1].argmax(-1, keepdim=True).clone()

    return Loop(prefill, step, state)


def describe(spec: ModelSpec) -> str:
    tf = transformers_module()
    return (f"Hugging Face transformers {tf.__version__}, {type(hf_config(spec)).__name__} "
            "from the preset (random weights), SDPA attention")
