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

from accelmap.api.parse import choice, count, duration, sequences_per_step
from accelmap.api.parse import framework as parse_framework
from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster, parse_cluster
from accelmap.search.clusters import (
    RANK_BASIS,
    ClusterComparison,
    ClusterRow,
    compare_clusters,
    rank_rows,
)
from accelmap.search.deadline import (
    MAX_DEADLINE_NODES,
    DeadlineSearch,
    deadline_search,
    first_possible_nodes,
    time_floor_s,
)
from accelmap.search.result import Objective, Plan, PlanResult
from accelmap.search.run import PlanRequest, Progress, finetune_fields, plan_job, run_plan
from accelmap.serving.metrics import Slo
from accelmap.serving.scenario import Load, Scenario
from accelmap.workload import Adapters

# the request, its run, the comparison of clusters and the deadline search live in search/
# (search/run.py, clusters.py, deadline.py); this module parses text into them
__all__ = ["MAX_DEADLINE_NODES", "RANK_BASIS", "ClusterComparison", "ClusterRow",
           "DeadlineSearch", "Plan", "PlanRequest", "PlanResult", "Progress", "check_profile",
           "compare_clusters", "deadline_search", "finetune_fields", "first_possible_nodes",
           "plan_clusters", "plan_job", "plan_request", "rank_rows", "run_plan", "time_floor_s"]


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
