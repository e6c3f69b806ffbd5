"""Planning: search every mapping of a model on a cluster, rank by an objective, compare
accelerators, and find the smallest cluster that meets a deadline.

    from accelmap import api
    cat = api.load_catalog()
    spec = api.load_model("llama-3.1-70b", cat)
    [cl] = api.plan_clusters(cat, cluster="64xH100")
    req = api.plan_request(train=True, seq=8192, global_batch_tokens="2M", tokens="2T")
    result = api.run_plan(spec, cl, req)
    print(result.plans[0].figures.tokens_per_s)

Serving plans run under a scenario: ``offline`` (every request queued, the default without a
rate), ``server`` (Poisson arrivals at ``rate``, the default with one) or ``batch`` (one fixed
batch prefilled at once, ``search.serve``); offline and server are simulated request by request
(``search.serve_scenario``):

    req = api.plan_request(train=False, prompt=2000, output=300, rate=4, ttft="2s",
                           tpot="50ms")          # server scenario, ranked by goodput
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from accelmap.api.estimates import training
from accelmap.api.models import context_warnings
from accelmap.api.parse import choice, count, duration, sequences_per_step
from accelmap.api.parse import framework as parse_framework
from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.framework import Framework
from accelmap.engine import class_framework
from accelmap.errors import InputError
from accelmap.export.base import Job, PlanKind
from accelmap.hardware.cluster import Cluster, parse_cluster
from accelmap.hardware.listing import unpublished
from accelmap.models.flops import forward_flops_per_token, training_flops_per_token
from accelmap.models.schema import ModelSpec
from accelmap.search.result import Objective, Plan, PlanResult, pareto_front
from accelmap.serving.metrics import Slo
from accelmap.serving.scenario import Load, Scenario
from accelmap.units import Dimension, DType, format_quantity
from accelmap.workload import Adapters, LoraTarget

__all__ = ["ClusterComparison", "ClusterRow", "DeadlineSearch", "Plan", "PlanRequest",
           "PlanResult", "check_profile", "compare_clusters", "deadline_search", "plan_clusters",
           "plan_job", "plan_request", "run_plan"]

Progress = Callable[[int, int], None]

# The largest node count the deadline search tries (powers of two from 1).
MAX_DEADLINE_NODES = 8192


@dataclass(frozen=True)
class PlanRequest:
    """What to plan, independent of the cluster: training (sequence length, global batch in
    sequences, tokens to train, an optional deadline for them in seconds) or serving (prompt,
    output, TTFT/TPOT targets in seconds), the objective, the software stack and the search
    switches."""

    train: bool = True
    seq: int = 4096
    global_batch: int = 1024
    tokens: float = 0.0
    prompt: int = 2048
    output: int = 256
    ttft_s: float | None = None
    tpot_s: float | None = None
    objective: Objective = Objective.THROUGHPUT
    framework: str | None = None
    top: int = 10
    offload: bool = False
    force_tp: bool = False
    include_tight: bool = False
    deadline_s: float | None = None
    profile: CalibrationProfile | None = field(default=None, compare=False)
    # serving: the scenario's load (offline/server, simulated); None = the batch scenario
    load: Load | None = None
    # training: LoRA/QLoRA adapters of a fine-tune (api.adapters); None = every weight trains
    finetune: Adapters | None = None
    # serving: search fp8/int8/int4 weights and an fp8 KV cache too (--allow-quantization)
    quantize: bool = False

    @property
    def scenario(self) -> Scenario | None:
        """The serving scenario (None for training)."""
        if self.train:
            return None
        return Scenario.BATCH if self.load is None else self.load.scenario

    def with_profile(self, profile: CalibrationProfile | None) -> PlanRequest:
        """The same request with a measured calibration profile (``load_profile``)."""
        return replace(self, profile=profile)

    def framework_for(self, cluster: Cluster) -> str:
        """The stack: the one given, else the device class's (cost/execution.py: Megatron-LM
        and vLLM on GPUs, XLA on TPUs, ...), the rule ``estimate`` uses, so a plan and an
        estimate on the same part run the same stack."""
        return self.framework or class_framework(cluster, training=self.train).value


def plan_request(*, train: bool = True, seq: int = 4096,
                 global_batch_tokens: str | float = "4M", tokens: str | float | None = None,
                 prompt: int = 2048, output: int = 256, ttft: str | float | None = None,
                 tpot: str | float | None = None, objective: str | Objective | None = None,
                 framework: str | None = None, top: int = 10, offload: bool = False,
                 force_tp: bool = False, include_tight: bool = False,
                 deadline: str | float | None = None,
                 profile: CalibrationProfile | None = None,
                 scenario: str | Scenario | None = None, rate: float | None = None,
                 requests: int | None = None, max_seqs: int | None = None,
                 finetune: Adapters | None = None,
                 concurrency: int | None = None,
                 allow_quantization: bool = False) -> PlanRequest:
    """A PlanRequest from text, every value checked before any search: ``objective`` one of
    ``Objective``, ``tokens`` as a count ('2T'), ``deadline`` (training with ``tokens`` only)
    and ``ttft``/``tpot`` as durations ('30d', '500ms'), ``global_batch_tokens`` as
    ``parse.batch_tokens`` reads it (binary K/M) divided by ``seq`` (at least one sequence).

    Serving: ``scenario`` (default ``server`` with a ``rate``, ``concurrency`` with
    ``concurrency`` closed-loop clients, else ``offline``; ``batch`` for the fixed-batch
    search); ``ttft``/``tpot`` are the batch's targets there and the SLOs of each request in
    offline/server; ``requests`` per simulation (default 2000), ``max_seqs`` a
    fixed cap on running requests per replica (else the framework's, lowered under a missed
    TPOT SLO). Objective default: goodput in the server scenario, throughput elsewhere."""
    if allow_quantization and train:
        raise InputError("--allow-quantization searches serving weight formats: add --serve")
    ttft_s = duration(ttft) if ttft is not None else None
    tpot_s = duration(tpot) if tpot is not None else None
    framework = parse_framework(framework, train)
    if finetune is not None and not train:
        raise InputError("--finetune lora/qlora plans a training job: add --train")
    load = _plan_load(train, scenario, rate, requests, max_seqs, concurrency, ttft_s, tpot_s)
    obj = _plan_objective(objective, train, load)
    n_tokens = count(tokens) if tokens is not None else 0.0
    if deadline is not None and not (train and n_tokens):
        raise InputError("--deadline needs --train and --tokens (what must be trained by when)")
    deadline_s = duration(deadline) if deadline is not None else None
    batch = sequences_per_step(global_batch_tokens, seq)
    return PlanRequest(train=train, seq=seq, global_batch=batch, tokens=n_tokens, prompt=prompt,
                       output=output, ttft_s=ttft_s, tpot_s=tpot_s, objective=obj,
                       framework=framework, top=top, offload=offload, force_tp=force_tp,
                       include_tight=include_tight, deadline_s=deadline_s, profile=profile,
                       load=load, finetune=finetune, quantize=allow_quantization)


def _plan_load(train: bool, scenario: str | Scenario | None, rate: float | None,
               requests: int | None, max_seqs: int | None, concurrency: int | None,
               ttft_s: float | None, tpot_s: float | None) -> Load | None:
    """The serving plan's simulated load (None: training, or the batch scenario), every
    option checked against the scenario it belongs to."""
    if train:
        if scenario is not None or rate is not None or requests is not None or max_seqs \
                or concurrency is not None:
            raise InputError("--scenario, --rate, --concurrency, --requests and --max-seqs are "
                             "for serving plans (--serve)")
        return None
    sc = choice(Scenario, scenario, "scenario") if scenario is not None else (
        Scenario.SERVER if rate is not None else
        Scenario.CONCURRENCY if concurrency is not None else Scenario.OFFLINE)
    if sc is Scenario.BATCH:
        if rate is not None or requests is not None or max_seqs or concurrency is not None:
            raise InputError("--rate, --requests and --max-seqs are for --scenario offline "
                             "or server (the batch scenario searches the batch itself)")
        return None
    if sc is Scenario.SERVER and rate is None:
        raise InputError("--scenario server needs --rate R (requests/s over the "
                         "cluster, Poisson arrivals)")
    if rate is not None and not rate > 0:
        raise InputError(f"--rate must be a positive number of requests/s, got {rate}")
    if sc is Scenario.OFFLINE and ttft_s is not None:
        raise InputError("a TTFT SLO needs arrivals: add --rate R (server scenario) or "
                         "use --scenario batch; offline queues every request at once, "
                         "so its TTFT is mostly waiting in the queue")
    if requests is not None and requests < 1:
        raise InputError(f"--requests must be at least 1, got {requests}")
    return Load(sc, requests, rate, slo=Slo(ttft_s, tpot_s), max_seqs=max_seqs,
                concurrency=concurrency)


def _plan_objective(objective: str | Objective | None, train: bool,
                    load: Load | None) -> Objective:
    """The objective given, else goodput in the server scenario and throughput elsewhere;
    refused where it ranks the other kind of plan."""
    if objective is None:
        obj = Objective.GOODPUT if load is not None and load.scenario is Scenario.SERVER \
            else Objective.THROUGHPUT
    else:
        obj = choice(Objective, objective, "objective")
    if obj is Objective.GOODPUT and load is None:
        raise InputError("--objective goodput ranks simulated serving runs: use --serve with "
                         "--scenario offline or server")
    if train and obj in SERVING_OBJECTIVES:
        raise InputError(f"--objective {obj.value} ranks serving plans; training takes one of "
                         + ", ".join(o.value for o in Objective if o not in SERVING_OBJECTIVES))
    if not train and obj is Objective.TIME:
        raise InputError("--objective time ranks training plans (time to train --tokens); "
                         "serving takes one of " + ", ".join(
                             o.value for o in Objective if o is not Objective.TIME))
    return obj


# objectives that rank serving plans only
SERVING_OBJECTIVES = (Objective.LATENCY, Objective.GOODPUT)


def plan_clusters(catalog: Catalog, cluster: str | None = None, hw: str | None = None,
                  devices: int | None = None, train: bool = True) -> list[Cluster]:
    """The clusters to plan on: one ``cluster`` spec (``64xH100``, a preset, a YAML file), or
    ``devices`` of each accelerator in ``hw`` (a name, a comma list, or ``any``: every
    accelerator with a system preset; default 64 devices for training, 8 for serving, and one
    for a measured local device, 'local' or 'local-...'), built as ``NxID``
    (``hardware.cluster.of_devices``: partial nodes included). In a list, an
    accelerator whose devices cannot be joined (no link in the catalog) is dropped (alone it
    fails); an unknown name fails."""
    if cluster and hw:
        raise InputError("give either --cluster or --hw, not both")
    if cluster:
        return [parse_cluster(cluster, catalog)]
    if not hw:
        raise InputError("give --cluster SPEC (e.g. 64xH100) or --hw NAME|any|A,B")
    from accelmap.api.measurement import is_local_name

    n = devices or (1 if is_local_name(hw) else 64 if train else 8)
    if hw.strip().lower() == "any":
        ids = sorted({p.accelerator for p in catalog.systems.values()})
    elif "," in hw:
        ids = [h.strip() for h in hw.split(",") if h.strip()]
    else:
        ids = [hw]
    out = []
    for name in ids:
        try:
            out.append(parse_cluster(name if name in catalog.systems else f"{n}x{name}",
                                     catalog))
        except InputError:
            if len(ids) == 1:
                raise
    if not out:
        raise InputError(f"no cluster could be built for --hw {hw}")
    return out


def check_profile(profile: CalibrationProfile | None, clusters: list[Cluster]) -> None:
    """A calibration profile applies to the accelerator it was measured on only."""
    if profile is None:
        return
    other = sorted({c.accelerator.id for c in clusters} - {profile.accelerator_id})
    if other:
        raise InputError(f"calibration profile {profile.name!r} was measured on "
                         f"{profile.accelerator_id}, not {', '.join(other)}: plan on "
                         f"{profile.accelerator_id} or drop --profile")


def run_plan(spec: ModelSpec, cluster: Cluster, request: PlanRequest,
             progress: Progress | None = None) -> PlanResult:
    """Search every mapping of ``spec`` on ``cluster`` and rank the feasible ones (training:
    ``search.planner.plan_training``; serving, batch scenario: ``search.serve.plan_serving``;
    offline/server: ``search.serve_scenario.plan_serving_scenario``, whose ``progress``
    counts simulated configurations)."""
    r = request
    beyond = context_warnings(spec, seq=r.seq) if r.train else context_warnings(
        spec, prompt=r.prompt, output=r.output)  # serving past the context: refused
    if r.train:
        res = _plan_training(spec, cluster, r, progress)
        res.notes[:0] = beyond
        return res
    return _plan_serving(spec, cluster, r, progress)


def _plan_training(spec: ModelSpec, cluster: Cluster, r: PlanRequest,
                   progress: Progress | None) -> PlanResult:
    from accelmap.search.planner import plan_training
    from accelmap.search.space import TrainingSpace

    space = TrainingSpace.default(spec, cluster, r.seq, offload=r.offload,
                                  force_tp=r.force_tp)
    wl = training(r.global_batch, r.seq, finetune=r.finetune) if r.finetune else None
    res = plan_training(spec, cluster, r.seq, r.global_batch, objective=r.objective,
                        framework=r.framework_for(cluster), top=r.top, tokens_to_train=r.tokens,
                        space=space, progress=progress, profile=r.profile,
                        include_tight=r.include_tight, workload=wl)
    if r.finetune is not None:
        ad = r.finetune
        res.notes.insert(0, f"{ad.method.value} fine-tune: rank-{ad.rank} adapters on "
                         + ",".join(t.value for t in LoraTarget if t in ad.targets)
                         + ", base frozen" + (" in NF4" if ad.quantized_base else ""))
    return res


def _plan_serving(spec: ModelSpec, cluster: Cluster, r: PlanRequest,
                  progress: Progress | None) -> PlanResult:
    if r.load is not None:
        from accelmap.search.serve_scenario import plan_serving_scenario

        res = plan_serving_scenario(spec, cluster, r.prompt, r.output, r.load,
                                    objective=r.objective, framework=r.framework_for(cluster),
                                    top=r.top, progress=progress, profile=r.profile,
                                    quantize=r.quantize)
        if r.include_tight:
            res.notes.append("--include-tight applies to --scenario batch: in offline/server "
                             "the framework's memory rule sizes the KV pool")
        return res
    from accelmap.search.serve import plan_serving

    return plan_serving(spec, cluster, r.prompt, r.output, ttft_s=r.ttft_s, tpot_s=r.tpot_s,
                        objective=r.objective, framework=r.framework_for(cluster), top=r.top,
                        progress=progress, profile=r.profile, include_tight=r.include_tight,
                        quantize=r.quantize)


def plan_job(spec: ModelSpec, cluster: Cluster, request: PlanRequest) -> Job:
    """The job a plan file records (and the exporters read): model, cluster and workload."""
    r = request
    return Job(kind=PlanKind.TRAIN if r.train else PlanKind.SERVE, model=spec.id,
               accelerator=cluster.accelerator.id, devices_per_node=cluster.devices_per_node,
               nodes=cluster.nodes, seq_len=r.seq if r.train else r.prompt + r.output,
               global_batch=r.global_batch, dtype=DType.BF16, prompt_len=r.prompt,
               output_len=r.output, framework=Framework(r.framework_for(cluster)),
               **finetune_fields(r.finetune))


def finetune_fields(ad: Adapters | None) -> dict[str, Any]:
    """The Job fields of a fine-tune (none for full training)."""
    if ad is None:
        return {}
    return {"finetune": ad.method, "lora_rank": ad.rank,
            "lora_targets": tuple(t for t in LoraTarget if t in ad.targets)}


# What each objective ranks accelerators by, compared like with like (the same job on each;
# throughput and goodput per device, so clusters of different sizes compare fairly): the
# best plan's figure (``engine.plan.PlanFigures``), whether more is better, and the words the
# output says.
RANK_BASIS: dict[Objective, tuple[str, bool, str]] = {
    Objective.THROUGHPUT: ("tokens_per_s", True, "tokens/s per device, most first"),
    Objective.TIME: ("time_to_train_s", False, "time to train --tokens, least first"),
    Objective.COST: ("usd_per_million_tokens", False, "$ per million tokens, least first"),
    Objective.ENERGY: ("energy_j_per_token_tdp", False,
                       "J per token at TDP (the upper bound), least first"),
    Objective.LATENCY: ("tpot_s", False, "time per output token, least first"),
    Objective.GOODPUT: ("goodput_requests_per_s", True,
                        "goodput (requests/s meeting every SLO) per device, most first"),
}
PER_DEVICE = (Objective.THROUGHPUT, Objective.GOODPUT)


@dataclass(frozen=True)
class ClusterRow:
    """One cluster of ``compare_clusters``: its best plan (None: nothing fits) and, where the
    catalog lacks the price or TDP behind a missing figure, what is not published and why
    (``hardware.listing.unpublished``). Figures are the plan's, in its vocabulary."""

    accelerator: str
    cluster: str
    devices: int
    plan: Plan | None
    not_published: dict[str, str] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.plan is not None

    def figure(self, key: str) -> Any:
        """The best plan's figure ``key`` (None without a plan or that figure)."""
        return getattr(self.plan.figures, key, None) if self.plan is not None else None

    def rank_value(self, objective: Objective) -> float | None:
        """The value this row is ranked by under ``objective`` (None: no plan, or a part
        without a price or TDP); a simulated TPOT ranks by its p99, the per-device objectives
        divide by the devices."""
        key = RANK_BASIS[objective][0]
        value = self.figure(key)
        if isinstance(value, dict):  # a simulated distribution: its p99
            value = self.figure(f"{key.removesuffix('_s')}_p99_s")
        if value is None or not math.isfinite(float(value)):
            return None
        return float(value) / self.devices if objective in PER_DEVICE else float(value)

    def to_dict(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, "cluster": self.cluster,
                "devices": self.devices, "feasible": self.feasible,
                "plan": self.plan.to_dict() if self.plan is not None else None,
                **{k: self.figure(k) for k in ROW_FIGURES},
                "not_published": self.not_published}


# the plan figures a comparison row repeats beside its plan
ROW_FIGURES = ("tokens_per_s_per_device", "usd_per_million_tokens", "energy_j_per_token_tdp",
               "time_to_train_s")


def rank_rows(rows: list[ClusterRow], objective: Objective) -> list[ClusterRow]:
    """Rows by the objective (best first); rows without its value after them, fastest per
    device first; rows that do not fit last."""
    more = RANK_BASIS[objective][1]

    def key(r: ClusterRow) -> tuple[int, float]:
        v = r.rank_value(objective)
        if v is not None:
            return (0, -v if more else v)
        return (1 if r.feasible else 2, -(r.figure("tokens_per_s_per_device") or 0.0))

    return sorted(rows, key=key)


@dataclass(frozen=True)
class ClusterComparison:
    """The best plan per cluster, ranked by the objective (``RANK_BASIS``, said in
    ``ranked_by``), and the throughput-vs-cost Pareto front of the feasible ones."""

    rows: tuple[ClusterRow, ...]
    objective: Objective = Objective.THROUGHPUT

    @property
    def ranked_by(self) -> str:
        return f"ranked by {self.objective.value}: {RANK_BASIS[self.objective][2]}"

    @property
    def pareto(self) -> list[dict[str, Any]]:
        return pareto_front([{"accelerator": r.accelerator,
                              "tokens_per_s_per_device": r.figure("tokens_per_s_per_device"),
                              "usd_per_million_tokens": r.figure("usd_per_million_tokens")}
                             for r in self.rows if r.feasible],
                            maximize="tokens_per_s_per_device",
                            minimize="usd_per_million_tokens")

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective.value, "ranked_by": self.ranked_by,
                "hardware": [r.to_dict() for r in self.rows],
                "pareto": {"throughput_vs_cost": self.pareto}}


def compare_clusters(spec: ModelSpec, clusters: list[Cluster], request: PlanRequest,
                     progress: Progress | None = None, runner: Any = None
                     ) -> ClusterComparison:
    """Plan on each cluster; one row each with its best plan under ``request.objective`` (or
    no plan), the rows ranked by that objective (``rank_rows``); ``progress``
    counts clusters. ``runner`` (``api.runner``, --ray): one task per cluster or a few, the
    same rows. (``compare_accelerators`` is the fast, same-precision comparison over every
    catalog part.)"""
    if runner is not None and runner.distributed:
        rows = runner.map(_hardware_row, clusters, (spec, request), "clusters")
    else:
        rows = []
        for i, cl in enumerate(clusters):
            if progress:
                progress(i, len(clusters))
            # the caller's progress reaches each search, so a time cap stops inside one as well
            inner = (lambda _d, _t, i=i: progress(i, len(clusters))) if progress else None
            rows.append(_hardware_row((spec, request), cl, inner))
    return ClusterComparison(tuple(rank_rows(rows, request.objective)), request.objective)


def _hardware_row(ctx: tuple[ModelSpec, PlanRequest], cl: Cluster,
                  progress: Progress | None = None) -> ClusterRow:
    """The best plan on one cluster, as a row of ``compare_clusters``."""
    spec, request = ctx
    res = run_plan(spec, cl, request, progress)
    return ClusterRow(cl.accelerator.id, cl.name, cl.devices,
                       res.plans[0] if res.plans else None, unpublished(cl.accelerator))


@dataclass(frozen=True)
class DeadlineSearch:
    """The node counts tried (devices, time to train, best plan) and the first that met the
    deadline, or None."""

    model: str
    base: Cluster
    deadline_s: float
    tokens: float
    tried: tuple[dict[str, Any], ...]
    found: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "deadline_s": self.deadline_s, "tokens": self.tokens,
                "found": self.found, "tried": list(self.tried)}


def time_floor_s(spec: ModelSpec, devices: int, request: PlanRequest,
                 accelerator: Any) -> float | None:
    """The least time ``devices`` of ``accelerator`` can train ``request.tokens`` in: the
    model FLOPs (6N + attention per token, models/flops.py; a fine-tune's forward only, a
    bound for any adapter recipe) at the part's best dense 16- or 8-bit peak, every device
    busy all the time. No plan beats it, so a deadline it misses is refused before any
    search. None where the part publishes neither peak."""
    peaks = [p for p in (accelerator.peak(DType.BF16), accelerator.peak(DType.FP16),
                         accelerator.peak(DType.FP8)) if p]
    if not peaks:
        return None
    per_token = (forward_flops_per_token(spec, request.seq) if request.finetune is not None
                 else training_flops_per_token(spec, request.seq))
    return float(request.tokens * per_token / (devices * max(peaks)))


def first_possible_nodes(spec: ModelSpec, base: Cluster, request: PlanRequest) -> int:
    """The smallest power-of-two node count (up to ``MAX_DEADLINE_NODES``) whose time floor
    (``time_floor_s``) meets the deadline; an InputError, with the floor, where even the
    largest misses it."""
    seconds = request.deadline_s or 0.0
    nodes = 1
    while nodes <= MAX_DEADLINE_NODES:
        floor = time_floor_s(spec, nodes * base.devices_per_node, request, base.accelerator)
        if floor is None or floor <= seconds:
            return nodes
        nodes *= 2
    most = MAX_DEADLINE_NODES * base.devices_per_node
    floor = time_floor_s(spec, most, request, base.accelerator) or 0.0
    raise InputError(
        f"--deadline {format_quantity(seconds, Dimension.TIME)} cannot be met: "
        f"{request.tokens:.3g} tokens of {spec.id} take at least "
        f"{format_quantity(floor, Dimension.TIME)} on {most:,} {base.accelerator.id} "
        f"({MAX_DEADLINE_NODES} nodes, every one at its dense peak); give a later deadline "
        "or fewer --tokens")


def deadline_search(spec: ModelSpec, base: Cluster, request: PlanRequest,
                    progress: Progress | None = None) -> DeadlineSearch:
    """The smallest power-of-two count of ``base``'s nodes (1 to ``MAX_DEADLINE_NODES``) whose
    best plan trains ``request.tokens`` within ``request.deadline_s``; ``progress`` counts
    the node counts tried."""
    seconds = request.deadline_s
    if seconds is None or not (request.train and request.tokens):
        raise InputError("--deadline needs --train and --tokens (what must be trained by when)")
    nodes = first_possible_nodes(spec, base, request)
    tried: list[dict[str, Any]] = []
    found = None
    best_t = math.inf
    while nodes <= MAX_DEADLINE_NODES:
        if progress:
            progress(len(tried), MAX_DEADLINE_NODES.bit_length())
        cl = Cluster(f"{nodes} x {base.devices_per_node} x {base.accelerator.id}",
                     base.accelerator, base.devices_per_node, nodes, base.tiers, None,
                     base.origin)
        r = run_plan(spec, cl, request)
        best = r.plans[0] if r.plans else None
        t = getattr(best.figures, "time_to_train_s", None) if best else None
        tried.append({"devices": cl.devices, "time_to_train_s": t,
                      "plan": best.to_dict() if best else None})
        if t is not None and t <= seconds:
            found = tried[-1]
            break
        if t is not None and t >= best_t:
            break  # doubling no longer shortens training (the global batch caps dp): stop
        best_t = min(best_t, t if t is not None else math.inf)
        nodes *= 2
    return DeadlineSearch(spec.id, base, seconds, request.tokens, tuple(tried), found)
