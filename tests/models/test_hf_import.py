"""Hugging Face config.json import: one real config per model_type, checked against facts of the
architecture and, where a public source gives one, the exact parameter count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelmap.errors import InputError, UnsupportedModelError
from accelmap.models.hf import _MAPPERS, load_hf_config, spec_from_hf_dict, supported_model_types
from accelmap.models.params import count_params
from accelmap.models.schema import (
    Activation,
    AttentionKind,
    FFNKind,
    ModelSpec,
    NormKind,
    PositionKind,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expected.json").read_text())
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json") if p.name != "expected.json")

REQUIRED_TYPES = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v3",
    "gemma2", "gpt2", "gptj", "gpt_neox", "falcon", "mpt", "phi3", "opt", "bloom",
    "gpt_oss", "glm4_moe", "kimi_k2", "llama4", "deepseek_v32",
}  # fmt: skip


def load(name: str) -> ModelSpec:
    return load_hf_config(str(FIXTURES / f"{name}.json"), name=name)


def raw(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def from_dict(data: dict[str, Any]) -> ModelSpec:
    return spec_from_hf_dict(data, "test/config.json", name="test")


# --- every fixture ---------------------------------------------------------------------------


def test_every_required_type_has_a_fixture() -> None:
    assert {raw(n)["model_type"] for n in NAMES} >= REQUIRED_TYPES


@pytest.mark.parametrize("name", NAMES)
def test_fixture_imports(name: str) -> None:
    spec = load(name)
    assert spec.family == raw(name)["model_type"]
    assert count_params(spec).total > 0
    assert any(str(FIXTURES / f"{name}.json") in note for note in spec.notes)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_published_parameter_count(name: str) -> None:
    entry = EXPECTED[name]
    assert entry["source"].strip()
    assert count_params(load(name)).total == entry["params"]


def test_expected_only_names_fixtures() -> None:
    assert set(EXPECTED) <= set(NAMES)


# --- architecture facts, hand-checked per model ----------------------------------------------


def test_llama_2_7b() -> None:
    s = load("llama-2-7b")
    assert s.attention_kind is AttentionKind.MHA and s.kv_heads == 32
    assert (s.ffn_kind, s.activation, s.norm) == (FFNKind.GATED, Activation.SILU, NormKind.RMSNORM)
    assert not s.tied_embeddings and not s.is_moe and s.sliding_window is None


def test_llama_reads_its_config_class_like_the_others() -> None:
    # hidden_act is read (LlamaConfig allows any ACT2FN name), a string "false" is refused
    # rather than read as true, and absent keys take LlamaConfig's defaults (vocab 32000)
    base = {k: v for k, v in raw("llama-2-7b").items() if k != "vocab_size"}
    assert from_dict({**base, "hidden_act": "gelu"}).activation is Activation.GELU
    assert from_dict(base).vocab_size == 32000
    with pytest.raises(InputError, match="attention_bias"):
        from_dict({**base, "attention_bias": "false"})


def test_mistral_7b_gqa_and_sliding_window() -> None:
    s = load("mistral-7b-v0.1")
    assert s.attention_kind is AttentionKind.GQA and s.kv_heads == 8
    assert s.sliding_window == 4096
    assert all(s.is_sliding_layer(i) for i in range(s.n_layers))
    assert not s.is_moe and not s.qkv_bias


def test_mixtral_moe() -> None:
    s = load("mixtral-8x7b-v0.1")
    assert s.attention_kind is AttentionKind.GQA and s.kv_heads == 8
    assert s.moe is not None
    assert (s.moe.num_experts, s.moe.top_k, s.moe.expert_ffn_dim) == (8, 2, 14336)
    assert s.moe.num_shared_experts == 0 and s.n_moe_layers == 32
    assert s.sliding_window is None  # sliding_window: null in the config


def test_qwen2_biases_and_tying() -> None:
    s = load("qwen2.5-0.5b")
    assert s.attention_kind is AttentionKind.GQA and (s.n_heads, s.kv_heads) == (14, 2)
    assert s.qkv_bias and not s.attn_out_bias and not s.mlp_bias
    assert s.tied_embeddings and s.sliding_window is None


def test_qwen2_moe_shared_expert() -> None:
    s = load("qwen1.5-moe-a2.7b")
    assert s.attention_kind is AttentionKind.MHA and s.qkv_bias
    m = s.moe
    assert m is not None
    assert (m.num_experts, m.top_k, m.expert_ffn_dim) == (60, 4, 1408)
    assert (m.num_shared_experts, m.shared_ffn, m.shared_expert_gate) == (1, 5632, True)
    assert s.n_moe_layers == 24 and not m.router_bias


def test_qwen3_qk_norm() -> None:
    s = load("qwen3-8b")
    assert s.attention_kind is AttentionKind.GQA and s.kv_heads == 8
    assert s.head_size == 128 and s.qk_norm
    assert not s.qkv_bias and not s.attn_out_bias and not s.tied_embeddings and not s.is_moe


def test_qwen3_moe() -> None:
    s = load("qwen3-30b-a3b")
    assert s.attention_kind is AttentionKind.GQA and s.kv_heads == 4 and s.head_size == 128
    assert s.qk_norm and s.moe is not None
    assert (s.moe.num_experts, s.moe.top_k, s.moe.expert_ffn_dim) == (128, 8, 768)
    assert s.moe.num_shared_experts == 0 and s.n_moe_layers == 48


def test_deepseek_v3_mla_moe() -> None:
    s = load("deepseek-v3")
    assert s.attention_kind is AttentionKind.MLA and s.mla is not None
    assert (s.mla.q_lora_rank, s.mla.kv_lora_rank) == (1536, 512)
    assert (s.mla.qk_nope_head_dim, s.mla.qk_rope_head_dim, s.mla.v_head_dim) == (128, 64, 128)
    m = s.moe
    assert m is not None
    assert (m.num_experts, m.top_k, m.num_shared_experts, m.expert_ffn_dim) == (256, 8, 1, 2048)
    assert m.dense_layers == 3 and s.n_moe_layers == 58 and m.router_bias
    assert not any(s.is_moe_layer(i) for i in range(3)) and s.is_moe_layer(3)
    assert any("multi-token-prediction" in n for n in s.notes)
    assert s.n_layers == 61  # the MTP layer is not a main-model layer


def test_gemma2_alternating_window_and_four_norms() -> None:
    s = load("gemma-2-9b")
    assert s.attention_kind is AttentionKind.GQA and s.kv_heads == 8 and s.head_size == 256
    assert s.norms_per_layer == 4 and s.tied_embeddings
    assert s.activation is Activation.GELU_TANH and s.ffn_kind is FFNKind.GATED
    assert s.sliding_window == 4096 and s.sliding_window_pattern == (True, False)
    assert s.is_sliding_layer(0) and not s.is_sliding_layer(1)


def test_gpt2() -> None:
    s = load("gpt2")
    assert s.attention_kind is AttentionKind.MHA
    assert s.position is PositionKind.LEARNED and s.max_seq_len == 1024
    assert (s.norm, s.ffn_kind, s.ffn_dim) == (NormKind.LAYERNORM, FFNKind.PLAIN, 3072)
    assert s.activation is Activation.GELU_TANH and s.tied_embeddings
    assert s.qkv_bias and s.attn_out_bias and s.mlp_bias and not s.lm_head_bias


def test_gptj_parallel_partial_rope() -> None:
    s = load("gpt-j-6b")
    assert s.parallel_block and s.norms_per_layer == 1
    assert s.rope_fraction == 0.25 and s.position is PositionKind.ROPE
    assert s.ffn_dim == 16384 and s.lm_head_bias and not s.tied_embeddings
    assert s.mlp_bias and not s.qkv_bias and not s.attn_out_bias


def test_gpt_neox_pythia() -> None:
    s = load("pythia-1b")
    assert s.parallel_block and s.norms_per_layer == 2 and s.rope_fraction == 0.25
    assert s.qkv_bias and s.attn_out_bias and s.mlp_bias and not s.tied_embeddings
    assert s.activation is Activation.GELU and s.ffn_kind is FFNKind.PLAIN


def test_falcon_7b_multi_query() -> None:
    s = load("falcon-7b-instruct")
    assert s.attention_kind is AttentionKind.MQA and s.n_heads == 71
    assert s.parallel_block and s.norms_per_layer == 1 and s.ffn_dim == 4 * 4544
    assert s.tied_embeddings and not s.qkv_bias and s.position is PositionKind.ROPE


def test_falcon_40b_new_decoder_architecture() -> None:
    s = load("falcon-40b-instruct")
    assert s.attention_kind is AttentionKind.GQA and (s.n_heads, s.kv_heads) == (128, 8)
    assert s.norms_per_layer == 2 and s.parallel_block


def test_mpt_alibi_no_bias() -> None:
    s = load("mpt-7b-instruct")
    assert s.position is PositionKind.ALIBI and s.norm is NormKind.LAYERNORM and not s.norm_bias
    assert not (s.qkv_bias or s.attn_out_bias or s.mlp_bias)
    assert s.ffn_dim == 4 * 4096 and s.activation is Activation.GELU and s.tied_embeddings


def test_phi3_mini() -> None:
    s = load("phi-3-mini-4k-instruct")
    assert s.attention_kind is AttentionKind.MHA and s.sliding_window == 2047
    assert s.ffn_kind is FFNKind.GATED and not s.tied_embeddings


def test_opt_learned_offset_positions() -> None:
    s = load("opt-125m")
    assert s.position is PositionKind.LEARNED and s.learned_position_offset == 2
    assert s.activation is Activation.RELU and s.ffn_kind is FFNKind.PLAIN
    assert s.qkv_bias and s.mlp_bias and s.final_norm and s.tied_embeddings


def test_bloom_embedding_norm_alibi() -> None:
    s = load("bloom-560m")
    assert s.position is PositionKind.ALIBI and s.embedding_norm
    assert s.ffn_dim == 4 * 1024 and s.activation is Activation.GELU_TANH
    assert s.qkv_bias and s.mlp_bias and s.tied_embeddings


# --- behaviour the fixtures do not exercise ---------------------------------------------------


def test_null_sliding_window_means_none() -> None:
    data = raw("mistral-7b-v0.1") | {"sliding_window": None}
    assert from_dict(data).sliding_window is None


def test_qwen2_sliding_layers_follow_max_window_layers() -> None:
    data = raw("qwen2.5-0.5b") | {"use_sliding_window": True, "max_window_layers": 20}
    s = from_dict(data)
    assert s.sliding_window == 32768
    assert [s.is_sliding_layer(i) for i in range(24)] == [i >= 20 for i in range(24)]


def test_qwen2_moe_sparse_step_matches_transformers_rule() -> None:
    data = raw("qwen1.5-moe-a2.7b") | {"decoder_sparse_step": 2}
    s = from_dict(data)
    # transformers: layer i is sparse when (i + 1) % decoder_sparse_step == 0
    assert [s.is_moe_layer(i) for i in range(24)] == [(i + 1) % 2 == 0 for i in range(24)]
    dense = count_params(s).layers[0]
    assert not dense.moe and dense.ffn == 3 * 2048 * 5632  # dense layers use intermediate_size


def test_qwen2_moe_irregular_layers_refused() -> None:
    data = raw("qwen1.5-moe-a2.7b") | {"mlp_only_layers": [5]}
    with pytest.raises(InputError, match="cannot express"):
        from_dict(data)


def test_deepseek_moe_layer_freq() -> None:
    data = raw("deepseek-v3") | {"moe_layer_freq": 2}
    s = from_dict(data)
    # reference code: MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0
    expected = [i >= 3 and i % 2 == 0 for i in range(61)]
    assert [s.is_moe_layer(i) for i in range(61)] == expected


def test_explicit_nulls_keep_their_meaning() -> None:
    ds = from_dict(raw("deepseek-v3") | {"q_lora_rank": None, "n_routed_experts": None})
    assert ds.mla is not None and ds.mla.q_lora_rank is None  # full-rank q_proj (V2-Lite)
    assert ds.moe is None  # no routed experts: a dense model
    mha = from_dict(raw("mistral-7b-v0.1") | {"num_key_value_heads": None})
    assert mha.attention_kind is AttentionKind.MHA  # null kv heads = heads, not the default 8
    assert from_dict(raw("gpt-j-6b") | {"rotary_dim": None}).rope_fraction == 1.0


def test_deepseek_attention_bias_refused() -> None:
    with pytest.raises(InputError, match="attention_bias"):
        from_dict(raw("deepseek-v3") | {"attention_bias": True})


def test_opt_projection_refused() -> None:
    # OPT-350M: word_embed_proj_dim 512 != hidden_size 1024 adds project_in/project_out.
    data = raw("opt-125m") | {"hidden_size": 1024, "word_embed_proj_dim": 512}
    with pytest.raises(InputError, match="word_embed_proj_dim"):
        from_dict(data)


def test_opt_post_norm_has_no_final_norm() -> None:
    s = from_dict(raw("opt-125m") | {"do_layer_norm_before": False})
    assert not s.final_norm


def test_mpt_without_alibi_refused() -> None:
    data = raw("mpt-7b-instruct")
    data["attn_config"] = data["attn_config"] | {"alibi": False}
    with pytest.raises(InputError, match="alibi"):
        from_dict(data)


def test_gpt2_cross_attention_refused() -> None:
    with pytest.raises(InputError, match="add_cross_attention"):
        from_dict(raw("gpt2") | {"add_cross_attention": True})


def test_gpt2_n_inner_default_is_four_times_width() -> None:
    assert from_dict(raw("gpt2") | {"n_inner": None}).ffn_dim == 4 * 768
    assert from_dict(raw("gpt2") | {"n_inner": 1000}).ffn_dim == 1000


def test_unknown_activation_refused() -> None:
    with pytest.raises(InputError, match="hidden_act"):
        from_dict(raw("mistral-7b-v0.1") | {"hidden_act": "squared_relu_x"})


# --- errors and registry ----------------------------------------------------------------------


def test_unknown_model_type_lists_supported_types() -> None:
    with pytest.raises(UnsupportedModelError) as err:
        from_dict(raw("llama-2-7b") | {"model_type": "not_a_model"})
    message = str(err.value)
    assert "not_a_model" in message
    for t in supported_model_types():
        assert t in message


HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "n_embed")


@pytest.mark.parametrize("name", NAMES)
def test_missing_hidden_size_names_file_and_key(name: str, tmp_path: Path) -> None:
    data = {k: v for k, v in raw(name).items() if k not in HIDDEN_KEYS}
    if isinstance(data.get("text_config"), dict):  # Llama 4 nests the language model
        data["text_config"] = {k: v for k, v in data["text_config"].items()
                               if k not in HIDDEN_KEYS}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        load_hf_config(str(path))
    assert str(path) in str(err.value) and "hidden_size" in str(err.value)


def test_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "hidden_size": 4096,')
    with pytest.raises(InputError, match="not valid JSON"):
        load_hf_config(str(path))


def test_directory_with_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((FIXTURES / "gpt2.json").read_text())
    assert count_params(load_hf_config(str(tmp_path))).total == 124439808


def test_supported_types_include_required() -> None:
    assert set(supported_model_types()) >= REQUIRED_TYPES


def test_one_documented_function_per_type() -> None:
    supported_model_types()  # loads the mappers
    for t in REQUIRED_TYPES:
        fn = _MAPPERS[t]
        assert fn.__name__ == t and fn.__doc__, t


@pytest.mark.parametrize("name", NAMES)
def test_a_config_without_its_layer_or_head_count_is_refused(name: str) -> None:
    """A class default for a size key (LlamaConfig's 32 layers are Llama-2-7B's) would be
    another model: the import stops and names the key."""
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    for keys in (("num_hidden_layers", "n_layer", "n_layers"),
                 ("num_attention_heads", "n_head", "n_heads")):
        present = [k for k in keys if k in data]
        if not present:
            continue
        cut = {k: v for k, v in data.items() if k not in keys}
        with pytest.raises(InputError, match="is missing; it sets the model's size"):
            spec_from_hf_dict(cut, f"{name}.json")


def test_every_class_default_taken_is_said() -> None:
    data = json.loads((FIXTURES / "llama-2-7b.json").read_text())
    data.pop("max_position_embeddings")
    spec = spec_from_hf_dict(data, "cfg.json")
    said = [n for n in spec.notes if "class defaults" in n]
    assert said and "max_position_embeddings=2048" in said[0]
    full = spec_from_hf_dict(json.loads((FIXTURES / "llama-2-7b.json").read_text()), "c.json")
    assert not any("max_position_embeddings" in n for n in full.notes)


def test_unreachable_hub_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No DNS for the Hub: one line at once, not huggingface_hub's five retries (~25 s)."""
    import socket

    pytest.importorskip("huggingface_hub")
    from accelmap.errors import AccelmapError
    from accelmap.models import hf

    def no_dns(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(AccelmapError, match="cannot be reached") as e:
        hf.load_hf_config("no-such-owner/no-such-model")
    assert "\n" not in str(e.value)
