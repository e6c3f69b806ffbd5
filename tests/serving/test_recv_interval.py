"""SGLang's --scheduler-recv-interval: new requests are taken off the socket once every N decode
steps (at once after a prefill step or on an idle server): SchedulerRecvSkipper."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.errors import InputError
from accelmap.serving.requests import make
from accelmap.serving.scenario import Load, Scenario, scheduler_for
from accelmap.serving.scheduler import KvBudget, KvPolicy, SchedulerConfig
from accelmap.serving.simulator import simulate


def _sched(interval: int = 1) -> SchedulerConfig:
    return SchedulerConfig(KvPolicy.ON_DEMAND, 64, 2048, True, 16, KvBudget.OF_TOTAL, 0.9,
                           recv_interval=interval)


def test_arrivals_during_decoding_wait_for_the_poll(cost) -> None:  # type: ignore[no-untyped-def]
    """16 clients, 300-token prompts, 200-token answers: a request sent when another finishes
    finds the batch decoding and waits up to 30 decode steps; the first wave (idle server) and
    a lone client (idle between its requests) do not wait."""
    reqs = make(64, 300, 200)
    plain = simulate(reqs, cost, _sched(1), 1e6, concurrency=16)
    polled = simulate(reqs, cost, _sched(30), 1e6, concurrency=16)
    ttft = lambda s: s.first_token_s - s.arrival_s  # noqa: E731
    assert np.allclose(ttft(polled)[:16], ttft(plain)[:16])  # all sent at t = 0, idle server
    step = float(np.median(plain.step_s))
    extra = float(np.median(ttft(polled)[16:]) - np.median(ttft(plain)[16:]))
    assert 2 * step < extra < 31 * step  # waited some decode steps, never more than 30 (+1)
    assert int(polled.step_decodes.sum()) == int(plain.step_decodes.sum())  # same tokens
    one_plain = simulate(make(4, 300, 50), cost, _sched(1), 1e6, concurrency=1)
    one_polled = simulate(make(4, 300, 50), cost, _sched(30), 1e6, concurrency=1)
    assert np.allclose(one_plain.first_token_s, one_polled.first_token_s)


def test_interval_one_is_the_plain_loop(cost) -> None:  # type: ignore[no-untyped-def]
    a = simulate(make(40, 300, 60), cost, _sched(), 1e6, concurrency=8)
    b = simulate(make(40, 300, 60), cost, replace(_sched(), recv_interval=1), 1e6,
                 concurrency=8)
    assert np.array_equal(a.first_token_s, b.first_token_s)


def test_only_sglang_has_the_setting(small) -> None:  # type: ignore[no-untyped-def]
    load = Load(Scenario.CONCURRENCY, concurrency=4, recv_interval=30)
    sched = scheduler_for(small.system, framework_profile(Framework.SGLANG), load)
    assert sched.recv_interval == 30
    with pytest.raises(InputError, match="SGLang's --scheduler-recv-interval"):
        scheduler_for(small.system, framework_profile(Framework.VLLM), load)
    with pytest.raises(InputError, match="--recv-interval must be a whole number of decode steps"):
        Load(Scenario.CONCURRENCY, concurrency=4, recv_interval=0)
    with pytest.raises(InputError, match="recv_interval must be at least 1"):
        _sched(0)


def test_the_cli_takes_it_for_sglang_only(cli) -> None:  # type: ignore[no-untyped-def]
    base = ["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--prompt", "512",
            "--output", "64", "--scenario", "concurrency", "--concurrency", "8", "--json"]
    ok = cli(*base, "--framework", "sglang", "--recv-interval", "30")
    assert ok.code == 0, ok.err
    assert "once every 30 decode steps" in ok.out
    bad = cli(*base, "--framework", "vllm", "--recv-interval", "30")
    assert bad.code == 2 and "SGLang's --scheduler-recv-interval" in bad.err
    batch = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
                "--recv-interval", "30")
    assert batch.code == 2 and "simulated run" in batch.err
