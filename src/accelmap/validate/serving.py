"""One serving run (offline or server scenario) through the request-level simulator.

A :class:`~accelmap.validate.runs.ServingRun` comes from a canonical run file or from the
inference layout's serving rows (``transcribe.serving_from_case``). Its prediction:

- device and model as every row resolves them (``validate/resolve.py``); the cluster from the
  run's device count (``validate/layout.py``); the mapping tp x pp per replica, ``dp``
  replicas (independent engine instances; MLPerf's 8 GPUs as 4 TP2 instances);
- the framework's cost profile and scheduler defaults (``serving/scheduler.py``), with the caps
  the run states (``max_batch``, ``max_tokens``, ``kv_fraction``);
- offline: every request queued at once (``Scenario.OFFLINE``), the run's request count (its
  ramp-up and tail are part of the published throughput);
- concurrency: N closed-loop clients (``Scenario.CONCURRENCY``), the run's request count or
  10 per client as the sweeps send (``serving/scenario.py`` ``REQUESTS_PER_CLIENT``);
- server at a stated rate: Poisson arrivals at that rate; server with latency limits and no
  rate (MLPerf Server): the highest rate meeting them (``serving/capacity.py``), with
  :data:`SERVER_REQUESTS_PER_REPLICA` requests per replica per trial; throughput and latency
  percentiles are read from the run at that rate;
- disaggregated (``disaggregated: true``): the same scenarios on its prefill and decode pools
  (``validate/pools.py``, ``serving/disagg.py``), the KV sent over the cluster's real tier;
- MTP (``mtp``, ``acceptance``): speculative decoding with the model's MTP module at the
  stated draft length, the acceptance share turned into Leviathan et al.'s per-token alpha
  (``validate/mtp.py``), colocated or on both disaggregated pools.

Simulations are shared between rows of the same run (MLPerf prints throughput, TTFT p99 and
TPOT p99 of one run as three rows).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework, FrameworkProfile, orchestrated, release_stack
from accelmap.cost.framework import profile as framework_profile
from accelmap.engine import System
from accelmap.engine.formats import resolve_inference
from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator
from accelmap.serving.capacity import Capacity, RunT, max_rate, max_rate_split
from accelmap.serving.disagg import Disaggregation, DisaggRun, run_disaggregated
from accelmap.serving.metrics import Slo
from accelmap.serving.requests import LengthDist
from accelmap.serving.scenario import Load, Scenario
from accelmap.serving.scenario import ServingRun as SimRun
from accelmap.serving.scenario import run as simulate
from accelmap.serving.speculative import Speculation
from accelmap.units import DType
from accelmap.validate import layout as lay
from accelmap.validate import resolve as rs
from accelmap.validate.mtp import speculation_of
from accelmap.validate.outcome import MetricKind, Prediction, done, skip
from accelmap.validate.pools import split_of
from accelmap.validate.runs import ServingMetric, ServingRun, ServingScenario
from accelmap.workload import Inference

SERVER_REQUESTS_PER_REPLICA = 2000  # per trial rate: p99 from ~20 requests above it
MAX_REQUESTS_PER_REPLICA = 50_000  # offline runs longer than this are simulated this long
NOT_SERVED = "published configuration predicted NOT to serve"

_SCENARIO = {ServingScenario.OFFLINE: Scenario.OFFLINE, ServingScenario.SERVER: Scenario.SERVER,
             ServingScenario.CONCURRENCY: Scenario.CONCURRENCY,
             ServingScenario.BATCH: Scenario.BATCH}
_cache: dict[tuple[Any, ...], tuple[SimRun | DisaggRun | None, list[str]]] = {}


def kind_of(run: ServingRun) -> MetricKind:
    if run.metric is not None and run.metric.is_latency:
        return MetricKind.LATENCY
    if run.scenario is ServingScenario.CONCURRENCY:
        return MetricKind.CONCURRENCY
    return MetricKind.SERVER if run.scenario is ServingScenario.SERVER else MetricKind.OFFLINE


def unit_of(metric: ServingMetric | None) -> str:
    if metric is None:
        return ""
    if metric.is_latency:
        return "ms"
    if metric is ServingMetric.REQUESTS_PER_S:
        return "requests/s"
    if metric is ServingMetric.TOKENS_PER_S_PER_USER:
        return "tokens/s per user"
    return "tokens/s per device" if metric.value.endswith("per_device") else "tokens/s"


def base_of(run: ServingRun) -> Prediction:
    fw = run.framework.value if run.framework else None
    return Prediction(run.id, run.file, run.source, run.model or "(dimensions)", run.accelerator,
                      metric=run.metric.value if run.metric else "", unit=unit_of(run.metric),
                      kind=kind_of(run), measured=run.value,
                      higher_is_better=not (run.metric and run.metric.is_latency),
                      framework=f"{fw} {run.version}".strip() if fw else None)


def _requests(run: ServingRun, replicas: int, notes: list[str], unit: str = "replica"
              ) -> int | None:
    """The requests simulated (``replicas``: engine instances, or a disaggregated run's larger
    pool's, ``unit`` naming them)."""
    if run.scenario is ServingScenario.SERVER:
        n = SERVER_REQUESTS_PER_REPLICA * replicas
        notes.append(f"server trials of {n:,} Poisson requests ({SERVER_REQUESTS_PER_REPLICA:,} "
                     f"per {unit}), seed 0")
        return n
    if run.scenario is ServingScenario.CONCURRENCY and run.requests is None:
        from accelmap.serving.scenario import REQUESTS_PER_CLIENT

        notes.append(f"request count not stated: {REQUESTS_PER_CLIENT} per client simulated")
        return None
    if run.requests is None:
        from accelmap.serving.scenario import DEFAULT_REQUESTS

        notes.append(f"request count not stated: {DEFAULT_REQUESTS:,} simulated")
        return DEFAULT_REQUESTS
    cap = MAX_REQUESTS_PER_REPLICA * replicas
    if run.requests > cap:
        notes.append(f"{run.requests:,} requests stated; the first {cap:,} simulated")
    return min(run.requests, cap)


def _foreign_setting(run: ServingRun, fw: Framework) -> str | None:
    """Why a run states a scheduler setting its stack does not have, or None."""
    if run.scheduler_recv_interval is not None and fw is not Framework.SGLANG:
        return (f"scheduler_recv_interval is SGLang's --scheduler-recv-interval; "
                f"{fw.value} has no such setting: drop the field")
    if run.attention_dp_balance is not None and fw is not Framework.TENSORRT_LLM_1:
        return (f"attention_dp_balance is TensorRT-LLM's (1.0 and later) attention_dp_config; "
                f"{fw.value} has no such setting: drop the field")
    if run.attention_dp_batching_wait and run.attention_dp_balance is None:
        return ("attention_dp_batching_wait is a setting of TensorRT-LLM's attention-DP "
                "balance: state attention_dp_balance (its timeout_iters) with it")
    return None


def simulate_run(run: ServingRun, system: System, spec: Any, notes: list[str],
                 split: Disaggregation | None = None) -> SimRun | DisaggRun | str:
    """The simulation the run's metric is read from (shared by rows of the same run), or why
    there is none: on ``split``'s prefill and decode pools when the run is disaggregated."""
    assert run.input_len and run.output_len and run.scenario
    tp, pp, ep, dp = run.tp or 1, run.pp or 1, run.ep or 1, run.dp or 1
    from accelmap.mapping.plan import Mapping

    # dp_attention: the tp group runs attention data-parallel (SGLang --tp 8 --dp 8
    # --enable-dp-attention is tp: 8 with dp_attention: true; dp stays the engine instances)
    m = Mapping.serving(tp=tp, pp=pp, ep=ep, replicas=dp, dp_attention=bool(run.dp_attention))
    # the release picks the profile (TensorRT-LLM 1.x runs the PyTorch-backend profile), the
    # accelerator's vendor its platform block (SGLang on ROCm)
    try:
        fw = framework_profile(release_stack(run.framework, run.version) if run.framework
                               else Framework.EAGER, system.device.acc.vendor)
    except InputError as e:  # a stack the part does not run (ATOM on an NVIDIA GPU)
        return str(e)
    if run.stack == "dynamo":  # Dynamo's front end in place of the engine's (cost/framework.py)
        fw = orchestrated(fw, "dynamo")
    if (foreign := _foreign_setting(run, fw.name)) is not None:
        return foreign
    weight = run.precision
    assert weight is not None
    # activations: fp8 with fp8 weights (W8A8), else 16 bits (4-bit GEMMs quantize their inputs
    # themselves; int weights are weight-only); the KV cache as the activations unless stated
    act = weight if weight.bytes >= 2 or weight is DType.FP8 else DType.BF16
    wl = Inference(batch=1, prompt_len=run.input_len, output_len=run.output_len,
                   weight_dtype=weight, act_dtype=act, kv_dtype=run.kv_precision or act,
                   moe_weight_dtype=run.moe_precision)
    try:
        resolve_inference(system.device.acc, wl)
    except InputError as e:  # a KV format the part's stacks do not store
        return str(e)
    key = (replace(run, id="", file="", line=0, source="", metric=None, value=None, notes="",
                   reading_notes=(), problems=()), system.cluster.name, system.device.acc.id,
           spec.id)
    if key in _cache:
        hit, said = _cache[key]
        notes += said
        return hit if hit is not None else said[-1]
    more: list[str] = [f"stated {k} {v:g} overrides the framework's default" for k, v in
                        (("max_batch_size", run.max_batch), ("max_num_tokens", run.max_tokens),
                         ("KV memory fraction", run.kv_fraction),
                         ("scheduler receive interval", run.scheduler_recv_interval),
                         ("attention-DP balance timeout", run.attention_dp_balance),
                         ("attention-DP batching wait", run.attention_dp_batching_wait))
                        if v is not None]
    replicas = dp if split is None else max(split.prefill_instances, split.decode_instances)
    unit = "replica" if split is None else "instance of the larger pool"
    load = Load(Scenario.OFFLINE, requests=_requests(run, replicas, more, unit),
                dist=LengthDist(run.length_dist or "fixed"), spread=run.length_spread or 0.0,
                max_seqs=run.max_batch, max_tokens=run.max_tokens, kv_fraction=run.kv_fraction,
                recv_interval=run.scheduler_recv_interval,
                adp_balance=run.attention_dp_balance,
                adp_batching_wait=run.attention_dp_batching_wait)
    sp = speculation_of(run, spec, more)
    sim: SimRun | DisaggRun | None
    if isinstance(sp, str):
        more.append(sp)
        sim = None
    elif split is not None:
        sim = _disaggregated(run, spec, system, wl, split, fw, load, more, sp)
    else:
        sim = _colocated(run, spec, system, wl, m, fw, load, more, sp)
    if sim is not None and not sim.feasible:
        more.append(f"{NOT_SERVED}: {sim.reason}")
        sim = None
    elif sim is not None:
        more += [a for a in sim.assumptions
                 if a.startswith(("scheduler", "KV pool", "closed loop", "mixed recipe",
                                  "KV cache in", "KV transfer", "speculative")) or
                 " weights (" in a]
        more.append(f"mean running {sim.metrics['mean_running']:.0f}, peak "
                    f"{sim.metrics['peak_running']} requests per "
                    + ("decode instance" if split is not None else "replica"))
    _cache[key] = (sim, more)
    notes += more
    return sim if sim is not None else more[-1]


def _colocated(run: ServingRun, spec: Any, system: System, wl: Inference, m: Any,
               fw: FrameworkProfile, load: Load, more: list[str], sp: Speculation | None
               ) -> SimRun | None:
    """The run on ``m``'s replicas in its scenario (with ``sp``'s drafter when it states MTP);
    None when no rate meets its latency limits (the reason appended to ``more``)."""
    if run.scenario is ServingScenario.OFFLINE:
        return simulate(spec, system, wl, m, fw, load, speculation=sp)
    if run.scenario is ServingScenario.CONCURRENCY:
        return simulate(spec, system, wl, m, fw, replace(
            load, scenario=Scenario.CONCURRENCY, concurrency=run.concurrency), speculation=sp)
    if run.rate is not None:
        return _over_the_run(run, simulate(spec, system, wl, m, fw, replace(
            load, scenario=Scenario.SERVER, rate=run.rate), speculation=sp), run.rate, more)
    slo, q = _limits(run)
    return _highest(run, max_rate(spec, system, wl, m, fw, load, slo, q, speculation=sp), more)


def _disaggregated(run: ServingRun, spec: Any, system: System, wl: Inference,
                   split: Disaggregation, fw: FrameworkProfile, load: Load, more: list[str],
                   sp: Speculation | None) -> DisaggRun | None:
    """``_colocated`` on the prefill and decode pools of ``split``."""
    assert run.scenario is not None
    if run.scenario is ServingScenario.SERVER and run.rate is None:
        slo, q = _limits(run)
        return _highest(run, max_rate_split(spec, system, wl, split, fw, load, slo, q,
                                            speculation=sp), more)
    sim = run_disaggregated(spec, system, wl, split, fw, replace(
        load, scenario=_SCENARIO[run.scenario], rate=run.rate, concurrency=run.concurrency),
        speculation=sp)
    if run.scenario is ServingScenario.SERVER and run.rate is not None and sim.feasible:
        return _over_the_run(run, sim, run.rate, more)
    return sim


def _limits(run: ServingRun) -> tuple[Slo, int]:
    """A server run's latency limits and the percentile they hold at (default p99)."""
    return (Slo(None if run.slo_ttft_ms is None else run.slo_ttft_ms / 1e3,
                None if run.slo_tpot_ms is None else run.slo_tpot_ms / 1e3),
            int(run.slo_percentile or 99))


# what a server run reports at a rate: its completions over the run, per second
RATE_METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_device", "total_tokens_per_s",
                "total_tokens_per_s_per_device", "input_tokens_per_s_per_device",
                "requests_per_s", "goodput_requests_per_s")


def _over_the_run(run: ServingRun, sim: RunT, rate: float, more: list[str]) -> RunT:
    """A server run's throughput as the benchmark counts it over the run's own queries.
    MLPerf's LoadGen (Server) divides what completed by the time from the first query sent to
    the last answer: ``requests`` N queries at ``rate`` take N / rate to send and the last one
    a request's latency more, so N / (N / rate + E2E) requests/s. The simulated trial is
    shorter (SERVER_REQUESTS_PER_REPLICA), so its own span would count its drain as a larger
    share of the run: its per-request figures (E2E, tokens per request) are kept and its rates
    are rescaled to the run's length (the steady state ``rate`` when N is not stated)."""
    m = sim.metrics
    if not sim.feasible or not m.get("requests_per_s") or not isinstance(m.get("e2e_s"), dict):
        return sim
    n = run.requests
    drain = float(m["e2e_s"]["mean"])
    served = n / (n / rate + drain) if n else rate
    factor = served / float(m["requests_per_s"])
    metrics = {**m, **{k: float(m[k]) * factor for k in RATE_METRICS if m.get(k) is not None}}
    more.append(f"throughput over the run's {n:,} queries at {rate:.3g} requests/s (sent over "
                f"{n / rate:,.0f} s, the last answered {drain:.3g} s later)" if n else
                f"throughput of the steady state at {rate:.3g} requests/s")
    return replace(sim, metrics=metrics)


def _highest(run: ServingRun, cap: Capacity[RunT], more: list[str]) -> RunT | None:
    """The run at the highest rate meeting the limits, said in ``more`` (None: no rate)."""
    q = int(run.slo_percentile or 99)
    limits = ", ".join(f"{w} p{q} <= {v:g} ms" for w, v in
                       (("TTFT", run.slo_ttft_ms), ("TPOT", run.slo_tpot_ms)) if v)
    if cap.rate is None:
        why = cap.offline.reason or f"no rate meets {limits}"
        more.append(f"{NOT_SERVED}: {why}")
        return None
    more.append(f"highest Poisson rate meeting {limits}: {cap.rate:.3g} requests/s "
                f"(offline {cap.offline.metrics['requests_per_s']:.3g}; "
                f"{len(cap.tried)} bisection steps)")
    assert cap.run is not None
    return _over_the_run(run, cap.run, cap.rate, more)


def _pool_nodes(acc: Accelerator, devices: int, split: Disaggregation | None, catalog: Catalog,
                notes: list[str]) -> int:
    """The devices of the cluster a run is laid out on. A disaggregated run whose pools do
    not fill whole nodes (4 prefill + 40 decode B200 on nodes of 8) runs each instance of at
    most a node's devices inside one node, where its tensor- and expert-parallel collectives
    have the scale-up links (a deployment would not split a tp=8 instance over two hosts'
    NICs): the cluster is the nodes the pools occupy, the rest of the last node idle (a
    training job of a partial node gets equal smaller domains instead,
    ``layout.build_cluster``). Throughput per device still divides by the pools' devices."""
    preset = lay.node_preset(acc, catalog)
    node = preset.devices_per_node if preset else lay.DEFAULT_NODE
    if split is None or devices % node == 0 or devices < node:
        return devices
    if max(split.prefill_tp, split.decode_tp) > node:
        return devices
    whole = -(-devices // node) * node
    notes.append(f"the pools' {devices} devices take {whole // node} nodes of {node} (one "
                 f"instance per node; {whole - devices} devices of the last node idle)")
    return whole


def _unmodelled(run: ServingRun) -> list[str]:
    """What a 2025-2026 run states that the run-file prediction does not model yet: each a
    reason to skip, so no row is predicted as something it was not (issue 22 part 8)."""
    out = []
    if run.stack == "dynamo" and run.engine is None:
        out.append("framework dynamo needs its engine (engine: tensorrt-llm, sglang or vllm)")
    if run.engine is not None and run.stack != "dynamo":
        out.append("engine is stated but the framework is not dynamo")
    pools = [k for k in ("prefill_devices", "decode_devices", "prefill_tp", "decode_tp",
                         "prefill_ep", "decode_ep", "prefill_dp_attention",
                         "decode_dp_attention") if getattr(run, k) is not None]
    if pools and not run.disaggregated:
        out.append(f"{', '.join(pools)} stated without disaggregated: true")
    return out


def _layout(run: ServingRun, reasons: list[str]) -> tuple[int | None, Disaggregation | None]:
    """The run's device count and, when disaggregated, its pools; what is wrong with them is
    appended to ``reasons``."""
    if run.disaggregated:
        split = split_of(run)
        if isinstance(split, list):
            reasons += split
            return run.device_count, None
        return split.devices, split
    devices = run.device_count
    if devices is None:
        reasons.append("device count not stated")
    elif (run.tp or 1) * (run.pp or 1) * (run.dp or 1) != devices:
        reasons.append(f"tp x pp x dp = {(run.tp or 1) * (run.pp or 1) * (run.dp or 1)} but "
                       f"the run used {devices} devices")
    return devices, None


def predict_serving(run: ServingRun, catalog: Catalog, calibrated: frozenset[str]
                    ) -> Prediction:
    """The prediction of a serving run's metric, or the reasons it cannot be made."""
    base = base_of(run)
    reasons = [str(p) for p in run.problems]
    notes = list(run.reading_notes)
    if run.scenario is ServingScenario.BATCH:
        reasons.append("fixed-batch runs in the run format are not predicted yet (the "
                       "inference layout's batch rows are)")
    if run.metric is None and not run.problems:
        reasons.append("no serving metric")
    if run.value is None:
        reasons.append("measured value is not a number")
    if run.input_len is None:
        reasons.append("input length not stated")
    if run.output_len is None:
        reasons.append("output length not stated")
    if run.precision is None and not run.problems:
        reasons.append("precision not stated")
    devices, split = _layout(run, reasons)
    if run.scenario is ServingScenario.CONCURRENCY and run.concurrency is None:
        reasons.append("a concurrency run needs its number of clients (concurrency)")
    if run.concurrency is not None and run.scenario is not ServingScenario.CONCURRENCY:
        reasons.append("concurrency is stated but the scenario is not concurrency")
    if (run.scenario is ServingScenario.SERVER and run.rate is None
            and run.slo_ttft_ms is None and run.slo_tpot_ms is None):
        reasons.append("a server run needs its request rate or its latency limits")
    reasons += _unmodelled(run)
    if run.stack == "dynamo" and run.engine is not None:
        notes.append(f"Dynamo orchestrating {run.engine.value}: the engine's cost profile and "
                     "scheduler defaults")
    dev = rs.resolve_device(run.accelerator, catalog, memory_gb=run.accelerator_memory_gb)
    model = rs.resolve_model(run.model, run.arch, catalog, None, megatron=False,
                             family=run.family.value if run.family else None)
    for res in (dev, model):
        reasons += [res.reason] if res.reason else []
        notes += res.notes
    if reasons or dev.value is None or model.value is None:
        return skip(base, reasons, notes)
    device, spec = dev.value, model.value
    assert devices is not None
    if devices == 1:
        system = System.on(device)
    else:
        if device.fraction != 1.0:
            return skip(base, ["multi-device runs of part of a device are not modelled"], notes)
        cluster = lay.build_cluster(device.acc, _pool_nodes(device.acc, devices, split, catalog,
                                                            notes), run.nodes, catalog)
        notes += cluster.notes
        if cluster.value is None:
            return skip(base, [cluster.reason or "cluster"], notes)
        system = System(cluster.value, device)
    if split is not None:
        notes.append(f"disaggregated: {split.describe()}")
    else:
        notes.append(f"tp={run.tp or 1} pp={run.pp or 1}"
                     + (f" x {run.dp} replicas" if (run.dp or 1) > 1 else ""))
    sim = simulate_run(run, system, spec, notes, split)
    if isinstance(sim, str):
        return skip(base, [sim], notes)
    assert run.metric is not None
    value = run.metric.read(sim.metrics)
    if value is None or not math.isfinite(value):
        return skip(base, [f"the simulation gives no {run.metric.value}"], notes)
    return done(base, value, calibrated, notes, fits=True, model_id=spec.id,
                accelerator_id=device.acc.id)
