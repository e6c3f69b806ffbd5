"""The plan file's schema: what `accelmap plan --json` writes in a plan's ``job`` block and its
``mapping``, checked by pydantic before any exporter reads a value. Names are catalog or Hub
names (letters, digits and . _ - / + only), counts are real integers in range (``true`` is not
a count, ``8.0`` or ``"8"`` are not either), enumerations are their values, and an unknown
job key is an error, so a plan file from someone else can carry nothing an exporter would
write verbatim. ``base.Job.from_dict`` then builds the typed values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from accelmap.cost.framework import Framework
from accelmap.errors import InputError
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget

NAME = r"^[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}$"
MAX_DEVICES = 10_000_000  # more devices than any cluster built
MAX_COUNT = 1_000_000_000  # tokens, sequences

Name = Annotated[str, Field(pattern=NAME, max_length=200)]
Devices = Annotated[StrictInt, Field(ge=1, le=MAX_DEVICES)]
Count = Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)]
Length = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]
Short = Annotated[str, Field(max_length=40)]
# enumerations as the plan file spells them: a Literal of the enums' values at run time (the
# type checker sees plain strings)
if TYPE_CHECKING:
    DTypeName: TypeAlias = str
    FrameworkName: TypeAlias = str
    FinetuneName: TypeAlias = str
    TargetName: TypeAlias = str
else:
    DTypeName = Literal[tuple(d.value for d in DType)]
    FrameworkName = Literal[("", *(f.value for f in Framework))]
    FinetuneName = Literal[tuple(f.value for f in Finetune)]
    TargetName = Literal[tuple(t.value for t in LoraTarget)]


class _Mapping(BaseModel):
    """The mapping keys a plan writes (others are read by ``read_plan_mapping``, which names
    any it does not know)."""

    model_config = ConfigDict(extra="allow")

    dp: Devices | None = None
    tp: Devices | None = None
    pp: Devices | None = None
    cp: Devices | None = None
    ep: Devices | None = None
    expert_tp: Devices | None = None
    replicas: Devices | None = None
    zero: Annotated[StrictInt, Field(ge=0, le=3)] | None = None
    shard_group: Devices | None = None
    micro_batch: Count | None = None
    vpp: Annotated[StrictInt, Field(ge=1, le=1024)] | None = None
    batch: Count | None = None
    recompute: Short | None = None
    schedule: Short | None = None
    weight_dtype: Short | None = None
    kv_dtype: Short | None = None
    offload: StrictBool | Short | None = None
    sequence_parallel: StrictBool | None = None
    tp_comm_overlap: StrictBool | None = None
    cp_comm: Short | None = None
    offload_activations: Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)] | None = None


class PlanJobSchema(BaseModel):
    """One plan of a plan file: the ``job`` block with its plan's ``mapping``."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["train", "serve"]
    model: Name
    accelerator: Name
    devices_per_node: Devices
    nodes: Devices
    seq_len: Count | None = None
    global_batch: Count | None = None
    dtype: DTypeName | None = None
    prompt_len: Length | None = None
    output_len: Length | None = None
    framework: FrameworkName | None = None
    finetune: FinetuneName | None = None
    lora_rank: Annotated[StrictInt, Field(ge=0, le=65536)] | None = None
    lora_targets: Annotated[list[TargetName], Field(max_length=len(LoraTarget))] | None = None
    mapping: _Mapping


def check_plan_job(data: Any) -> None:
    """Validate a job block with its mapping against the schema: one InputError line naming
    the first field that breaks it."""
    if not isinstance(data, dict):
        return  # Job.from_dict says what it got
    try:
        PlanJobSchema.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "job"
        got = repr(err.get("input"))[:60]
        raise InputError(f"plan job field {where}: {err['msg'].lower()} (got {got})") from None
