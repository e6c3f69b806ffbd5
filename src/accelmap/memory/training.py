"""Training memory of one device as the one slash-keyed tree, for one mapping or a table of
candidates (array-friendly: every branch on a mapping field is an ``np.where``).

- model states under ZeRO (Rajbhandari et al. 2020, sec. 5, Table 1; ``memory.sharding``):
  weights, gradients, fp32 master weights and optimizer states, each divided by the ZeRO shard
  group at the stage that shards it; offloaded states leave the device (ZeRO-Offload, Ren et al.
  2021; ZeRO-Infinity keeps one layer's gathered parameters, Rajbhandari et al. 2021);
- activations: each layer's saved bytes (``memory.budget.activation_bytes``) x layers on the
  stage x micro-batches in flight under the schedule (``cost.schedules``), plus the working set
  of full recompute once per device; the embedding's and head's saved inputs and one fp32
  logits buffer on the stages that hold them (Megatron's vocab-parallel cross-entropy reuses
  the logits buffer for the gradient: tensor_parallel/cross_entropy.py);
- ZeRO-3 keeps the gathered parameters of the layer in use and the one being prefetched;
- runtime: CUDA context and workspaces; NCCL buffers only where the device communicates;
  allocator fragmentation as a share of the dynamic (activation) memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelmap.memory.budget import FRAGMENTATION, RUNTIME_OVERHEAD_BYTES
from accelmap.memory.sharding import model_state_bytes

Num = Any

# NCCL channel buffers and framework bucket buffers on each device: NCCL_BUFFSIZE 4 MiB x
# channels x peers; Megatron DDP buckets of 40M elements (fp32 grads: 160 MB). A named estimate.
COMM_BUFFER_BYTES = 0.5 * 2**30


def training_items(*, params: Num, layer_params: float, zero: Num, zero_shards: Num,
                   weight_bytes: float, grad_bytes: float, master_bytes: float,
                   state_bytes: float, offload_optimizer: Num, offload_params: Num,
                   layer_acts: Num, working: float, ends_acts: Num, logits: Num, world: Num
                   ) -> dict[str, Num]:
    """Bytes per device by item. ``params``: parameters the device's stage holds (its tp/ep
    share); ``layer_acts``: saved activations of its layers for all micro-batches in flight;
    ``ends_acts`` and ``logits``: the embedding/head inputs and the fp32 logits on this stage."""
    ms = model_state_bytes(params, zero, zero_shards, weight_bytes, grad_bytes,
                           master_bytes + state_bytes)
    opt_share = ms["optimizer"] / max(master_bytes + state_bytes, 1e-30)
    z3 = np.asarray(zero) >= 3
    dynamic = layer_acts + ends_acts + logits
    return {
        "weights": np.where(offload_params, 2 * layer_params * weight_bytes, ms["weights"]),
        "gradients": ms["gradients"],
        "optimizer/master_weights": np.where(offload_optimizer, 0.0, opt_share * master_bytes),
        "optimizer/states": np.where(offload_optimizer, 0.0, opt_share * state_bytes),
        "activations/layers": layer_acts + working,
        "activations/ends": ends_acts,
        "activations/logits": logits,
        "zero3/gathered_params": np.where(z3, 2 * layer_params * weight_bytes, 0.0),
        "runtime/context": RUNTIME_OVERHEAD_BYTES,
        "runtime/comm_buffers": np.where(np.asarray(world) > 1, COMM_BUFFER_BYTES, 0.0),
        "runtime/fragmentation": FRAGMENTATION * (dynamic + working),
    }
