"""validate --local: the PyTorch transformer built from a ModelSpec (exact parameter counts,
KV-cache correctness), scaling, a tiny real run with its rows, and the clear errors."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.measure.local_run import LocalSettings, run_local, scale_spec
from accelmap.models.params import count_params
from accelmap.models.schema import AttentionKind

torch = pytest.importorskip("torch")

from accelmap.measure.torch_model import KVCache, Transformer, build, parameter_count  # noqa: E402

# Full-size presets cheap to build on the meta device (one per architecture family)
FULL = ("gpt3-125m", "llama-2-7b", "gemma-2-9b", "mixtral-8x7b", "gpt-j-6b", "phi-3-mini",
        "qwen3-8b", "mpt-7b")
# One preset per structural feature: learned positions + biases + tying, GQA + RoPE + gated,
# sliding window + 4 norms, MoE, MLA + shared experts + dense layers, parallel block + partial
# RoPE, ALiBi, qk-norm, MoE with shared-expert gate
KINDS = ("gpt3-125m", "llama-3.1-8b", "gemma-2-9b", "mixtral-8x7b", "deepseek-v3", "gpt-j-6b",
         "bloom-176b", "qwen3-8b", "qwen2-57b-a14b")


def _meta(spec: Any) -> Transformer:
    with torch.device("meta"):
        return Transformer(spec)


def test_parameter_count_equals_count_params_for_every_scaled_preset(catalog: Catalog) -> None:
    from accelmap.measure.local_run import not_built

    skipped = {mid for mid, spec in catalog.models.items() if not_built(spec)}
    # the presets whose features the reference model lacks are refused by run_local, not run
    assert skipped == {"gpt-oss-120b", "gpt-oss-20b", "deepseek-v3.2"}
    for mid, spec in catalog.models.items():
        if mid in skipped:
            continue
        tiny, _ = scale_spec(spec, "tiny")
        assert parameter_count(_meta(tiny)) == count_params(tiny).total, mid


@pytest.mark.parametrize("mid", FULL)
def test_parameter_count_equals_count_params_at_full_size(catalog: Catalog, mid: str) -> None:
    spec = catalog.models[mid]
    assert parameter_count(_meta(spec)) == count_params(spec).total
    if spec.published_params:
        assert parameter_count(_meta(spec)) == spec.published_params


def test_scale_keeps_the_architecture(catalog: Catalog) -> None:
    for mid in KINDS:
        spec = catalog.models[mid]
        tiny, note = scale_spec(spec, "tiny")
        assert count_params(tiny).total < 10e6, mid
        assert "scaled to tiny" in note
        assert tiny.ffn_kind is spec.ffn_kind and tiny.norm is spec.norm
        assert tiny.position is spec.position and tiny.tied_embeddings == spec.tied_embeddings
        assert (tiny.moe is None) == (spec.moe is None) and (tiny.mla is None) == (
            spec.mla is None)
        if spec.mla is None:
            assert tiny.attention_kind is spec.attention_kind
        if spec.moe is not None:
            assert tiny.n_moe_layers >= 1
    small, _ = scale_spec(catalog.models["llama-2-7b"], "small")
    assert 10e6 < count_params(small).total < 40e6
    assert small.attention_kind is AttentionKind.MHA
    gqa, _ = scale_spec(catalog.models["llama-3.1-8b"], "tiny")
    assert gqa.attention_kind is AttentionKind.GQA
    same, note = scale_spec(catalog.models["gpt3-125m"], "full")
    assert same is catalog.models["gpt3-125m"] and "full size" in note
    auto, _ = scale_spec(catalog.models["gpt3-125m"], "auto")
    assert auto.d_model == 256
    with pytest.raises(InputError, match="unknown scale"):
        scale_spec(same, "huge")


@pytest.mark.parametrize("mid", KINDS)
def test_kv_cache_decode_matches_the_full_forward(catalog: Catalog, mid: str) -> None:
    """Prefill n tokens, decode one: the logits equal a full forward over n + 1 tokens."""
    spec, _ = scale_spec(catalog.models[mid], "micro")
    model = build(spec).eval()
    tokens = torch.randint(0, spec.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    cache = KVCache.empty(spec, 2, 9, torch.float32, "cpu")
    with torch.inference_mode():
        full = model(tokens)[:, -1]
        model(tokens[:, :8], 0, cache, last_only=True)
        step = model(tokens[:, 8:], 8, cache)[:, -1]
    assert torch.allclose(full, step, atol=1e-4, rtol=1e-4)
    assert cache.bytes > 0


def test_missing_torch_names_the_extra(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match=r"accelmap\[measure\]"):
        run_local(catalog.models["gpt3-125m"], LocalSettings(), "tiny")


def test_settings_and_lengths_are_checked(catalog: Catalog) -> None:
    with pytest.raises(InputError, match="batch"):
        LocalSettings(batch=0)
    with pytest.raises(InputError, match="max_seq_len"):
        run_local(catalog.models["gpt3-125m"], LocalSettings(seq=2040, decode_tokens=16), "tiny")


def test_run_local_refuses_what_the_reference_model_does_not_build(catalog: Catalog) -> None:
    from accelmap.errors import InputError
    from accelmap.measure.local_run import LocalSettings, run_local

    with pytest.raises(InputError, match="does not build attention sinks"):
        run_local(catalog.models["gpt-oss-20b"], LocalSettings(device="cpu"), "tiny")
