"""Attention data parallelism (``Mapping.dp_attention``, issue 22 part 3): each device of the tp
group runs attention for its own requests with the whole attention weights and holds only their
KV cache; the FFN and experts stay split over the group and see every rank's tokens."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap import api
from accelmap.catalog import load_catalog
from accelmap.cost.collectives import Collective
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.engine import estimate
from accelmap.engine.serve import rank_geometry, serving_links, serving_memory
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import Mapping
from accelmap.models.geometry import Geometry
from accelmap.models.params import count_params
from accelmap.ops.graph import forward_ops
from accelmap.serving.scenario import Load, Scenario, kv_pool, run, scheduler_for
from accelmap.units import DType
from accelmap.workload import Inference

CAT = load_catalog()
NODE = parse_cluster("8xh200-sxm", CAT)
DS = CAT.models["deepseek-v3"]  # MLA: one latent KV head
QWEN = CAT.models["qwen3-30b-a3b"]  # GQA MoE
WL = Inference(batch=64, prompt_len=1024, output_len=128, weight_dtype=DType.FP8,
               act_dtype=DType.BF16)
TP = Mapping.serving(tp=8, ep=8)
DPA = Mapping.serving(tp=8, ep=8, dp_attention=True)


def _items(m: Mapping, wl: Inference = WL, spec: object = DS) -> dict[str, float]:
    return {k: float(v) for k, v in
            serving_memory(spec, wl, m, NODE.accelerator.memory_bytes, None).items.items()}


def test_attention_weights_are_whole_on_every_rank() -> None:
    whole = sum(lp.attention for lp in count_params(Geometry.of(DS)).layers)
    dp = sum(lp.attention for lp in count_params(rank_geometry(DS, DPA)).layers)
    tp = sum(lp.attention for lp in count_params(rank_geometry(DS, TP)).layers)
    assert dp == whole and tp < whole
    # the rest of the layer (experts, dense FFN) and the vocabulary stay split as under TP
    assert ([lp.ffn for lp in count_params(rank_geometry(DS, DPA)).layers]
            == [lp.ffn for lp in count_params(rank_geometry(DS, TP)).layers])
    assert _items(DPA)["weights"] > _items(TP)["weights"]


def test_mla_kv_is_not_held_g_times() -> None:
    """TP holds MLA's one latent for all 64 requests on every device; DP attention each
    device's own 8."""
    assert _items(DPA)["kv_cache"] == pytest.approx(_items(TP)["kv_cache"] / 8)


def test_gqa_kv_per_device_is_the_same_when_heads_split() -> None:
    """Qwen3-30B-A3B's 4 KV heads split over tp=4: the same KV bytes per device either way."""
    tp4, dp4 = Mapping.serving(tp=4, ep=4), Mapping.serving(tp=4, ep=4, dp_attention=True)
    assert _items(dp4, spec=QWEN)["kv_cache"] == pytest.approx(_items(tp4, spec=QWEN)["kv_cache"])


def test_capacity_grows_for_mla() -> None:
    tp, dp = (estimate(DS, NODE, WL, m) for m in (TP, DPA))
    assert tp.feasible and dp.feasible
    assert dp.metrics["max_batch"] > 4 * tp.metrics["max_batch"]


def test_attention_runs_on_own_requests_the_rest_on_all() -> None:
    """Per rank: the attention block's operators are the whole model's on ceil(64/8) = 8
    requests; the experts' and FFN's are tensor parallelism's on all 64."""
    from accelmap.engine.shapes import inference_precision, inference_shapes

    dp = estimate(DS, NODE, WL, DPA)
    tp = estimate(DS, NODE, WL, TP)
    own = Inference(batch=8, prompt_len=1024, output_len=128, weight_dtype=DType.FP8,
                    act_dtype=DType.BF16)
    _, dec = inference_shapes(DS, own)
    whole = {o.name: o for o in forward_ops(Geometry.of(DS), dec, inference_precision(own))}

    def ops(est: object, pick: object) -> dict[str, object]:
        return {t.op.name: t.op for t in est.times["decode"] if pick(t.op.name)}  # type: ignore

    def attn(n: str) -> bool:
        return n.startswith("layers/attention/")

    for name, op in ops(dp, attn).items():
        assert float(op.flops) == pytest.approx(float(whole[name].flops)), name
        assert float(op.total_bytes) == pytest.approx(float(whole[name].total_bytes)), name
    moe = ops(dp, lambda n: n.startswith("layers/moe/"))
    assert moe and all(float(o.flops) == pytest.approx(float(ops(tp, lambda n: True)[k].flops))
                       for k, o in moe.items())


def test_busiest_rank_sets_the_step() -> None:
    """65 requests over 8 ranks: the busiest holds 9, so the step is 9 requests' attention."""
    w65, w72 = (Inference(batch=b, prompt_len=1024, output_len=128, weight_dtype=DType.FP8,
                          act_dtype=DType.BF16) for b in (65, 72))
    a65, a72 = (sum(float(t.op.flops) for t in estimate(DS, NODE, w, DPA).times["decode"]
                    if t.op.attention_core) for w in (w65, w72))
    assert a65 == pytest.approx(a72)


def test_gather_and_scatter_replace_all_to_all() -> None:
    dp = estimate(DS, NODE, WL, DPA).metrics["communication_s"]["decode_step"]
    tp = estimate(DS, NODE, WL, TP).metrics["communication_s"]["decode_step"]
    assert dp["tp"] > 0 and dp["ep"] == 0 and tp["ep"] == 0
    assert dp["tp"] != tp["tp"]  # gather + scatter of the group's tokens, not 2 all-reduces
    bigger = Inference(batch=512, prompt_len=1024, output_len=128, weight_dtype=DType.FP8,
                       act_dtype=DType.BF16)
    more = estimate(DS, NODE, bigger, DPA).metrics["communication_s"]["decode_step"]
    assert more["tp"] > dp["tp"]


def test_rules_name_the_flag() -> None:
    llama = CAT.models["llama-3.1-8b"]
    bad = check_serving(llama, NODE, Mapping.serving(tp=2, dp_attention=True))
    assert [v.rule for v in bad] == ["dp_attention_moe"]
    assert [v.rule for v in check_serving(DS, NODE, Mapping.serving(dp_attention=True))] == [
        "dp_attention_group"]
    # heads need not split under DP attention: 128 heads, tp = 8 fine either way; the rule
    # reads the attention's own split
    assert not check_serving(DS, NODE, DPA)
    with pytest.raises(InputError, match=r"dp_attention_moe rule.*--dp-attention"):
        api.estimate_inputs(api.EstimateRequest(model="llama-3.1-8b", cluster="2xH100", tp=2,
                                                dp_attention=True))
    with pytest.raises(InputError, match="give --tp"):
        api.estimate_inputs(api.EstimateRequest(model="deepseek-v3", cluster="8xH200",
                                                dp_attention=True))
    with pytest.raises(InputError, match="--serve"):
        api.estimate_inputs(api.EstimateRequest(model="deepseek-v3", cluster="8xH200", tp=8,
                                                train=True, dp_attention=True))


def test_mapping_round_trips() -> None:
    assert Mapping.from_dict(DPA.to_serving_dict()) == DPA
    assert "dp-attention" in DPA.describe_serving()
    assert (DPA.attention_tp, DPA.attention_dp, TP.attention_tp, TP.attention_dp) == (1, 8, 8, 1)


def test_simulator_pools_the_group_kv() -> None:
    system = System.of(NODE)
    fw = framework_profile(Framework.SGLANG)
    load = Load(Scenario.CONCURRENCY, concurrency=64, requests=128)
    pool = kv_pool(DS, WL, DPA, system.memory_bytes, scheduler_for(system, fw, load, DPA))
    assert pool.tokens == pytest.approx(8 * pool.pool_bytes / pool.bytes_per_token)
    assert scheduler_for(system, fw, load, DPA).max_seqs == 8 * scheduler_for(
        system, fw, load).max_seqs
    tp, dp = (run(DS, system, WL, m, fw, load) for m in (TP, DPA))
    assert tp.feasible and dp.feasible
    assert dp.metrics["kv_capacity_tokens"] > 4 * tp.metrics["kv_capacity_tokens"]
    assert dp.to_dict()["mapping"]["dp_attention"] is True


@pytest.mark.parametrize(("framework", "per_rank"), [(Framework.TENSORRT_LLM_1, True),
                                                      (Framework.VLLM, True),
                                                      (Framework.SGLANG, False)])
def test_a_stated_cap_is_a_rank_s_where_the_stack_s_caps_are(framework: Framework,
                                                            per_rank: bool) -> None:
    """TensorRT-LLM's max_batch_size under attention DP is "Max batch size in each rank" (the
    DeepSeek-R1 best-practice blog's max-throughput sections) and vLLM runs an engine core a
    rank; SGLang divides a given --max-running-requests over the attention-DP ranks."""
    system = System.of(NODE)
    fw = framework_profile(framework)
    load = Load(Scenario.CONCURRENCY, concurrency=1024, requests=2048, max_seqs=128,
                max_tokens=1151)
    got = scheduler_for(system, fw, load, DPA)
    k = 8 if per_rank else 1
    assert (got.max_seqs, got.max_batched_tokens) == (128 * k, 1151 * k)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 4096), tp=st.sampled_from([2, 4, 8]),
       model=st.sampled_from(["deepseek-v3", "deepseek-r1", "kimi-k2"]))
def test_mla_kv_per_device_never_exceeds_tp(batch: int, tp: int, model: str) -> None:
    """MLA: for a fixed total batch, DP attention's KV bytes per device never exceed tensor
    parallelism's (each device holds ceil(B/G) requests' latents instead of all B), and are
    below them from two requests on."""
    spec = CAT.models[model]
    assert spec.mla is not None
    wl = Inference(batch=batch, prompt_len=512, output_len=64)
    t = _items(Mapping.serving(tp=tp, ep=tp), wl, spec)["kv_cache"]
    d = _items(Mapping.serving(tp=tp, ep=tp, dp_attention=True), wl, spec)["kv_cache"]
    assert d <= t
    assert d == pytest.approx(t * math.ceil(batch / tp) / batch)


def test_wide_ep_under_dp_attention_may_cross_nodes() -> None:
    """DP attention with ep = tp splits no GEMM over the group (attention per device, experts
    whole), so the group may span nodes, its token gathers priced on the tiers it crosses;
    tensor-split experts (ep < tp) or plain tp still may not."""
    two = parse_cluster("2x8xh200-sxm", CAT)
    rules = [v.rule for v in check_serving(DS, two, Mapping.serving(16, ep=16,
                                                                    dp_attention=True))]
    assert "tp_in_scale_up" not in rules
    for m in (Mapping.serving(16, ep=8, dp_attention=True), Mapping.serving(16, ep=16)):
        assert "tp_in_scale_up" in [v.rule for v in check_serving(DS, two, m)]
    one = estimate(DS, System.of(NODE), WL,
                   Mapping.serving(8, ep=8, dp_attention=True))
    wide = estimate(DS, System.of(two), WL, Mapping.serving(16, ep=16, dp_attention=True))
    assert one.feasible and wide.feasible
    # the same tokens gathered over 16 ranks across InfiniBand cost more than over 8 on NVLink
    assert wide.axes is not None and "InfiniBand" in wide.axes["tp"]
    assert wide.communication_s is not None and one.communication_s is not None
    assert wide.communication_s["decode_step"]["tp"] > one.communication_s["decode_step"]["tp"]


def test_experts_inside_the_tp_group_add_no_all_to_all() -> None:
    """Under tp the group's ranks hold the same tokens after the attention all-reduce: each
    runs its own experts and the MoE output is the layer's second all-reduce, so splitting
    the experts (ep = 8) or the expert GEMMs (ep = 1) costs the same communication: 2
    all-reduces of the tokens' activations per layer (engine/serve.py serving_comm)."""
    ep8, ep1 = (estimate(DS, NODE, WL, m).metrics["communication_s"]
                for m in (TP, Mapping.serving(tp=8)))
    assert ep8 == ep1
    assert ep8["decode_step"]["ep"] == 0 and ep8["prefill"]["ep"] == 0
    links = serving_links(NODE, TP, framework_profile(Framework.VLLM))  # the GPU default
    one = links["tp"].time(Collective.ALL_REDUCE, WL.batch * DS.d_model * 2)  # bf16 tokens
    assert ep8["decode_step"]["tp"] == pytest.approx(2 * DS.n_layers * one)


def test_a_prompt_chunk_runs_on_its_rank_and_the_others_wait() -> None:
    """TensorRT-LLM tech blog 10 ("ADP Balance Strategy"): under DP attention one rank's
    context phase makes the iteration; the attention block runs max(P / G, the largest
    chunk) prompt tokens on the busiest rank, the experts all of them."""
    from accelmap.serving.iteration import IterationCost

    system = System.of(NODE)
    fw = framework_profile(Framework.TENSORRT_LLM_1)
    cost = IterationCost(DS, system, WL, DPA, fw, max_tokens=8 * 2048, max_seqs=8 * 64,
                         max_context=4096)
    decode = 8 * 32  # 32 decoding sequences a rank
    even = cost.cost(decode + 1024, decode, 1024, 512, decode, 2048)
    one = cost.cost(decode + 1024, decode, 1024, 512, decode, 2048, largest_chunk=1024)
    spread = cost.cost(decode + 1024, decode, 1024, 512, decode, 2048, largest_chunk=128)
    assert one > even and spread == pytest.approx(even)
    plain = IterationCost(DS, system, WL, TP, fw, max_tokens=2048, max_seqs=64,
                          max_context=4096)
    assert plain.cost(64, 32, 32, 16, 32, 2048, largest_chunk=32) == pytest.approx(
        plain.cost(64, 32, 32, 16, 32, 2048))


def test_a_prompt_chunk_is_at_most_a_rank_s_token_budget() -> None:
    from accelmap.serving.iteration import IterationCost
    from accelmap.serving.requests import make
    from accelmap.serving.scheduler import KvPolicy
    from accelmap.serving.simulator import simulate

    system = System.of(NODE)
    fw = framework_profile(Framework.TENSORRT_LLM_1)
    load = Load(Scenario.CONCURRENCY, concurrency=4, requests=4, max_tokens=512)
    sched = scheduler_for(system, fw, load, DPA)
    assert sched.ranks == 8 and sched.max_batched_tokens == 8 * 512
    assert sched.policy in tuple(KvPolicy)
    cost = IterationCost(DS, system, WL, DPA, fw, max_tokens=sched.max_batched_tokens,
                         max_seqs=64, max_context=4096)
    r = simulate(make(1, 2048, 4), cost, sched, 1e6, concurrency=1)
    # one 2048-token prompt in chunks of a rank's 512: four prefill iterations, not one
    assert max(r.step_tokens) <= 512 and len(r.step_s) >= 4 + 3
