"""Mapping: how the model and the batch are split over devices and links. One value for
training and serving, for one mapping and for the planner's table of candidates.

In the spirit of torchtitan's ``ParallelDims`` (torchtitan/distributed/parallel_dims.py): the
degrees are validated once, and everything derived from them -- data-parallel degree from the
world size, world size, ZeRO shard group, expert groups, rank order -- is worked out here and
nowhere else.

Training: dp x tp x pp x cp devices (world size). Expert parallelism is carved out of the
dense ranks as in Megatron-Core (``initialize_model_parallel``): each expert layer runs on
etp x ep x edp = tp x cp x dp ranks of a stage, where etp (tensor parallelism inside an expert)
is tp by default (Megatron-Core's ``--expert-tensor-parallel-size`` default). ZeRO stage 0-3
shards over dp x cp (stage 3 = FSDP; ``shard_group`` < dp = HSDP: shard inside groups of that
size, replicate across them). Micro-batch and gradient accumulation, virtual pipeline stages and
the schedule, recompute, CPU/NVMe offload.

Serving: the same degrees; dp counts replicas, each of tp x pp devices. vLLM's expert
parallelism (``--enable-expert-parallel``) splits the tensor-parallel group itself: ep divides
tp and each expert is tensor-parallel over etp = tp / ep ranks (``Mapping.serving``).

Degrees may be ints (one mapping) or numpy arrays of equal shape (the planner's candidates):
every derived property is array-friendly, so constraints, composition and the planner take the
same value.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import IntEnum, StrEnum
from typing import Any

import numpy as np

from accelmap.cost.schedules import Schedule
from accelmap.errors import InputError
from accelmap.workload import Recompute

Num = Any  # int or numpy array


class ZeroStage(IntEnum):
    NONE = 0
    OPTIMIZER = 1  # ZeRO-1: optimizer states sharded over dp (Rajbhandari et al. 2020, sec. 5)
    GRADIENTS = 2  # ZeRO-2: + gradients
    PARAMETERS = 3  # ZeRO-3 / FSDP: + parameters (gathered per layer when used)


class Offload(StrEnum):
    NONE = "none"
    CPU = "cpu"  # ZeRO-Offload (Ren et al. 2021)
    NVME = "nvme"  # ZeRO-Infinity (Rajbhandari et al. 2021)


# Rank order, innermost first: Megatron-Core's default ``order="tp-cp-ep-dp-pp"``
# (parallel_state.initialize_model_parallel); torchtitan nests its device mesh the same way
# (pp outermost, then dp, cp, tp). Expert parallelism is carved out of cp x dp next to tp.
RANK_ORDER: tuple[str, ...] = ("tp", "cp", "dp", "pp")

_DEGREES = ("dp", "tp", "pp", "cp", "ep", "micro_batch", "virtual_stages")


@dataclass(frozen=True)
class Mapping:
    dp: Num = 1  # data-parallel ranks (training) or replicas (serving)
    tp: Num = 1
    pp: Num = 1
    cp: Num = 1
    ep: Num = 1
    etp: Num | None = None  # tensor parallelism inside an expert; None = tp (Megatron-Core)
    sequence_parallel: bool = True  # with tp > 1 (Korthikanti et al. 2022 sec. 4.2.2)
    zero: Num = ZeroStage.NONE
    shard_group: Num | None = None  # HSDP: ZeRO shards over this many dp ranks (None = all dp)
    micro_batch: Num = 1
    virtual_stages: Num = 1
    schedule: Schedule = Schedule.ONE_F_ONE_B
    recompute: Recompute = Recompute.NONE
    offload_optimizer: Offload | Num = Offload.NONE  # an Offload, or bools in a candidate table
    offload_params: Offload | Num = Offload.NONE
    tp_comm_overlap: bool = False  # Megatron --tp-comm-overlap (userbuffers)
    force_tp_across_nodes: Num = False  # allow tp beyond the scale-up domain

    def __post_init__(self) -> None:
        # Candidate tables are built by the planner and checked by mapping.constraints as
        # masks; a single mapping comes from a user and is checked here, with the fix.
        if not self.is_scalar:
            return
        for name in _DEGREES:
            v = getattr(self, name)
            if isinstance(v, bool) or not float(v).is_integer() or v < 1:
                raise InputError(f"{name}={v!r}: parallel degrees and the micro-batch are "
                                 "whole numbers >= 1")
        if int(self.zero) not in (0, 1, 2, 3):
            raise InputError(f"zero={self.zero!r}: the ZeRO stage is 0, 1, 2 or 3")
        if self.shard_group is not None and self.shard_group < 1:
            raise InputError(f"shard_group={self.shard_group!r} must be >= 1 (or left out)")
        object.__setattr__(self, "zero", ZeroStage(int(self.zero)))
        for name in _DEGREES:
            object.__setattr__(self, name, int(getattr(self, name)))

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def for_world(cls, world: int, **degrees: Any) -> Mapping:
        """A mapping whose data-parallel degree fills ``world`` devices (``dp`` left out), as
        ParallelDims derives dp_shard = -1; an InputError says what does not divide. With
        array degrees (the planner's table) dp is world / (tp x pp x cp), and the rule
        ``world_size`` of mapping.constraints masks the candidates where that is no integer."""
        if any(np.ndim(v) for v in degrees.values()):
            degrees.pop("dp", None)
            inner = (np.asarray(degrees.get("tp", 1)) * np.asarray(degrees.get("pp", 1))
                     * np.asarray(degrees.get("cp", 1)))
            return cls(dp=world / inner, **degrees)
        if degrees.get("dp") is not None:
            m = cls(**degrees)
            if m.world != world:
                raise InputError(f"dp x tp x pp x cp = {m.world} but the cluster has {world} "
                                 "devices; leave --dp out to fill the cluster")
            return m
        degrees.pop("dp", None)
        inner = int(np.prod([degrees.get(k, 1) for k in ("tp", "pp", "cp")]))
        if inner < 1 or world % inner:
            raise InputError(f"tp x pp x cp = {inner} does not divide the cluster's {world} "
                             "devices")
        return cls(dp=world // inner, **degrees)

    @classmethod
    def serving(cls, tp: int = 1, pp: int = 1, ep: int = 1, replicas: int | None = 1,
                world: int | None = None) -> Mapping:
        """A serving mapping: ``replicas`` copies of tp x pp devices (``replicas=None``: as many
        as fit in ``world`` devices); vLLM expert parallelism splits the tensor-parallel group
        (etp = tp / ep)."""
        if replicas is None:
            replicas = max((world or 1) // (tp * pp), 1)
        return cls(dp=replicas, tp=tp, pp=pp, ep=ep, etp=max(tp // max(ep, 1), 1),
                   sequence_parallel=False)

    # -- derived once -----------------------------------------------------------------------
    @property
    def is_scalar(self) -> bool:
        return all(np.ndim(getattr(self, f.name)) == 0 for f in fields(self))

    @property
    def world(self) -> Num:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def replicas(self) -> Num:
        """Serving: copies of the model, one per data-parallel rank."""
        return self.dp

    @property
    def devices_per_replica(self) -> Num:
        return self.tp * self.pp * self.cp

    @property
    def expert_tp(self) -> Num:
        return self.tp if self.etp is None else self.etp

    @property
    def zero_stage(self) -> Num:
        return np.asarray(self.zero) if not self.is_scalar else int(self.zero)

    @property
    def zero_group(self) -> Num:
        """HSDP shard group in data-parallel ranks (all of dp when not hybrid)."""
        return self.dp if self.shard_group is None else self.shard_group

    @property
    def zero_shards(self) -> Num:
        """Ranks one ZeRO shard group spans (HSDP shards inside a group, replicates across).
        Context-parallel ranks hold the same weights, so they shard too: Megatron-Core's
        distributed optimizer uses the data-parallel group with context parallel, torchtitan
        flattens dp_shard x cp into one FSDP mesh dimension."""
        return self.zero_group * self.cp

    @property
    def grad_group(self) -> Num:
        """Ranks that reduce one gradient shard: dp x cp (Megatron-Core's data-parallel group
        with context parallel)."""
        return self.dp * self.cp

    @property
    def interleaved(self) -> Num:
        return np.asarray(self.virtual_stages) > 1

    @property
    def offloads_optimizer(self) -> Num:
        return _offloaded(self.offload_optimizer)

    @property
    def offloads_params(self) -> Num:
        return _offloaded(self.offload_params)

    def micro_batches(self, global_batch: Num) -> Num:
        """Gradient-accumulation steps: the global batch over dp x micro-batch."""
        return global_batch / (self.dp * self.micro_batch)

    # -- tables -------------------------------------------------------------------------------
    def take(self, index: Any) -> Mapping:
        """The candidates at ``index`` (a mask or integer index) of a candidate table; an int
        index gives a plain, validated mapping."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = np.asarray(v)[index] if np.ndim(v) else v
        if np.ndim(index) == 0:
            out = {k: _item(v) for k, v in out.items()}
            out["zero"] = ZeroStage(int(out["zero"]))
            for key in ("offload_optimizer", "offload_params"):
                if isinstance(out[key], bool):
                    out[key] = Offload.CPU if out[key] else Offload.NONE
        return Mapping(**out)

    def with_(self, **changes: Any) -> Mapping:
        return replace(self, **changes)

    # -- text and JSON ------------------------------------------------------------------------
    def describe(self) -> str:
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}"]
        if self.cp > 1:
            parts.append(f"cp={self.cp}")
        if self.ep > 1:
            parts.append(f"ep={self.ep}")
        if self.shard_group is not None and self.shard_group != self.dp:
            parts.append(f"shard_group={self.shard_group}")
        parts.append(f"zero={int(self.zero)}")
        parts.append(f"mb={self.micro_batch}")
        if self.virtual_stages > 1:
            parts.append(f"vpp={self.virtual_stages}")
        parts.append(f"recompute={self.recompute.value}")
        if self.offloads_optimizer or self.offloads_params:
            parts.append("offload")
        return " ".join(parts)

    def describe_serving(self) -> str:
        return f"tp={self.tp} pp={self.pp} ep={self.ep} x {self.replicas} replicas"

    def to_dict(self) -> dict[str, Any]:
        """The training plan's ``mapping`` object (``accelmap plan --json``)."""
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep,
                "zero": int(self.zero), "micro_batch": self.micro_batch,
                "vpp": self.virtual_stages, "recompute": self.recompute.value,
                "offload": bool(self.offloads_optimizer or self.offloads_params)}

    def to_serving_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "replicas": self.replicas}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Mapping:
        """Inverse of ``to_dict`` and ``to_serving_dict`` (plan files, exporters)."""
        try:
            if "replicas" in data:
                return cls.serving(int(data.get("tp", 1)), int(data.get("pp", 1)),
                                   int(data.get("ep", 1)), int(data["replicas"]))
            vpp = int(data.get("vpp", data.get("virtual_stages", 1)))
            off = Offload.CPU if data.get("offload") else Offload.NONE
            return cls(dp=int(data.get("dp", 1)), tp=int(data.get("tp", 1)),
                       pp=int(data.get("pp", 1)), cp=int(data.get("cp", 1)),
                       ep=int(data.get("ep", 1)), zero=ZeroStage(int(data.get("zero", 0))),
                       micro_batch=int(data.get("micro_batch", 1)), virtual_stages=vpp,
                       schedule=Schedule.INTERLEAVED if vpp > 1 else Schedule.ONE_F_ONE_B,
                       recompute=Recompute(str(data.get("recompute", "none"))),
                       offload_optimizer=off, offload_params=off)
        except (TypeError, ValueError) as e:
            raise InputError(f"cannot read the mapping {data!r}: {e}") from None


def _offloaded(v: Any) -> Any:
    if isinstance(v, Offload):
        return v is not Offload.NONE
    return np.asarray(v, dtype=bool) if np.ndim(v) else bool(v)


def _item(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v
