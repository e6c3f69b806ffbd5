"""TensorRT-LLM's attention-DP balance (``attention_dp_config: enable_balance: true,
timeout_iters: N, batching_wait_iters: W``): a context request waits until every rank has one,
or until a counter of iterations reaches N, or until some rank has nothing to decode; with W,
W more such iterations pass before the prompts go (``PyExecutor._balance_adp_requests``;
serving/simulator.py module doc)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from accelmap import api
from accelmap.api.validation import Status, validate_cases
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.errors import InputError
from accelmap.serving.requests import LengthDist, make
from accelmap.serving.scenario import Load, Scenario, scheduler_for
from accelmap.serving.scheduler import KvBudget, KvPolicy, SchedulerConfig
from accelmap.serving.simulator import simulate

RANKS = 4


def _sched(iters: int = 0, wait: int = 0) -> SchedulerConfig:
    return SchedulerConfig(KvPolicy.RESERVE, 64, 8192, True, 32, KvBudget.OF_FREE, 0.9,
                           ranks=RANKS, adp_balance_iters=iters, adp_batching_wait_iters=wait)


def _ttft(s):  # type: ignore[no-untyped-def]
    return s.first_token_s - s.arrival_s


def test_prompts_wait_for_every_rank_or_the_timeout(cost) -> None:  # type: ignore[no-untyped-def]
    """16 clients over 4 ranks, answers of uneven length: the first wave (every rank has a
    prompt) goes at once; later prompts, sent one by one as others finish, wait until each rank
    has one or the counter of 40 iterations runs out, never longer; the tokens are the same."""
    reqs = make(96, 300, 200, dist=LengthDist.UNIFORM, spread=0.5, seed=1)
    plain = simulate(reqs, cost, _sched(), 1e6, concurrency=16)
    held = simulate(reqs, cost, _sched(40), 1e6, concurrency=16)
    assert np.allclose(_ttft(held)[:16], _ttft(plain)[:16])  # all sent at t = 0
    step = float(np.median(plain.step_s))
    extra = _ttft(held)[16:] - np.median(_ttft(plain)[16:])
    assert float(np.median(extra)) > 3 * step  # they waited
    assert float(extra.max()) < 41 * float(held.step_s.max())  # at most the 40-iteration cycle
    assert int(held.step_tokens.sum()) == int(plain.step_tokens.sum())


def test_a_lone_client_and_a_timeout_of_one_do_not_wait(cost) -> None:  # type: ignore[no-untyped-def]
    """One client: the other ranks have nothing to decode, so its prompt goes at once. A
    timeout of 1 iteration releases every iteration: the plain loop."""
    one = make(6, 300, 50)
    assert np.allclose(simulate(one, cost, _sched(), 1e6, concurrency=1).first_token_s,
                       simulate(one, cost, _sched(60), 1e6, concurrency=1).first_token_s)
    reqs = make(48, 300, 120, dist=LengthDist.UNIFORM, spread=0.5, seed=2)
    assert np.allclose(simulate(reqs, cost, _sched(), 1e6, concurrency=8).first_token_s,
                       simulate(reqs, cost, _sched(1), 1e6, concurrency=8).first_token_s)


def test_longer_timeouts_hold_prompts_longer(cost) -> None:  # type: ignore[no-untyped-def]
    reqs = make(96, 300, 200, dist=LengthDist.UNIFORM, spread=0.5, seed=3)
    waits = [float(np.median(_ttft(simulate(reqs, cost, _sched(n), 1e6, concurrency=16))[16:]))
             for n in (1, 10, 40)]
    assert waits[0] < waits[1] < waits[2]


def test_a_batching_wait_holds_ready_prompts_and_batches_them(cost) -> None:  # type: ignore[no-untyped-def]
    """batching_wait_iters W: with every rank holding a prompt and a decode, W more iterations
    pass before the prompts go, so TTFT grows with W while the first wave (nothing decoding
    yet) still goes at once, and fewer iterations carry prompt tokens; the tokens are the
    same."""
    reqs = make(96, 300, 200, dist=LengthDist.UNIFORM, spread=0.5, seed=4)
    runs = [simulate(reqs, cost, _sched(40, w), 1e6, concurrency=16) for w in (0, 3, 10)]
    waits = [float(np.median(_ttft(r)[16:])) for r in runs]
    assert waits[0] < waits[1] < waits[2]
    assert np.allclose(_ttft(runs[2])[:16], _ttft(runs[0])[:16])
    prefills = [int(np.count_nonzero(r.step_tokens > r.step_decodes)) for r in runs]
    assert prefills[2] < prefills[0]
    assert {int(r.step_tokens.sum()) for r in runs} == {int(runs[0].step_tokens.sum())}


def test_only_tensorrt_llm_1_has_it_and_one_rank_ignores_it(small) -> None:  # type: ignore[no-untyped-def]
    load = Load(Scenario.CONCURRENCY, concurrency=4, adp_balance=60)
    trt = framework_profile(Framework.TENSORRT_LLM_1)
    assert scheduler_for(small.system, trt, load).adp_balance_iters == 0  # no DP attention
    with pytest.raises(InputError, match=r"TensorRT-LLM's \(1.0 and later\) attention_dp_config"):
        scheduler_for(small.system, framework_profile(Framework.SGLANG), load)
    with pytest.raises(InputError, match="--adp-balance must be a whole number of iterations"):
        Load(Scenario.CONCURRENCY, concurrency=4, adp_balance=0)
    with pytest.raises(InputError, match="adp_balance_iters must be at least 0"):
        replace(_sched(), adp_balance_iters=-1)
    with pytest.raises(InputError, match="adp_batching_wait_iters must be at least 0"):
        replace(_sched(), adp_batching_wait_iters=-1)
    with pytest.raises(InputError, match="give --adp-balance N"):
        Load(Scenario.CONCURRENCY, concurrency=4, adp_batching_wait=3)
    with pytest.raises(InputError, match="--adp-batching-wait must be a whole number"):
        Load(Scenario.CONCURRENCY, concurrency=4, adp_balance=60, adp_batching_wait=-1)
    waited = scheduler_for(small.system, trt, replace(load, adp_batching_wait=3),
                           api.serving_mapping(tp=1, replicas=1))
    assert waited.adp_batching_wait_iters == 0  # one rank: nothing to balance


ROW = """
- id: {id}
  source: test
  accelerator: b200
  model: deepseek-r1
  devices: 8
  tp: 8
  ep: 8
  dp_attention: true
  framework: {framework}
  precision: fp8
  kv_precision: fp8
  scenario: concurrency
  concurrency: 64
  input_len: 1024
  output_len: 256
  length_dist: uniform
  length_spread: 0.2
  metric: ttft_p50_ms
  value: 500
"""


def test_the_run_format_field(tmp_path: Path) -> None:
    """attention_dp_balance reaches a TensorRT-LLM 1.x run with DP attention (its median TTFT
    grows: prompts wait for the ranks); another stack's run with it is a clear skip."""
    trt = ROW.format(id="plain", framework="tensorrt-llm 1.1.0")
    held = ROW.format(id="held", framework="tensorrt-llm 1.1.0") + \
        "  attention_dp_balance: 60\n"
    sglang = ROW.format(id="sg", framework="sglang") + "  attention_dp_balance: 60\n"
    batched = held.replace("id: held", "id: batched") + "  attention_dp_batching_wait: 10\n"
    alone = ROW.format(id="alone", framework="tensorrt-llm 1.1.0") + \
        "  attention_dp_batching_wait: 10\n"
    path = tmp_path / "runs.yaml"
    path.write_text(trt + held + sglang + batched + alone)
    rows = {p.row_id: p for p in validate_cases([path]).predictions}
    assert rows["plain"].status is Status.OK and rows["held"].status is Status.OK
    assert rows["held"].predicted > rows["plain"].predicted  # type: ignore[operator]
    assert any("attention-DP balance timeout 60" in n for n in rows["held"].notes)
    assert rows["sg"].status is not Status.OK
    assert "attention_dp_config" in (rows["sg"].skipped_reason or "")
    assert rows["batched"].status is Status.OK
    assert rows["batched"].predicted != rows["held"].predicted  # it reaches the simulation
    assert any("attention-DP batching wait 10" in n for n in rows["batched"].notes)
    assert rows["alone"].status is not Status.OK
    assert "state attention_dp_balance" in (rows["alone"].skipped_reason or "")


def test_the_cli_flag(cli) -> None:  # type: ignore[no-untyped-def]
    base = ["estimate", "deepseek-r1", "--cluster", "1x8xb200", "--serve", "--weights", "fp8",
            "--tp", "8", "--ep", "8", "--dp-attention", "--prompt", "1024", "--output", "128",
            "--scenario", "concurrency", "--concurrency", "32", "--json"]
    ok = cli(*base, "--framework", "tensorrt-llm-1", "--adp-balance", "60")
    assert ok.code == 0, ok.err
    assert "60 iterations pass" in ok.out
    waited = cli(*base, "--framework", "tensorrt-llm-1", "--adp-balance", "60",
                 "--adp-batching-wait", "3")
    assert waited.code == 0, waited.err
    assert "then 3 more to batch them" in waited.out
    alone = cli(*base, "--framework", "tensorrt-llm-1", "--adp-batching-wait", "3")
    assert alone.code == 2 and "give --adp-balance N" in alone.err
    bad = cli(*base, "--framework", "sglang", "--adp-balance", "60")
    assert bad.code == 2 and "attention_dp_config" in bad.err
    batch = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
                "--adp-balance", "60")
    assert batch.code == 2 and "simulated run" in batch.err
