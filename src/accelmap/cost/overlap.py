"""Communication overlapped with compute, as physics rather than a switch.

1. **Contention.** An overlapped collective is not free: NCCL runs its collectives as CUDA
   kernels, one thread block per channel (typically 16-32 channels on NVLink systems; NCCL
   docs, "Environment Variables": NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS), on SMs the GEMMs
   then lack, and streams its buffers through the same HBM. Rashidi et al. 2021 ("Enabling
   Compute-Communication Overlap in Distributed Deep Learning Training Platforms", ISCA) measure
   the resulting slow-down of overlapped compute; Megatron-LM's userbuffers give its TP overlap
   a fixed 1-16 SMs for the same reason. The engine stretches compute by ``CONTENTION`` seconds
   per second of communication it hides: one value for every stack and device, fitted once on
   the shared training rows (fitters/fit_training.py).

2. **Per-layer prefetch (ZeRO-3 / FSDP).** Parameters are gathered one wrapped unit (a layer) at
   a time, the next unit's all-gather running during the current unit's compute (PyTorch FSDP
   forward_prefetch / BackwardPrefetch.BACKWARD_PRE; DeepSpeed ZeRO-3 prefetch_bucket_size). The
   first gather of the forward and of the backward, and the last reduce-scatter, have nothing
   to hide behind; every other unit exposes only what its gather (and, in backward, its
   reduce-scatter) takes beyond that unit's compute. With ``reshard_after_forward`` (FSDP
   FULL_SHARD, ZeRO-3) the backward gathers again, and every gradient-accumulation micro-batch
   repeats both (Zhao et al. 2023, "PyTorch FSDP", sec. 3.2-3.3). Under pipeline parallelism
   PyTorch's FSDP keeps a stage gathered across its micro-batches (torchtitan: no reshard after
   forward with pp; ``torch.distributed.pipelining`` syncs gradients on the last micro-batch):
   one gather chain under the first forward and one reduce-scatter chain under the last
   backward a step (``memory.stack.MemoryStack.gather_stage_under_pp``); MaxText gathers per
   micro-batch unless ``pipeline_fsdp_ag_once`` is set.

3. **Gradient buckets (ZeRO 0-2).** Data-parallel gradient reduction runs per bucket as the
   backward produces them (Megatron-LM DDP ``--overlap-grad-reduce``, bucket of
   max(40M, 1M x dp) parameters: megatron/core/distributed/distributed_data_parallel_config.py
   ``bucket_size``; PyTorch DDP 25 MB buckets, Li et al. 2020 sec. 3.2.3): each bucket pays the
   collective's fixed latency, and the last bucket is exposed after the backward ends.

4. **TP comm overlap** (Megatron-Core ``--tp-comm-overlap`` on Transformer Engine userbuffers;
   torchtitan's async TP on PyTorch SymmetricMemory, ``_fused_all_gather_matmul`` /
   ``_fused_matmul_reduce_scatter``). The GEMMs run in chunks while the next shard moves peer
   to peer on the copy engines (TE ``ring_exchange``; PyTorch's "micro-pipelined" async TP), so
   no NCCL kernel takes SMs and the hidden TP traffic adds no contention. Transformer Engine's
   pipelined reduce-scatter (forward proj/fc2) and bulk overlaps (qkv/fc1 dgrad and wgrad) do
   hold 16 SMs and start their GEMMs with that margin (``initialize_ub`` defaults ``num_sm``,
   ``set_sm_margin``): those GEMMs run on SMs - 16 (``engine.profile._tp_overlap_s``). Not
   modelled: the chunks' own tile and wave losses (the roofline's shape model, made for whole
   cuBLAS GEMMs, puts them at 40-60 % for T / tp rows, which the published Megatron-Core
   table contradicts).

5. **DualPipe's all-to-all** (DeepSeek-V3, Liu et al. 2024 sec. 3.2.2): the expert dispatch and
   combine run on DeepSeek's own kernels, which hold 20 of the H800's 132 SMs ("only 20 SMs are
   sufficient to fully utilize the bandwidths of IB and NVLink"), warp-specialized, so the
   computation they hide behind runs on the other 112: a second of hidden all-to-all costs the
   20 SMs' share of a second of compute, 20 / 112 s (``DUALPIPE_CONTENTION``), in place of the
   fitted NCCL contention.
"""

from __future__ import annotations

import numpy as np

from accelmap.units import Num

# DualPipe's communication SMs of the H800's 132 (5. above): compute added per second hidden
DUALPIPE_COMM_SMS, H800_SMS = 20, 132
DUALPIPE_CONTENTION = DUALPIPE_COMM_SMS / (H800_SMS - DUALPIPE_COMM_SMS)


def contention() -> float:
    """Seconds of compute added per second of communication hidden behind it, fitted on the
    shared training rows (fitters/fit_training.py writes cost/data/training_fit.yaml with
    the value and the rows)."""
    from accelmap.cost.efficiency import training_fit

    return float(training_fit().get("contention", {}).get("value", 0.0))

# Megatron-Core DDP: bucket_size = max(40_000_000, 1_000_000 * dp) parameters
# (distributed_data_parallel_config.py); PyTorch DDP's 25 MB default is of the same order.
BUCKET_PARAMS = 40_000_000


def per_layer_exposed(first: Num, per_unit_comm: Num, per_unit_compute: Num, units: Num) -> Num:
    """A chain of ``units`` layers whose communication is prefetched one unit ahead: the first
    unit's communication is exposed, each later one only beyond its unit's compute."""
    return first + np.maximum(units - 1, 0) * np.maximum(per_unit_comm - per_unit_compute, 0.0)


def hidden(comm: Num, exposed: Num) -> Num:
    """Communication that ran under compute (never negative)."""
    return np.maximum(np.asarray(comm) - np.asarray(exposed), 0.0)


def buckets(params: Num, dp: Num) -> Num:
    """Gradient buckets of one data-parallel reduction (at least one)."""
    size = np.maximum(BUCKET_PARAMS, 1_000_000 * np.asarray(dp, dtype=float))
    return np.maximum(np.ceil(np.asarray(params, dtype=float) / size), 1.0)
