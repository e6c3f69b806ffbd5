"""Serving scenarios: offline throughput and server load through the request-level simulator
(``accelmap.serving``); the fixed-batch scenario is ``api.estimate``.

    from accelmap import api
    spec = api.load_model("llama-3.1-70b")
    system = api.load_system(cluster="1x2xh100-sxm5-80gb")
    wl = api.inference(1, prompt=1000, output=1000, weights="fp8")
    run = api.serve(spec, system, wl, api.serving_mapping(tp=2), framework="tensorrt-llm",
                    load=api.serving_load("offline"))
    print(run.output_tokens_per_s)

Speculative decoding (``speculation``): a draft model or MTP/EAGLE-style heads, acceptance
rate alpha and draft length k (chosen when not given), in every scenario:

    sp = api.speculation(0.8, draft="llama-3.1-8b")
    run = api.serve(spec, system, wl, api.serving_mapping(tp=8), speculation=sp,
                    load=api.serving_load("server", rate=5))
    est = api.serve_batch(spec, system, wl, api.serving_mapping(tp=8), speculation=sp)
    print(run.metrics["speculative"]["draft_len"], est.tpot_s)

Disaggregated prefill/decode (DistServe, Splitwise) on the same simulator:

    server = api.serving_load("server", rate=8, slo_ttft="2s", slo_tpot="50ms")
    split = api.disaggregation("2:1", prefill_tp=4, decode_tp=8)
    d = api.serve_disaggregated(spec, system, wl, split, load=server)
    best = api.plan_disaggregation(spec, system, wl, load=server)  # the split and its why
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from accelmap.api.parse import choice, duration
from accelmap.api.requests import refuse_shape
from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.engine import System, class_framework, estimate, resolve_framework, sparsity
from accelmap.engine.result import ServeStep
from accelmap.errors import InputError
from accelmap.files import is_file
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.serving.disagg import Disaggregation, DisaggRun, check, run_disaggregated
from accelmap.serving.layout import scenario_layout as _scenario_layout
from accelmap.serving.metrics import Slo
from accelmap.serving.requests import LengthDist
from accelmap.serving.scenario import Load, Scenario, ServingRun, run
from accelmap.serving.speculative import MAX_DRAFT_LEN, Speculation, batch_step
from accelmap.serving.split import SplitSearch, search_split
from accelmap.workload import Inference, Sparsity

__all__ = ["DisaggRun", "Disaggregation", "Load", "Scenario", "ServingRun", "Slo", "Speculation",
           "SplitSearch", "disaggregation", "plan_disaggregation", "scenario_layout", "serve",
           "serve_batch", "serve_disaggregated", "serving_load", "speculation"]


def serving_load(scenario: str | Scenario = "offline", *, requests: int | None = None,
                 rate: float | None = None, trace: str | Path | None = None,
                 lengths: str | LengthDist = "fixed", spread: float = 0.0,
                 prefix_hit: float = 0.0, slo_ttft: str | float | None = None,
                 slo_tpot: str | float | None = None, seed: int = 0,
                 max_seqs: int | None = None, max_tokens: int | None = None,
                 chunked_prefill: bool | None = None, concurrency: int | None = None,
                 recv_interval: int | None = None, adp_balance: int | None = None,
                 adp_batching_wait: int | None = None) -> Load:
    """A scenario's request stream and objectives from text (``slo_ttft``/``slo_tpot``:
    durations such as '2s', '50ms'); ``concurrency``: closed-loop clients of the
    ``concurrency`` scenario; ``recv_interval``: SGLang's --scheduler-recv-interval;
    ``adp_balance``: TensorRT-LLM's attention-DP balance timeout in iterations;
    ``adp_batching_wait``: its batching_wait_iters."""
    sc = choice(Scenario, scenario, "scenario")
    if sc is Scenario.BATCH:
        raise InputError("the batch scenario is one fixed batch: use api.estimate")
    path = None
    if trace is not None:
        path = Path(trace)
        if not is_file(path):
            raise InputError(f"trace {path} is not a file: give a CSV or JSON-lines file with "
                             "arrival_s, prompt_len and output_len per request")
    slo = Slo(None if slo_ttft is None else duration(slo_ttft),
              None if slo_tpot is None else duration(slo_tpot))
    return Load(sc, requests, rate, path, choice(LengthDist, lengths, "length distribution"),
                spread, prefix_hit, slo, seed, max_seqs, max_tokens, chunked_prefill,
                concurrency=concurrency, recv_interval=recv_interval,
                adp_balance=adp_balance, adp_batching_wait=adp_batching_wait)


def scenario_layout(model: ModelSpec, system: System, workload: Inference, load: Load,
                    framework: Framework | str | FrameworkProfile | None = None
                    ) -> tuple[Mapping, str | None]:
    """The layout of a simulated run when none is given, and why (``serving.layout``): the
    smallest whose KV pool under the stack's memory rule holds the clients' context."""
    fw = resolve_framework(framework, class_framework(system, training=False),
                           system.accelerator.vendor)
    return _scenario_layout(model, system, workload, fw, load)


def serve(model: ModelSpec, system: System, workload: Inference, mapping: Mapping, *,
          framework: Framework | str | FrameworkProfile | None = None,
          load: Load | None = None, imbalance: float = 1.0,
          speculation: Speculation | None = None) -> ServingRun:
    """Simulate ``load`` (default: offline) on ``mapping``; ``workload`` gives the precisions and
    the mean prompt/output lengths (its batch is ignored: the scheduler picks it)."""
    fw = resolve_framework(framework, class_framework(system, training=False),
                           system.accelerator.vendor)
    if workload.sparsity is Sparsity.NONE:
        return run(model, system, workload, mapping, fw, load or Load(), imbalance=imbalance,
                   speculation=speculation)
    sparsity.check(system.accelerator, workload)
    out = run(model, system, workload, mapping, fw, load or Load(), imbalance=imbalance,
              speculation=speculation)
    dense = run(model, system, replace(workload, sparsity=Sparsity.NONE), mapping, fw,
                load or Load(), imbalance=imbalance, speculation=speculation)
    return replace(out, assumptions=(*out.assumptions, sparsity.usage(system.accelerator,
                                                                      workload),
                                     _bought(out, dense)))


def _bought(sparse: ServingRun, dense: ServingRun) -> str:
    """What 2:4 sparsity bought in a simulated run, against the same load on dense weights."""
    def ratio(key: str, higher: bool = True) -> str:
        a, b = sparse.metrics.get(key), dense.metrics.get(key)
        if not a or not b:
            return "n/a"
        return f"{(a / b if higher else b / a):.2f}x"

    return (f"2:4 sparsity bought: output throughput {ratio('output_tokens_per_s')}, KV-cache "
            f"capacity {ratio('kv_capacity_tokens')} of the same load on dense weights")


def serve_batch(model: ModelSpec, system: System, workload: Inference, mapping: Mapping, *,
                framework: Framework | str | FrameworkProfile | None = None,
                imbalance: float = 1.0, speculation: Speculation | None = None) -> ServeStep:
    """The fixed-batch scenario (``api.estimate``), with speculative decoding when given."""
    est = estimate(model, system, workload, mapping, framework=framework, imbalance=imbalance)
    if speculation is None:
        return est  # type: ignore[return-value]
    assert isinstance(est, ServeStep)
    fw = resolve_framework(framework, class_framework(system, training=False),
                           system.accelerator.vendor)
    return batch_step(est, speculation, model, system, workload, mapping, fw, imbalance)


def speculation(accept: float | str | None, *, draft: str | ModelSpec | None = None,
                mtp: int | None = None, draft_len: int | str | None = "auto",
                catalog: Catalog | None = None) -> Speculation:
    """A drafter (``draft``: a model preset, config or spec; or ``mtp`` head layers), the
    acceptance rate alpha in [0, 1) and the draft length k (1..64, or 'auto': chosen from
    1..MAX_DRAFT_LEN)."""
    if draft is None and mtp is None:
        raise InputError("speculative decoding needs a drafter: --draft MODEL or --mtp N")
    if accept is None:
        raise InputError("--draft/--mtp need the acceptance rate: --accept ALPHA (0 <= alpha "
                         "< 1, e.g. 0.8)")
    try:
        alpha = float(accept)
    except ValueError:
        raise InputError(f"--accept takes a number in [0, 1), got {accept!r}") from None
    k: int | None
    if draft_len is None or (isinstance(draft_len, str) and draft_len.strip().lower() == "auto"):
        k = None
    else:
        try:
            k = int(draft_len)
        except ValueError:
            raise InputError(f"--draft-len takes a whole number of draft tokens or 'auto' "
                             f"(chosen from 1..{MAX_DRAFT_LEN}), got {draft_len!r}") from None
    spec = None
    if draft is not None:
        from accelmap.api.models import load_model

        spec = draft if isinstance(draft, ModelSpec) else load_model(draft, catalog)
    return Speculation(alpha, k, spec, int(mtp or 0))


def disaggregation(text: str, *, prefill_tp: int = 1, decode_tp: int = 1, prefill_ep: int = 1,
                   decode_ep: int = 1, prefill_dp_attention: bool = False,
                   decode_dp_attention: bool = False) -> Disaggregation:
    """``P:D``: P prefill instances of ``prefill_tp`` devices and D decode instances of
    ``decode_tp`` devices, with ``prefill_ep`` / ``decode_ep`` expert parallelism inside each
    instance (ep divides tp and the experts, as in an aggregated layout) and, per pool,
    attention data-parallel over the instance's tp group (MoE models)."""
    return replace(Disaggregation.parse(text, prefill_tp, decode_tp, prefill_ep, decode_ep),
                   prefill_dp_attention=prefill_dp_attention,
                   decode_dp_attention=decode_dp_attention)


def _disagg_load(load: Load | None) -> Load:
    if load is None:
        raise InputError("disaggregated serving needs a request stream: "
                         "api.serving_load('server', rate=R) (--scenario server --rate R)")
    return load


def serve_disaggregated(model: ModelSpec, system: System, workload: Inference,
                        split: Disaggregation, *,
                        framework: Framework | str | FrameworkProfile | None = None,
                        load: Load | None = None, layerwise: bool = False,
                        speculation: Speculation | None = None) -> DisaggRun:
    """Simulate ``load`` on a prefill pool and a decode pool (``split``) of ``system``; a
    layout the cluster or the model cannot take is an InputError, a pool without memory for
    its KV is a result with ``feasible=False``. Each pool's instance is checked by the shape
    rules of an aggregated layout (``requests.refuse_shape``), naming the pool's flag.
    ``speculation`` (with a given draft length): the drafter on both pools."""
    for role in ("prefill", "decode"):
        refuse_shape(model, system, split.instance_mapping(role), role)
    bad = check(model, system.cluster, split)
    if bad:
        raise InputError(f"--disaggregate {split.prefill_instances}:{split.decode_instances}: "
                         f"{bad[0]}")
    fw = resolve_framework(framework, class_framework(system, training=False),
                           system.accelerator.vendor)
    return run_disaggregated(model, system, workload, split, fw, _disagg_load(load),
                             layerwise=layerwise, speculation=speculation)


def plan_disaggregation(model: ModelSpec, system: System, workload: Inference, *,
                        framework: Framework | str | FrameworkProfile | None = None,
                        load: Load | None = None, layerwise: bool = False,
                        attainment: float = 0.9) -> SplitSearch:
    """The split of ``system`` between prefill and decode (and the colocated layouts) with the
    most goodput per device at the load's rate and SLOs, among the layouts meeting the SLOs for
    ``attainment`` of the requests (DistServe's 90 % example), with every candidate tried."""
    fw = resolve_framework(framework, class_framework(system, training=False),
                           system.accelerator.vendor)
    return search_split(model, system, workload, fw, _disagg_load(load), layerwise=layerwise,
                        attainment=attainment)
