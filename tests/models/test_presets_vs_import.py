"""Two independent routes to the same model must agree: the bundled preset (written from the
paper/config) and the Hugging Face importer (run on the real config.json)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.catalog import Catalog
from accelmap.models.hf import load_hf_config
from accelmap.models.params import count_mtp_params, count_params

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"

PAIRS = {
    "llama-2-7b": "llama-2-7b",
    "mistral-7b-v0.1": "mistral-7b",
    "mixtral-8x7b-v0.1": "mixtral-8x7b",
    "gemma-2-9b": "gemma-2-9b",
    "gpt-j-6b": "gpt-j-6b",
    "phi-3-mini-4k-instruct": "phi-3-mini",
    "qwen3-8b": "qwen3-8b",
    "qwen3-30b-a3b": "qwen3-30b-a3b",
    "deepseek-v3": "deepseek-v3",
    "mpt-7b-instruct": "mpt-7b",
    "gpt-oss-120b": "gpt-oss-120b",
    "gpt-oss-20b": "gpt-oss-20b",
    "glm-4.5": "glm-4.5",
    "kimi-k2-instruct": "kimi-k2",
    "llama-4-scout-17b-16e-instruct": "llama-4-scout",
    "llama-4-maverick-17b-128e-instruct": "llama-4-maverick",
    "qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen3-32b": "qwen3-32b",
    "deepseek-v3.2-exp": "deepseek-v3.2",
}


@pytest.mark.parametrize(("fixture", "preset"), sorted(PAIRS.items()))
def test_preset_equals_import(catalog: Catalog, fixture: str, preset: str) -> None:
    imported = load_hf_config(str(FIXTURES / f"{fixture}.json"))
    spec = catalog.models[preset]
    a, b = count_params(imported), count_params(spec)
    assert (a.total, a.active) == (b.total, b.active)
    assert imported.attention_kind == spec.attention_kind
    assert imported.sliding_window == spec.sliding_window
    assert imported.local_attention == spec.local_attention
    assert imported.attention_sinks == spec.attention_sinks
    assert count_mtp_params(imported) == count_mtp_params(spec)
    assert [imported.is_sliding_layer(i) for i in range(spec.n_layers)] == [
        spec.is_sliding_layer(i) for i in range(spec.n_layers)
    ]
    assert [imported.is_moe_layer(i) for i in range(spec.n_layers)] == [
        spec.is_moe_layer(i) for i in range(spec.n_layers)
    ]
