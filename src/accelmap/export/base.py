"""Exporters turn a plan into launchable framework configs.

An exporter is registered by name, states the framework version it targets and a link to the
documentation its keys come from, and returns the files it writes, the launch command, the
plan fields its framework cannot express (never silently dropped) and notes on values it chose
where the plan is silent. A plan whose files would be wrong (a LoRA fine-tune for a framework
without adapters) is refused with one InputError line. Each exporter also reads its own output
back (:class:`ReadBack`: a typed Mapping, serving choices, cluster shape, adapters), so round
trips can be tested.

The plan side is :class:`PlanJob`: what the job is (:class:`Job`: model, cluster, sequence, batch,
precision; the ``job`` block of ``accelmap plan --json``) plus the chosen plan as typed values, a
:class:`~accelmap.mapping.plan.Mapping` and, for serving, a
:class:`~accelmap.search.result.ServingChoice`. Exporters read those values
(``job.mapping.tp``, ``job.mapping.replicas``, ``job.serving.kv_dtype`` ...); the JSON is parsed
once, here, with one InputError line for anything malformed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from accelmap.cost.framework import Framework
from accelmap.cost.schedules import Schedule
from accelmap.engine.plan import (
    Plan,
    PlanKind,
    ServingChoice,
    json_kind,
    plan_mapping_dict,
    read_plan_mapping,
)
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget, Recompute

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}")

E = TypeVar("E", bound=Enum)

__all__ = [
    "NEUTRAL",
    "ExportResult",
    "Exporter",
    "Job",
    "PlanJob",
    "PlanKind",
    "ReadBack",
    "ServingChoice",
    "load_plan_file",
    "plan_fields",
    "register",
    "registered",
    "training_mapping",
]


@dataclass(frozen=True)
class Job:
    """What runs where: the ``job`` block of ``accelmap plan --json``."""

    kind: PlanKind
    model: str  # catalog model id
    accelerator: str
    devices_per_node: int
    nodes: int
    seq_len: int = 4096  # training sequence or serving max model length
    global_batch: int = 1  # sequences per optimizer step (training)
    dtype: DType = DType.BF16
    prompt_len: int = 0
    output_len: int = 0
    framework: Framework | None = None  # the planner's framework profile
    # training: full, lora or qlora (workload.Finetune); adapters' rank and targets
    finetune: Finetune = Finetune.FULL
    lora_rank: int = 0
    lora_targets: tuple[LoraTarget, ...] = ()

    def __post_init__(self) -> None:
        # The names end up in shell scripts, TOML and YAML: a plan file from someone else must
        # not be able to smuggle a newline, a quote or $(...) into them. Catalog ids and Hub
        # repo ids use letters, digits and . _ - / + only.
        for key in ("model", "accelerator"):
            value = getattr(self, key)
            if not isinstance(value, str) or not SAFE_NAME.fullmatch(value):
                raise InputError(f"the plan job's {key}={str(value)[:80]!r} is not a catalog or "
                                 "Hub name (letters, digits and . _ - / + only)")
        # the adapters end up in JSON, YAML and command lines too: enums only
        if not isinstance(self.finetune, Finetune) or not all(
                isinstance(t, LoraTarget) for t in self.lora_targets):
            raise InputError("the plan job's finetune and lora_targets must be Finetune and "
                             "LoraTarget values")

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes

    def to_dict(self) -> dict[str, Any]:
        """The ``job`` block, keys and values as ``accelmap plan --json`` writes them."""
        out: dict[str, Any] = {"kind": self.kind.value, "model": self.model,
               "accelerator": self.accelerator,
               "devices_per_node": self.devices_per_node, "nodes": self.nodes,
               "seq_len": self.seq_len, "global_batch": self.global_batch,
               "dtype": self.dtype.value, "prompt_len": self.prompt_len,
               "output_len": self.output_len,
               "framework": self.framework.value if self.framework else ""}
        if self.finetune is not Finetune.FULL:  # full training keeps the plan file as it was
            out |= {"finetune": self.finetune.value, "lora_rank": self.lora_rank,
                    "lora_targets": [t.value for t in self.lora_targets]}
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Job:
        """A Job from its JSON block; one InputError line for a missing or malformed field."""
        if not isinstance(data, dict):
            raise InputError(f"the plan job is not a JSON object (got {json_kind(data)})")
        for key in ("kind", "model", "accelerator", "devices_per_node", "nodes"):
            if key not in data:
                raise InputError(f"the plan job has no {key}")
        kind = _enum(PlanKind, data["kind"], "kind")
        for key in ("model", "accelerator"):
            if not isinstance(data[key], str) or not data[key]:
                raise InputError(f"the plan job's {key}={data[key]!r} is not a name")
        values: dict[str, Any] = {"kind": kind, "model": data["model"],
                                  "accelerator": data["accelerator"]}
        for key, least in (("devices_per_node", 1), ("nodes", 1), ("seq_len", 1),
                           ("global_batch", 1), ("prompt_len", 0), ("output_len", 0)):
            if key in data:
                values[key] = _count(data, key, least)
        if "dtype" in data:
            values["dtype"] = _enum(DType, data["dtype"], "dtype")
        if data.get("framework"):  # "" = none named
            values["framework"] = _enum(Framework, data["framework"], "framework")
        if data.get("finetune"):
            values["finetune"] = _enum(Finetune, data["finetune"], "finetune")
        if "lora_rank" in data:
            values["lora_rank"] = _count(data, "lora_rank", 0)
        if data.get("lora_targets"):
            targets = data["lora_targets"]
            if not isinstance(targets, list):
                raise InputError("the plan job's lora_targets is not a list of names")
            values["lora_targets"] = tuple(_enum(LoraTarget, t, "lora_targets")
                                           for t in targets)
        if values.get("finetune", Finetune.FULL) is not Finetune.FULL and (
                values.get("lora_rank", 0) < 1 or not values.get("lora_targets")):
            raise InputError("a lora/qlora plan job needs lora_rank >= 1 and lora_targets")
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class PlanJob(Job):
    """One plan of a job: the Job plus the typed mapping (and serving choices) to export."""

    mapping: Mapping
    serving: ServingChoice | None = None  # serving plans: batch per replica, weight/KV dtype

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.mapping.is_scalar:
            raise InputError("a plan to export holds one mapping, not a table of candidates")
        if self.kind is PlanKind.TRAIN:
            # an exported training plan states its recompute policy: one left open is none
            # (the job holds no workload wish to settle it against)
            object.__setattr__(self, "mapping", self.mapping.with_recompute(None))
        if (self.serving is None) != (self.kind is PlanKind.TRAIN):
            raise InputError(f"a {self.kind.value} plan "
                             + ("needs its serving choices (batch, weight and KV dtype)"
                                if self.kind is PlanKind.SERVE else "has no serving choices"))

    @classmethod
    def of(cls, job: Job, plan: Plan) -> PlanJob:
        """The job with one of its search's plans."""
        return cls(**_job_fields(job), mapping=plan.mapping, serving=plan.serving)

    @property
    def job(self) -> Job:
        return Job(**_job_fields(self))

    def mapping_dict(self) -> dict[str, Any]:
        """The plan's ``mapping`` object as ``accelmap plan --json`` writes it."""
        return plan_mapping_dict(self.mapping, self.serving)

    def to_dict(self) -> dict[str, Any]:
        block = self.job.to_dict()
        head = {k: block.pop(k) for k in ("kind", "model", "accelerator", "devices_per_node",
                                          "nodes")}
        return {**head, "mapping": self.mapping_dict(), **block}

    @classmethod
    def from_dict(cls, data: Any) -> PlanJob:
        """A PlanJob from a job block with its plan's ``mapping`` object (``to_dict``'s form):
        each field read with its own message, then the whole block checked against the plan
        file's pydantic schema (export/schema.py: strict types, ranges, no unknown job key)
        before any exporter sees it."""
        from accelmap.export.schema import check_plan_job

        job = Job.from_dict(data)
        if "mapping" not in data:
            raise InputError("the plan job has no mapping")
        mapping, serving = read_plan_mapping(data["mapping"], job.kind)
        check_plan_job(data)
        return cls(**_job_fields(job), mapping=mapping, serving=serving)


def _job_fields(job: Job) -> dict[str, Any]:
    return {f.name: getattr(job, f.name) for f in fields(Job)}


MAX_COUNT = 10**9  # any count in a plan file (devices, tokens, sequences)


def _count(data: dict[str, Any], key: str, least: int) -> int:
    v = data[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise InputError(f"the plan job's {key}={v!r} is not a whole number >= {least}")
    if v > MAX_COUNT:
        raise InputError(f"the plan job's {key}={v!r} is more than {MAX_COUNT:,}")
    return v


def _enum(enum: type[E], value: Any, key: str) -> E:
    try:
        return enum(value)
    except (TypeError, ValueError):
        raise InputError(f"the plan job's {key}={value!r} is not one of "
                         f"{', '.join(str(e.value) for e in enum)}") from None


def training_mapping(*, dp: int, tp: int, pp: int, cp: int, ep: int, zero: int,
                     micro_batch: int, virtual_stages: int, recompute: Recompute | str,
                     offload_optimizer: bool, offload_params: bool,
                     sequence_parallel: bool = True) -> Mapping:
    """A training Mapping read back from a framework's files, built as a plan file's mapping is
    (``Mapping.from_dict``: the interleaved schedule with virtual stages, CPU offload)."""
    return Mapping(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, zero=ZeroStage(zero),
                   micro_batch=micro_batch, virtual_stages=virtual_stages,
                   schedule=Schedule.INTERLEAVED if virtual_stages > 1 else Schedule.ONE_F_ONE_B,
                   recompute=Recompute(recompute), sequence_parallel=sequence_parallel,
                   offload_optimizer=Offload.CPU if offload_optimizer else Offload.NONE,
                   offload_params=Offload.CPU if offload_params else Offload.NONE)


@dataclass(frozen=True)
class ReadBack:
    """What an exporter's files say, read back: the plan they express (a typed Mapping and, for
    serving, the ServingChoice), the cluster shape they launch on and, for a LoRA/QLoRA
    fine-tune, the adapters they set up; None where they are silent."""

    mapping: Mapping | None = None
    serving: ServingChoice | None = None
    nodes: int | None = None
    devices_per_node: int | None = None
    finetune: Finetune | None = None
    lora_rank: int | None = None
    lora_targets: frozenset[LoraTarget] | None = None  # the projections that get adapters


@dataclass(frozen=True)
class ExportResult:
    files: dict[str, str]  # file name -> contents
    launch: str  # the command line that starts the job
    unsupported: list[str] = field(default_factory=list)  # plan fields the framework lacks
    # what a user should know that is not a missing plan field: values the plan does not set
    # and the exporter chose (PEFT's default lora_alpha ...), and how to use the files
    notes: list[str] = field(default_factory=list)


# The fields of a plan each exporter must handle: the plan file's keys (export/schema.py's
# job block and the mapping keys of search/result.py) of its kind. The other kind's keys are
# written in every plan file but unused: a training plan's prompt/output lengths, a serving
# plan's global batch and adapters.
OTHER_KIND_FIELDS = {PlanKind.TRAIN: ("prompt_len", "output_len"),
                     PlanKind.SERVE: ("global_batch", "finetune", "lora_rank", "lora_targets")}


def plan_fields(kind: PlanKind) -> tuple[str, ...]:
    """Every field of a plan of ``kind`` an exporter must express or list in ``not_exported``
    (tests/export/test_every_field_exported.py checks each exporter against it)."""
    from accelmap.engine.plan import (
        OPTIONAL_SERVE_KEYS,
        OPTIONAL_TRAIN_KEYS,
        SERVE_MAPPING_KEYS,
        TRAIN_MAPPING_KEYS,
    )
    from accelmap.export.schema import PlanJobSchema

    job = [k for k in PlanJobSchema.model_fields if k not in ("kind", "mapping")]
    mapping = (TRAIN_MAPPING_KEYS + OPTIONAL_TRAIN_KEYS if kind is PlanKind.TRAIN
               else SERVE_MAPPING_KEYS + OPTIONAL_SERVE_KEYS)
    return tuple(k for k in (*job, *mapping) if k not in OTHER_KIND_FIELDS[kind])


# Reasons several exporters share (their NOT_EXPORTED dicts)
FRAMEWORK_REASON = ("the plan was priced with this stack's profile (cost/framework.py: kernel "
                    "overheads, overlap, fusion); under the exported framework the time differs")
ACCELERATOR_REASON = ("the files name no device: they run on the accelerators of the nodes "
                      "they are launched on")
MODEL_REASON = "the config holds no model: the training script builds it"
SEQ_REASON = "the config holds no sequence length: the data loader sets it"
PIPE_REASON = ("DeepSpeed's PipelineModule runs one 1F1B schedule with one stage per rank and "
               "partitions layers itself (partition_method); no virtual stages or hand splits")
SPLIT_REASON = ("the export splits layers evenly over the stages; an uneven split (layers on "
                "the first/last stage, embedding or loss counted) must be set by hand")
CP_COMM_REASON = ("the framework's context parallelism exchanges K and V its own way (a ring, or "
                  "PyTorch's all-gather overlapped with the local chunk); Llama 3's exposed "
                  "all-gather (cp_comm=allgather) is Megatron-Core's --cp-comm-type allgather")
ACT_OFFLOAD_REASON = ("the framework keeps every layer's saved activations on the device; "
                      "Megatron-Core's per-layer offload to host memory (offload_activations, "
                      "--cpu-offloading-num-layers) has no key here, and without it the plan's "
                      "activations need that much more device memory")
SERVE_LEN_REASON = ("the serving files size the context from prompt_len + output_len (a "
                    "serving plan's seq_len is their sum)")

# A not-exported field is said on each export where its value is not this (a field absent
# here, such as the accelerator, is only declared: the files run where they are launched).
NEUTRAL: dict[str, Any] = {"cp": 1, "ep": 1, "pp": 1, "vpp": 1, "zero": 0, "micro_batch": 1,
                            "recompute": "none", "offload": False, "finetune": "full",
                            "lora_rank": 0, "lora_targets": [], "max_batched_tokens": None,
                            "schedule": None, "first_stage_layers": None,
                            "last_stage_layers": None, "embedding_in_split": None,
                            "loss_in_split": None, "shard_group": None,
                            "tp_comm_overlap": None, "cp_comm": None,
                            "offload_activations": None, "dtype": "bf16",
                            "kv_dtype": "bf16", "weight_dtype": "bf16"}


@dataclass(frozen=True)
class Exporter:
    name: str
    framework: str
    version: str  # the framework version whose documented keys are used
    url: str
    kinds: tuple[PlanKind, ...]
    export: Callable[[PlanJob, Any], ExportResult]  # (job, ModelSpec) -> files
    read_back: Callable[[dict[str, str]], ReadBack]  # files -> the plan they express
    # plan fields (``plan_fields``) the framework has no key for -> why; each is said in the
    # result's ``unsupported`` lines where the plan sets it (``run``)
    not_exported: dict[str, str] = field(default_factory=dict)

    def run(self, job: PlanJob, spec: Any) -> ExportResult:
        """``export``, with a line in ``unsupported`` for every field of the plan in
        ``not_exported`` that the plan sets (its value is not the neutral one) and that the
        exporter did not already name; the job's framework when it is another stack's."""
        res = self.export(job, spec)
        values = {**job.job.to_dict(), **job.mapping_dict()}
        said = list(res.unsupported)
        todo: dict[str, list[str]] = {}  # reason -> the fields it covers, said in one line
        for key in plan_fields(job.kind):
            why = self.not_exported.get(key)
            if why is None or key not in NEUTRAL or _names(said, key):
                continue
            value = values.get(key)
            if value is not None and value != NEUTRAL[key]:
                todo.setdefault(why, []).append(f"{key}={_show(value)}")
        fw = job.framework.value if job.framework else ""
        if fw and fw != self.name and "framework" in self.not_exported and not _names(
                said, "framework"):
            todo.setdefault(self.not_exported["framework"], []).append(f"framework={fw}")
        said += [f"{', '.join(keys)}: {why}" for why, keys in todo.items()]
        return replace(res, unsupported=said)


def _names(lines: list[str], key: str) -> bool:
    """Whether a line already names ``key`` as ``key=value`` (at its start or after a space,
    comma or bracket)."""
    pattern = re.compile(rf"(^|[\s,(]){re.escape(key)}=")
    return any(pattern.search(line) for line in lines)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


_REGISTRY: dict[str, Exporter] = {}


def register(exporter: Exporter) -> Exporter:
    if exporter.name in _REGISTRY:
        raise RuntimeError(f"two exporters named {exporter.name!r}")
    _REGISTRY[exporter.name] = exporter
    return exporter


def registered() -> dict[str, Exporter]:
    """The exporters registered so far, by name; ``export.registry.exporters`` imports every
    format first (the formats import this module, so this module never imports them)."""
    return dict(sorted(_REGISTRY.items()))


def load_plan_file(path: Path, index: int = 0) -> PlanJob:
    """A PlanJob from `accelmap plan --json` output (or a bare job object)."""
    from accelmap.files import load_json

    data = load_json(path, "plan file")
    try:
        if isinstance(data, dict) and "job" in data and "plans" in data:
            plans = data["plans"]
            if not isinstance(plans, list) or not plans:
                raise InputError("the plan file holds no feasible plan to export")
            if not 0 <= index < len(plans):
                raise InputError(f"plan index {index} out of range (0-{len(plans) - 1})")
            job, plan = data["job"], plans[index]
            if not (isinstance(job, dict) and isinstance(plan, dict) and "mapping" in plan):
                raise InputError(f"plan {index}: expected a job object and plans with a mapping, "
                                 "as `accelmap plan --json` writes them")
            try:
                return PlanJob.from_dict({**job, "mapping": plan["mapping"]})
            except InputError as e:
                raise InputError(f"plan {index}: {e}") from None
        if isinstance(data, dict) and "mapping" in data and "kind" in data:
            return PlanJob.from_dict(data)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    raise InputError(f"{path}: expected the JSON of `accelmap plan --json`")


def public_recompute(m: Mapping, stack: str, unsupported: list[str]) -> Mapping:
    """The mapping as a public stack can run it: DeepSeek-V3's recompute of the norms and
    up-projections (Recompute.NORM_UP, HAI-LLM's) is no option of theirs, so it is exported as
    their attention-only selective recompute (more activation memory than planned), said in
    ``unsupported``."""
    if m.policy is not Recompute.NORM_UP:
        return m
    unsupported.append(f"recompute={m.policy.value}: DeepSeek-V3's recompute of the norms and "
                       f"up-projections is no {stack} option; exported as selective (more "
                       "activation memory than planned)")
    return m.with_(recompute=Recompute.SELECTIVE)
