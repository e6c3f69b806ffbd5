"""The simulator against the engine and against itself: a lone request and a static batch
reproduce the fixed-batch estimate; every request finishes with its tokens; the caps hold; the
KV policies behave as their frameworks document (reservation never preempts, on-demand
allocation preempts when the pool is small); more load means longer queues."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap.engine import estimate
from accelmap.serving.iteration import IterationCost
from accelmap.serving.requests import Requests, make
from accelmap.serving.scheduler import KvBudget, KvPolicy, SchedulerConfig
from accelmap.serving.simulator import CapacityError, DecodeStep, simulate


def _cost(s, max_tokens=9000, max_seqs=64, max_context=3000):  # type: ignore[no-untyped-def]
    return IterationCost(s.spec, s.system, s.wl, s.m, s.fw, max_tokens=max_tokens,
                         max_seqs=max_seqs, max_context=max_context)


def _sched(policy=KvPolicy.ON_DEMAND, seqs=32, tokens=2048, chunked=True, block=16):  # type: ignore[no-untyped-def]
    return SchedulerConfig(policy, seqs, tokens, chunked, block, KvBudget.OF_TOTAL, 0.9)


@pytest.fixture(scope="module")
def cost(small):  # type: ignore[no-untyped-def]
    return _cost(small)


def test_a_lone_request_is_the_batch_one_estimate(small, cost) -> None:  # type: ignore[no-untyped-def]
    est = estimate(small.spec, small.system, small.wl, small.m, framework=small.fw)
    sim = simulate(make(1, 512, 128), cost, _sched(), 1e6)
    assert sim.first_token_s[0] == pytest.approx(est.ttft_s, rel=1e-6)
    tpot = (sim.finish_s[0] - sim.first_token_s[0]) / 127
    assert tpot == pytest.approx(est.tpot_s, rel=1e-3)  # per-step contexts vs the mean one


def test_a_static_batch_is_the_fixed_batch_estimate(make_setup) -> None:  # type: ignore[no-untyped-def]
    s = make_setup(fw="torch-compile", batch=16)
    est = estimate(s.spec, s.system, s.wl, s.m, framework=s.fw)
    sim = simulate(make(16, 512, 128), _cost(s), _sched(KvPolicy.STATIC, seqs=16,
                                                        tokens=1 << 30, chunked=False), 1e7)
    assert float(np.max(sim.finish_s)) == pytest.approx(est.total_time_s, rel=2e-3)
    assert np.all(sim.step_decodes[1:] <= 16)


def test_every_request_finishes_and_gets_its_tokens(cost) -> None:  # type: ignore[no-untyped-def]
    req = make(300, 400, 60, rate=40.0, seed=3)
    sim = simulate(req, cost, _sched(), 2e5)
    assert not np.any(np.isnan(sim.finish_s))
    assert np.all(sim.first_token_s >= sim.arrival_s)
    assert np.all(sim.finish_s >= sim.first_token_s)
    # every decode step of every request is an iteration in which it was counted
    assert int(sim.step_decodes.sum()) == int((req.output - 1).sum())


def test_reservation_never_preempts_and_on_demand_does_when_short(cost) -> None:  # type: ignore[no-untyped-def]
    req = make(200, 300, 400)
    pool = 30_000.0  # tokens: a fraction of what 200 requests of 700 tokens need
    reserve = simulate(req, cost, _sched(KvPolicy.RESERVE, seqs=200), pool)
    on_demand = simulate(req, cost, _sched(KvPolicy.ON_DEMAND, seqs=200), pool)
    assert reserve.preemptions == 0
    assert on_demand.preemptions > 0
    assert reserve.peak_running <= pool // 700 + 1
    for sim in (reserve, on_demand):
        assert not np.any(np.isnan(sim.finish_s))


def test_chunked_prefill_keeps_every_iteration_within_the_budget(cost) -> None:  # type: ignore[no-untyped-def]
    sim = simulate(make(100, 3000, 20), cost, _sched(tokens=1024), 1e6)
    assert float(np.max(sim.step_tokens)) <= 1024
    whole = simulate(make(100, 3000, 20), cost, _sched(tokens=1024, chunked=False), 1e6)
    assert float(np.max(whole.step_tokens)) >= 3000  # a prompt larger than the budget, whole


def test_prefix_hits_shorten_the_prefill(cost) -> None:  # type: ignore[no-untyped-def]
    cold = simulate(make(50, 2000, 10), cost, _sched(), 1e6)
    warm = simulate(make(50, 2000, 10, prefix_hit=0.75), cost, _sched(), 1e6)
    assert np.max(warm.finish_s) < 0.6 * np.max(cold.finish_s)


def test_a_request_larger_than_the_pool_is_refused(cost) -> None:  # type: ignore[no-untyped-def]
    for policy in KvPolicy:
        with pytest.raises(CapacityError, match="more KV cache than the pool"):
            simulate(make(2, 3000, 100), cost,
                     _sched(policy, tokens=1 << 20 if policy is KvPolicy.STATIC else 2048,
                            chunked=policy is not KvPolicy.STATIC), 1000.0)


def test_speculative_steps_advance_faster(cost) -> None:  # type: ignore[no-untyped-def]
    plain = simulate(make(8, 200, 200), cost, _sched(), 1e6)
    spec = simulate(make(8, 200, 200), cost, _sched(), 1e6,
                    DecodeStep(verify=4, advance=2.5, extra_s=lambda n, c: 1e-4))
    assert len(spec.step_s) < len(plain.step_s)


def test_more_load_means_longer_ttft(cost) -> None:  # type: ignore[no-untyped-def]
    p99 = []
    for rate in (5.0, 40.0, 160.0):
        sim = simulate(make(400, 500, 100, rate=rate, seed=1), cost, _sched(), 2e5)
        p99.append(float(np.percentile(sim.first_token_s - sim.arrival_s, 99)))
    assert p99 == sorted(p99) and p99[-1] > 2 * p99[0]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 40), prompt=st.integers(1, 1500), output=st.integers(1, 200),
       rate=st.one_of(st.none(), st.floats(0.5, 500)), seqs=st.integers(1, 48),
       tokens=st.integers(64, 4096), policy=st.sampled_from(list(KvPolicy)),
       chunked=st.booleans(), hit=st.floats(0, 0.9), pool=st.floats(4000, 2e5),
       seed=st.integers(0, 100))
def test_invariants(cost, n, prompt, output, rate, seqs, tokens, policy, chunked, hit, pool,  # type: ignore[no-untyped-def]
                    seed) -> None:
    req = make(n, prompt, output, rate=rate, prefix_hit=hit, seed=seed)
    sched = _sched(policy, seqs=seqs, tokens=1 << 30 if policy is KvPolicy.STATIC else tokens,
                   chunked=chunked and policy is not KvPolicy.STATIC)
    try:
        sim = simulate(req, cost, sched, pool)
    except CapacityError:
        assert prompt + output > pool // 2 or (not chunked and prompt > tokens)
        return
    assert not np.any(np.isnan(sim.finish_s))
    assert np.all(sim.first_token_s >= sim.arrival_s - 1e-12)
    assert np.all(sim.finish_s >= sim.first_token_s)
    assert sim.peak_running <= seqs
    assert np.all(sim.step_s > 0)
    if policy is KvPolicy.RESERVE:
        assert sim.preemptions == 0


def test_requests_must_be_consistent() -> None:
    from accelmap.errors import InputError

    with pytest.raises(InputError):
        Requests(np.array([1.0, 0.0]), np.array([1, 1]), np.array([1, 1]), np.array([0, 0]))
