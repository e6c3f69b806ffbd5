"""Serving scenarios, the way serving benchmarks are run (MLPerf Inference rules, sec.
"Scenarios"; trtllm-bench; vLLM's benchmark_throughput.py / benchmark_serving.py):

- ``offline``: every request queued at once, the server picks its batch (continuous batching
  under the framework's caps and the KV pool); reports throughput.
- ``server``: Poisson arrivals at ``rate`` requests/s (or a trace); reports TTFT/TPOT/ITL/E2E
  percentiles and goodput under the SLOs as well.
- ``concurrency``: a closed loop of N clients, each sending its next request when its previous
  one finishes (``vllm bench serve --max-concurrency N``, genai-perf ``--concurrency N``, the
  public GPU-comparison dashboards' sweeps); reports throughput per device and per user
  (1 / median TPOT) with the latency percentiles.
- ``batch``: one fixed batch prefilled and decoded together (``engine.serve.serve_step``).

Replicas (data parallelism) each get an equal share of the requests: a load balancer splitting
a Poisson stream round-robin leaves each replica with (close to) rate / replicas; N closed-loop
clients split the same way, N / replicas each (rounded up when N does not divide).

A pipeline-parallel replica keeps one micro-batch in flight per stage, each scheduled on its own
under the batch caps, so that every stage works on one of them while the others are in the other
stages: TensorRT-LLM's in-flight batching model sets ``mNumMicroBatches =
getPipelineParallelism()`` and sizes its capacity scheduler at ``getMaxBatchSize() *
mNumMicroBatches`` (cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp); vLLM V1's
engine keeps ``max_concurrent_batches`` batches in its batch queue, ``pipeline_parallel_size``
of them ("PP requires PP-size concurrent batches to fill the pipeline", vllm/config/vllm.py).
One micro-batch's iteration takes every stage in turn (the iteration cost,
serving/iteration.py), so a replica of pp stages is simulated as pp lanes, each with the caps, 1
/ pp of the replica's KV pool and 1 / pp of its requests or clients, and the replica's
throughput is pp lanes'. """

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from accelmap.cost.execution import execution_model
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.engine.error_band import ErrorBand, error_band
from accelmap.engine.formats import resolve_inference
from accelmap.engine.serve import rank_geometry, serving_memory
from accelmap.engine.shapes import context_notes, device_notes
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import Mapping
from accelmap.memory.budget import MemoryBudget, kv_cache_bytes
from accelmap.models.schema import ModelSpec
from accelmap.serving.iteration import IterationCost
from accelmap.serving.metrics import Slo, summarize
from accelmap.serving.requests import MAX_REQUESTS, LengthDist, Requests, make, read_trace
from accelmap.serving.scheduler import KvBudget, KvPolicy, SchedulerConfig, defaults
from accelmap.serving.simulator import CapacityError, DecodeStep, SimResult, simulate
from accelmap.serving.speculative import (
    MAX_DRAFT_LEN,
    Choice,
    DraftMemory,
    Speculation,
    choose,
    decode_step,
    draft_cost,
    draft_memory,
)
from accelmap.serving.trtllm_bench import bench_caps
from accelmap.units import Dimension, format_quantity
from accelmap.workload import Inference


class Scenario(StrEnum):
    OFFLINE = "offline"
    SERVER = "server"
    CONCURRENCY = "concurrency"
    BATCH = "batch"


DEFAULT_REQUESTS = 2000  # per run; enough for the steady state to dominate ramp-up and tail
# Closed loop: requests per client when --requests is not given. InferenceMAX-style sweeps send
# 10 prompts per concurrent client (num_prompts = 10 x max_concurrency), so each client's ramp-up
# and tail are about a tenth of the run.
REQUESTS_PER_CLIENT = 10
MAX_CONCURRENCY = 1_000_000  # clients over a whole cluster


MAX_RATE = 1e7  # requests/s over a whole cluster
MAX_SPREAD = 100.0  # uniform +- fraction or lognormal coefficient of variation


@dataclass(frozen=True)
class Load:
    """The request stream and the objectives of a scenario run."""

    scenario: Scenario = Scenario.OFFLINE
    requests: int | None = None  # None: DEFAULT_REQUESTS (or the trace's)
    rate: float | None = None  # requests/s over all replicas (server)
    trace: Path | None = None
    dist: LengthDist = LengthDist.FIXED
    spread: float = 0.0
    prefix_hit: float = 0.0
    slo: Slo = field(default_factory=Slo)
    seed: int = 0
    max_seqs: int | None = None  # scheduler caps overriding the framework's defaults
    max_tokens: int | None = None
    chunked_prefill: bool | None = None
    kv_fraction: float | None = None  # KV memory fraction overriding the framework's default
    concurrency: int | None = None  # closed-loop clients over all replicas (concurrency)
    # SGLang --scheduler-recv-interval (SchedulerConfig.recv_interval); None: the stack's 1
    recv_interval: int | None = None
    # TensorRT-LLM attention-DP balance timeout in iterations (SchedulerConfig.adp_balance_iters;
    # attention_dp_config enable_balance, timeout_iters N); None: off
    adp_balance: int | None = None
    # its batching_wait_iters (SchedulerConfig.adp_batching_wait_iters); None: 0
    adp_batching_wait: int | None = None

    def __post_init__(self) -> None:
        if self.scenario is Scenario.SERVER and self.rate is None and self.trace is None:
            raise InputError("--scenario server needs a request rate (--rate R, requests/s) "
                             "or a trace (--trace FILE)")
        self._check_concurrency()
        if self.scenario is Scenario.OFFLINE and self.rate is not None:
            raise InputError("--rate applies to --scenario server; offline queues every "
                             "request at once")
        if self.rate is not None and not (math.isfinite(self.rate) and 0 < self.rate <= MAX_RATE):
            raise InputError(f"--rate must be a positive number of requests/s up to "
                             f"{MAX_RATE:.0e}, got {self.rate}")
        if not (math.isfinite(self.spread) and 0 <= self.spread <= MAX_SPREAD):
            raise InputError(f"--spread must be a number from 0 to {MAX_SPREAD:g}, got "
                             f"{self.spread}")
        if not (math.isfinite(self.prefix_hit) and 0 <= self.prefix_hit < 1):
            raise InputError(f"--prefix-hit must be a fraction in [0, 1), got {self.prefix_hit}")
        n = self.recv_interval
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise InputError(f"--recv-interval must be a whole number of decode steps, at "
                             f"least 1, got {n}")
        n = self.adp_balance
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise InputError(f"--adp-balance must be a whole number of iterations, at least 1, "
                             f"got {n}")
        w = self.adp_batching_wait
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise InputError(f"--adp-batching-wait must be a whole number of iterations, at "
                             f"least 0, got {w}")
        if w and n is None:
            raise InputError("--adp-batching-wait is a setting of TensorRT-LLM's attention-DP "
                             "balance: give --adp-balance N (its timeout_iters) with it")

    def _check_concurrency(self) -> None:
        n = self.concurrency
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)
                              or not 1 <= n <= MAX_CONCURRENCY):
            raise InputError(f"--concurrency must be a whole number of clients from 1 to "
                             f"{MAX_CONCURRENCY:,}, got {n}")
        if self.scenario is Scenario.CONCURRENCY:
            if n is None:
                raise InputError("--scenario concurrency needs the number of closed-loop "
                                 "clients: --concurrency N")
            if self.rate is not None or self.trace is not None:
                raise InputError("--scenario concurrency sends each request when a client's "
                                 "previous one finishes: drop --rate/--trace (they belong to "
                                 "--scenario server)")
        elif n is not None:
            raise InputError("--concurrency applies to --scenario concurrency (closed loop); "
                             f"add --scenario concurrency or drop it ({self.scenario.value} "
                             "was asked)")

    def clients_per_replica(self, replicas: int) -> int | None:
        """Closed-loop clients one replica serves: N / replicas, rounded up."""
        if self.concurrency is None:
            return None
        return max(math.ceil(self.concurrency / max(replicas, 1)), 1)


@dataclass(frozen=True)
class KvPool:
    """The KV cache one device of a replica can hold, and what the rest of its memory holds."""

    pool_bytes: float
    bytes_per_token: float
    other: MemoryBudget  # weights, activations, runtime (kv_cache item = the pool)
    # devices of a replica whose pools hold different requests: G under DP attention (each
    # holds only its own requests' KV), 1 where every device holds a share of every token
    ranks: int = 1

    @property
    def tokens(self) -> float:
        """Tokens of KV the replica holds: one device's pool, times the DP-attention ranks
        (balanced over them: a request's KV sits on one rank, fragmentation across ranks
        is not modelled)."""
        return (self.ranks * self.pool_bytes / self.bytes_per_token if self.bytes_per_token
                else math.inf)


def kv_pool(spec: ModelSpec, wl: Inference, m: Mapping, capacity: float,
            sched: SchedulerConfig, draft: DraftMemory | None = None) -> KvPool:
    """KV pool per device: what the framework's memory rule leaves after the weights, the
    activations of one ``max_batched_tokens`` pass and the sampler's logits for ``max_seqs``
    rows (vLLM profiles exactly that peak before sizing the pool). A speculative ``draft``
    adds its weights, and its KV to every token of context (the draft's passes run after the
    target's, so its activations reuse the target's peak)."""
    chunk = min(sched.max_batched_tokens, sched.max_seqs * wl.prompt_len)
    w = replace(wl, batch=max(min(sched.max_seqs, chunk), 1), prompt_len=1)
    budget = serving_memory(spec, w, m, capacity, chunk, tokens=0)
    items = {k: float(v) for k, v in budget.items.items() if k != "kv_cache"}
    if draft is not None:
        items["draft_weights"] = draft.weights_bytes
    other = float(sum(items.values()))
    if sched.kv_budget is KvBudget.OF_TOTAL:
        pool = sched.memory_fraction * capacity - other
    else:
        pool = sched.memory_fraction * (capacity - other)
    stage = rank_geometry(spec, m).first_layers(math.ceil(spec.n_layers / m.pp))
    per_token = float(kv_cache_bytes(stage, 1, 1, wl.kv_dtype, 1))
    if draft is not None:
        per_token += draft.kv_bytes_per_token
    items["kv_cache"] = max(pool, 0.0)
    return KvPool(max(pool, 0.0), per_token, MemoryBudget(items=items, capacity=capacity),
                  ranks=int(m.attention_dp))


@dataclass(frozen=True)
class ServingRun:
    """One scenario run of a serving mapping: the benchmark's figures (``metrics``), the
    scheduler it ran under, the per-device memory, and what was assumed."""

    model: str
    accelerator: str
    system: str
    mapping: Mapping
    framework: str
    scenario: Scenario
    feasible: bool
    reason: str | None
    metrics: dict[str, Any]
    scheduler: SchedulerConfig | None
    memory: MemoryBudget | None
    assumptions: tuple[str, ...] = ()
    error_band: ErrorBand | None = None
    latency_error_band: ErrorBand | None = None
    simulated_s: float = 0.0  # wall-clock seconds the simulation took

    @property
    def output_tokens_per_s(self) -> float | None:
        return self.metrics.get("output_tokens_per_s")

    def to_dict(self) -> dict[str, Any]:
        s = self.scheduler
        return {
            "phase": "serve",
            "scenario": self.scenario.value,
            "model": self.model,
            "accelerator": self.accelerator,
            "system": self.system,
            "framework": self.framework,
            "mapping": {"tp": int(self.mapping.tp), "pp": int(self.mapping.pp),
                        "ep": int(self.mapping.ep), "replicas": int(self.mapping.replicas),
                        **({"dp_attention": True} if self.mapping.dp_attention else {})},
            "feasible": self.feasible,
            "reason": self.reason,
            **self.metrics,
            "scheduler": None if s is None else {
                "policy": s.policy.value, "max_seqs": s.max_seqs,
                "max_batched_tokens": s.max_batched_tokens,
                "chunked_prefill": s.chunked_prefill, "block_tokens": s.block_tokens,
                "kv_budget": s.kv_budget.value, "memory_fraction": s.memory_fraction,
                "source": s.source},
            "memory": None if self.memory is None else {
                "capacity_bytes": self.memory.capacity,
                "breakdown": {k: float(v) for k, v in self.memory.items.items()}},
            "error_band": self.error_band.to_dict() if self.error_band else None,
            "latency_error_band": (self.latency_error_band.to_dict()
                                   if self.latency_error_band else None),
            "simulated_s": self.simulated_s,
            "assumptions": list(self.assumptions),
        }


def requests_for(load: Load, wl: Inference, replicas: int) -> Requests:
    """One replica's share of the scenario's requests."""
    if load.trace is not None:
        whole = read_trace(load.trace, load.prefix_hit)
        pick = np.arange(0, len(whole), max(replicas, 1))
        return Requests(whole.arrival_s[pick] - whole.arrival_s[pick][0], whole.prompt[pick],
                        whole.output[pick], whole.cached[pick])
    clients = load.clients_per_replica(replicas)
    if load.requests is None and clients is not None:
        n = min(max(REQUESTS_PER_CLIENT * clients, 1), MAX_REQUESTS)
        return make(n, wl.prompt_len, max(wl.output_len, 1), dist=load.dist, spread=load.spread,
                    prefix_hit=load.prefix_hit, seed=load.seed)
    n = load.requests or DEFAULT_REQUESTS
    rate = None if load.rate is None else load.rate / replicas
    return make(max(math.ceil(n / replicas), 1), wl.prompt_len, max(wl.output_len, 1),
                rate=rate, dist=load.dist, spread=load.spread, prefix_hit=load.prefix_hit,
                seed=load.seed)


@dataclass(frozen=True)
class Instance:
    """One serving instance ready to simulate: its scheduler, its KV pool per device and its
    iteration cost table (what ``run`` builds before the event loop; disaggregated serving builds
    one per pool and reuses it for every instance of the pool)."""

    scheduler: SchedulerConfig
    pool: KvPool
    cost: IterationCost
    max_tokens: float
    longest: float

    def lane_tokens(self, m: Mapping) -> float:
        """KV tokens of one micro-batch lane: the replica's pool shared by its lanes."""
        return self.pool.tokens / micro_batches(m)


@dataclass(frozen=True)
class Unfit:
    """Why an instance cannot run: a mapping rule (no memory figures) or the memory rule."""

    reason: str
    memory: MemoryBudget | None = None


# Stacks whose scheduler caps are each DP-attention rank's: TensorRT-LLM runs one executor a
# rank ("Max batch size in each rank", docs/source/blogs/Best_perf_practice_on_DeepSeek-R1_in_
# TensorRT-LLM.md, max-throughput sections) and vLLM one engine core a data-parallel rank, each
# scheduling with the whole config's --max-num-seqs (v1/engine/core.py: a ``DPEngineCoreProc``
# runs one EngineCore a rank from the one VllmConfig); SGLang divides a given
# --max-running-requests by the attention-DP size (``attn_dp_size``: export/formats/sglang.py),
# so its caps are the group's
CAPS_PER_RANK = frozenset({Framework.TENSORRT_LLM, Framework.TENSORRT_LLM_1, Framework.VLLM})


def _with_adp_balance(base: SchedulerConfig, fw: FrameworkProfile, iters: int,
                      wait: int = 0) -> SchedulerConfig:
    """TensorRT-LLM's attention-DP balance on ``base`` (simulator module doc); a layout
    without DP attention has one rank and nothing to balance."""
    if fw.name is not Framework.TENSORRT_LLM_1:
        raise InputError(f"attention-DP balance is TensorRT-LLM's (1.0 and later) "
                         f"attention_dp_config; {fw.name.value} has no such setting: drop it, "
                         "or serve with tensorrt-llm 1.x")
    if base.ranks < 2:
        return base
    batched = f", then {wait} more to batch them" if wait else ""
    return replace(base, adp_balance_iters=iters, adp_batching_wait_iters=wait,
                   source=f"{base.source}; prompts held until every rank has one or "
                          f"{iters} iterations pass{batched} (attention_dp_config "
                          "enable_balance)")


def scheduler_for(system: System, fw: FrameworkProfile, load: Load,
                  m: Mapping | None = None) -> SchedulerConfig:
    """The framework's documented scheduler for the scenario, with the user's caps. Under DP
    attention (``m.dp_attention``) each of the G ranks runs its own scheduler with the
    framework's caps, so the simulated replica (the group) schedules G times them; a cap the
    user gives is a rank's where the stack's caps are (``CAPS_PER_RANK``), else the group's."""
    base = defaults(fw.name, offline=load.scenario is Scenario.OFFLINE,
                    device_bytes=system.memory_bytes)
    g = 1 if m is None else int(m.attention_dp)
    if g > 1:
        base = replace(base, max_seqs=base.max_seqs * g,
                       max_batched_tokens=base.max_batched_tokens * g, ranks=g,
                       source=f"{base.source}; x{g} DP-attention ranks")
    k = g if fw.name in CAPS_PER_RANK else 1
    if load.recv_interval is not None:
        if fw.name is not Framework.SGLANG:
            raise InputError(f"a scheduler receive interval is SGLang's --scheduler-recv-interval"
                             f"; {fw.name.value} has no such setting: drop it, or serve with "
                             "sglang")
        base = replace(base, recv_interval=load.recv_interval,
                       source=f"{base.source}; new requests taken once every "
                              f"{load.recv_interval} decode steps (--scheduler-recv-interval)")
    if load.adp_balance is not None:
        base = _with_adp_balance(base, fw, load.adp_balance, load.adp_batching_wait or 0)
    return base.with_caps(None if load.max_seqs is None else load.max_seqs * k,
                          None if load.max_tokens is None else load.max_tokens * k,
                          load.chunked_prefill, load.kv_fraction)


def instance(spec: ModelSpec, system: System, wl: Inference, m: Mapping, fw: FrameworkProfile,
             sched: SchedulerConfig, reqs: Requests, step: DecodeStep = DecodeStep(),
             imbalance: float = 1.0, draft: DraftMemory | None = None,
             verify: int | None = None) -> Instance | Unfit:
    """The instance of ``m`` that will serve ``reqs`` (for the sizes of its cost tables), or
    why it cannot run (a mapping rule or the memory rule). ``draft``: a speculative drafter's
    memory on the same devices; ``verify``: the most tokens per sequence a decode step checks
    (sizes the tables; default ``step.verify``)."""
    bad = check_serving(spec, system.cluster, m)
    if bad:
        return Unfit(f"{bad[0].sentence} ({bad[0].rule} rule)")
    if execution_model(system.accelerator).layer_pipelined:
        return Unfit(f"{system.accelerator.id} runs a layer-pipelined dataflow schedule "
                     "(engine/dataflow.py); the request-level simulator prices GPU-style "
                     "iterations, so use --scenario batch for this class (scenario rule)")
    pool = kv_pool(spec, wl, m, system.memory_bytes, sched, draft)
    if pool.pool_bytes <= 0:
        return Unfit("the weights and activations leave no memory for the KV cache "
                     f"under {fw.name.value}'s memory rule (memory rule)", pool.other)
    v = step.verify if verify is None else verify
    longest = float(np.max(reqs.prompt + reqs.output))
    if sched.policy is KvPolicy.STATIC:
        width = min(sched.max_seqs, max(int(pool.tokens // longest), 1))
        max_tokens = width * max(float(np.max(reqs.prompt)), v)
    else:
        max_tokens = sched.max_batched_tokens + sched.max_seqs * v
        if not sched.chunked_prefill:
            max_tokens = max(max_tokens, float(np.max(reqs.prompt)) + sched.max_seqs)
    cost = IterationCost(spec, system, wl, m, fw, max_tokens=max_tokens,
                         max_seqs=sched.max_seqs * v + sched.max_seqs,
                         max_context=longest + v, imbalance=imbalance)
    return Instance(sched, pool, cost, max_tokens, longest)


SIMULATED_DRAFT_LENS = 3  # the one-step table's best k values simulated under the load


def _scenario_score(sim: SimResult, load: Load) -> tuple[float, float]:
    """Higher is better: offline runs rank by output tokens/s; server runs by requests meeting
    the SLOs, then by a lower median TPOT (arrivals set the throughput there)."""
    span = float(np.nanmax(sim.finish_s) - np.min(sim.arrival_s))
    ttft = sim.first_token_s - sim.arrival_s
    out = sim.output.astype(float)
    tpot = np.where(out > 1, (sim.finish_s - sim.first_token_s) / np.maximum(out - 1, 1), np.nan)
    if load.scenario in (Scenario.OFFLINE, Scenario.CONCURRENCY):
        return float(out.sum()) / span, 0.0
    met = float(load.slo.met(ttft, tpot).sum()) / span
    return met, -float(np.nanmedian(tpot)) if np.any(~np.isnan(tpot)) else 0.0


def run(spec: ModelSpec, system: System, wl: Inference, m: Mapping, fw: FrameworkProfile,
        load: Load, step: DecodeStep = DecodeStep(), imbalance: float = 1.0,
        speculation: Speculation | None = None) -> ServingRun:
    """``_run`` on the workload as it runs on the part (engine/formats.py: ``fp4`` resolved,
    W4A4 or weight-only), the format lines added to its assumptions."""
    wl, formats = resolve_inference(system.device.acc, wl, spec.id, spec.is_moe)
    out = _run(spec, system, wl, m, fw, load, step, imbalance, speculation)
    return replace(out, assumptions=(*out.assumptions, *formats)) if formats else out


def _run(spec: ModelSpec, system: System, wl: Inference, m: Mapping, fw: FrameworkProfile,
         load: Load, step: DecodeStep = DecodeStep(), imbalance: float = 1.0,
         speculation: Speculation | None = None) -> ServingRun:
    """Simulate ``load`` on every replica of ``m`` (they are identical: one is simulated).

    With ``speculation`` the same load is first simulated with plain decoding (its figures are
    reported as ``speculative.plain_run``, and its mean running batch is where the draft length
    is chosen, ``speculative.choose``), then with the drafter's memory taken from the KV pool
    and every decode step verifying k + 1 tokens and advancing E of them."""
    cluster, dev = system.cluster, system.device
    head = (spec.id, dev.acc.id, cluster.name, m, fw.name.value, load.scenario)
    if speculation is not None and (why := _draft_violation(spec, system, m, speculation)):
        return ServingRun(*head, False, why, {}, None, None)
    plain = None
    if speculation is not None:
        if m.pp > 1:
            raise InputError("speculative decoding is modelled for tensor-parallel replicas: "
                             "use --pp 1 with --draft/--mtp")
        plain = run(spec, system, wl, m, fw, load, imbalance=imbalance)
        if not plain.feasible:
            return plain
    replicas = int(m.replicas)
    lanes = replicas * micro_batches(m)  # simulated units: micro-batches of every replica
    reqs = requests_for(load, wl, lanes)
    load, bench_note = _bench_caps(spec, system, wl, m, fw, load, reqs)
    fw, served_note = served(fw, load)
    bench_note = (*bench_note, *served_note)
    sched = scheduler_for(system, fw, load, m)
    dmem = None if speculation is None else draft_memory(speculation, spec, wl, m)
    verify = step.verify if speculation is None else (
        max(speculation.draft_len or 0, MAX_DRAFT_LEN) + 1)
    inst = instance(spec, system, wl, m, fw, sched, reqs, step, imbalance, dmem, verify)
    if isinstance(inst, Unfit):
        return ServingRun(*head, False, inst.reason, {}, None if inst.memory is None else sched,
                          inst.memory)
    pool, cost, longest, lane_tokens = inst.pool, inst.cost, inst.longest, inst.lane_tokens(m)
    choice = None
    if speculation is not None:
        assert plain is not None and dmem is not None
        dcost = draft_cost(speculation, spec, system, wl, m, fw, max_tokens=inst.max_tokens,
                           max_seqs=sched.max_seqs, max_context=longest + verify)
        batch = max(float(plain.metrics["mean_running"]), 1.0)
        context = float(np.mean(reqs.prompt) + np.mean(reqs.output) / 2.0)
        choice = choose(cost, dcost, speculation.accept, batch, context, speculation.draft_len)
        step = decode_step(speculation, choice.chosen.k, dcost)
    t0 = time.perf_counter()
    try:
        clients = load.clients_per_replica(lanes)
        sim = simulate(reqs, cost, sched, lane_tokens, step, clients)
        if choice is not None and not choice.given:
            assert speculation is not None
            sim, choice = _simulate_draft_lens(sim, choice, speculation, dcost, reqs, cost,
                                               sched, lane_tokens, clients, load)
        if plain is not None and load.scenario is Scenario.OFFLINE and choice is not None:
            choice = _offline_check(choice, plain, sim, load, replicas)
    except CapacityError as e:
        return ServingRun(*head, False, f"{e} (memory rule)", {}, sched, pool.other)
    wall = time.perf_counter() - t0
    metrics = summarize(sim, lanes, int(m.world), load.slo)
    world = int(m.world)
    notes: tuple[str, ...] = ()
    if speculation is not None and choice is not None and plain is not None and dmem:
        metrics["speculative"], notes = _speculative_figures(speculation, spec, choice, dmem,
                                                            plain)
    notes = (*notes, *context_notes(spec, int(longest)),
             f"{m.describe_serving()} on {cluster.name}",
             f"scheduler: {sched.source}",
             *bench_note,
             f"KV pool {format_quantity(pool.pool_bytes, Dimension.BYTES)} per device = "
             f"{pool.tokens:,.0f} tokens per replica",
             _simulated_note(len(reqs), m, lane_tokens),
             *_closed_loop_notes(load, lanes),
             *device_notes(dev, wl.compute_dtype, fw))
    # the throughput band: the offline check set (data/serving_published.csv: out-of-sample
    # residuals of the same simulator); no published server run is scored yet
    return ServingRun(*head, True, None, metrics, sched, pool.other, notes,
                      error_band("serve-offline", fw.band_stack, world, dev.acc.device_class.value),
                      error_band("serve-latency", fw.band_stack, int(m.devices_per_replica),
                                 dev.acc.device_class.value),
                      wall)


def micro_batches(m: Mapping) -> int:
    """Micro-batches a replica keeps in flight: one per pipeline stage (module doc)."""
    return max(int(m.pp), 1)


def _simulated_note(n: int, m: Mapping, lane_tokens: float) -> str:
    """What one simulation stands for: a replica, or one pipeline micro-batch of it."""
    lanes = "" if m.pp <= 1 else (
        f", one of its {micro_batches(m)} pipeline micro-batches in flight (each with the "
        f"batch caps and {lane_tokens:,.0f} KV tokens)")
    return f"{n:,} requests simulated on one replica of {int(m.replicas)}{lanes}"


def served(fw: FrameworkProfile, load: Load) -> tuple[FrameworkProfile, tuple[str, ...]]:
    """A stack whose engine sits behind a server of its own only when served (trtllm-serve,
    cost/framework.py ``server_request_latency_s``): its clients wait for that front end in
    TTFT and end-to-end latency in the served scenarios, not in an offline benchmark."""
    if load.scenario is Scenario.OFFLINE or not fw.server_request_latency_s:
        return fw, ()
    late = fw.request_latency_s + fw.server_request_latency_s
    return replace(fw, request_latency_s=late), (
        f"served: {fw.server_request_latency_s * 1e3:.0f} ms of front-end latency per request "
        f"(the {fw.name.value} server, fitted: data/server_latency.yaml)",)


def _bench_caps(spec: ModelSpec, system: System, wl: Inference, m: Mapping,
                fw: FrameworkProfile, load: Load, reqs: Requests) -> tuple[Load, tuple[str, ...]]:
    """An offline TensorRT-LLM >= 1.0 run is ``trtllm-bench throughput``: the caps it does not
    state are the ones trtllm-bench picks itself (serving/trtllm_bench.py), each rank's, with
    chunked prefill off unless the run asks for it."""
    if (fw.name is not Framework.TENSORRT_LLM_1 or load.scenario is not Scenario.OFFLINE
            or (load.max_seqs is not None and load.max_tokens is not None)):
        return load, ()
    caps = bench_caps(spec, wl, int(m.tp), int(m.pp), system.memory_bytes,
                      int(np.max(reqs.prompt)), load.kv_fraction)
    chunked = caps.chunked if load.chunked_prefill is None else load.chunked_prefill
    stated = [f"the stated {flag} replaces its {name}" for flag, name, v in (
        ("--max-seqs (max_batch)", "max_batch_size", load.max_seqs),
        ("--max-tokens (max_tokens)", "max_num_tokens", load.max_tokens)) if v is not None]
    return replace(load, max_seqs=caps.max_batch if load.max_seqs is None else load.max_seqs,
                   max_tokens=caps.max_tokens if load.max_tokens is None else load.max_tokens,
                   chunked_prefill=chunked), ("; ".join([caps.note, *stated]),)


def _draft_violation(spec: ModelSpec, system: System, m: Mapping,
                     speculation: Speculation) -> str | None:
    """The first serving rule the drafter's own mapping breaks, as the run's reason."""
    bad = [replace(v, sentence=f"draft {speculation.drafter(spec).id}: {v.sentence}")
           for v in check_serving(speculation.drafter(spec), system.cluster,
                                  speculation.draft_mapping(m))]
    return f"{bad[0].sentence} ({bad[0].rule} rule)" if bad else None


def _simulate_draft_lens(sim: SimResult, choice: Choice, speculation: Speculation,
                         dcost: IterationCost, reqs: Requests, cost: IterationCost,
                         sched: SchedulerConfig, pool_tokens: float, clients: int | None,
                         load: Load) -> tuple[SimResult, Choice]:
    """The table prices one step at the plain run's mean batch; the batch a drafter leaves
    room for and its prompt prefills move with k, so the table's best draft lengths are
    simulated under the load and the best for the scenario is kept (``sim``: the table's
    choice, already simulated)."""
    sims = {choice.chosen.k: sim}
    for row in sorted((r for r in choice.rows if r.k > 0), key=lambda r: r.tpot_s)[
            :SIMULATED_DRAFT_LENS]:
        if row.k not in sims:
            sims[row.k] = simulate(reqs, cost, sched, pool_tokens,
                                   decode_step(speculation, row.k, dcost), clients)
    best_k = max(sims, key=lambda k: _scenario_score(sims[k], load))
    what = "throughput" if load.scenario is Scenario.OFFLINE else "goodput"
    how = (f"chosen: best {what} of k = {', '.join(str(k) for k in sorted(sims))} "
           "simulated under the load")
    chosen = next(r for r in choice.rows if r.k == best_k)
    choice = replace(choice, chosen=chosen, how=how, notes=(
        *choice.notes, f"draft length k={best_k} {how} (the one-step table at the "
        f"plain run's batch favoured k={choice.chosen.k})"))
    return sims[best_k], choice


def _offline_check(choice: Choice, plain: ServingRun, sim: SimResult, load: Load,
                   replicas: int) -> Choice:
    """Offline: a warning in the choice's notes when speculation lowers the throughput."""
    plain_rate = float(plain.metrics["output_tokens_per_s"]) / replicas
    spec_rate = _scenario_score(sim, load)[0]
    if spec_rate < plain_rate:
        choice = replace(choice, notes=(
            *choice.notes, f"warning: with speculation the offline throughput is "
            f"{spec_rate * replicas:,.0f} output tokens/s, below plain decoding's "
            f"{plain_rate * replicas:,.0f}: the drafter's memory shrinks the batch and "
            "its verify pass is compute-bound at this load"))
    return choice


def _speculative_figures(speculation: Speculation, spec: ModelSpec, choice: Choice,
                         dmem: DraftMemory, plain: ServingRun
                         ) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The run's ``speculative`` figures (the choice, the drafter's memory, plain decoding's
    figures) and the notes that say how k was chosen."""
    pm = plain.metrics
    figures = {
        "method": speculation.method, "drafter": speculation.drafter(spec).id,
        **choice.to_dict(),
        "draft_weights_bytes_per_device": dmem.weights_bytes,
        "draft_kv_bytes_per_token_per_device": dmem.kv_bytes_per_token,
        "plain_run": {k: pm[k] for k in (
            "output_tokens_per_s", "ttft_s", "tpot_s", "goodput_requests_per_s",
            "slo_attainment", "mean_running", "kv_capacity_tokens")}}
    c = choice.chosen
    how = "given" if choice.given else (
        choice.how or f"chosen at the plain run mean batch {choice.batch:,.1f}")
    notes = (f"speculative decoding: {speculation.method}, alpha {speculation.accept:g}, "
             f"k={c.k} ({how}), E = {c.expected_tokens:.2f} tokens per target step "
             "(Leviathan et al. 2023 eq. 1)", *choice.notes)
    return figures, notes


def _closed_loop_notes(load: Load, replicas: int) -> tuple[str, ...]:
    clients = load.clients_per_replica(replicas)
    if clients is None or load.concurrency is None:
        return ()
    split = "" if load.concurrency == clients * replicas else (
        f" ({load.concurrency:,} clients do not split evenly over {replicas} replicas: the "
        f"simulated replica serves {clients:,}, the most any replica gets)")
    return (f"closed loop: {load.concurrency:,} clients, {clients:,} per replica, each sending "
            f"its next request when the previous one finishes{split}",)
