"""Mapping: how the model and the batch are split over devices and links.

Training: dp x tp x pp x cp devices (world size); ep is carved out of dp x cp as in Megatron-Core
(expert-data-parallel = dp*cp/ep); ZeRO stage 0-3 over dp x cp (stage 3 = FSDP; ``shard_group`` < dp
= HSDP: shard inside groups of that size, replicate across them); micro-batch and gradient
accumulation; virtual pipeline stages and the schedule; recompute; CPU/NVMe offload.
Inference: tp x pp x ep per replica, ``replicas`` copies, the batch and quantization are in the
Inference workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

from accelmap.cost.schedules import Schedule
from accelmap.workload import Recompute


class ZeroStage(IntEnum):
    NONE = 0
    OPTIMIZER = 1  # ZeRO-1: optimizer states sharded over dp (Rajbhandari et al. 2020, sec. 5)
    GRADIENTS = 2  # ZeRO-2: + gradients
    PARAMETERS = 3  # ZeRO-3 / FSDP: + parameters (gathered per layer when used)


class Offload(StrEnum):
    NONE = "none"
    CPU = "cpu"  # ZeRO-Offload (Ren et al. 2021)
    NVME = "nvme"  # ZeRO-Infinity (Rajbhandari et al. 2021)


@dataclass(frozen=True)
class Mapping:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    sequence_parallel: bool = True  # with tp > 1 (Korthikanti et al. 2022 sec. 4.2.2)
    zero: ZeroStage = ZeroStage.NONE
    shard_group: int | None = None  # HSDP: ZeRO shards over this many dp ranks (None = all dp)
    micro_batch: int = 1
    virtual_stages: int = 1
    schedule: Schedule = Schedule.ONE_F_ONE_B
    recompute: Recompute = Recompute.NONE
    offload_optimizer: Offload = Offload.NONE
    offload_params: Offload = Offload.NONE
    tp_comm_overlap: bool = False  # Megatron --tp-comm-overlap (userbuffers)
    force_tp_across_nodes: bool = False  # allow tp beyond the scale-up domain

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def zero_shards(self) -> int:
        """Ranks one ZeRO shard group spans (HSDP shards inside a group, replicates across).
        Context-parallel ranks hold the same weights, so they shard too: Megatron-Core's
        distributed optimizer uses the data-parallel group with context parallel, torchtitan
        flattens dp_shard x cp into one FSDP mesh dimension."""
        return (self.shard_group or self.dp) * self.cp

    def describe(self) -> str:
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}"]
        if self.cp > 1:
            parts.append(f"cp={self.cp}")
        if self.ep > 1:
            parts.append(f"ep={self.ep}")
        parts.append(f"zero={int(self.zero)}")
        parts.append(f"mb={self.micro_batch}")
        if self.virtual_stages > 1:
            parts.append(f"vpp={self.virtual_stages}")
        parts.append(f"recompute={self.recompute.value}")
        return " ".join(parts)


@dataclass(frozen=True)
class ServeMapping:
    tp: int = 1
    pp: int = 1
    ep: int = 1
    replicas: int = 1

    @property
    def devices_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def world(self) -> int:
        return self.devices_per_replica * self.replicas
