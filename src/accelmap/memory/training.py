"""Training memory of one device as the one slash-keyed tree, for one mapping or a table of
candidates (array-friendly: every branch on a mapping field is an ``np.where``).

- model states under ZeRO (Rajbhandari et al. 2020, sec. 5, Table 1; ``memory.sharding``):
  weights, gradients, master weights and optimizer states, each divided by the ZeRO shard
  group at the stage that shards it. Through FSDP mixed precision ZeRO-3 keeps one fp32 shard
  that is both the parameter and the master (``memory.stack``), so no 16-bit shard is counted.
  Offloaded optimizer states leave the device, and so do the gradients, which ZeRO-Offload
  moves to the host as they are reduced for the CPU optimizer step (Ren et al. 2021 sec. 4.1);
  offloaded parameters leave only the layers in use on the device (ZeRO-Infinity,
  Rajbhandari et al. 2021), counted once, as the gathered parameters;
- FP8 training under Transformer Engine keeps an FP8 copy and transpose of each GEMM weight,
  or stores the weight in FP8 (``memory.stack.fp8_weights``);
- activations: each layer's saved bytes (``memory.budget.activation_bytes``) x layers on the
  stage x micro-batches in flight under the schedule (``cost.schedules``), plus the working set
  of full recompute once per device; the embedding's and head's saved inputs and the loss's
  logits on the stages that hold them (``workload.Loss``: one fp32 buffer in a fused
  cross-entropy, three in PyTorch's log-softmax backward);
- ZeRO-3 keeps the gathered parameters of the layer in use and the one being prefetched. Under
  pipelining a PyTorch FSDP stage keeps its layers gathered from the first forward to the last
  backward (torchtitan does not reshard after forward, ``parallelize_llama.py`` L325-331;
  ``torch.distributed.pipelining``'s ``backward_maybe_with_nosync`` sets
  ``set_reshard_after_backward(False)`` and ``set_requires_gradient_sync(False)`` until the last
  micro-batch), and accumulates their unsharded gradients in the reduce dtype meanwhile (FSDP2
  ``_fsdp_param.py`` ``to_accumulated_grad_if_needed``: ``unsharded_grad.to(reduce_dtype)``);
- runtime: the CUDA context outside PyTorch (``memory.allocator``); NCCL buffers only where
  the device communicates; the caching allocator's reserve, fitted on measured peaks, as a
  fixed part plus a share of the dynamic memory.
"""

from __future__ import annotations

import numpy as np

from accelmap.memory.allocator import CUDA_CONTEXT_BYTES, allocator_bytes
from accelmap.memory.sharding import model_state_bytes
from accelmap.memory.stack import MEGATRON, FP8Weights, MemoryStack
from accelmap.units import Num

# NCCL channel buffers and framework bucket buffers on each device: NCCL_BUFFSIZE 4 MiB x
# channels x peers; Megatron DDP buckets of 40M elements (fp32 grads: 160 MB). A named estimate.
COMM_BUFFER_BYTES = 0.5 * 2**30


def training_items(*, params: Num, layer_params: float, zero: Num, zero_shards: Num,
                   weight_bytes: float, grad_bytes: float, master_bytes: float,
                   state_bytes: float, offload_optimizer: Num, offload_params: Num,
                   layer_acts: Num, working: float, ends_acts: Num, logits: Num, world: Num,
                   stage_layer_params: Num = 0.0, pp: Num = 1, fp8: FP8Weights | None = None,
                   stack: MemoryStack = MEGATRON, frozen: Num = 0.0,
                   frozen_layer: float = 0.0) -> dict[str, Num]:
    """Bytes per device by item. ``params``: parameters the device's stage holds (its tp/ep
    share); ``stage_layer_params``: the part of them in the stage's layers (the FP8 GEMM
    weights, and what a stage keeps gathered); ``layer_acts``: saved activations of its layers
    for all micro-batches in flight; ``ends_acts`` and ``logits``: the embedding/head inputs and
    the loss's logits on this stage. ``frozen``: bytes of the stage's frozen base weights
    (LoRA/QLoRA; ``params`` are then the adapters), ``frozen_layer`` those of one layer: held
    in full, or under ZeRO-3 / FSDP sharded like the rest and gathered a layer at a time
    (FSDP shards frozen parameters with the trainable ones; QLoRA's FSDP recipe keeps the
    4-bit storage, Answer.AI fsdp_qlora)."""
    fp8 = fp8 or FP8Weights()
    # FP8 primary weights: the stage's GEMM weights are stored in fp8.storage bytes, the rest
    # in weight_bytes; ZeRO shards the mean bytes per parameter
    gemm = np.minimum(np.asarray(stage_layer_params, dtype=float), params)
    stored = (weight_bytes if fp8.storage is None else
              (weight_bytes * (params - gemm) + fp8.storage * gemm) / np.maximum(params, 1.0))
    ms = model_state_bytes(params, zero, zero_shards, stored, grad_bytes,
                           master_bytes + state_bytes)
    opt_share = ms["optimizer"] / max(master_bytes + state_bytes, 1e-30)
    z3 = np.asarray(zero) >= 3
    off_p, off_o = np.asarray(offload_params, dtype=bool), np.asarray(offload_optimizer, dtype=bool)
    fsdp_shard = z3 & stack.fsdp_params  # the fp32 shard is the parameter
    gathered_layers = 2 * (layer_params * weight_bytes + frozen_layer)
    whole_stage = stack.gather_stage_under_pp & (np.asarray(pp) > 1)
    gathered = np.where(z3 | off_p, np.where(whole_stage, np.maximum(gemm * weight_bytes,
                                                                     gathered_layers),
                                             gathered_layers), 0.0)
    unsharded_grads = np.where(z3 & whole_stage, gemm * grad_bytes, 0.0)
    # what is allocated and freed within a step (memory.allocator.DYNAMIC_ITEMS)
    dynamic = layer_acts + working + ends_acts + logits + gathered + unsharded_grads
    frozen_held = np.where(off_p, 0.0, np.where(z3, frozen / np.asarray(zero_shards, dtype=float),
                                                frozen))
    return {
        "weights": np.where(off_p | fsdp_shard, 0.0, ms["weights"]),
        "frozen_weights": frozen_held,
        "gradients": np.where(off_o, 0.0, ms["gradients"]),
        "optimizer/master_weights": np.where(off_o, 0.0, opt_share * master_bytes),
        "optimizer/states": np.where(off_o, 0.0, opt_share * state_bytes),
        # Transformer Engine's FP8 copies are cast from the weights it holds: the whole stage's,
        # or under ZeRO-3 / FSDP the gathered layers', made and freed with them (Megatron
        # FSDP gathers bf16 and casts per use: keep_fp8_transpose_cache off)
        "fp8/weight_cache": np.where(z3 & ~whole_stage,
                                     fp8.cache * np.minimum(2 * layer_params, gemm),
                                     fp8.cache * gemm),
        "activations/layers": layer_acts + working,
        "activations/ends": ends_acts,
        "activations/logits": logits,
        "zero3/gathered_params": gathered,
        "zero3/unsharded_grads": unsharded_grads,
        "runtime/context": CUDA_CONTEXT_BYTES,
        "runtime/comm_buffers": np.where(np.asarray(world) > 1, COMM_BUFFER_BYTES, 0.0),
        "runtime/fragmentation": allocator_bytes(dynamic),
    }
