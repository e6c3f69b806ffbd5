"""Exact parameter counts and FLOPs per token, against published figures and formulas."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from accelmap.catalog import Catalog
from accelmap.models.flops import forward_flops_per_token, training_flops_per_token
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec

REQUIRED = [
    "gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b",
    "gpt3-175b", "megatron-1.7b", "megatron-3.6b", "megatron-7.5b", "megatron-18.4b",
    "megatron-39.1b", "megatron-76.1b", "megatron-145.6b", "megatron-310.1b", "megatron-529.6b",
    "megatron-1t", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b",
    "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "mixtral-8x22b", "qwen2.5-7b", "qwen2.5-72b",
    "deepseek-v3", "gemma-2-9b", "gemma-2-27b", "falcon-180b", "gpt-j-6b", "mpt-7b", "mpt-30b",
    "phi-3-mini", "opt-175b", "bloom-176b", "palm-540b",
]

# Exact totals quoted in the issue (and in the checkpoints' metadata); tested independently of
# the YAML's own published_params so that a wrong YAML number cannot hide a wrong count.
EXACT = {
    "llama-2-7b": 6_738_415_616,
    "llama-3.1-8b": 8_030_261_248,
    "mixtral-8x7b": 46_702_792_704,
}

# Narayanan et al. 2021 (SC21) Table 1, parameters in billions (rounded to 0.1B).
MEGATRON_TABLE1 = {
    "megatron-1.7b": 1.7, "megatron-3.6b": 3.6, "megatron-7.5b": 7.5, "megatron-18.4b": 18.4,
    "megatron-39.1b": 39.1, "megatron-76.1b": 76.1, "megatron-145.6b": 145.6,
    "megatron-310.1b": 310.1, "megatron-529.6b": 529.6, "megatron-1t": 1008.0,
}

# Brown et al. 2020 Table 2.1 nominal sizes (the paper rounds, e.g. "125M" is 125.2M).
GPT3_TABLE = {"gpt3-125m": 125e6, "gpt3-350m": 350e6, "gpt3-760m": 760e6, "gpt3-1.3b": 1.3e9,
              "gpt3-2.7b": 2.7e9, "gpt3-6.7b": 6.7e9, "gpt3-13b": 13e9, "gpt3-175b": 175e9}


def test_at_least_25_models_and_all_required(catalog: Catalog) -> None:
    assert len(catalog.models) >= 25
    missing = [m for m in REQUIRED if m not in catalog.models]
    assert not missing, missing


@pytest.mark.parametrize(("model_id", "params"), sorted(EXACT.items()))
def test_issue_exact_counts(catalog: Catalog, model_id: str, params: int) -> None:
    assert count_params(catalog.models[model_id]).total == params


def test_every_published_count_matches(catalog: Catalog) -> None:
    checked = 0
    for spec in catalog.models.values():
        if spec.published_params is not None:
            assert count_params(spec).total == spec.published_params, spec.id
            checked += 1
    assert checked >= 10, f"only {checked} presets carry an exact published count"


@pytest.mark.parametrize(("model_id", "billions"), sorted(MEGATRON_TABLE1.items()))
def test_megatron_table1(catalog: Catalog, model_id: str, billions: float) -> None:
    spec = catalog.models[model_id]
    total = count_params(spec).total
    assert abs(total / 1e9 - billions) <= 0.05 * max(1.0, billions / 100), (total, billions)
    # The paper's closed form, P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)), counts the same
    # modules (QKV+proj+MLP with biases, two LayerNorms per layer, embeddings incl. positions)
    # except the final LayerNorm (2h): check it to the parameter.
    l, h, v, s = spec.n_layers, spec.d_model, spec.vocab_size, spec.max_seq_len
    closed = 12 * l * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l * h))
    assert total == pytest.approx(closed + 2 * h, abs=1)


@pytest.mark.parametrize(("model_id", "nominal"), sorted(GPT3_TABLE.items()))
def test_gpt3_table(catalog: Catalog, model_id: str, nominal: float) -> None:
    total = count_params(catalog.models[model_id]).total
    assert abs(total - nominal) / nominal < 0.06, (model_id, total)


def test_moe_active_counts(catalog: Catalog) -> None:
    # Mixtral paper (Jiang et al. 2024, sec. 2): 47B total, 13B active; DeepSeek-V3 report
    # (arXiv:2412.19437, abstract): 671B total, 37B activated per token. DeepSeek's figure leaves
    # out the input embedding (a lookup); ours keeps it, as Mixtral's 12.9B does, so compare the
    # non-embedding share for DeepSeek.
    mix = count_params(catalog.models["mixtral-8x7b"])
    assert round(mix.active / 1e9) == 13
    ds = count_params(catalog.models["deepseek-v3"])
    assert round(ds.total / 1e9) == 671 and round((ds.active - ds.embedding) / 1e9) == 37


def test_megatron_flops_formula(catalog: Catalog) -> None:
    """Narayanan et al. 2021 eq. (3) without recompute: 72 B s l h^2 (1 + s/6h + V/(12 l h))."""
    spec = catalog.models["megatron-145.6b"]
    l, h, v, s = spec.n_layers, spec.d_model, spec.vocab_size, 2048
    per_token = 72 * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
    # the paper counts full (non-causal) attention
    assert 3 * forward_flops_per_token(spec, s, causal=False) == pytest.approx(per_token, rel=1e-9)


def test_training_is_three_forwards(catalog: Catalog) -> None:
    spec = catalog.models["llama-3.1-8b"]
    assert training_flops_per_token(spec, 8192) == pytest.approx(
        3 * forward_flops_per_token(spec, 8192))


def test_six_n_rule_of_thumb(catalog: Catalog) -> None:
    # Kaplan et al. 2020: training ~ 6N per token when seq << 12 d_model.
    spec = catalog.models["gpt3-175b"]
    n = count_params(spec).non_embedding
    assert training_flops_per_token(spec, 64) == pytest.approx(6 * n, rel=0.02)


def _spec(**kw: object) -> ModelSpec:
    base: dict[str, object] = dict(id="t", name="t", family="t", n_layers=2, d_model=64,
                                   n_heads=4, ffn_dim=256, vocab_size=1000, max_seq_len=128)
    base.update(kw)
    return ModelSpec.model_validate(base)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"n_heads": 5}, "does not divide d_model"),
        ({"n_kv_heads": 3}, "must divide n_heads"),
        ({"d_model": 0}, "greater than 0"),
        ({"n_layers": -1}, "greater than 0"),
        ({"moe": {"num_experts": 4, "top_k": 8, "expert_ffn_dim": 8}}, "top_k 8 exceeds"),
    ],
)
def test_bad_specs_rejected(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _spec(**kw)


def test_hand_count_tiny_gpt() -> None:
    # GPT-2 style: d=64, 4 heads, ffn 256, vocab 1000, ctx 128, 2 layers, biases, LN, tied.
    spec = _spec(ffn_kind="plain", activation="gelu", position="learned", norm="layernorm",
                 qkv_bias=True, attn_out_bias=True, mlp_bias=True, tied_embeddings=True)
    d, f, v, s = 64, 256, 1000, 128
    per_layer = (4 * d * d + 4 * d) + (2 * d * f + f + d) + 2 * (2 * d)
    assert count_params(spec).total == v * d + s * d + 2 * per_layer + 2 * d


dims = st.sampled_from([32, 64, 128])


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 8), d=dims, heads=st.sampled_from([1, 2, 4, 8]),
       kv_div=st.sampled_from([1, 2, 4]), experts=st.integers(1, 16), k=st.integers(1, 4),
       tied=st.booleans())
def test_properties(layers: int, d: int, heads: int, kv_div: int, experts: int, k: int,
                    tied: bool) -> None:
    kv = max(1, heads // kv_div)
    dense = _spec(n_layers=layers, d_model=d, n_heads=heads, n_kv_heads=kv, tied_embeddings=tied)
    pc = count_params(dense)
    assert pc.total == pc.active  # dense: every parameter is used by every token
    untied = count_params(dense.model_copy(update={"tied_embeddings": False}))
    assert untied.total - pc.total == (0 if not tied else 1000 * d)
    k = min(k, experts)
    moe = _spec(n_layers=layers, d_model=d, n_heads=heads, n_kv_heads=kv, tied_embeddings=tied,
                moe={"num_experts": experts, "top_k": k, "expert_ffn_dim": 256})
    mc = count_params(moe)
    expert = 3 * d * 256
    assert mc.total - mc.active == layers * (experts - k) * expert
    assert mc.total - pc.total == layers * ((experts - 1) * expert + d * experts)
    deeper = count_params(dense.model_copy(update={"n_layers": layers + 1}))
    assert deeper.total - pc.total == pc.layers[0].total


def test_every_preset_cites_defined_sources(catalog: Catalog) -> None:
    for spec in catalog.models.values():
        assert spec.source, f"{spec.id} cites no source"
        assert spec.cited_ids() <= set(spec.sources), spec.id
