"""Expert parallelism per pool of a disaggregated layout (issue 22 part 4): each pool's
instances are aggregated serving instances of their tp and ep (same memory, same shape rules),
the KV moves over the real tier, and a bad ep is one line, exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap import api
from accelmap.errors import InputError
from accelmap.serving.disagg import Disaggregation, check, kv_transfer, same_domain

Run = Callable[..., Any]
MOE = api.load_model("qwen3-30b-a3b")  # 128 experts
NODE = api.load_system(cluster="dgx-h100")


def test_ep_defaults_to_one_and_is_checked() -> None:
    d = Disaggregation(2, 2, 1, 4)
    assert (d.prefill_ep, d.decode_ep) == (1, 1)
    assert int(Disaggregation(2, 2, 1, 4, 2, 4).decode_mapping.ep) == 4
    assert int(Disaggregation(2, 2, 1, 4, 2, 4).decode_mapping.expert_tp) == 1  # tp / ep
    with pytest.raises(InputError, match="prefill ep"):
        Disaggregation(1, 2, 1, 2, 0, 1)
    split = Disaggregation.parse("3:1", 2, 8, 2, 8)
    assert split.to_dict()["prefill_ep"] == 2 and split.to_dict()["decode_ep"] == 8
    assert "decode 1 x tp=8 ep=8" in split.describe()


def test_of_pools_counts_instances() -> None:
    assert Disaggregation.of_pools(8, 16, 4, 8, 4, 8) == Disaggregation(2, 4, 2, 8, 4, 8)
    with pytest.raises(InputError, match="decode_devices 12 is not a whole number"):
        Disaggregation.of_pools(8, 12, 4, 8)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 64), st.integers(1, 16), st.integers(1, 64), st.integers(1, 16))
def test_of_pools_round_trips_the_device_counts(p: int, tp_p: int, d: int, tp_d: int) -> None:
    split = Disaggregation.of_pools(p * tp_p, d * tp_d, tp_p, tp_d)
    assert (split.prefill_instances, split.decode_instances) == (p, d)
    assert split.devices == p * tp_p + d * tp_d
    assert int(split.prefill_mapping.world) == split.prefill_devices


def test_pool_rules_are_one_instances_serving_rules() -> None:
    """check() names the pool and the rule an aggregated layout of that tp/ep breaks."""
    assert check(MOE, NODE.cluster, Disaggregation(2, 2, 1, 4, 2, 4)) == []
    why = check(MOE, NODE.cluster, Disaggregation(1, 4, 1, 4, 1, 3))[0]  # ep 3 of tp 4
    assert why.startswith("decode pool:") and "experts_divisible" in why
    (why,) = check(MOE, NODE.cluster, Disaggregation(1, 2, 1, 4, 4, 1))
    assert why.startswith("prefill pool:") and "ep_within_tp" in why


def test_each_pool_is_the_aggregated_layout_of_its_tp_and_ep() -> None:
    """The decode pool's memory per device is that of a colocated tp=4 ep=4 run of the same
    load (the same engine path), and ep moves the decode step time."""
    wl = api.inference(1, 1000, 100)
    load = api.serving_load("offline", requests=40)
    ep4 = api.serve_disaggregated(MOE, NODE, wl, Disaggregation(2, 2, 1, 4, 2, 4), load=load)
    ep1 = api.serve_disaggregated(MOE, NODE, wl, Disaggregation(2, 2, 1, 4, 2, 1), load=load)
    agg = api.serve(MOE, NODE, wl, api.serving_mapping(4, 1, 4, 1), load=load)
    assert ep4.feasible and ep1.feasible and agg.memory is not None
    assert ep4.decode_memory is not None
    assert dict(ep4.decode_memory.items) == pytest.approx(dict(agg.memory.items))
    assert ep4.metrics["decode_pool"]["ep"] == 4 and ep4.metrics["prefill_pool"]["ep"] == 2
    assert ep4.metrics["tpot_s"]["p50"] != ep1.metrics["tpot_s"]["p50"]


def test_kv_moves_over_nvlink_in_an_nvl72_rack_and_over_nics_across_nodes() -> None:
    spec = api.load_model("deepseek-v3")
    fp8 = api.parse.dtype("fp8", "KV")
    rack = api.load_system(cluster="gb200-nvl72").cluster
    wide = Disaggregation(2, 8, 4, 8, 8, 8)  # 48 GPUs in one 72-GPU NVLink domain
    assert same_domain(rack, wide)
    assert "NVLink" in kv_transfer(spec, rack, wide, fp8).link.name
    two = api.load_system(cluster="2xdgx-h100").cluster
    far = kv_transfer(spec, two, Disaggregation(1, 8, 1, 8, 8, 8), fp8)
    assert not far.same_domain and "InfiniBand" in far.link.name


ARGS = ("estimate", "deepseek-v3", "--cluster", "2xdgx-h100", "--serve", "--weights", "fp8",
        "--scenario", "server", "--rate", "2", "--requests", "20", "--disaggregate", "1:1",
        "--prefill-tp", "8", "--decode-tp", "8")


@pytest.mark.parametrize(("extra", "says"), [
    (("--prefill-ep", "3"), "prefill pool: ep=3 does not split the experts (experts_divisible "
                            "rule): give --prefill-ep dividing the 256 experts"),
    (("--decode-ep", "16"), "decode pool: ep=16 must divide tp=8 (serving) (ep_within_tp rule): "
                            "give --decode-ep dividing --decode-tp"),
])
def test_bad_pool_ep_is_one_line_exit_2(cli: Run, extra: tuple[str, ...], says: str) -> None:
    r = cli(*ARGS, *extra)
    assert r.code == 2
    assert r.err.strip().splitlines() == [f"error: {says} (expert parallelism splits the tp "
                                           "group)" if "ep_within_tp" in says
                                           else f"error: {says}"]


def test_pool_ep_needs_disaggregate(cli: Run) -> None:
    r = cli("estimate", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--serve", "--rate", "2",
            "--decode-ep", "2")
    assert r.code == 2 and "--disaggregate" in r.err
    assert len(r.err.strip().splitlines()) == 1


# --- closed-loop clients on the two pools --------------------------------------------------

SPLIT = Disaggregation(2, 2, 1, 4, 2, 4)
WL = api.inference(1, 1000, 100)


def _loop(clients: int, requests: int) -> api.DisaggRun:
    load = api.serving_load("concurrency", concurrency=clients, requests=requests)
    return api.serve_disaggregated(MOE, NODE, WL, SPLIT, load=load)


def test_one_client_sends_each_request_alone() -> None:
    """One client: every request runs alone, so its end-to-end time is that of a run of one
    request, and the run lasts n of them."""
    alone = api.serve_disaggregated(MOE, NODE, WL, SPLIT,
                                    load=api.serving_load("offline", requests=1))
    one = _loop(1, 5)
    e2e = alone.metrics["e2e_s"]["p50"]
    assert one.metrics["e2e_s"]["p50"] == pytest.approx(e2e, rel=1e-9)
    assert one.metrics["e2e_s"]["p99"] == pytest.approx(e2e, rel=1e-9)
    assert one.metrics["output_tokens_per_s"] == pytest.approx(100 / e2e, rel=1e-6)
    assert any("closed loop: 1 clients" in a for a in one.assumptions)


def test_more_clients_than_requests_is_the_offline_run() -> None:
    """Clients >= requests: every request is sent at t = 0, as offline."""
    off = api.serve_disaggregated(MOE, NODE, WL, SPLIT,
                                  load=api.serving_load("offline", requests=12))
    assert _loop(16, 12).metrics["output_tokens_per_s"] == pytest.approx(
        off.metrics["output_tokens_per_s"], rel=1e-12)


def test_closed_loop_is_its_own_fixed_point() -> None:
    """Request c + k is sent at the k-th finish, the first c at t = 0; more clients give more
    throughput and a longer TPOT."""
    from accelmap.cost.framework import Framework
    from accelmap.cost.framework import profile as framework_profile
    from accelmap.serving import disagg

    load = api.serving_load("concurrency", concurrency=4, requests=24)
    cache: disagg.Instances = {}
    fw = framework_profile(Framework.VLLM)
    run = disagg.run_disaggregated(MOE, NODE, WL, SPLIT, fw, load, cache=cache)
    assert run.feasible and run.metrics["requests"] == 24
    pre, dec = cache[("prefill", 2, 2, False)], cache[("decode", 4, 4, False)]
    assert isinstance(pre, disagg.Instance) and isinstance(dec, disagg.Instance)
    xfer = kv_transfer(MOE, NODE.cluster, SPLIT, WL.kv_dtype)
    got = disagg.closed_loop(MOE, SPLIT, WL, disagg.all_requests(load, WL),
                             disagg.Pools(pre, dec), xfer, 4)
    assert not isinstance(got, str)
    tl, sent, rounds = got
    assert rounds > 1 and list(sent.arrival_s[:4]) == [0.0] * 4
    assert list(sent.arrival_s[4:]) == sorted(tl.finish)[:20]
    more = _loop(16, 96)
    assert more.metrics["output_tokens_per_s"] > run.metrics["output_tokens_per_s"]
    assert more.metrics["tpot_s"]["p50"] > run.metrics["tpot_s"]["p50"]


# --- speculative decoding on both pools ----------------------------------------------------

def test_mtp_on_both_pools() -> None:
    """The drafter's weights sit in both pools, the prefill pool also prefills it, and at one
    client the decode pool's TPOT drops by about E (memory-bound decode)."""
    sp = api.speculation(0.8, mtp=1, draft_len=2)
    load = api.serving_load("concurrency", concurrency=1, requests=4)
    plain = _loop(1, 4)
    spec_run = api.serve_disaggregated(MOE, NODE, WL, SPLIT, load=load, speculation=sp)
    assert spec_run.feasible, spec_run.reason
    assert spec_run.prefill_memory is not None and plain.prefill_memory is not None
    for pool in (spec_run.prefill_memory, spec_run.decode_memory):
        assert pool is not None and pool.items["draft_weights"] > 0
    assert "draft_weights" not in plain.prefill_memory.items
    assert spec_run.metrics["ttft_s"]["p50"] > plain.metrics["ttft_s"]["p50"]
    e = spec_run.metrics["speculative"]["expected_tokens_per_step"]
    assert e == pytest.approx(1 + 0.8 + 0.8 ** 2)  # Leviathan et al. eq. 1, k = 2
    speedup = plain.metrics["tpot_s"]["p50"] / spec_run.metrics["tpot_s"]["p50"]
    assert 1.0 < speedup < e
    with pytest.raises(InputError, match="--draft-len"):
        api.serve_disaggregated(MOE, NODE, WL, SPLIT, load=load,
                                speculation=api.speculation(0.8, mtp=1))


def test_speculation_with_the_split_search_is_refused(cli: Run) -> None:
    r = cli("estimate", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--serve", "--rate", "2",
            "--slo-ttft", "2s", "--slo-tpot", "50ms", "--disaggregate", "auto", "--mtp", "1",
            "--accept", "0.7", "--draft-len", "2")
    assert r.code == 2 and "P:D split and --draft-len" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_highest_rate_on_pools_meets_the_limit_and_the_next_rate_does_not() -> None:
    from accelmap.cost.framework import Framework
    from accelmap.cost.framework import profile as framework_profile
    from accelmap.serving.capacity import max_rate_split, meets
    from accelmap.serving.metrics import Slo

    low = _loop(1, 4).metrics["tpot_s"]["p99"]
    slo = Slo(None, 1.5 * low)  # reachable at a low rate, broken at saturation
    load = api.serving_load("server", rate=1, requests=60)
    cap = max_rate_split(MOE, NODE, WL, SPLIT, framework_profile(Framework.VLLM), load, slo,
                         steps=8)
    assert cap.rate is not None and cap.run is not None and cap.run.feasible
    assert meets(cap.run.metrics, slo)
    failed = [r for r, ok in cap.tried if not ok]
    assert failed and min(failed) > cap.rate
    assert cap.rate < cap.offline.metrics["requests_per_s"]


def test_ep_is_the_pools_default(cli: Run) -> None:
    """--ep (like --tp) is the pools' default, checked per pool, not as a colocated layout."""
    r = cli("estimate", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--serve", "--scenario",
            "offline", "--requests", "20", "--prompt", "500", "--output", "20",
            "--disaggregate", "1:1", "--prefill-tp", "4", "--decode-tp", "4", "--ep", "4",
            "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)["disaggregation"]
    assert (d["prefill_ep"], d["decode_ep"]) == (4, 4)


# --- DP attention inside a pool ------------------------------------------------------------

DSV3 = api.load_model("deepseek-v3")  # MLA: under tp the latent KV is whole on every rank


def test_dp_attention_is_per_pool() -> None:
    d = Disaggregation(1, 8, 1, 8, 8, 8, decode_dp_attention=True)
    assert bool(d.decode_mapping.dp_attention) and not bool(d.prefill_mapping.dp_attention)
    assert int(d.decode_mapping.attention_dp) == 8 and int(d.decode_mapping.attention_tp) == 1
    assert d.to_dict()["decode_dp_attention"] is True and "prefill_dp_attention" not in d.to_dict()
    assert "decode 1 x tp=8 ep=8 dp-attention" in d.describe()
    assert Disaggregation.of_pools(8, 8, 8, 8, 8, 8, True, False).prefill_dp_attention


def test_dp_attention_pool_rules() -> None:
    """A dense model cannot run DP attention in a pool; under it the heads are not split, so
    a tp the heads do not divide is no longer refused there (check_serving's rules)."""
    dense = api.load_model("llama-3.1-8b")
    (why,) = check(dense, NODE.cluster, Disaggregation(1, 4, 1, 4, decode_dp_attention=True))
    assert why.startswith("decode pool:") and "dp_attention_moe" in why
    spec = api.load_model("qwen3-30b-a3b")  # 32 query heads, 128 experts
    assert any("heads_divisible" in w for w in check(spec, NODE.cluster,
                                                     Disaggregation(1, 2, 1, 6, 1, 2)))
    assert not any("heads_divisible" in w for w in check(
        spec, NODE.cluster, Disaggregation(1, 2, 1, 6, 1, 2, decode_dp_attention=True)))


def test_dp_attention_pool_holds_its_kv_once_and_sends_it_from_one_rank() -> None:
    """MLA's latent KV is whole on every tp rank; DP attention keeps each request on one rank,
    so the decode instance holds about G = 8 times the tokens, its scheduler runs 8 ranks'
    caps, and a request's KV leaves from, or lands on, one device."""
    wl = api.inference(1, 1000, 100, kv="fp8", weights="fp8")
    load = api.serving_load("offline", requests=64)
    tp = api.serve_disaggregated(DSV3, api.load_system(cluster="2xdgx-h200"), wl,
                                 Disaggregation(1, 8, 1, 8, 8, 8), load=load)
    dpa = api.serve_disaggregated(DSV3, api.load_system(cluster="2xdgx-h200"), wl,
                                  Disaggregation(1, 8, 1, 8, 8, 8, decode_dp_attention=True),
                                  load=load)
    assert tp.feasible and dpa.feasible, (tp.reason, dpa.reason)
    ratio = dpa.metrics["decode_pool"]["kv_capacity_tokens"] / \
        tp.metrics["decode_pool"]["kv_capacity_tokens"]
    # x8 ranks, less the memory of the attention weights each rank now holds whole (MLA's
    # ~11.4 B attention parameters, 11.4 GB in fp8 per device instead of 1.4 GB under tp=8)
    assert 5.0 < ratio < 8.0
    assert tp.metrics["prefill_pool"]["kv_capacity_tokens"] == \
        dpa.metrics["prefill_pool"]["kv_capacity_tokens"]
    assert any("decode pool" in a and "x8 DP-attention ranks" in a for a in dpa.assumptions)
    fp8 = api.parse.dtype("fp8", "KV")
    two = api.load_system(cluster="2xdgx-h200").cluster
    assert kv_transfer(DSV3, two, Disaggregation(1, 8, 1, 8, 8, 8), fp8).streams == 8
    assert kv_transfer(DSV3, two, Disaggregation(1, 8, 1, 8, 8, 8, True), fp8).streams == 1


@pytest.mark.parametrize(("extra", "says"), [
    (("--decode-dp-attention",), "drop --disaggregate"),
    (("--disaggregate", "auto", "--dp-attention"), "split search"),
])
def test_pool_dp_attention_flags_are_checked(cli: Run, extra: tuple[str, ...], says: str
                                            ) -> None:
    base = ("estimate", "deepseek-v3", "--cluster", "2xdgx-h100", "--serve", "--weights",
            "fp8", "--rate", "2", "--requests", "20")
    r = cli(*base, *extra)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert (says in r.err) if says != "drop --disaggregate" else ("--disaggregate P:D" in r.err)
