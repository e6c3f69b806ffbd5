"""The serving planner under the offline and server scenarios (issue 12): screened by the
fixed-batch model, decided by the request-level simulator."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework
from accelmap.engine import resolve_framework
from accelmap.engine.serve import serve_step
from accelmap.engine.system import System
from accelmap.hardware.cluster import parse_cluster
from accelmap.search.result import Objective
from accelmap.search.serve import _workload
from accelmap.search.serve_scenario import plan_serving_scenario
from accelmap.serving.metrics import Slo
from accelmap.serving.scenario import Load, Scenario, run
from accelmap.units import DType

PROMPT, OUTPUT = 1024, 128
REQUESTS = 240  # per simulation: small enough for a fast test, enough for a p99


@pytest.fixture(scope="module")
def setup(catalog: Catalog):  # type: ignore[no-untyped-def]
    spec = catalog.models["llama-3.1-8b"]
    cluster = parse_cluster("8xH100", catalog)
    return spec, cluster


def _server(rate: float, ttft: float | None = None, tpot: float | None = None) -> Load:
    return Load(Scenario.SERVER, REQUESTS, rate, slo=Slo(ttft, tpot))


def test_goodput_ranking_matches_the_simulator(setup) -> None:  # type: ignore[no-untyped-def]
    spec, cluster = setup
    load = _server(40.0, ttft=0.5, tpot=0.03)
    res = plan_serving_scenario(spec, cluster, PROMPT, OUTPUT, load, top=20, shortlist=4)
    assert res.objective is Objective.GOODPUT and res.plans
    goodput = [p.metrics["goodput_requests_per_s"] for p in res.plans]
    assert goodput == sorted(goodput, reverse=True)  # highest simulated goodput first
    # the top plan's figures are what scenario.run gives for that mapping and its caps
    top = res.plans[0]
    assert top.serving is not None
    wl = _workload(PROMPT, OUTPUT, 1, top.serving.weight_dtype, top.serving.kv_dtype,
                   DType.BF16)
    fw = resolve_framework("vllm", Framework.VLLM)
    again = run(spec, System.of(cluster), wl, top.mapping, fw,
                Load(Scenario.SERVER, REQUESTS, 40.0, slo=load.slo,
                     max_seqs=top.serving.batch))
    assert again.metrics["goodput_requests_per_s"] == pytest.approx(goodput[0])
    assert again.scheduler is not None
    assert again.scheduler.max_batched_tokens == top.serving.max_tokens
    s = res.search or {}
    assert s["simulated_configurations"] <= s["screened_feasible"] <= s["configurations"]
    assert s["simulation_runs"] >= s["simulated_configurations"]
    assert any("runner-up" in line for line in res.explanation)
    assert any(line.startswith("screened ") for line in res.explanation)


def test_tight_ttft_slo_is_met_at_p99(setup) -> None:  # type: ignore[no-untyped-def]
    spec, cluster = setup
    res = plan_serving_scenario(spec, cluster, PROMPT, OUTPUT, _server(20.0, ttft=0.15),
                                objective="throughput", top=5, shortlist=4)
    assert res.plans
    for p in res.plans:
        assert p.metrics["ttft_p99_s"] <= 0.15


def test_scheduler_ttft_is_not_the_whole_batch_prefill(setup) -> None:  # type: ignore[no-untyped-def]
    """Issue 12: the throughput-best plan's TTFT was the prefill of its whole batch."""
    spec, cluster = setup
    res = plan_serving_scenario(spec, cluster, PROMPT, OUTPUT, _server(30.0, tpot=0.05),
                                objective="throughput", top=1, shortlist=4)
    p = res.plans[0]
    assert p.serving is not None
    tp, pp, ep = int(p.mapping.tp), int(p.mapping.pp), int(p.mapping.ep)
    from accelmap.mapping.plan import Mapping

    m = Mapping.serving(tp=tp, pp=pp, ep=ep, replicas=None, world=cluster.devices)
    batch = p.metrics["screen_batch"]
    fixed = serve_step(spec, System.of(cluster), _workload(
        PROMPT, OUTPUT, batch, p.serving.weight_dtype, p.serving.kv_dtype, DType.BF16), m,
        resolve_framework(Framework.VLLM, Framework.VLLM), limits=False)
    assert batch > 1 and p.metrics["batch_ttft_s"] == pytest.approx(fixed.metrics["ttft_s"])
    assert p.metrics["ttft_p99_s"] < fixed.metrics["ttft_s"] / 5


def test_offline_tpot_slo_lowers_the_cap(setup) -> None:  # type: ignore[no-untyped-def]
    spec, cluster = setup
    load = Load(Scenario.OFFLINE, 2000, slo=Slo(None, 0.012))  # 250 per replica of 8
    res = plan_serving_scenario(spec, cluster, PROMPT, OUTPUT, load, top=3, shortlist=3)
    assert res.objective is Objective.THROUGHPUT and res.plans
    for p in res.plans:
        assert p.metrics["tpot_p99_s"] <= 0.012
        assert p.metrics["peak_running"] <= p.metrics["max_seqs"]
    # the framework's cap (1024 running requests) misses the SLO: the planner lowered it
    assert any(p.metrics["max_seqs"] < 1024 for p in res.plans)
    # the whole-batch stall is gone: no iteration is as long as the fixed batch's prefill
    top = res.plans[0].metrics
    assert top["itl_s"]["p99"] < top["batch_ttft_s"]


def test_batch_scenario_is_refused_here(setup) -> None:  # type: ignore[no-untyped-def]
    spec, cluster = setup
    from accelmap.errors import InputError

    with pytest.raises(InputError, match="batch scenario"):
        plan_serving_scenario(spec, cluster, PROMPT, OUTPUT, Load(Scenario.BATCH))


def test_precision_neighbours_name_their_tp(setup) -> None:  # type: ignore[no-untyped-def]
    """Issue 27: "int4 weights: not simulated" was printed beside an int4 row of the table
    (simulated at another tp). A precision neighbour of the winner keeps its tp and says so;
    formats whose screens are equal are said to be equal, with why, once."""
    spec, cluster = setup
    res = plan_serving_scenario(spec, cluster, PROMPT, OUTPUT,
                                Load(Scenario.OFFLINE, 120, slo=Slo(None, 0.03)), top=8,
                                shortlist=3, quantize=True)
    assert res.plans and res.plans[0].serving is not None
    tp = res.plans[0].mapping.tp
    weights = [line for line in res.explanation if " weights" in line.split(":")[0]
               and not line.startswith(("runner-up", "best"))]
    assert weights, res.explanation
    for line in weights:
        head = line.split(":")[0]
        assert head.endswith(f"at tp={tp}") or "screen the same" in head, line
