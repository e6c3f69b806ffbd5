"""Scenario runs end to end: the KV pool rules of the frameworks, infeasible mappings as
results, the issue's exact offline command, and the server scenario's percentiles."""

from __future__ import annotations

import json

import pytest

from accelmap import api
from accelmap.cost.framework import Framework
from accelmap.errors import InputError
from accelmap.serving.scenario import Load, Scenario, kv_pool, run
from accelmap.serving.scheduler import KvBudget, defaults


def test_kv_pool_rules(make_setup) -> None:  # type: ignore[no-untyped-def]
    s = make_setup(model="llama-3.1-70b", cluster="1x2xh100-sxm5-80gb", tp=2, weights="fp8")
    cap = s.system.memory_bytes
    trt = defaults(Framework.TENSORRT_LLM, offline=True, device_bytes=cap)
    vllm = defaults(Framework.VLLM, offline=True, device_bytes=cap)
    assert trt.kv_budget is KvBudget.OF_FREE and vllm.kv_budget is KvBudget.OF_TOTAL
    for sched in (trt, vllm):
        pool = kv_pool(s.spec, s.wl, s.m, cap, sched)
        other = sum(v for k, v in pool.other.items.items() if k != "kv_cache")
        expect = (0.9 * (cap - other) if sched is trt else 0.9 * cap - other)
        assert pool.pool_bytes == pytest.approx(expect)
        # 70B with GQA: 80 layers x 2 x 8 heads x 128 dims, fp8, split over tp=2
        assert pool.bytes_per_token == pytest.approx(80 * 2 * 8 * 128 / 2)


def test_a_model_that_leaves_no_room_is_a_result(make_setup) -> None:  # type: ignore[no-untyped-def]
    s = make_setup(model="llama-3.1-70b", hw="l4")
    r = run(s.spec, s.system, s.wl, s.m, s.fw, Load(Scenario.OFFLINE, requests=10))
    assert not r.feasible and "memory rule" in (r.reason or "")


def test_server_needs_a_rate() -> None:
    with pytest.raises(InputError, match="--rate"):
        Load(Scenario.SERVER)
    with pytest.raises(InputError, match="batch"):
        api.serving_load("batch")


def test_replicas_share_the_load(make_setup) -> None:  # type: ignore[no-untyped-def]
    one = make_setup(cluster="1x2xh100-sxm5-80gb")
    two = api.serving_mapping(replicas=2)
    load = Load(Scenario.SERVER, requests=400, rate=150.0)  # more than one H100 can prefill
    a = run(one.spec, one.system, one.wl, one.m, one.fw, load)
    b = run(one.spec, one.system, one.wl, two, one.fw, load)
    assert b.metrics["requests"] == a.metrics["requests"]
    assert b.metrics["ttft_s"]["p50"] < 0.5 * a.metrics["ttft_s"]["p50"]
    assert b.metrics["output_tokens_per_s"] > 1.5 * a.metrics["output_tokens_per_s"]


def test_a_pipeline_keeps_one_micro_batch_in_flight_per_stage(
        make_setup, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """tp1 x pp2: each stage works on one of two micro-batches while the other is in the other
    stage (TensorRT-LLM mNumMicroBatches = pp), so offline throughput is about twice that of one
    batch walking both stages in turn; a micro-batch's iteration still takes both stages."""
    from accelmap.serving import scenario

    s = make_setup(cluster="1x2xh100-sxm5-80gb", fw="tensorrt-llm")
    pp2 = api.serving_mapping(tp=1, pp=2)
    load = Load(Scenario.OFFLINE, requests=400)
    piped = run(s.spec, s.system, s.wl, pp2, s.fw, load)
    monkeypatch.setattr(scenario, "micro_batches", lambda m: 1)
    serial = run(s.spec, s.system, s.wl, pp2, s.fw, load)
    assert piped.metrics["requests"] == serial.metrics["requests"] == 400
    ratio = piped.metrics["output_tokens_per_s"] / serial.metrics["output_tokens_per_s"]
    assert 1.5 < ratio <= 2.05
    assert any("2 pipeline micro-batches in flight" in n for n in piped.assumptions)
    assert scenario.micro_batches(api.serving_mapping(tp=2)) == 1


def test_the_issue_command_prints_output_tokens_per_s(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("estimate", "llama-3.1-70b", "--cluster", "1x2xh100-sxm5-80gb", "--serve", "--tp",
            "2", "--scenario", "offline", "--prompt", "1000", "--output", "1000", "--weights",
            "fp8", "--framework", "tensorrt-llm", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["scenario"] == "offline" and d["output_tokens_per_s"] > 0
    assert d["output_tokens_per_s"] == pytest.approx(2 * d["output_tokens_per_s_per_device"])
    assert d["scheduler"]["policy"] == "reserve"


def test_server_text_report(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--rate", "4",
            "--requests", "100", "--prompt", "1000", "--output", "100", "--slo-ttft", "1s",
            "--slo-tpot", "40ms")
    assert r.code == 0, r.err
    assert "server scenario" in r.out and "TTFT p50 / p90 / p99" in r.out
    assert "goodput" in r.out


@pytest.mark.parametrize("args,match", [
    (("--scenario", "server"), "--rate"),
    (("--scenario", "offline", "--rate", "3"), "--rate applies"),
    (("--scenario", "bogus"), "scenario"),
    (("--scenario", "batch", "--rate", "3"), "takes no --rate"),
    (("--rate", "3", "--lengths", "gaussian"), "length distribution"),
])
def test_bad_scenarios_are_one_line(cli, args, match) -> None:  # type: ignore[no-untyped-def]
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", *args)
    assert r.code != 0
    assert match in r.err and "Traceback" not in r.err


def test_each_serving_framework_has_its_documented_scheduler() -> None:
    """vLLM and SGLang allocate KV on demand with chunked prefill, TensorRT-LLM reserves,
    stacks without a serving scheduler run static batches."""
    from accelmap.serving.scheduler import KvPolicy

    cap = 80e9
    policy = {fw: defaults(fw, offline=True, device_bytes=cap).policy for fw in Framework}
    assert policy[Framework.VLLM] is KvPolicy.ON_DEMAND
    assert policy[Framework.SGLANG] is KvPolicy.ON_DEMAND
    assert policy[Framework.TENSORRT_LLM] is KvPolicy.RESERVE
    assert policy[Framework.TORCH_COMPILE] is KvPolicy.STATIC
    assert defaults(Framework.SGLANG, offline=True, device_bytes=cap).block_tokens == 1
