"""A plan: a typed :class:`~accelmap.mapping.plan.Mapping` with the cluster it runs on and its
figures, and, for serving, the :class:`ServingChoice` (batch per replica, weight and KV precision).
Searches produce plans (``search``), exporters consume them (``export``); both read this module,
one layer below them. Their JSON form, the ``mapping`` object of ``accelmap plan --json``, is
written by :meth:`Plan.mapping_dict` and read back, strictly, by :func:`read_plan_mapping`:

- training: ``dp tp pp cp ep zero micro_batch vpp recompute offload`` (``Mapping.to_dict``);
- serving: ``tp pp ep replicas`` (``Mapping.to_serving_dict``) then ``batch weight_dtype
  kv_dtype`` and, for plans of the offline/server scenarios, ``max_batched_tokens``
  (``ServingChoice.to_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum, StrEnum
from typing import Any, TypeVar

from accelmap.cost.schedules import Schedule
from accelmap.engine.result import plain
from accelmap.errors import InputError
from accelmap.mapping.plan import CpComm, Mapping, ZeroStage
from accelmap.units import DType
from accelmap.workload import Recompute

E = TypeVar("E", bound=Enum)


class PlanKind(StrEnum):
    TRAIN = "train"
    SERVE = "serve"


@dataclass(frozen=True)
class ServingChoice:
    """What a serving plan chooses besides the mapping: requests in flight per replica and the
    precision of the weights and of the KV cache; plans of the offline/server scenarios also
    carry the scheduler's token budget per iteration (``max_tokens``), and their ``batch`` is
    the scheduler's cap on running requests (the scheduler picks the batch under it)."""

    batch: int  # concurrent sequences per replica (vLLM --max-num-seqs)
    weight_dtype: DType
    kv_dtype: DType
    max_tokens: int | None = None  # tokens per iteration (vLLM --max-num-batched-tokens)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batch": self.batch, "weight_dtype": self.weight_dtype.value,
                               "kv_dtype": self.kv_dtype.value}
        if self.max_tokens is not None:
            out["max_batched_tokens"] = self.max_tokens
        return out


@dataclass(frozen=True)
class PlanFigures:
    """What every plan row reports, under the keys an estimate uses for the same figure
    (``engine/result.py``; money and energy as ``cost/per_token.py`` defines them): the
    throughput of the whole cluster and per device, one device's memory and whether it fits
    (``memory_fit``: fits / tight), $ per million tokens at the catalog's rent, the TDP bound
    on J per token, and the expected error of the throughput (``engine/error_band.py``)."""

    tokens_per_s: float
    tokens_per_s_per_device: float
    memory_per_device_bytes: float
    memory_fit: str
    usd_per_million_tokens: float | None
    energy_j_per_token_tdp: float | None
    error_band: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON figures of ``accelmap plan --json`` (numpy values as plain numbers)."""
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class TrainPlanFigures(PlanFigures):
    """A training plan: MFU and step time; with tokens to train, the time, rent and TDP-bound
    energy of the whole run."""

    mfu: float = 0.0
    step_time_s: float = 0.0
    time_to_train_s: float | None = None
    cost_to_train_usd: float | None = None
    energy_to_train_j: float | None = None


@dataclass(frozen=True)
class ServePlanFigures(PlanFigures):
    """A serving plan of the batch scenario: one fixed batch per replica, its TTFT and TPOT
    (``engine/serve.py``), the replicas and the precisions."""

    ttft_s: float = 0.0
    tpot_s: float = 0.0
    latency_error_band: dict[str, Any] | None = None
    batch: int = 1
    replicas: int = 1
    memory_capacity_bytes: float = 0.0
    weight_dtype: str = ""
    kv_dtype: str = ""


@dataclass(frozen=True)
class ScenarioPlanFigures(PlanFigures):
    """A serving plan of the offline / server / concurrency scenarios, simulated request by
    request (``serving/scenario.py``): the latency distributions (p50/p90/p99, seconds) and
    their p99s, goodput and SLO attainment, the scheduler's caps and what the simulation saw,
    and the screen that chose it (``search/serve_scenario.py``)."""

    scenario: str = ""
    total_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    goodput_requests_per_s: float = 0.0
    slo_attainment: float = 0.0
    slo: dict[str, Any] | None = None
    ttft_s: dict[str, float] | None = None
    tpot_s: dict[str, float] | None = None
    itl_s: dict[str, float] | None = None
    e2e_s: dict[str, float] | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    kv_capacity_tokens: float = 0.0
    peak_running: int = 0
    mean_running: float = 0.0
    preemptions: int = 0
    max_seqs: int = 0
    max_batched_tokens: int = 0
    replicas: int = 1
    memory_capacity_bytes: float = 0.0
    latency_error_band: dict[str, Any] | None = None
    simulated_s: float = 0.0
    weight_dtype: str = ""
    kv_dtype: str = ""
    screen_tokens_per_s: float | None = None
    screen_batch: int | None = None
    batch_ttft_s: float | None = None


AnyPlanFigures = TrainPlanFigures | ServePlanFigures | ScenarioPlanFigures


@dataclass(frozen=True)
class Plan:
    mapping: Mapping
    cluster: str
    accelerator: str
    devices: int
    feasible: bool
    figures: AnyPlanFigures
    reason: str | None = None
    serving: ServingChoice | None = None  # serving plans only

    @property
    def kind(self) -> PlanKind:
        return PlanKind.TRAIN if self.serving is None else PlanKind.SERVE

    @property
    def metrics(self) -> dict[str, Any]:
        """The figures by key, as ``accelmap plan --json`` writes them."""
        return self.figures.to_dict()

    def mapping_dict(self) -> dict[str, Any]:
        """The ``mapping`` object of ``accelmap plan --json``."""
        return plan_mapping_dict(self.mapping, self.serving)

    def to_dict(self) -> dict[str, Any]:
        return {"mapping": self.mapping_dict(), "cluster": self.cluster,
                "accelerator": self.accelerator, "devices": self.devices,
                "feasible": self.feasible, "reason": self.reason, **self.metrics}


TRAIN_MAPPING_KEYS = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "vpp", "recompute",
                      "offload")
SERVE_MAPPING_KEYS = ("tp", "pp", "ep", "replicas", "batch", "weight_dtype", "kv_dtype")
OPTIONAL_SERVE_KEYS = ("max_batched_tokens",)  # offline/server scenario plans
# written only when they differ from the default (Mapping.to_dict)
OPTIONAL_TRAIN_KEYS = ("schedule", "first_stage_layers", "last_stage_layers",
                       "embedding_in_split", "loss_in_split", "shard_group", "tp_comm_overlap",
                       "cp_comm", "offload_activations")


def plan_mapping_dict(mapping: Mapping, serving: ServingChoice | None) -> dict[str, Any]:
    """The JSON ``mapping`` object of a training plan (``serving`` None) or a serving plan."""
    if serving is None:
        return mapping.to_dict()
    return {**mapping.to_serving_dict(), **serving.to_dict()}


MAX_MAPPING_COUNT = 10**9  # a parallel degree, batch or token cap in a plan file


def read_plan_mapping(data: Any, kind: PlanKind) -> tuple[Mapping, ServingChoice | None]:
    """The typed mapping (and, serving, the ServingChoice) of a plan file's ``mapping`` object.

    Strict: every key ``accelmap plan --json`` writes for that kind, no other, each of its type;
    anything else is one InputError line naming the key and what it should be."""
    what = f"the {kind.value} plan's mapping"
    if not isinstance(data, dict):
        raise InputError(f"{what} is not a JSON object (got {json_kind(data)})")
    keys = TRAIN_MAPPING_KEYS if kind is PlanKind.TRAIN else SERVE_MAPPING_KEYS
    optional = OPTIONAL_TRAIN_KEYS if kind is PlanKind.TRAIN else OPTIONAL_SERVE_KEYS
    missing = [k for k in keys if k not in data]
    unknown = sorted(str(k) for k in data if k not in keys and k not in optional)
    if missing or unknown:
        problem = (f"has no {', '.join(missing)}" if missing
                   else f"has unknown key(s) {', '.join(unknown)}")
        raise InputError(f"{what} {problem}; it takes {', '.join(keys)}")
    floor = {"zero": 0}
    for key in (*keys, *(k for k in OPTIONAL_SERVE_KEYS if k in data)):
        if key in ("recompute", "offload", "weight_dtype", "kv_dtype"):
            continue
        v = data[key]
        if (isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer()
                or v < floor.get(key, 1)):
            raise InputError(f"{what}: {key}={v!r} is not a whole number >= "
                             f"{floor.get(key, 1)}")
        if v > MAX_MAPPING_COUNT:
            raise InputError(f"{what}: {key}={v!r} is more than {MAX_MAPPING_COUNT:,}")
    if kind is PlanKind.SERVE:
        tokens = data.get("max_batched_tokens")
        serving = ServingChoice(int(data["batch"]), _choice(DType, data, "weight_dtype", what),
                                _choice(DType, data, "kv_dtype", what),
                                None if tokens is None else int(tokens))
        return Mapping.serving(int(data["tp"]), int(data["pp"]), int(data["ep"]),
                               int(data["replicas"])), serving
    if data["zero"] not in tuple(ZeroStage):
        raise InputError(f"{what}: zero={data['zero']!r} is not a ZeRO stage (0, 1, 2 or 3)")
    _choice(Recompute, data, "recompute", what)
    if not isinstance(data["offload"], bool):
        raise InputError(f"{what}: offload={data['offload']!r} is not true or false")
    for key in ("first_stage_layers", "last_stage_layers", "shard_group"):
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"{what}: {key}={v!r} is not a whole number >= 1")
        if v is not None and v > MAX_MAPPING_COUNT:
            raise InputError(f"{what}: {key}={v!r} is more than {MAX_MAPPING_COUNT:,}")
    for key in ("embedding_in_split", "loss_in_split", "tp_comm_overlap"):
        if key in data and not isinstance(data[key], bool):
            raise InputError(f"{what}: {key}={data[key]!r} is not true or false")
    if "schedule" in data:
        _choice(Schedule, data, "schedule", what)
    if "cp_comm" in data:
        _choice(CpComm, data, "cp_comm", what)
    return Mapping.from_dict(data), None


def json_kind(value: Any) -> str:
    """What a JSON value is, for error sentences ("an array", "a string" ...)."""
    return {dict: "an object", list: "an array", str: "a string", bool: "true or false",
            type(None): "null"}.get(type(value), "a number")


def _choice(enum: type[E], data: dict[str, Any], key: str, what: str) -> E:
    try:
        return enum(data[key])
    except (TypeError, ValueError):
        raise InputError(f"{what}: {key}={data[key]!r} is not one of "
                         f"{', '.join(str(e.value) for e in enum)}") from None
