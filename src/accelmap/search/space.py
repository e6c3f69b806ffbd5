"""The training mapping space: which values of each parallelism dimension are tried.

Defaults follow what the frameworks support and what published runs use: tp in powers of two up
to the scale-up domain (Megatron keeps TP inside NVLink, Narayanan et al. 2021 sec. 3.2), pp in
powers of two up to the layer count, cp for long sequences, ep over divisors of the expert
count, micro-batches 1-32 in steps of about 1.5x (published llm-foundry and Megatron runs use
up to 20-40 sequences per micro-batch for small models), 1-4 virtual stages, every ZeRO stage
and recompute policy,
and the choices published runs make beyond those: HSDP (ZeRO-3 sharded inside the node,
replicated across: llm-foundry's and torchtitan's hybrid sharding), TP-communication overlap
(Megatron --tp-comm-overlap) on or off, and the zero-bubble ZB-H1 schedule next to 1F1B
(interleaving takes Megatron's interleaved 1F1B). Pipeline stages that do not divide the layers
get Megatron's balanced first/last split (mapping.plan.balanced_split). dp is not searched: it
is what the cluster leaves (devices / (tp x pp x cp)).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelmap.cost.execution import streams_training_weights
from accelmap.hardware.cluster import Cluster
from accelmap.mapping.plan import powers_of_two as powers_of_two  # re-exported
from accelmap.models.schema import ModelSpec
from accelmap.workload import Recompute

# the largest micro-batch tried on a weight-streaming wafer: its 40-44 GB of SRAM holds the
# activations of a few dozen 4k-token sequences under full recompute
STREAM_MAX_MICRO_BATCH = 256




@dataclass(frozen=True)
class TrainingSpace:
    tp: tuple[int, ...]
    pp: tuple[int, ...]
    cp: tuple[int, ...]
    ep: tuple[int, ...]
    micro_batch: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
    vpp: tuple[int, ...] = (1, 2, 4)
    zero: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[Recompute, ...] = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
    offload: tuple[bool, ...] = (False,)
    force_tp: bool = False
    hsdp: tuple[bool, ...] = (False, True)  # ZeRO-3 sharded inside the node
    tp_overlap: tuple[bool, ...] = (False, True)
    zero_bubble: tuple[bool, ...] = (False, True)  # ZB-H1 instead of 1F1B (vpp = 1)

    @classmethod
    def default(cls, spec: ModelSpec, cluster: Cluster, seq_len: int, offload: bool = False,
                force_tp: bool = False) -> TrainingSpace:
        n = cluster.devices
        tp_limit = n if force_tp else min(cluster.scale_up_domain, n)
        tp = tuple(t for t in powers_of_two(tp_limit) if spec.n_heads % t == 0)
        pp = tuple(p for p in powers_of_two(min(spec.n_layers, n)) if n % p == 0)
        # context parallelism pays off only for long sequences (Megatron-Core CP docs: >= 8k)
        cp = tuple(c for c in powers_of_two(min(8, n)) if c == 1 or seq_len >= 8192 * c // 2)
        if spec.moe is None:
            ep: tuple[int, ...] = (1,)
        else:
            ep = tuple(e for e in powers_of_two(min(spec.moe.num_experts, n))
                       if spec.moe.num_experts % e == 0)
        if streams_training_weights(cluster.accelerator):
            # a wafer trains by weight streaming (cost/execution.py): weights and optimizer in
            # the external tier, data parallelism over the wafers, no model split, no ZeRO;
            # the micro-batch sets how often the weights stream (once per micro-batch)
            return cls(tp=(1,), pp=(1,), cp=(1,), ep=(1,), micro_batch=tuple(
                powers_of_two(STREAM_MAX_MICRO_BATCH)), vpp=(1,), zero=(0,),
                recompute=(Recompute.SELECTIVE, Recompute.FULL), offload=(True,),
                hsdp=(False,), tp_overlap=(False,), zero_bubble=(False,))
        return cls(tp=tp, pp=pp, cp=cp, ep=ep, offload=(False, True) if offload else (False,),
                   force_tp=force_tp)

    @property
    def size(self) -> int:
        """Upper bound on candidates (before dp is derived and rules applied)."""
        n = 1
        for axis in (self.tp, self.pp, self.cp, self.ep, self.micro_batch, self.vpp, self.zero,
                     self.recompute, self.offload, self.hsdp, self.tp_overlap,
                     self.zero_bubble):
            n *= len(axis)
        return n
