"""Closed-loop concurrency (issue 22 part 5): N clients, each sending its next request when its
previous one finishes (vllm bench serve --max-concurrency, genai-perf --concurrency)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap.errors import InputError
from accelmap.serving.iteration import IterationCost
from accelmap.serving.requests import make
from accelmap.serving.scenario import Load, Scenario, run
from accelmap.serving.scheduler import KvBudget, KvPolicy, SchedulerConfig
from accelmap.serving.simulator import simulate


@pytest.fixture(scope="module")
def cost(small):  # type: ignore[no-untyped-def]
    return IterationCost(small.spec, small.system, small.wl, small.m, small.fw, max_tokens=9000,
                         max_seqs=96, max_context=3000)


def _sched(seqs: int = 64) -> SchedulerConfig:
    return SchedulerConfig(KvPolicy.ON_DEMAND, seqs, 2048, True, 16, KvBudget.OF_TOTAL, 0.9)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 12), reqs=st.integers(1, 40))
def test_never_more_than_n_in_flight(cost, n: int, reqs: int) -> None:  # type: ignore[no-untyped-def]
    sim = simulate(make(reqs, 300, 20), cost, _sched(), 1e6, concurrency=n)
    # in flight at any instant: sent and not finished; every send after the first n is a finish
    events = sorted([(t, 1) for t in sim.arrival_s] + [(t, -1) for t in sim.finish_s],
                    key=lambda e: (e[0], e[1]))
    live, peak = 0, 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    assert peak <= n
    assert np.all(sim.arrival_s[: min(n, reqs)] == 0.0)
    later = sim.arrival_s[n:]
    assert all(np.any(np.isclose(t, sim.finish_s)) for t in later)  # sent when one finished
    assert np.all(np.diff(sim.arrival_s) >= 0)
    assert int(sim.step_decodes.sum()) == reqs * 19


def test_one_client_is_requests_back_to_back(cost) -> None:  # type: ignore[no-untyped-def]
    sim = simulate(make(5, 300, 20), cost, _sched(), 1e6, concurrency=1)
    assert np.allclose(sim.arrival_s[1:], sim.finish_s[:-1])
    lone = simulate(make(1, 300, 20), cost, _sched(), 1e6)
    e2e = sim.finish_s - sim.arrival_s
    assert np.allclose(e2e, lone.finish_s[0], rtol=1e-9)  # each one alone on the server


def test_more_clients_more_throughput_less_per_user(small) -> None:  # type: ignore[no-untyped-def]
    def figures(n: int) -> dict:  # type: ignore[type-arg]
        r = run(small.spec, small.system, small.wl, small.m, small.fw,
                Load(Scenario.CONCURRENCY, concurrency=n))
        assert r.feasible, r.reason
        return r.metrics
    lo, hi = figures(1), figures(32)
    assert hi["output_tokens_per_s_per_device"] > 5 * lo["output_tokens_per_s_per_device"]
    assert hi["tokens_per_s_per_user"] < lo["tokens_per_s_per_user"]
    # tokens/s per user is 1000 / median TPOT in ms
    assert hi["tokens_per_s_per_user"] == pytest.approx(1.0 / hi["tpot_s"]["p50"])
    assert lo["requests"] == 10  # 10 requests per client by default
    assert set(hi["ttft_s"]) >= {"p50", "p90", "p99"} and "p99" in hi["itl_s"]
    assert hi["input_tokens_per_s_per_device"] > 0
    assert hi["peak_running"] <= 32


def test_clients_split_over_replicas(make_setup) -> None:  # type: ignore[no-untyped-def]
    from accelmap.mapping.plan import Mapping
    s = make_setup(cluster="1x8xh100-sxm5-80gb")
    m = Mapping.serving(tp=2, replicas=4)
    r = run(s.spec, s.system, s.wl, m, s.fw, Load(Scenario.CONCURRENCY, concurrency=10))
    assert r.feasible, r.reason
    assert any("3 per replica" in a and "do not split evenly" in a for a in r.assumptions)


@pytest.mark.parametrize(("kw", "match"), [
    ({"concurrency": 0}, "--concurrency must be a whole number of clients from 1"),
    ({"concurrency": -3}, "--concurrency must be a whole number"),
    ({}, "needs the number of closed-loop clients"),
    ({"concurrency": 4, "rate": 2.0}, "drop --rate/--trace"),
])
def test_bad_concurrency_is_one_line(kw: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError, match=match):
        Load(Scenario.CONCURRENCY, **kw)


def test_concurrency_needs_its_scenario() -> None:
    with pytest.raises(InputError, match="applies to --scenario concurrency"):
        Load(Scenario.OFFLINE, concurrency=8)
