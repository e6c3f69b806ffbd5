"""The front end's latency outside the serving loop (cost/framework.py ``request_latency_s``):
the simulator adds it to what the client sees, never to a step."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from accelmap.serving.iteration import IterationCost
from accelmap.serving.requests import make
from accelmap.serving.scheduler import KvBudget, KvPolicy, SchedulerConfig
from accelmap.serving.simulator import simulate


def test_front_end_latency_shifts_ttft_and_e2e_only(small) -> None:  # type: ignore[no-untyped-def]
    sched = SchedulerConfig(KvPolicy.ON_DEMAND, 64, 2048, True, 16, KvBudget.OF_TOTAL, 0.9)

    def sim(late: float):  # type: ignore[no-untyped-def]
        fw = replace(small.fw, request_latency_s=late)
        cost = IterationCost(small.spec, small.system, small.wl, small.m, fw, max_tokens=9000,
                             max_seqs=96, max_context=3000)
        return simulate(make(6, 300, 20), cost, sched, 1e6)

    a, b = sim(0.0), sim(0.25)
    assert np.allclose(b.first_token_s - b.arrival_s, a.first_token_s - a.arrival_s + 0.25)
    assert np.allclose(b.finish_s - b.first_token_s, a.finish_s - a.first_token_s)  # TPOT
    assert np.allclose(b.step_s, a.step_s)  # no device time


def test_fixed_batch_estimate_pays_it_once_before_the_first_token(small  # type: ignore[no-untyped-def]
                                                                  ) -> None:
    from accelmap.engine import estimate

    def est(late: float):  # type: ignore[no-untyped-def]
        return estimate(small.spec, small.system, small.wl, small.m,
                        framework=replace(small.fw, request_latency_s=late))

    a, b = est(0.0), est(0.3)
    assert b.ttft_s == pytest.approx(a.ttft_s + 0.3, rel=1e-9)
    assert b.tpot_s == pytest.approx(a.tpot_s, rel=1e-12)


def test_a_served_stack_adds_its_server_latency_in_served_scenarios_only() -> None:
    """TensorRT-LLM >= 1.0 behind trtllm-serve (a fitted figure, data/server_latency.yaml)
    waits for its front end in the concurrency and server scenarios, never offline
    (trtllm-bench runs the executor in-process); a stack without one is left as it is."""
    from accelmap.cost.framework import Framework, profile
    from accelmap.serving.scenario import Load, Scenario, served

    trt = profile(Framework.TENSORRT_LLM_1)
    assert 0.0 < trt.server_request_latency_s < 1.0
    closed = Load(Scenario.CONCURRENCY, concurrency=8)
    fw, notes = served(trt, closed)
    assert fw.request_latency_s == pytest.approx(
        trt.request_latency_s + trt.server_request_latency_s) and "served" in notes[0]
    assert served(trt, Load(Scenario.OFFLINE)) == (trt, ())
    sgl = profile(Framework.SGLANG)
    assert sgl.server_request_latency_s == 0.0 and served(sgl, closed) == (sgl, ())


def test_dynamo_front_end_replaces_the_engines() -> None:
    """Under Dynamo the engine's own front end is not in the request's path: its fitted latency
    (data/server_latency.yaml ``dynamo``) replaces the engine's, and no served latency is
    added on top (cost/framework.py ``orchestrated``)."""
    from accelmap.cost import framework as fwmod
    from accelmap.cost.framework import Framework, orchestrated, profile

    for name in (Framework.SGLANG, Framework.TENSORRT_LLM_1):
        fw = orchestrated(profile(name), "dynamo")
        assert fw.request_latency_s == pytest.approx(fwmod.server_latency_s("dynamo"))
        assert fw.server_request_latency_s == 0.0
    plain = profile(Framework.SGLANG)
    assert orchestrated(plain, "no-such-orchestrator") is plain
