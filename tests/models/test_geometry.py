"""The one model geometry: every tensor, and each rank's share under tensor/expert parallelism.

A rank's piece of a tensor times the number of pieces the tensor is cut into (``parts``, from
its split annotation: replicated tensors count once) gives back the whole tensor; the shares the
operator graph streams are exactly the share's parameters."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.catalog import Catalog
from accelmap.models.geometry import ExpertSplit, Geometry, Split, Tensor
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import ByteKind, Precision, Shape, forward_ops

# (model, tp, ep, etp) with per-rank totals pinned to the first sharding code
# (parallel/shard.py, deleted when the geometry took over); etp None = tp (Megatron-Core).
PINNED = [
    ("llama-3.1-70b", 8, 1, None, 8820367360, 8820367360),
    ("llama-3.1-70b", 16, 1, None, 4494729216, 4494729216),  # 8 KV heads replicated over 16
    ("mixtral-8x7b", 2, 4, None, 6439833600, 6439833600),
    ("deepseek-v3", 8, 8, None, 13165945664, 5502952256),
    ("deepseek-v3", 8, 8, 1, 84687217472, 23383270208),  # vLLM: etp = tp / ep
    ("gpt3-1.3b", 4, 1, None, 332302336, 332302336),
    ("gemma-2-9b", 8, 1, None, 1155743232, 1155743232),
    ("qwen2-57b-a14b", 4, 4, 1, 14352393216, 8186766336),
]

DECODE = Shape(tokens=1, context=100.0, kv_tokens=100.0, sequences=1, logits_tokens=1,
               decode=True)


def pieces(whole: Geometry, share: Geometry) -> list[tuple[Tensor, Tensor, int]]:
    """(whole tensor, the rank's piece, number of pieces) for every tensor of the model."""
    assert [(g.first, g.last) for g in whole.groups] == [(g.first, g.last) for g in share.groups]
    out = []
    pairs = list(zip(whole.outer, share.outer, strict=True))
    for gw, gs in zip(whole.groups, share.groups, strict=True):
        pairs += list(zip(gw.tensors, gs.tensors, strict=True))
    for w, s in pairs:
        assert (w.name, w.part, w.tp, w.ep) == (s.name, s.part, s.tp, s.ep)
        out.append((w, s, whole.parts(w, share.tp, share.ep, share.etp)))
    return out


def assert_sums_back(spec: ModelSpec, tp: int, ep: int, etp: int | None) -> None:
    whole = Geometry.of(spec)
    share = whole.shard(tp, ep, etp)
    for w, s, n in pieces(whole, share):
        if w.tp is Split.VOCAB:  # ceil(V / tp) rows per rank: padded up to whole rows
            rows = math.ceil(spec.vocab_size / tp)
            assert s.params * n == w.params // spec.vocab_size * rows * tp, w.name
        else:
            assert s.params * n == w.params, (spec.id, w.name, s.shape, w.shape, n)
    layer_groups = [(g.count, g) for g in whole.groups]
    assert sum(c * g.params_per_layer for c, g in layer_groups) + sum(
        t.params for t in whole.outer) == count_params(spec).total


@pytest.mark.parametrize(("model_id", "tp", "ep", "etp"), [
    ("llama-3.1-8b", 8, 1, None), ("llama-3.1-70b", 16, 1, None), ("mixtral-8x7b", 2, 4, None),
    ("mixtral-8x7b", 8, 8, 1), ("deepseek-v3", 8, 8, None), ("deepseek-v3", 16, 64, 1),
    ("gemma-2-9b", 8, 1, None), ("gpt3-1.3b", 4, 1, None), ("qwen2-57b-a14b", 4, 4, 1),
    ("qwen3-8b", 4, 1, None), ("bloom-176b", 8, 1, None), ("gpt-j-6b", 4, 1, None),
])
def test_rank_shares_sum_back_to_the_whole(catalog: Catalog, model_id: str, tp: int, ep: int,
                                          etp: int | None) -> None:
    assert_sums_back(catalog.models[model_id], tp, ep, etp)


@pytest.mark.parametrize(("model_id", "tp", "ep", "etp", "total", "active"), PINNED)
def test_rank_share_counts_are_pinned(catalog: Catalog, model_id: str, tp: int, ep: int,
                                      etp: int | None, total: int, active: int) -> None:
    pc = count_params(Geometry.of(catalog.models[model_id]).shard(tp, ep, etp))
    assert (pc.total, pc.active) == (total, active)


def test_unsharded_share_is_the_whole_model(catalog: Catalog) -> None:
    for spec in catalog.models.values():
        whole = Geometry.of(spec)
        assert whole.shard(1, 1) == whole, spec.id
        assert count_params(whole.shard()) == count_params(spec), spec.id
        assert forward_ops(whole.shard(1, 1), DECODE, Precision()) == forward_ops(
            spec, DECODE, Precision()), spec.id


@pytest.mark.parametrize(("model_id", "tp"), [("llama-3.1-70b", 8), ("llama-3.1-70b", 16),
                                              ("llama-2-7b", 4)])
def test_sharded_decode_streams_the_share_once(catalog: Catalog, model_id: str, tp: int) -> None:
    """A rank's decode step reads each weight of its share once (the embedding reads a row)."""
    share = Geometry.of(catalog.models[model_id]).shard(tp)
    ops = forward_ops(share, DECODE, Precision())
    weights = sum(o.bytes.get(ByteKind.WEIGHTS, 0.0) * o.count for o in ops
                  if o.name != "embedding")
    pc = count_params(share)
    assert weights == pytest.approx(2.0 * (pc.total - pc.embedding), rel=1e-12)


def test_share_dimensions(catalog: Catalog) -> None:
    ds = Geometry.of(catalog.models["deepseek-v3"])
    train, serve = ds.shard(8, 8), ds.shard(8, 8, etp=1)
    assert (train.heads, train.experts, train.expert_ffn, train.shared_ffn) == (16, 32, 256, 256)
    assert (serve.expert_ffn, serve.top_k, serve.total_experts) == (2048, 8, 256)
    assert train.kv_width == ds.kv_width == 512 + 64  # the MLA latent is replicated
    assert train.group_of(0).tensor("wkv_a").shape == ds.group_of(0).tensor("wkv_a").shape
    assert train.group_of(0).tensor("wkv_b").cols * 8 == ds.group_of(0).tensor("wkv_b").cols
    llama = Geometry.of(catalog.models["llama-3.1-70b"])
    assert (llama.shard(4).kv_heads, llama.shard(8).kv_heads, llama.shard(16).kv_heads) == (
        2, 1, 1)
    assert llama.shard(8).vocab == 128256 // 8
    stage = llama.shard(8).first_layers(40)
    assert (stage.n_layers, sum(g.count for g in stage.groups)) == (40, 40)
    with pytest.raises(ValueError, match="whole model"):
        llama.shard(8).shard(2)


def test_split_annotations(catalog: Catalog) -> None:
    g = Geometry.of(catalog.models["qwen2-57b-a14b"]).group_of(0)
    assert g.tensor("wq").tp is Split.COLUMN and g.tensor("wo").tp is Split.ROW
    assert g.tensor("wk").tp is Split.KV_HEADS and g.tensor("bk").tp is Split.KV_HEADS
    assert g.tensor("router").ep is ExpertSplit.ROUTER
    assert g.tensor("expert_down").ep is ExpertSplit.EXPERTS
    assert g.tensor("expert_down").copies == 64
    assert g.tensor("shared_expert_gate").tp is Split.REPLICATED
    assert g.tensor("norm").copies == 2


@st.composite
def sharded_models(draw: st.DrawFn) -> tuple[ModelSpec, int, int, int]:
    """A random architecture and a (tp, ep, etp) whose degrees divide its dimensions."""
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    heads = tp * draw(st.integers(1, 4))
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0
                               and (k % tp == 0 or tp % k == 0)]))
    head_dim = draw(st.sampled_from([16, 32]))
    d = draw(st.sampled_from([64, 96, 128]))
    fields: dict[str, object] = dict(
        id="rand", name="rand", family="rand", n_layers=draw(st.integers(1, 5)), d_model=d,
        n_heads=heads, n_kv_heads=kv, head_dim=head_dim, ffn_dim=tp * draw(st.integers(1, 40)),
        ffn_kind=draw(st.sampled_from(["plain", "gated"])),
        vocab_size=tp * draw(st.integers(10, 200)), max_seq_len=256,
        tied_embeddings=draw(st.booleans()),
        position=draw(st.sampled_from(["learned", "rope", "alibi"])),
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])), norm_bias=draw(st.booleans()),
        norms_per_layer=draw(st.integers(1, 4)), embedding_norm=draw(st.booleans()),
        qk_norm=draw(st.booleans()), qkv_bias=draw(st.booleans()),
        attn_out_bias=draw(st.booleans()), mlp_bias=draw(st.booleans()),
        lm_head_bias=draw(st.booleans()),
    )
    if draw(st.booleans()):
        fields["mla"] = dict(q_lora_rank=draw(st.sampled_from([None, 48])), kv_lora_rank=32,
                             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)
        fields["n_kv_heads"] = None
    ep, etp = 1, tp
    if draw(st.booleans()):
        ep = draw(st.sampled_from([1, 2, 4]))
        etp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if t <= tp]))
        experts = ep * draw(st.integers(1, 4))
        fields["moe"] = dict(
            num_experts=experts, top_k=draw(st.integers(1, experts)),
            expert_ffn_dim=8 * draw(st.integers(1, 8)),
            num_shared_experts=draw(st.integers(0, 2)),
            shared_expert_ffn_dim=tp * draw(st.integers(1, 8)),
            shared_expert_gate=draw(st.booleans()), router_bias=draw(st.booleans()),
            dense_layers=draw(st.integers(0, 1)), layer_frequency=draw(st.integers(1, 2)))
    return ModelSpec.model_validate(fields), tp, ep, etp


@settings(max_examples=150, deadline=None)
@given(sharded_models())
def test_random_shares_sum_back(case: tuple[ModelSpec, int, int, int]) -> None:
    spec, tp, ep, etp = case
    assert_sums_back(spec, tp, ep, etp)
    assert Geometry.of(spec).shard(1, 1) == Geometry.of(spec)
