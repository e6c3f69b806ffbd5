"""The models served in 2025-2026 (issue 22 part 2): parameter counts against the published
figures at the precision they were published, the MTP module, KV-cache bytes per token against
hand calculations, and their attention variants in the operator graph."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.catalog import Catalog
from accelmap.memory.budget import kv_bytes_per_token, kv_cache_bytes
from accelmap.models.flops import causal_mean_keys
from accelmap.models.geometry import Geometry, Part
from accelmap.models.params import count_mtp_params, count_params
from accelmap.ops.graph import Precision, Shape, forward_ops
from accelmap.units import DType

# (total, active, precision, which active) as published; "active" counts the input embedding
# unless the source counts without it ("noemb"): gpt-oss card Table 1 (116.83B / 5.13B,
# 20.91B / 3.61B), Qwen3 report (235B / 22B; 32.8B card), Kimi K2 card (1T / 32B), Llama 4 card
# (text model: Scout 17B active; Maverick 400B / 17B). GLM-4.5 and Scout totals are in the
# dedicated tests below (their published totals include the MTP module / the vision encoder).
PUBLISHED = {
    "gpt-oss-120b": (116.83e9, 5.13e9, 0.005e9, "noemb"),
    "gpt-oss-20b": (20.91e9, 3.61e9, 0.005e9, "noemb"),
    "qwen3-235b-a22b": (235e9, 22e9, 0.5e9, "emb"),
    "qwen3-32b": (32.8e9, None, 0.05e9, "emb"),
    "kimi-k2": (1.0e12, 32e9, 0.05e12, "emb"),
    "llama-4-maverick": (400e9, 17e9, 1e9, "emb"),
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_published_totals(catalog: Catalog, model_id: str) -> None:
    total, active, tol, how = PUBLISHED[model_id]
    pc = count_params(catalog.models[model_id])
    assert abs(pc.total - total) <= tol
    if active is not None:
        got = pc.active - pc.embedding if how == "noemb" else pc.active
        assert abs(got - active) <= max(tol, 0.5e9 if how == "emb" else tol)


def test_qwen3_32b_non_embedding(catalog: Catalog) -> None:
    pc = count_params(catalog.models["qwen3-32b"])
    # model card: 31.2B non-embedding (embedding and untied head both left out)
    assert round((pc.total - pc.embedding - pc.lm_head) / 1e9, 1) == 31.2


def test_deepseek_r1_is_v3_with_mtp_as_stored(catalog: Catalog) -> None:
    r1, v3 = catalog.models["deepseek-r1"], catalog.models["deepseek-v3"]
    assert count_params(r1).total == count_params(v3).total == 671_026_419_200
    mtp = count_mtp_params(r1)
    # the block alone is README_WEIGHTS.md's "11.5B unique"
    block = sum(t.params for t in Geometry.of(r1).groups[-1].tensors)
    assert round(block / 1e9, 1) == 11.5
    assert mtp.stored - mtp.unique == 2 * 129280 * 7168  # embedding and head copies
    # with one fp32 scale per 128x128 block of every FP8 matrix (layers and MTP block; routers,
    # embeddings, heads and eh_proj in BF16) the checkpoint holds the Hub's safetensors total
    geo = Geometry.of(r1)

    def scales(tensors: tuple, count: int) -> int:
        return count * sum(math.ceil(t.rows / 128) * math.ceil(t.cols / 128) * t.copies
                           for t in tensors if t.is_matrix and not t.name.startswith("router")
                           and t.part not in (Part.EMBEDDING, Part.LM_HEAD)
                           and t.name != "mtp_eh_proj")
    n_scales = sum(scales(g.tensors, g.count) for g in geo.groups) + scales(geo.mtp, 1)
    assert count_params(r1).total + mtp.stored + n_scales == 684_531_386_000


def test_glm45_stored_total_is_the_hub_total(catalog: Catalog) -> None:
    spec = catalog.models["glm-4.5"]
    pc, mtp = count_params(spec), count_mtp_params(spec)
    assert pc.total + mtp.stored == 358_337_791_296  # zai-org/GLM-4.5 safetensors total (BF16)
    assert 352e9 < pc.total < 355e9 < pc.total + mtp.unique < 357e9  # the report's "355B"
    assert round((pc.active - pc.embedding) / 1e9) in (32, 33)  # "32B activated"


def test_llama4_scout_text_model(catalog: Catalog) -> None:
    pc = count_params(catalog.models["llama-4-scout"])
    assert round(pc.active / 1e9) == 17  # "17B active"
    assert 107e9 < pc.total < 109e9  # 109B total includes the vision encoder


def test_gpt_oss_sinks_and_biases(catalog: Catalog) -> None:
    g = Geometry.of(catalog.models["gpt-oss-120b"]).groups[0]
    assert g.tensor("sinks").shape == (64,)
    assert g.tensor("expert_down_bias").copies == 128
    assert Geometry.of(catalog.models["gpt-oss-120b"]).shard(tp=8).groups[0].tensor(
        "sinks").shape == (8,)


def test_llama4_maverick_interleaves(catalog: Catalog) -> None:
    spec = catalog.models["llama-4-maverick"]
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    assert [spec.is_sliding_layer(i) for i in range(8)] == [True, True, True, False] * 2


# KV bytes per token at BF16 over all layers, by hand: MLA keeps kv_lora_rank + rope dim per
# layer (DeepSeek-V2 sec. 2.1.2); GQA keeps K and V of every KV head.
KV_BF16 = {
    "deepseek-r1": 61 * (512 + 64) * 2,
    "kimi-k2": 61 * (512 + 64) * 2,
    "gpt-oss-120b": 36 * 2 * 8 * 64 * 2,
    "gpt-oss-20b": 24 * 2 * 8 * 64 * 2,
    "qwen3-235b-a22b": 94 * 2 * 4 * 128 * 2,
    "qwen3-32b": 64 * 2 * 8 * 128 * 2,
    "glm-4.5": 92 * 2 * 8 * 128 * 2,
    "llama-4-scout": 48 * 2 * 8 * 128 * 2,
    "llama-4-maverick": 48 * 2 * 8 * 128 * 2,
}


@pytest.mark.parametrize("model_id", sorted(KV_BF16))
def test_kv_bytes_per_token(catalog: Catalog, model_id: str) -> None:
    assert kv_bytes_per_token(catalog.models[model_id], DType.BF16) == KV_BF16[model_id]


def test_kv_cache_capped_on_local_layers(catalog: Catalog) -> None:
    tokens = 32768
    oss = catalog.models["gpt-oss-120b"]  # 18 full layers, 18 windowed at 128 (blocks of 16)
    assert kv_cache_bytes(oss, 1, tokens, DType.BF16, 16) == (18 * tokens + 18 * 128) * 2048
    scout = catalog.models["llama-4-scout"]  # 12 global NoPE layers, 36 chunked at 8192
    assert kv_cache_bytes(scout, 1, tokens, DType.BF16, 16) == (12 * tokens + 36 * 8192) * 4096


@given(st.integers(1, 5000), st.integers(1, 600))
def test_chunked_mean_keys_is_the_sum(s: int, w: int) -> None:
    exact = sum(((i - 1) % w) + 1 for i in range(1, s + 1)) / s
    assert float(causal_mean_keys(s, w, chunked=True)) == pytest.approx(exact)
    # a chunk never sees more than a sliding window of the same size
    assert float(causal_mean_keys(s, w, chunked=True)) <= float(causal_mean_keys(s, w)) + 1e-9


def _decode(batch: int, ctx: float) -> Shape:
    return Shape(tokens=batch, context=ctx, kv_tokens=batch * ctx, sequences=batch,
                 logits_tokens=batch, decode=True)


def test_mla_absorbed_decode(catalog: Catalog) -> None:
    spec = catalog.models["deepseek-r1"]
    B, C, h = 4, 2000.0, 128
    ops = {o.name: o for o in forward_ops(spec, _decode(B, C), Precision())}
    assert "layers/attention/kv_up" not in ops  # the latent is never expanded in decode
    core = ops["layers/attention/core"]
    # scores over r_kv + d_rope = 576, context over r_kv = 512, every head (FlashMLA's shapes)
    assert core.flops == pytest.approx(2 * B * C * h * (576 + 512))
    assert core.bytes[next(k for k in core.bytes if k.value == "kv_cache")] == pytest.approx(
        B * C * 576 * 2)
    assert ops["layers/attention/q_absorb"].flops == pytest.approx(2 * B * h * 128 * 512)
    assert ops["layers/attention/v_absorb"].flops == pytest.approx(2 * B * h * 512 * 128)
    # prefill keeps the expanded form: 2 T C h (192 + 128)
    pre = Shape(tokens=B, context=C, kv_tokens=B * C, sequences=1, logits_tokens=1)
    pops = {o.name: o for o in forward_ops(spec, pre, Precision())}
    assert "layers/attention/kv_up" in pops
    assert pops["layers/attention/core"].flops == pytest.approx(2 * B * C * h * (192 + 128))


def test_sliding_and_chunked_decode_attention_capped(catalog: Catalog) -> None:
    oss = catalog.models["gpt-oss-120b"]
    C = 10_000.0
    cores = [o for o in forward_ops(oss, _decode(1, C), Precision())
             if o.name == "layers/attention/core"]
    flops = sorted({float(o.flops) for o in cores})  # 36 groups of one layer, two kinds
    assert flops == pytest.approx([2 * 128 * 64 * 64 * 2, 2 * C * 64 * 64 * 2])
    scout = catalog.models["llama-4-scout"]
    cores = [o for o in forward_ops(scout, _decode(1, 20_000.0), Precision())
             if o.name == "layers/attention/core"]
    assert min(o.flops for o in cores) == pytest.approx(2 * 8192 * 40 * 128 * 2)


def test_deepseek_v32_indexer_params_and_kv(catalog: Catalog) -> None:
    v32, v3 = catalog.models["deepseek-v3.2"], catalog.models["deepseek-v3"]
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64  # inference/model.py Indexer
    assert per_layer == 13_959_424
    assert count_params(v32).total - count_params(v3).total == 61 * per_layer
    # the cache holds the latent, the RoPE key and the indexer's key
    assert kv_bytes_per_token(v32, DType.BF16) == 61 * (512 + 64 + 128) * 2


def test_dsa_attends_to_the_top_k_only(catalog: Catalog) -> None:
    spec = catalog.models["deepseek-v3.2"]
    B, h = 2, 128
    for C in (1000.0, 50_000.0):
        ops = {o.name: o for o in forward_ops(spec, _decode(B, C), Precision())}
        core, idx = ops["layers/attention/core"], ops["layers/attention/indexer_scores"]
        keys = min(C, 2048)
        assert core.flops == pytest.approx(2 * B * keys * h * (576 + 512))
        kv = next(k for k in core.bytes if k.value == "kv_cache")
        assert core.bytes[kv] == pytest.approx(B * keys * 576 * 2)  # latent + RoPE of the top-k
        assert idx.flops == pytest.approx(2 * B * C * 64 * 128)  # the indexer sees every key
        assert idx.bytes[kv] == pytest.approx(B * C * 128 * 2)
    # at long context the sparse model's attention work is far below the dense one's
    dense = {o.name: o for o in forward_ops(catalog.models["deepseek-v3"], _decode(B, 50_000.0),
                                            Precision())}
    sparse = {o.name: o for o in forward_ops(spec, _decode(B, 50_000.0), Precision())}
    assert (sparse["layers/attention/core"].flops + sparse["layers/attention/indexer_scores"].flops
            ) < 0.2 * dense["layers/attention/core"].flops
