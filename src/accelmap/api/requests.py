"""Typed requests shared by the faces: the CLI's options and the web's forms are built into the
same frozen value, and one function turns it into the engine's inputs, so the same input gives
the same answer or the same error sentence in both (issue 25; ``tests/web/test_cli_web.py``).

    req = api.EstimateRequest(model="llama-3.1-70b", cluster="8xH100", tp=8, batch=32)
    spec, system, workload, mapping = api.estimate_inputs(req)
    est = api.estimate(spec, system, workload, mapping)

Field names are the CLI's flags (``--micro-batch`` is ``micro_batch``); defaults are the CLI's.
Names are resolved, defaults applied and the checks made once, here: the dtype in every mode
(a typo is never ignored), one device given several-device degrees, serving past the model's
context, a fine-tune asked of a serving job. A mapping left open (serving with none of tp,
pp, ep, replicas) is None: the engine then chooses a layout that holds the model.

``plan`` and ``compare`` are built the same way: ``PlanOptions`` (resolved by ``plan_inputs``
into the model, the clusters and a ``PlanRequest``) and ``CompareRequest`` (resolved by
``compare_inputs`` into the model, the parts and a ``CompareJob``):

    spec, clusters, req = api.plan_inputs(api.PlanOptions(model="llama-3.1-8b",
                                                          cluster="8xH100", tokens="1T"))
    result = api.run_plan(spec, clusters[0], req)
    spec, parts, job = api.compare_inputs(api.CompareRequest(model="llama-3.1-8b", hw="all"))
    cmp = api.compare_parts(spec, parts, job, api.load_catalog())
"""

from __future__ import annotations

from collections.abc import Mapping as AnyMapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from accelmap.api.comparison import compare_job, select_parts
from accelmap.api.estimates import (
    adapters,
    check_one_device,
    inference,
    load_system,
    mapping,
    serving_mapping,
    training,
)
from accelmap.api.models import context_warnings, load_model
from accelmap.api.parse import dtype
from accelmap.api.planning import PlanRequest, check_profile, plan_clusters, plan_request
from accelmap.catalog import Catalog, load_catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.engine import System
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import Accelerator
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import CpComm, Mapping
from accelmap.mapping.plan import cp_comm as parse_cp_comm
from accelmap.models.schema import ModelSpec
from accelmap.search.compare import CompareJob
from accelmap.workload import Inference, Training

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_R = TypeVar("_R", bound="DataclassInstance")


def _of(cls: type[_R], values: Any) -> _R:
    """``cls`` from the fields of ``values`` it names: a mapping (``locals()``) or an object with
    attributes (the CLI's parsed options, a web form); a field it lacks keeps its default."""
    if isinstance(values, AnyMapping):
        got = {f.name: values[f.name] for f in fields(cls) if f.name in values}
    else:
        got = {f.name: getattr(values, f.name) for f in fields(cls) if hasattr(values, f.name)}
    return cls(**got)


__all__ = ["CompareRequest", "EstimateRequest", "PlanOptions", "compare_inputs", "estimate_inputs",
           "plan_inputs"]


@dataclass(frozen=True)
class EstimateRequest:
    """One ``accelmap estimate`` / ``POST /api/estimate``: what runs, where, and how it is
    split (None: the default the engine or ``Mapping.training`` applies)."""

    model: str
    hw: str | None = None
    cluster: str | None = None
    devices: int | None = None
    train: bool = False
    batch: int = 1
    seq: int = 2048
    prompt: int = 512
    output: int = 128
    dtype: str = "bf16"
    weights: str = "bf16"
    moe_weights: str | None = None
    kv: str | None = None
    group: int = 128
    optimizer: str = "adamw"
    recompute: str = "none"
    flash: bool = True
    tokens: str | None = None
    finetune: str = "full"
    lora_rank: int | None = None
    lora_targets: str | None = None
    sparsity: str = "none"
    fp8_scaling: str = "tensorwise"
    grad_accumulation: str = "fused"
    pp_sends: str = "batched"
    scale_out: str | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int = 1
    ep: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    vpp: int = 1
    schedule: str | None = None
    sequence_parallel: bool = True
    tp_overlap: bool = False
    cp_comm: str = "p2p"
    offload_activations: int = 0
    force_tp: bool = False
    replicas: int | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    embedding_in_split: bool = False
    loss_in_split: bool = False
    dp_attention: bool = False

    @classmethod
    def of(cls, values: Any) -> EstimateRequest:
        """The request from any object with these attributes (the CLI's parsed options, the
        web's form); the CLI's ``--no-sp`` is ``sequence_parallel=False``."""
        req = _of(cls, values)
        no_sp = values.get("no_sp") if isinstance(values, AnyMapping) else getattr(
            values, "no_sp", None)
        return req if no_sp is None else replace(req, sequence_parallel=not no_sp)


def _one(v: int | None) -> int:
    """A degree left out is 1; a given 0 or -1 goes on to the Mapping's check, never to 1."""
    return 1 if v is None else v


def _check_cp_comm(r: EstimateRequest) -> None:
    """--cp-comm other than p2p says how context-parallel ranks exchange K and V: refused
    where there is no such exchange (serving, or training without --cp > 1)."""
    if parse_cp_comm(r.cp_comm) is CpComm.P2P:
        return
    if not r.train:
        raise InputError("--cp-comm is a training option (how context-parallel ranks exchange "
                         "K and V): add --train --cp N, or drop it")
    if r.cp <= 1:
        raise InputError(f"--cp-comm {r.cp_comm} exchanges K and V between context-parallel "
                         "ranks: add --cp N (N > 1), or drop it")


def estimate_inputs(req: EstimateRequest, catalog: Catalog | None = None,
                    profile: CalibrationProfile | None = None
                    ) -> tuple[ModelSpec, System, Training | Inference, Mapping | None]:
    """The engine's inputs for ``req``: the model, the system, the workload and the mapping
    (None where serving leaves the layout to the engine)."""
    r = req
    train_dtype = dtype(r.dtype, "training")  # checked in every mode: a typo is never ignored
    spec = load_model(r.model, catalog)
    system = load_system(hw=r.hw, cluster=r.cluster, catalog=catalog, profile=profile,
                         scale_out=r.scale_out,
                         devices=r.devices)
    check_one_device(system, r.hw, tp=r.tp, pp=r.pp, dp=r.dp, cp=r.cp, ep=r.ep,
                     replicas=r.replicas)
    ft = adapters(r.finetune, r.lora_rank, r.lora_targets)
    _check_cp_comm(r)
    if r.train and r.dp_attention:
        raise InputError("--dp-attention is a serving layout (attention data-parallel over the "
                         "--tp group): use it with --serve")
    if r.train:
        wl = training(r.batch, r.seq, train_dtype, r.optimizer, r.recompute, r.flash, r.tokens,
                      finetune=ft, sparsity=r.sparsity, fp8_scaling=r.fp8_scaling,
                      grad_accumulation=r.grad_accumulation, pp_sends=r.pp_sends)
        return spec, system, wl, mapping(
            system, wl, tp=_one(r.tp), pp=_one(r.pp), dp=r.dp, cp=r.cp, ep=_one(r.ep),
            zero=r.zero, micro_batch=r.micro_batch, vpp=r.vpp, schedule=r.schedule,
            sequence_parallel=r.sequence_parallel, tp_overlap=r.tp_overlap, cp_comm=r.cp_comm,
            offload_activations=r.offload_activations,
            force_tp=r.force_tp, first_stage_layers=r.first_stage_layers,
            last_stage_layers=r.last_stage_layers, embedding_in_split=r.embedding_in_split,
            loss_in_split=r.loss_in_split)
    if ft is not None:
        raise InputError("--finetune lora/qlora is a training workload: add --train")
    if r.fp8_scaling.strip().lower() != "tensorwise":
        raise InputError("--fp8-scaling is a training option (torchao's FP8 training recipes): "
                         "add --train --dtype fp8, or drop it")
    if r.grad_accumulation.strip().lower() != "fused":
        raise InputError("--grad-accumulation is a training option (how the stack adds "
                         "micro-batch gradients up): add --train, or drop it")
    if r.offload_activations:
        raise InputError("--offload-activations is a training option (layers whose saved "
                         "activations go to host memory): add --train, or drop it")
    if r.pp_sends.strip().lower() != "batched":
        raise InputError("--pp-sends is a training option (how the pipeline's stages send to "
                         "each other): add --train --pp N, or drop it")
    context_warnings(spec, prompt=r.prompt, output=r.output)  # serving past it: refused
    inf = inference(r.batch, r.prompt, r.output, r.weights, r.kv, r.group, r.flash,
                    sparsity=r.sparsity, moe_weights=r.moe_weights)
    m = serving_mapping(r.tp, r.pp, r.ep, r.replicas, dp_attention=r.dp_attention)
    if m is not None:
        refuse_shape(spec, system, m)
    return spec, system, inf, m


# Rules a given serving layout breaks by the model's shape, whatever the hardware: refused as
# input (one line, exit 2), like an unreadable degree; the others (memory, the scale-up domain,
# the device count) are results that say why the layout cannot run there.
SHAPE_RULES = ("heads_divisible", "kv_heads", "layers_over_stages", "experts_divisible",
               "ep_within_tp", "dp_attention_moe", "dp_attention_group")


def refuse_shape(spec: ModelSpec, system: System, m: Mapping, pool: str = "") -> None:
    """An InputError naming the first shape rule ``m`` breaks on ``spec`` and the flag to
    change (``SHAPE_RULES``); ``pool`` ("prefill", "decode"): ``m`` is one instance of that
    pool of a disaggregated layout, whose flags are --prefill-tp, --prefill-ep, ..."""
    bad = [v for v in check_serving(spec, system.cluster, m) if v.rule in SHAPE_RULES]
    if not bad:
        return
    v = bad[0]
    tp, ep, dpa = ((f"--{pool}-tp", f"--{pool}-ep", f"--{pool}-dp-attention") if pool
                   else ("--tp", "--ep", "--dp-attention"))
    fix = {"experts_divisible": (f"give {ep} dividing the {spec.moe.num_experts} experts"
                                 if spec.moe else f"{ep} is for MoE models: drop it"),
           "ep_within_tp": f"give {ep} dividing {tp} (expert parallelism splits the tp group)",
           "layers_over_stages": f"give --pp of at most {spec.n_layers}",
           "dp_attention_moe": f"drop {dpa} (dense models split attention by {tp})",
           "dp_attention_group": f"give {tp} of 2 or more with {dpa} (the devices "
                                 "that run attention on their own requests)",
           }.get(v.rule, f"give {tp} dividing the {spec.n_heads} attention heads")
    where = f"{pool} pool: " if pool else ""
    raise InputError(f"{where}{v.sentence} ({v.rule} rule): {fix}")


@dataclass(frozen=True)
class PlanOptions:
    """One ``accelmap plan`` / ``POST /api/plan`` as given: field names are the CLI's flags,
    defaults the CLI's, values still text ('4M', '2T', '30d', 'goodput').

    Named Options, not Request: ``api.PlanRequest`` is the *resolved* value the planners read
    (numbers, enums, the serving load), kept under that name for its callers; this is what the
    faces hold before anything is resolved, and ``plan_inputs`` turns it into the model, the
    clusters and that PlanRequest. CLI-only options (--ray, --report, --export, --out, --force,
    --profile, --db, --catalog, --json) say where and how to run or print, not what to plan,
    and are not fields."""

    model: str
    cluster: str | None = None
    hw: str | None = None
    devices: int | None = None
    train: bool = True
    seq: int = 4096
    global_batch_tokens: str = "4M"
    tokens: str | None = None
    deadline: str | None = None
    prompt: int = 2048
    output: int = 256
    scenario: str | None = None
    rate: float | None = None
    concurrency: int | None = None
    requests: int | None = None
    max_seqs: int | None = None
    ttft: str | None = None
    tpot: str | None = None
    objective: str | None = None
    top: int = 10
    framework: str | None = None
    offload: bool = False
    force_tp: bool = False
    include_tight: bool = False
    allow_quantization: bool = False
    finetune: str = "full"
    lora_rank: int | None = None
    lora_targets: str | None = None

    @classmethod
    def of(cls, values: Any) -> PlanOptions:
        """The options from the CLI's parsed parameters (``locals()``) or the web's form."""
        return _of(cls, values)


def plan_inputs(opts: PlanOptions, catalog: Catalog | None = None,
                profile: CalibrationProfile | None = None
                ) -> tuple[ModelSpec, list[Cluster], PlanRequest]:
    """The planners' inputs for ``opts``: the model, the clusters (``plan_clusters``: one
    --cluster, or --devices of each --hw) and the resolved ``PlanRequest`` (``plan_request``'s
    checks, ``profile`` checked against the clusters and attached). The stack stays the one
    given, else each cluster's device class's (``PlanRequest.framework_for``: XLA on a TPU
    slice, Megatron-LM/vLLM on GPUs), the rule ``estimate`` uses. Checked in the CLI's order,
    so the first mistake is the one both faces report."""
    o = opts
    cat = catalog or load_catalog()
    spec = load_model(o.model, cat)
    req = plan_request(train=o.train, seq=o.seq, global_batch_tokens=o.global_batch_tokens,
                       tokens=o.tokens, prompt=o.prompt, output=o.output, ttft=o.ttft,
                       tpot=o.tpot, objective=o.objective, framework=o.framework, top=o.top,
                       offload=o.offload, force_tp=o.force_tp, include_tight=o.include_tight,
                       deadline=o.deadline, scenario=o.scenario, rate=o.rate,
                       requests=o.requests, max_seqs=o.max_seqs,
                       finetune=adapters(o.finetune, o.lora_rank, o.lora_targets),
                       concurrency=o.concurrency, allow_quantization=o.allow_quantization)
    clusters = plan_clusters(cat, o.cluster, o.hw, o.devices, o.train)
    check_profile(profile, clusters)
    return spec, clusters, req.with_profile(profile)


@dataclass(frozen=True)
class CompareRequest:
    """One ``accelmap compare`` / ``POST /api/compare`` as given: field names are the CLI's
    flags (``--class`` is ``device_class``, ``--budget-usd-h`` ``budget_usd_h``), defaults the
    CLI's. ``compare_inputs`` resolves it. CLI-only: --top (rows printed), --ray, --report,
    --profile, --db, --catalog, --json (where and how to run or print)."""

    model: str
    train: bool = False
    hw: str = "all"
    device_class: str | None = None
    batch: int = 1
    prompt: int = 2048
    output: int = 256
    seq: int = 4096
    global_batch_tokens: str = "4M"
    precision: str | None = None
    best_precision: bool = False
    devices: int | None = None
    budget_usd_h: float | None = None
    objective: str | None = None
    framework: str | None = None

    @classmethod
    def of(cls, values: Any) -> CompareRequest:
        """The request from the CLI's parsed parameters (``locals()``) or the web's form."""
        return _of(cls, values)


def compare_inputs(req: CompareRequest, catalog: Catalog | None = None,
                   profile: CalibrationProfile | None = None
                   ) -> tuple[ModelSpec, list[Accelerator], CompareJob]:
    """The comparison's inputs for ``req``: the model, the parts (``select_parts``: --hw, of
    --class) and the job every part runs (``compare_job``'s checks; ``profile`` used for the
    part it was measured on), for ``api.compare_parts``. Each part's stack is its device
    class's where --framework is not given (``search.compare``)."""
    r = req
    cat = catalog or load_catalog()
    spec = load_model(r.model, cat)
    job = compare_job(train=r.train, batch=r.batch, prompt=r.prompt, output=r.output,
                      seq=r.seq, global_batch_tokens=r.global_batch_tokens,
                      precision=r.precision, best_precision=r.best_precision,
                      devices=r.devices, budget_usd_h=r.budget_usd_h, objective=r.objective,
                      framework=r.framework, profile=profile)
    return spec, select_parts(cat, r.hw, r.device_class), job
