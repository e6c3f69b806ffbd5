"""Disaggregated prefill and decode: two pools of instances on one cluster, the prompt's KV sent
from the first to the second (DistServe, Zhong et al. OSDI 2024; Splitwise, Patel et al. ISCA
2024). Prefill no longer stalls decode iterations and each phase gets its own parallelism, at
the price of a KV transfer per request and of two pools to size.

Simulated with the same simulator and the same iteration costs as colocated serving, run twice:

1. the prefill pool serves every request with one output token: its iterations are prompt
   chunks only, and the pass over the prompt samples the first token (``first_token_s``);
2. the KV of the prompt (prompt tokens x the whole model's KV bytes per token) goes to a decode
   instance (``KvTransfer``);
3. the decode pool serves the requests arriving at first token + transfer, with the prompt
   already in KV (``cached`` = prompt - 1, so their "prefill" is the one query token a first
   decode step runs) and output - 1 tokens left to generate.

Requests are dealt round-robin to the instances of each pool (a load balancer splitting the
stream evenly, as ``scenario.requests_for`` does for replicas); the decode pool is dealt in the
order the KV arrives. The first token reaches the user with the decode stream, so TTFT counts
the transfer (a request of one output token needs no transfer: its TTFT is the prefill's).

Closed-loop concurrency (N clients, each sending its next request when its previous one
finishes, as ``scenario`` runs colocated replicas): the send times depend on the finishes of both
pools, so the pools are simulated with the send times of the previous round until they settle
(``closed_loop``): the first N requests are sent at t = 0, and request N + k at the k-th finish.
The simulation up to a time T depends only on the requests sent before T, and every request
takes at least the shortest end-to-end latency d > 0, so each round makes the timeline exact
over at least d more seconds: the rounds reach the closed loop's own timeline exactly (to the
last bit, checked) after about (the run's span) / d rounds, about the requests per client.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from accelmap.cost.collectives import Collective, Link, collective_time
from accelmap.cost.framework import FrameworkProfile
from accelmap.engine.error_band import ErrorBand, error_band
from accelmap.engine.shapes import context_notes, device_notes
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.placement import pair_link
from accelmap.mapping.plan import Mapping
from accelmap.memory.budget import MemoryBudget, kv_cache_bytes
from accelmap.models.geometry import Geometry
from accelmap.models.schema import ModelSpec
from accelmap.serving import disagg_spec
from accelmap.serving.metrics import Slo, distribution, summarize
from accelmap.serving.requests import MAX_REQUESTS, Requests, make, read_trace
from accelmap.serving.scenario import (
    DEFAULT_REQUESTS,
    REQUESTS_PER_CLIENT,
    Instance,
    Load,
    Scenario,
    Unfit,
    instance,
    scheduler_for,
)
from accelmap.serving.scheduler import SchedulerConfig
from accelmap.serving.simulator import CapacityError, DecodeStep, SimResult, simulate
from accelmap.serving.speculative import Speculation
from accelmap.workload import Inference


@dataclass(frozen=True)
class Disaggregation:
    """A prefill pool of ``prefill_instances`` x ``prefill_tp`` devices and a decode pool of
    ``decode_instances`` x ``decode_tp`` devices on the same cluster (each instance one
    tensor-parallel group, no pipeline). ``prefill_ep`` / ``decode_ep``: expert parallelism
    inside each pool's instances, as an aggregated serving layout has it (``Mapping.serving``:
    vLLM expert parallelism splits the tensor-parallel group, so ep divides tp and the experts,
    ``mapping.constraints.check_serving``'s experts_divisible and ep_within_tp rules); 1: the
    experts are tensor-parallel like the rest. ``prefill_dp_attention`` /
    ``decode_dp_attention``: that pool's instances run attention data-parallel over their tp
    group (``Mapping.dp_attention``; SGLang's PD disaggregation takes ``--enable-dp-attention``
    per server, so a deployment may use it in one pool only: LMSYS, "Deploying DeepSeek with PD
    Disaggregation and Large-Scale Expert Parallelism on 96 H100 GPUs", 2025-05-05, runs both
    pools with it; InferenceX's disaggregated SGLang and TensorRT-LLM recipes set it per
    pool)."""

    prefill_instances: int
    prefill_tp: int
    decode_instances: int
    decode_tp: int
    prefill_ep: int = 1
    decode_ep: int = 1
    prefill_dp_attention: bool = False
    decode_dp_attention: bool = False

    def __post_init__(self) -> None:
        for name in ("prefill_instances", "prefill_tp", "decode_instances", "decode_tp",
                     "prefill_ep", "decode_ep"):
            v = getattr(self, name)
            if not isinstance(v, int | np.integer) or v < 1:
                raise InputError(f"disaggregation: {name.replace('_', ' ')} must be a whole "
                                 f"number >= 1, got {v!r}")

    @classmethod
    def parse(cls, text: str, prefill_tp: int = 1, decode_tp: int = 1, prefill_ep: int = 1,
              decode_ep: int = 1) -> Disaggregation:
        """``P:D``: P prefill instances and D decode instances (devices = instances x tp)."""
        parts = text.split(":")
        try:
            p, d = (int(x) for x in parts) if len(parts) == 2 else (0, 0)
        except ValueError:
            p = d = 0
        if p < 1 or d < 1:
            raise InputError(f"--disaggregate takes P:D, prefill and decode instances (e.g. "
                             f"2:2), or auto; got {text!r}")
        return cls(p, prefill_tp, d, decode_tp, prefill_ep, decode_ep)

    @classmethod
    def of_pools(cls, prefill_devices: int, decode_devices: int, prefill_tp: int,
                 decode_tp: int, prefill_ep: int = 1, decode_ep: int = 1,
                 prefill_dp_attention: bool = False, decode_dp_attention: bool = False
                 ) -> Disaggregation:
        """The split from each pool's device count and tp (a run file's ``prefill_devices`` /
        ``prefill_tp`` instances, ...); a pool its tp does not divide is an InputError."""
        for role, devices, tp in (("prefill", prefill_devices, prefill_tp),
                                  ("decode", decode_devices, decode_tp)):
            if devices % tp:
                raise InputError(f"{role}_devices {devices} is not a whole number of "
                                 f"{role}_tp={tp} instances: give {role}_devices as "
                                 f"instances x {role}_tp")
        return cls(prefill_devices // prefill_tp, prefill_tp, decode_devices // decode_tp,
                   decode_tp, prefill_ep, decode_ep, prefill_dp_attention, decode_dp_attention)

    @property
    def prefill_devices(self) -> int:
        return self.prefill_instances * self.prefill_tp

    @property
    def decode_devices(self) -> int:
        return self.decode_instances * self.decode_tp

    @property
    def devices(self) -> int:
        return self.prefill_devices + self.decode_devices

    @property
    def prefill_mapping(self) -> Mapping:
        return Mapping.serving(self.prefill_tp, ep=self.prefill_ep,
                               replicas=self.prefill_instances,
                               dp_attention=self.prefill_dp_attention)

    @property
    def decode_mapping(self) -> Mapping:
        return Mapping.serving(self.decode_tp, ep=self.decode_ep, replicas=self.decode_instances,
                               dp_attention=self.decode_dp_attention)

    def instance_mapping(self, role: str) -> Mapping:
        """One instance of the ``role`` pool ("prefill" or "decode"): its tp, ep and DP
        attention, one replica."""
        m = self.prefill_mapping if role == "prefill" else self.decode_mapping
        return Mapping.serving(int(m.tp), ep=int(m.ep), dp_attention=bool(m.dp_attention))

    @property
    def kv_on_one_rank(self) -> bool:
        """Whether a request's KV lives on one device of a pool: under DP attention each rank
        holds only its own requests' KV (``Mapping.dp_attention``), so the prompt's KV leaves
        from, or lands on, that one device."""
        return self.prefill_dp_attention or self.decode_dp_attention

    def describe(self) -> str:
        def pool(n: int, tp: int, ep: int, dpa: bool) -> str:
            return (f"{n} x tp={tp}" + (f" ep={ep}" if ep > 1 else "")
                    + (" dp-attention" if dpa else ""))

        pre = pool(self.prefill_instances, self.prefill_tp, self.prefill_ep,
                   self.prefill_dp_attention)
        dec = pool(self.decode_instances, self.decode_tp, self.decode_ep,
                   self.decode_dp_attention)
        return f"prefill {pre} + decode {dec} ({self.devices} devices)"

    def to_dict(self) -> dict[str, int | bool]:
        return {"prefill_instances": self.prefill_instances, "prefill_tp": self.prefill_tp,
                "prefill_ep": self.prefill_ep, "prefill_devices": self.prefill_devices,
                "decode_instances": self.decode_instances, "decode_tp": self.decode_tp,
                "decode_ep": self.decode_ep, "decode_devices": self.decode_devices,
                "devices": self.devices,
                **({"prefill_dp_attention": True} if self.prefill_dp_attention else {}),
                **({"decode_dp_attention": True} if self.decode_dp_attention else {})}


def check(spec: ModelSpec, cluster: Cluster, d: Disaggregation) -> list[str]:
    """Why ``d`` cannot be laid out on ``cluster`` for ``spec`` (empty: it can)."""
    out = []
    if d.devices > cluster.devices:
        out.append(f"the pools need {d.prefill_devices} prefill + {d.decode_devices} decode = "
                   f"{d.devices} devices; {cluster.name} has {cluster.devices}")
    for role in ("prefill", "decode"):
        one = d.instance_mapping(role)  # one instance: the pool's world is checked above
        out += [f"{role} pool: {v.sentence} ({v.rule} rule)"
                for v in check_serving(spec, cluster, one)]
    return out


def same_domain(cluster: Cluster, d: Disaggregation) -> bool:
    """Whether the pools can be laid out as g identical scale-up domains, each holding
    P/g prefill and D/g decode instances, so that every prefill instance sends its KV to a
    decode instance of its own domain (DistServe sec. 4, its placement for clusters with
    little bandwidth between nodes puts the prefill and decode instances that exchange KV in
    one node, so the transfer rides NVLink)."""
    dom = cluster.scale_up_domain
    domains = max(cluster.devices // max(dom, 1), 1)
    for g in range(1, min(domains, d.prefill_instances, d.decode_instances) + 1):
        if d.prefill_instances % g or d.decode_instances % g:
            continue
        if (d.prefill_instances // g) * d.prefill_tp + (d.decode_instances // g) * d.decode_tp \
                <= dom:
            return True
    return False


@dataclass(frozen=True)
class KvTransfer:
    """Moving a prompt's KV from a prefill instance to a decode instance.

    Bytes: the prompt's KV over all layers of the whole model (``kv_cache_bytes`` with one-token
    blocks: sliding-window layers keep their window), once, whatever the tp of either side.
    Streams: each of the min(tp_prefill, tp_decode) devices of the smaller side moves its share
    over its own link (NVLink port, or its own NIC in a rail-optimized fabric), as one
    point-to-point send (``collective_time(SEND_RECV)``: latency + bytes / bandwidth). Where
    either pool runs DP attention the request's KV sits on one rank of that pool
    (``Disaggregation.kv_on_one_rank``), so one device's link carries it all.

    The tier is the cluster's (``pair_link``): the scale-up links (NVLink, an NVL72 rack) when
    the pools that exchange KV share a scale-up domain, else each device's RDMA NIC of the
    scale-out tier, with that tier's bandwidth and latency.

    After the prefill (default): the whole transfer t follows the prompt's pass. That is what
    the serving stacks modelled here do: vLLM's disaggregated prefill moves a finished
    request's KV blocks (NixlConnector: the decode instance pulls them over RDMA once the
    prefill instance has computed them; docs.vllm.ai "NixlConnector Usage Guide" and
    "Disaggregated Prefilling"), as does TensorRT-LLM's disaggregated serving after the context
    phase. Layer-wise (``layerwise``, e.g. LMCache's layer-wise mode): the KV of layer l is sent
    while layer l + 1 computes (Splitwise sec. 4, layer-wise KV-cache transfer overlapped with
    the prompt computation). What stays exposed after the prompt's pass is the last layer's
    share, or what the link cannot carry during the pass: max(t / L, t - c (L - 1) / L), c = the
    prompt's forward time alone on the prefill instance (a lower bound of its time in the
    batch, so the exposed part is an upper bound)."""

    link: Link
    same_domain: bool
    streams: int
    bytes_per_token: float
    layers: int
    layerwise: bool = True

    def bytes(self, geo: Geometry, prompt: np.ndarray, kv_dtype: Any) -> np.ndarray:
        return np.asarray(kv_cache_bytes(geo, 1, prompt, kv_dtype, 1), dtype=float)

    def seconds(self, nbytes: np.ndarray, compute_s: np.ndarray) -> np.ndarray:
        whole = np.asarray(collective_time(Collective.SEND_RECV, nbytes / self.streams, 2,
                                           self.link), dtype=float)
        if not self.layerwise:
            return whole
        lay = self.layers
        last = np.asarray(collective_time(Collective.SEND_RECV, nbytes / self.streams / lay, 2,
                                          self.link), dtype=float)
        return np.maximum(last, whole - compute_s * (lay - 1) / lay)

    def describe(self) -> str:
        where = "inside one scale-up domain" if self.same_domain else "across domains"
        return (f"KV transfer {where} on {self.link.name} "
                f"({self.link.bandwidth / 1e9:.0f} GB/s per device x {self.streams} devices), "
                + ("layer-wise, overlapped with the prompt's pass" if self.layerwise
                   else "after the prefill"))


def kv_transfer(spec: ModelSpec, cluster: Cluster, d: Disaggregation, kv_dtype: Any,
                layerwise: bool = False) -> KvTransfer:
    geo = Geometry.of(spec)
    near = same_domain(cluster, d)
    streams = 1 if d.kv_on_one_rank else min(d.prefill_tp, d.decode_tp)
    return KvTransfer(pair_link(cluster, near), near, streams,
                      float(kv_cache_bytes(geo, 1, 1, kv_dtype, 1)), geo.n_layers, layerwise)


@dataclass(frozen=True)
class DisaggRun:
    """One disaggregated scenario run: the benchmark's figures over both pools (``metrics``:
    TTFT = prefill + transfer, TPOT from the decode pool, throughput per device over all
    devices), each pool's own figures, the KV transfer and the assumptions."""

    model: str
    accelerator: str
    system: str
    disaggregation: Disaggregation
    framework: str
    scenario: Scenario
    feasible: bool
    reason: str | None
    metrics: dict[str, Any]
    scheduler: SchedulerConfig | None = None
    prefill_memory: MemoryBudget | None = None
    decode_memory: MemoryBudget | None = None
    transfer: str = ""
    assumptions: tuple[str, ...] = ()
    error_band: ErrorBand | None = None
    simulated_s: float = 0.0

    @property
    def goodput_per_device(self) -> float:
        return float(self.metrics.get("goodput_requests_per_s", 0.0)) / \
            self.disaggregation.devices if self.feasible else 0.0

    def to_dict(self) -> dict[str, Any]:
        def mem(b: MemoryBudget | None) -> dict[str, Any] | None:
            return None if b is None else {
                "capacity_bytes": b.capacity,
                "breakdown": {k: float(v) for k, v in b.items.items()}}

        s = self.scheduler
        return {
            "phase": "serve", "scenario": self.scenario.value, "disaggregated": True,
            "model": self.model, "accelerator": self.accelerator, "system": self.system,
            "framework": self.framework, "disaggregation": self.disaggregation.to_dict(),
            "feasible": self.feasible, "reason": self.reason, **self.metrics,
            "scheduler": None if s is None else {
                "policy": s.policy.value, "max_seqs": s.max_seqs,
                "max_batched_tokens": s.max_batched_tokens,
                "chunked_prefill": s.chunked_prefill, "source": s.source},
            "memory": {"prefill": mem(self.prefill_memory), "decode": mem(self.decode_memory)},
            "kv_transfer": self.transfer,
            "error_band": self.error_band.to_dict() if self.error_band else None,
            "simulated_s": self.simulated_s,
            "assumptions": list(self.assumptions),
        }


def all_requests(load: Load, wl: Inference) -> Requests:
    """The whole request stream of the scenario (every instance's share together; closed
    loop: ``REQUESTS_PER_CLIENT`` per client unless the count is given, all sent at t = 0
    until ``closed_loop`` sets their send times)."""
    if load.trace is not None:
        return read_trace(load.trace, load.prefix_hit)
    if load.concurrency is not None and load.requests is None:
        n = min(max(REQUESTS_PER_CLIENT * load.concurrency, 1), MAX_REQUESTS)
        return make(n, wl.prompt_len, max(wl.output_len, 1), dist=load.dist,
                    spread=load.spread, prefix_hit=load.prefix_hit, seed=load.seed)
    return make(load.requests or DEFAULT_REQUESTS, wl.prompt_len, max(wl.output_len, 1),
                rate=load.rate, dist=load.dist, spread=load.spread,
                prefix_hit=load.prefix_hit, seed=load.seed)


def simulate_pool(reqs: Requests, instances: int, inst: Instance,
                  step: DecodeStep = DecodeStep()) -> tuple[list[np.ndarray], list[SimResult]]:
    """Deal ``reqs`` round-robin over ``instances`` and simulate each one (``step``: what a
    decode step does, speculative or plain)."""
    picks, sims = [], []
    for i in range(min(instances, len(reqs))):
        pick = np.arange(i, len(reqs), instances)
        sub = Requests(reqs.arrival_s[pick], reqs.prompt[pick], reqs.output[pick],
                       reqs.cached[pick])
        picks.append(pick)
        sims.append(simulate(sub, inst.cost, inst.scheduler, inst.pool.tokens, step))
    return picks, sims


Instances = dict[tuple[str, int, int, bool], Instance | Unfit]


@dataclass(frozen=True)
class Pools:
    """The prefill and decode instances a split runs, and the step each pool's iterations
    take (plain decoding, or speculative: ``disagg_spec``)."""

    pre: Instance
    dec: Instance
    pre_step: DecodeStep = field(default_factory=DecodeStep)
    dec_step: DecodeStep = field(default_factory=DecodeStep)


def run_disaggregated(spec: ModelSpec, system: System, wl: Inference, d: Disaggregation,
                      fw: FrameworkProfile, load: Load, *, layerwise: bool = False,
                      cache: Instances | None = None,
                      speculation: Speculation | None = None) -> DisaggRun:
    """Simulate ``load`` on the prefill and decode pools of ``d`` (``cache``: instances
    already built for this load, keyed by (pool, tp, ep, DP attention); the planner shares it;
    ``speculation``: a drafter on both pools, ``disagg_spec``)."""
    cluster, dev = system.cluster, system.device
    head = (spec.id, dev.acc.id, cluster.name, d, fw.name.value, load.scenario)
    if load.scenario is Scenario.BATCH:
        raise InputError("disaggregated serving needs a request stream: use --scenario "
                         "server (or offline), not batch")
    if load.scenario is Scenario.CONCURRENCY and load.trace is not None:
        raise InputError("closed-loop concurrency sends requests as earlier ones finish: give "
                         "--concurrency N without --trace")
    bad = check(spec, cluster, d)
    if bad:
        return DisaggRun(*head, False, bad[0], {})
    sched = pool_scheduler(system, fw, load, d, "decode")
    reqs = all_requests(load, wl)
    built = _pools(spec, system, wl, d, fw, load, reqs, speculation,
                   {} if cache is None else cache)
    if isinstance(built, tuple):
        role, inst = built
        return DisaggRun(*head, False, f"{role} pool: {inst.reason}", {}, sched,
                         inst.memory if role == "prefill" else None,
                         inst.memory if role == "decode" else None)
    pools = built
    xfer = kv_transfer(spec, cluster, d, wl.kv_dtype, layerwise)
    notes: tuple[str, ...] = ()
    if load.concurrency is not None:
        settled = closed_loop(spec, d, wl, reqs, pools, xfer, load.concurrency)
        tl = settled if isinstance(settled, str) else settled[0]
        if not isinstance(settled, str):
            reqs, rounds = settled[1], settled[2]
            notes = (f"closed loop: {load.concurrency:,} clients over both pools, each sending "
                     f"its next request when the previous one finishes (settled in {rounds} "
                     "rounds of the two pools' simulation)",)
    else:
        tl = _timeline(spec, d, wl, reqs, _prefill_requests(reqs), pools, xfer)
    pre, dec = pools.pre, pools.dec
    if isinstance(tl, str):
        why = tl if tl.startswith("the closed loop") else f"{tl} (memory rule)"
        return DisaggRun(*head, False, why, {}, sched, pre.pool.other, dec.pool.other)
    metrics = _disagg_metrics(tl, reqs, d, load, pre, dec, xfer)
    if speculation is not None:
        metrics["speculative"], note = disagg_spec.figures(speculation, spec)
        notes = (note, *notes)
    return DisaggRun(*head, True, None, metrics, sched, pre.pool.other, dec.pool.other,
                     xfer.describe(), (*_disagg_notes(spec, system, wl, d, fw, sched, reqs, pre,
                                                      dec, xfer), *notes),
                     error_band("serve-offline", fw.band_stack, d.devices,
                                dev.acc.device_class.value), tl.wall_s)


def _decode_requests(reqs: Requests) -> Requests:
    """What the decode pool's tables are sized for: the prompt in KV but its last token,
    output - 1 to go."""
    return Requests(reqs.arrival_s, reqs.prompt, np.maximum(reqs.output - 1, 1),
                    np.maximum(reqs.prompt - 1, 0))


def _pools(spec: ModelSpec, system: System, wl: Inference, d: Disaggregation,
           fw: FrameworkProfile, load: Load, reqs: Requests,
           speculation: Speculation | None, cache: Instances
           ) -> Pools | tuple[str, Unfit]:
    """Both pools' instances and steps, or the pool that does not fit and why. Each pool runs
    the framework's scheduler for its own instance (``scheduler_for``: G times the caps under
    DP attention)."""
    pre_reqs = _prefill_requests(reqs)
    roles = (("prefill", pre_reqs, False), ("decode", _decode_requests(reqs), True))
    if speculation is None:
        pre, dec = (_pool_instance(spec, system, wl, d, fw, load, role, r, cache)
                    for role, r, _ in roles)
        steps = (DecodeStep(), DecodeStep())
    else:
        p, q = (disagg_spec.speculative_pool(spec, system, wl, d.instance_mapping(role), fw,
                                             pool_scheduler(system, fw, load, d, role), r,
                                             speculation, decode)
                for role, r, decode in roles)
        pre, dec, steps = p.instance, q.instance, (p.step, q.step)
    for role, inst in (("prefill", pre), ("decode", dec)):
        if isinstance(inst, Unfit):
            return role, inst
    assert isinstance(pre, Instance) and isinstance(dec, Instance)
    return Pools(pre, dec, *steps)


def pool_scheduler(system: System, fw: FrameworkProfile, load: Load, d: Disaggregation,
                   role: str) -> SchedulerConfig:
    """The scheduler one instance of the ``role`` pool runs."""
    return scheduler_for(system, fw, load, d.instance_mapping(role))


def _pool_instance(spec: ModelSpec, system: System, wl: Inference, d: Disaggregation,
                   fw: FrameworkProfile, load: Load, role: str, reqs: Requests,
                   cache: Instances) -> Instance | Unfit:
    """The ``role`` pool's instance (or why it does not fit), built once per (pool, tp, ep,
    DP attention) in ``cache``: an aggregated serving instance of that layout
    (``scenario.instance``, the path ``scenario.run`` takes), so its step times and memory are
    the engine's for that layout."""
    m = d.instance_mapping(role)
    key = (role, int(m.tp), int(m.ep), bool(m.dp_attention))
    if key not in cache:
        cache[key] = instance(spec, system, wl, m, fw, pool_scheduler(system, fw, load, d, role),
                              reqs)
    return cache[key]


def _prefill_requests(reqs: Requests) -> Requests:
    """What the prefill pool serves: each request with one output token."""
    return Requests(reqs.arrival_s, reqs.prompt, np.ones(len(reqs), dtype=np.int64),
                    reqs.cached)


MAX_LOOP_ROUNDS = 400  # past this the closed loop is said not to settle (a result, not a hang)


def closed_loop(spec: ModelSpec, d: Disaggregation, wl: Inference, reqs: Requests,
                pools: Pools, xfer: KvTransfer, clients: int
                ) -> tuple[_Timeline, Requests, int] | str:
    """``clients`` closed-loop clients on the two pools (module docstring): the timeline, the
    requests with their send times and the rounds it took; or why it cannot run."""
    n = len(reqs)
    sent = np.zeros(n)
    for rounds in range(1, MAX_LOOP_ROUNDS + 1):
        cur = Requests(sent, reqs.prompt, reqs.output, reqs.cached)
        tl = _timeline(spec, d, wl, cur, _prefill_requests(cur), pools, xfer)
        if isinstance(tl, str):
            return tl
        nxt = np.zeros(n)
        if n > clients:  # request clients + k is sent at the k-th finish
            nxt[clients:] = np.sort(tl.finish)[:n - clients]
        if np.array_equal(nxt, sent):
            return tl, cur, rounds
        sent = nxt
    return (f"the closed loop of {clients:,} clients did not settle in {MAX_LOOP_ROUNDS} rounds "
            "of the pools' simulation")


@dataclass(frozen=True)
class _Timeline:
    """One simulated split, per request: the prefill pool's first token (absolute), the KV
    transfer's bytes and seconds, TTFT with the transfer (absolute), the finish, and whether
    the request moved to the decode pool (output > 1); the pools' runs and the wall time."""

    first: np.ndarray
    nbytes: np.ndarray
    transfer: np.ndarray
    ttft_abs: np.ndarray
    finish: np.ndarray
    moved: np.ndarray
    pre_sims: list[SimResult]
    dec_sims: list[SimResult]
    wall_s: float


def _timeline(spec: ModelSpec, d: Disaggregation, wl: Inference, reqs: Requests,
              pre_reqs: Requests, pools: Pools, xfer: KvTransfer) -> _Timeline | str:
    """Prefill pool, KV transfer, then decode pool, request by request; a pool that cannot
    hold a request: its reason."""
    n = len(reqs)
    pre = pools.pre
    t0 = time.perf_counter()
    try:
        pre_picks, pre_sims = simulate_pool(pre_reqs, d.prefill_instances, pre, pools.pre_step)
    except CapacityError as e:
        return f"prefill pool: {e}"
    first = np.full(n, np.nan)
    for pick, sim in zip(pre_picks, pre_sims, strict=True):
        first[pick] = sim.first_token_s
    # the KV transfer of each request
    geo = Geometry.of(spec)
    nbytes = xfer.bytes(geo, reqs.prompt, wl.kv_dtype)
    alone = np.array([pre.cost.cost(p - c, 1, p - c, c + (p - c + 1) / 2, 0, 0)
                      for p, c in zip(reqs.prompt.tolist(), reqs.cached.tolist(), strict=True)])
    moved = reqs.output > 1
    transfer = np.where(moved, xfer.seconds(nbytes, alone), 0.0)
    ttft_abs = first + transfer
    finish = first.copy()
    dec_sims: list[SimResult] = []
    if np.any(moved):
        idx = np.flatnonzero(moved)
        idx = idx[np.argsort(ttft_abs[idx], kind="stable")]
        dec_reqs = Requests(ttft_abs[idx], reqs.prompt[idx], reqs.output[idx] - 1,
                            reqs.prompt[idx] - 1)
        try:
            dec_picks, dec_sims = simulate_pool(dec_reqs, d.decode_instances, pools.dec,
                                                pools.dec_step)
        except CapacityError as e:
            return f"decode pool: {e}"
        for pick, sim in zip(dec_picks, dec_sims, strict=True):
            finish[idx[pick]] = sim.finish_s
    return _Timeline(first, nbytes, transfer, ttft_abs, finish, moved, pre_sims, dec_sims,
                     time.perf_counter() - t0)


def _disagg_metrics(tl: _Timeline, reqs: Requests, d: Disaggregation, load: Load,
                    pre: Instance, dec: Instance, xfer: KvTransfer) -> dict[str, Any]:
    """The run's figures: the whole stream's (``summarize``), each pool's, the KV transfer's
    and the TTFT objective's attainment alone."""
    pre_sims, dec_sims, moved = tl.pre_sims, tl.dec_sims, tl.moved

    def cat(sims: list[SimResult], name: str) -> np.ndarray:
        return np.concatenate([getattr(s, name) for s in sims]) if sims else np.zeros(0)

    whole = SimResult(reqs.arrival_s, tl.ttft_abs, tl.finish, reqs.prompt, reqs.output,
                      cat(dec_sims, "step_s"), cat(dec_sims, "step_decodes"),
                      cat(dec_sims, "step_tokens"),
                      sum(s.preemptions for s in (*pre_sims, *dec_sims)),
                      max((s.peak_running for s in dec_sims), default=0),
                      dec.pool.tokens, 0.0)
    metrics = summarize(whole, 1, d.devices, load.slo)
    span = metrics["duration_s"]
    metrics.pop("busy_fraction")

    def pool_figures(sims: list[SimResult], inst: Instance, m: Mapping) -> dict[str, Any]:
        return {"instances": int(m.replicas), "tp": int(m.tp), "ep": int(m.ep),
                "devices": int(m.world),
                "busy_fraction": (sum(s.busy_s for s in sims) / (int(m.replicas) * span)
                                  if span else 0.0),
                "iterations": int(sum(len(s.step_s) for s in sims)),
                "preemptions": int(sum(s.preemptions for s in sims)),
                "peak_running": max((s.peak_running for s in sims), default=0),
                "kv_capacity_tokens": inst.pool.tokens}

    metrics["prefill_pool"] = {**pool_figures(pre_sims, pre, d.prefill_mapping),
                               "ttft_s": distribution(tl.first - reqs.arrival_s)}
    metrics["decode_pool"] = {**pool_figures(dec_sims, dec, d.decode_mapping),
                              "queue_s": distribution(
                                  np.array([t for s in dec_sims for t in
                                            (s.first_token_s - s.arrival_s)]))}
    metrics["kv_transfer_s"] = distribution(tl.transfer[moved]) if np.any(moved) else {}
    metrics["kv_transfer_bytes"] = distribution(tl.nbytes[moved]) if np.any(moved) else {}
    metrics["kv_bytes_per_token"] = xfer.bytes_per_token
    # the TTFT objective alone: what the prefill pool (and the transfer) let through, whatever
    # the decode pool does (the planner stops adding decode instances there)
    metrics["ttft_slo_attainment"] = float(np.mean(
        Slo(ttft_s=load.slo.ttft_s).met(tl.ttft_abs - reqs.arrival_s,
                                        np.full(len(reqs), np.nan))))
    return metrics


def _disagg_notes(spec: ModelSpec, system: System, wl: Inference, d: Disaggregation,
                  fw: FrameworkProfile, sched: SchedulerConfig, reqs: Requests, pre: Instance,
                  dec: Instance, xfer: KvTransfer) -> tuple[str, ...]:
    """What the run assumed: context, layout, transfer, scheduler, pools and device."""
    return (*context_notes(spec, int(np.max(reqs.prompt + reqs.output))),
            f"{d.describe()} on {system.cluster.name}",
            xfer.describe(),
            *((f"scheduler (both pools): {sched.source}",)
              if pre.scheduler == dec.scheduler else
              (f"scheduler, prefill pool: {pre.scheduler.source}",
               f"scheduler, decode pool: {dec.scheduler.source}")),
            f"KV pool {pre.pool.tokens:,.0f} tokens per prefill instance, "
            f"{dec.pool.tokens:,.0f} per decode instance",
            f"{len(reqs):,} requests dealt round-robin to {d.prefill_instances} prefill and "
            f"{d.decode_instances} decode instances; TTFT counts the KV transfer (the first "
            "token reaches the user with the decode stream)",
            "a decode instance recomputes a preempted request's prompt itself (vLLM recompute)",
            *device_notes(system.device, wl.compute_dtype, fw))


def with_requests(load: Load, requests: int) -> Load:
    """The same load with ``requests`` requests (the planner's bounded runs)."""
    return replace(load, requests=requests) if load.trace is None else load


__all__ = [
    "DisaggRun",
    "Disaggregation",
    "KvTransfer",
    "Pools",
    "check",
    "closed_loop",
    "kv_transfer",
    "run_disaggregated",
    "same_domain",
    "simulate_pool",
    "with_requests",
]
