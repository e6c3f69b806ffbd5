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

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, TypeVar

from accelmap.cost.schedules import Schedule
from accelmap.engine.result import plain
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping, ZeroStage
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
class Plan:
    mapping: Mapping
    cluster: str
    accelerator: str
    devices: int
    feasible: bool
    metrics: dict[str, Any]
    reason: str | None = None
    serving: ServingChoice | None = None  # serving plans only

    @property
    def kind(self) -> PlanKind:
        return PlanKind.TRAIN if self.serving is None else PlanKind.SERVE

    def mapping_dict(self) -> dict[str, Any]:
        """The ``mapping`` object of ``accelmap plan --json``."""
        return plan_mapping_dict(self.mapping, self.serving)

    def to_dict(self) -> dict[str, Any]:
        return {"mapping": self.mapping_dict(), "cluster": self.cluster,
                "accelerator": self.accelerator, "devices": self.devices,
                "feasible": self.feasible, "reason": self.reason,
                **{k: plain(v) for k, v in self.metrics.items()}}


TRAIN_MAPPING_KEYS = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "vpp", "recompute",
                      "offload")
SERVE_MAPPING_KEYS = ("tp", "pp", "ep", "replicas", "batch", "weight_dtype", "kv_dtype")
OPTIONAL_SERVE_KEYS = ("max_batched_tokens",)  # offline/server scenario plans
# written only when they differ from the default (Mapping.to_dict)
OPTIONAL_TRAIN_KEYS = ("schedule", "first_stage_layers", "last_stage_layers",
                       "embedding_in_split", "loss_in_split", "shard_group", "tp_comm_overlap")


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
