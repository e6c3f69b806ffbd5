"""Training on a cluster: one optimizer step of a mapped model, per device.

Per micro-batch the slowest pipeline stage runs its share of the sharded operator graph
(parallel/shard.py) forward and backward; communication per axis uses the tier that axis lands
on (mapping/placement.py) and the alpha-beta collectives (cost/collectives.py):

- TP: per layer 2 all-reduces forward and 2 backward of the layer's activations (T x d), or the
  same volume as all-gather + reduce-scatter with sequence parallelism (Korthikanti et al. 2022
  sec. 4.2.2); exposed unless --tp-comm-overlap hides it behind the GEMMs;
- CP: ring attention passes K and V around the cp ranks (cp - 1 steps per layer, twice in
  backward for dK, dV), overlapped with the attention compute (Megatron-Core CP);
- EP: all-to-all dispatch and combine per MoE layer, forward and backward (exposed);
- PP: one send/recv of the activations per micro-batch per direction on the critical path;
- DP: gradient all-reduce (ZeRO 0) or reduce-scatter + parameter all-gather (ZeRO >= 1, the
  distributed optimizer), overlapped with the last micro-batch's backward and the next
  forward (Megatron overlap-grad-reduce / overlap-param-gather);
- ZeRO-3 / FSDP: parameters all-gathered per layer in forward and backward and gradients
  reduce-scattered every micro-batch, prefetched behind compute (exposed = comm - compute).

Step = (m + bubble) x (forward + backward + exposed per micro-batch) + exposed DP + optimizer,
with bubble = (p - 1)/v micro-batch slots (Narayanan et al. 2021 sec. 2.2). MFU counts model
FLOPs (PaLM convention) over world x peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from accelmap.cost.collectives import Collective
from accelmap.cost.framework import Framework, profile
from accelmap.cost.roofline import Device, OpTime, time_ops, total_time
from accelmap.cost.schedules import bubble_over_ideal, in_flight_micro_batches
from accelmap.estimate import Estimate, training_precision
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import LinkRole
from accelmap.mapping.constraints import TrainingJob, check_training
from accelmap.mapping.placement import place_axes
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.memory.budget import (
    FRAGMENTATION,
    LOGITS_BYTES,
    OPTIMIZER_STATES,
    RUNTIME_OVERHEAD_BYTES,
    MemoryBudget,
    activation_bytes,
)
from accelmap.memory.sharding import model_state_bytes
from accelmap.models.flops import forward_flops_per_token
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import Op, Shape, Stage, Unit, forward_ops
from accelmap.ops.training import backward_ops, optimizer_ops, recompute_ops
from accelmap.parallel.shard import shard_spec
from accelmap.workload import Optimizer, Phase, Training

Num = Any

# NCCL channel buffers and framework bucket buffers on each device: NCCL_BUFFSIZE 4 MiB x
# channels x peers; Megatron DDP buckets of 40M elements (fp32 grads: 160 MB). A named estimate.
COMM_BUFFER_BYTES = 0.5 * 2**30
# Host link when the catalog entry lists none: PCIe 4.0 x16, 16 GT/s x 16 lanes ~ 32 GB/s raw,
# ~16 GB/s achieved for pinned transfers in one direction is a conservative middle.
HOST_FALLBACK_BW = 16e9


@dataclass(frozen=True)
class OverlapPolicy:
    """Which communication hides behind compute (reported with every estimate)."""

    tp: bool = False  # Megatron --tp-comm-overlap
    dp_grad_reduce: bool = True  # Megatron --overlap-grad-reduce, FSDP backward prefetch
    dp_param_gather: bool = True  # Megatron --overlap-param-gather
    zero3_prefetch: bool = True  # FSDP / ZeRO-3 prefetch of the next layer's parameters
    cp_ring: bool = True  # ring attention overlaps K/V exchange with attention compute
    ep_all_to_all: bool = False
    pp_p2p: bool = False


def _stage_ops(ops: list[Op], layers_on_stage: int, n_layers: int, first: bool,
               last: bool) -> list[Op]:
    """The operators of one pipeline stage: its share of the layers, plus embedding on the
    first stage and head/loss on the last."""
    out = []
    for op in ops:
        if op.name.startswith("layers/"):
            # the stage runs its share of every layer group's occurrences
            out.append(replace(op, count=op.count * layers_on_stage / n_layers))
        elif (op.name.startswith("embedding") and first) or (not op.name.startswith(
                ("embedding", "layers/", "optimizer")) and last):
            out.append(op)
    return out


def parallel_training(spec: ModelSpec, cluster: Cluster, wl: Training, m: Mapping,
                      framework: Framework | str = Framework.MEGATRON,
                      overlap: OverlapPolicy | None = None, imbalance: float = 1.0,
                      price_usd_per_hour: float | None = None) -> Estimate:
    """``wl.batch`` is the global batch in sequences; ``m`` splits it."""
    overlap = overlap or OverlapPolicy(tp=m.tp_comm_overlap)
    fw = profile(framework)
    dev = Device.of(cluster.accelerator)
    job = TrainingJob(spec, cluster, wl.batch, wl.seq_len)
    violations = check_training(job, m)
    if violations:
        return _infeasible(spec, cluster, violations[0].rule, violations[0].sentence)

    micro_batches = wl.batch // (m.dp * m.micro_batch)
    s = wl.seq_len
    T = m.micro_batch * s / m.cp
    shard = shard_spec(spec, m.tp, m.ep)
    shape = Shape(tokens=T, context=(s + 1) / 2 if wl.flash_attention else float(s),
                  kv_tokens=m.micro_batch * s, sequences=m.micro_batch,
                  logits_tokens=T, dropout=wl.dropout,
                  sp_tokens=T / m.tp if (m.sequence_parallel and m.tp > 1) else None)
    p = training_precision(wl.dtype)
    fwd_all = forward_ops(shard, shape, p, flash=wl.flash_attention, imbalance=imbalance,
                          training=True)
    L = spec.n_layers
    per_stage = math.ceil(L / m.pp)
    last_layers = L - per_stage * (m.pp - 1) if m.pp > 1 else L
    stages = {"first": _stage_ops(fwd_all, per_stage, L, True, m.pp == 1),
              "last": _stage_ops(fwd_all, max(last_layers, 1), L, m.pp == 1, True)}

    def stage_times(fwd: list[Op]) -> tuple[list[OpTime], list[OpTime]]:
        rec = recompute_ops(fwd, m.recompute, wl.flash_attention)
        bwd = backward_ops(fwd, wl.grad_dtype)
        return time_ops(fwd, dev, fw), time_ops(rec + bwd, dev, fw)

    timed = {k: stage_times(v) for k, v in stages.items()}
    t_fwd = max(float(total_time(f)) for f, _ in timed.values())
    t_bwd = max(float(total_time(b)) for _, b in timed.values())
    slow = max(timed, key=lambda k: float(total_time(timed[k][0]) + total_time(timed[k][1])))

    # Dense axes fill the world (tp innermost, dp outermost); expert parallelism is carved out
    # of dp x cp next to tp (Megatron-Core), so its group is placed separately.
    links = place_axes(cluster, {"tp": m.tp, "cp": m.cp, "pp": m.pp, "dp": m.dp},
                       order=("tp", "cp", "pp", "dp"))
    links["ep"] = place_axes(cluster, {"tp": m.tp, "ep": m.ep}, order=("tp", "ep"))["ep"]
    a = wl.storage_dtype.bytes
    d = spec.d_model
    layers = per_stage
    moe_layers = math.ceil(spec.n_moe_layers / m.pp)
    comm: dict[str, float] = {}
    exposed: dict[str, float] = {}

    # TP: 4 collectives per layer per micro-batch (2 forward, 2 backward) of T x d activations
    tp_t = 4 * layers * float(links["tp"].time(Collective.ALL_REDUCE, T * d * a))
    comm["tp"] = tp_t
    gemm_time = sum(float(t.total_s) for t in timed[slow][0] + timed[slow][1]
                    if t.op.gemm is not None)
    exposed["tp"] = max(tp_t - gemm_time, 0.0) if overlap.tp else tp_t
    # CP: (cp - 1) ring steps of this rank's K and V chunk per layer, 3x for fwd + bwd (dK, dV)
    kv_width = (shard.mla.kv_lora_rank + shard.mla.qk_rope_head_dim if shard.mla
                else 2 * shard.kv_heads * shard.head_size)
    cp_t = 3 * layers * (m.cp - 1) * float(links["cp"].time(Collective.SEND_RECV,
                                                            T * kv_width * a))
    attn = sum(float(t.total_s) for t in timed[slow][0] + timed[slow][1]
               if "attention/core" in t.op.name)
    comm["cp"] = cp_t
    exposed["cp"] = max(cp_t - attn, 0.0) if overlap.cp_ring else cp_t
    # EP: dispatch + combine, forward and backward, of T x top_k tokens of width d
    if spec.moe is not None:
        ep_t = 4 * moe_layers * float(links["ep"].time(Collective.ALL_TO_ALL,
                                                       T * spec.moe.top_k * d * a))
    else:
        ep_t = 0.0
    comm["ep"] = ep_t
    exposed["ep"] = ep_t if not overlap.ep_all_to_all else 0.0
    # PP: activations out and gradients back, once per micro-batch
    pp_t = 2 * float(links["pp"].time(Collective.SEND_RECV, T * d * a)) if m.pp > 1 else 0.0
    comm["pp"] = pp_t
    exposed["pp"] = 0.0 if overlap.pp_p2p else pp_t

    # parameters one device holds (its stage, its tp/ep shard)
    p_shard = count_params(shard)
    layer_params = sum(lp.total for lp in p_shard.layers) / L
    p_dev = layer_params * per_stage + p_shard.embedding + (p_shard.lm_head if m.pp == 1 else 0)
    zero_n = m.zero_shards
    per_mb_zero3 = 0.0
    if m.zero >= ZeroStage.PARAMETERS:
        # gather bf16 params fwd + bwd, reduce-scatter grads, every micro-batch
        ag = float(links["dp"].time(Collective.ALL_GATHER, p_dev * a))
        rs = float(links["dp"].time(Collective.REDUCE_SCATTER, p_dev * wl.grad_dtype.bytes))
        per_mb_zero3 = 2 * ag + rs
        comm["dp"] = per_mb_zero3 * micro_batches
        hidden = t_fwd + t_bwd if overlap.zero3_prefetch else 0.0
        exposed_mb_zero3 = max(per_mb_zero3 - hidden, 0.0)
        exposed["dp"] = exposed_mb_zero3 * micro_batches
        dp_tail = 0.0
    else:
        if m.zero >= ZeroStage.OPTIMIZER:
            grad = float(links["dp"].time(Collective.REDUCE_SCATTER, p_dev * wl.grad_dtype.bytes))
            gather = float(links["dp"].time(Collective.ALL_GATHER, p_dev * a))
        else:
            grad = float(links["dp"].time(Collective.ALL_REDUCE, p_dev * wl.grad_dtype.bytes))
            gather = 0.0
        comm["dp"] = grad + gather
        exp_grad = max(grad - t_bwd, 0.0) if overlap.dp_grad_reduce else grad
        exp_gather = max(gather - t_fwd, 0.0) if overlap.dp_param_gather else gather
        dp_tail = exp_grad + exp_gather
        exposed["dp"] = dp_tail

    per_mb = t_fwd + t_bwd + exposed["tp"] + exposed["cp"] + exposed["ep"] + exposed["pp"]
    if m.zero >= ZeroStage.PARAMETERS:
        per_mb += exposed["dp"] / micro_batches
    bubble = float(bubble_over_ideal(m.schedule, m.pp, micro_batches, m.virtual_stages))
    opt_shards = zero_n if m.zero >= ZeroStage.OPTIMIZER else 1
    opt_ops = optimizer_ops(p_dev / opt_shards, wl.optimizer, wl.grad_dtype)
    t_opt = float(total_time(time_ops(opt_ops, dev, fw)))
    host = dev.acc.bandwidth_per_direction(LinkRole.HOST) or HOST_FALLBACK_BW
    if m.offload_optimizer is not Offload.NONE:
        # ZeRO-Offload (Ren et al. 2021): gradients go to the host, updated parameters come back
        t_opt += 2 * p_dev / opt_shards * wl.grad_dtype.bytes / host
    if m.offload_params is not Offload.NONE:
        # ZeRO-Infinity (Rajbhandari et al. 2021): parameters stream in for forward and backward
        # of every micro-batch, prefetched behind compute
        fetch = 2 * p_dev * wl.storage_dtype.bytes / host
        per_mb += max(fetch - (t_fwd + t_bwd), 0.0)
        comm["offload"] = fetch * micro_batches
    step = micro_batches * per_mb + bubble * micro_batches * (t_fwd + t_bwd) + dp_tail + t_opt

    tokens = wl.batch * s
    model_flops = 3.0 * forward_flops_per_token(spec, s, causal=False) * tokens
    peak, _ = dev.peak(wl.dtype, Unit.MATRIX)
    world = m.world
    fwd_hw = sum(float(t.op.flops) * t.op.count for t in timed[slow][0])
    bwd_hw = sum(float(t.op.flops) * t.op.count for t in timed[slow][1])
    hw_flops = (fwd_hw + bwd_hw) * micro_batches * m.pp * m.dp * m.cp * m.tp
    memory = _memory(spec, shard, wl, m, stages, per_stage, p_dev, micro_batches, dev, T)
    breakdown = {
        "compute/forward": micro_batches * t_fwd,
        "compute/backward": micro_batches * t_bwd,
        "bubble": bubble * micro_batches * (t_fwd + t_bwd),
        "optimizer": t_opt,
        **{f"exposed_comm/{k}": (v * micro_batches if k in ("tp", "cp", "ep", "pp") else v)
           for k, v in exposed.items()},
    }
    tdp = dev.acc.tdp.value if dev.acc.tdp else None
    metrics: dict[str, Any] = {
        "step_time_s": step,
        "tokens_per_s": tokens / step,
        "tokens_per_s_per_device": tokens / step / world,
        "mfu": model_flops / (step * world * peak),
        "hfu": hw_flops / (step * world * peak),
        "tflops_per_device": model_flops / step / world / 1e12,
        "hardware_tflops_per_device": hw_flops / step / world / 1e12,
        "micro_batches": micro_batches,
        "bubble_fraction": breakdown["bubble"] / step,
        "time_breakdown_s": breakdown,
        "communication_s": {k: (v * micro_batches if k in ("tp", "cp", "ep", "pp") else v)
                            for k, v in comm.items()},
        "axes": {k: links[k].describe() for k in ("tp", "cp", "ep", "pp", "dp")},
        "overlap_policy": overlap.__dict__,
        "energy_j_per_token_tdp": tdp * world * step / tokens if tdp else None,
    }
    if wl.tokens_to_train:
        secs = wl.tokens_to_train / metrics["tokens_per_s"]
        metrics["time_to_train_s"] = secs
        if price_usd_per_hour:
            metrics["cost_to_train_usd"] = secs / 3600 * price_usd_per_hour * world
    feasible = bool(np.all(memory.fits))
    reason = None if feasible else (
        f"needs {float(memory.total) / 2**30:.1f} GiB per device but the device has "
        f"{memory.capacity / 2**30:.1f} GiB (memory rule)")
    assumptions = (
        f"mapping {m.describe()} on {cluster.name} ({cluster.origin})",
        f"framework {fw.name.value}; overlap {overlap}",
        f"pipeline schedule {m.schedule.value}, {micro_batches} micro-batches, bubble "
        f"{bubble:.3f} of ideal",
    )
    return Estimate(Phase.TRAIN, spec.id, dev.acc.id, feasible, reason, memory, metrics,
                    {"forward": timed[slow][0], "backward": timed[slow][1]}, assumptions)


def _memory(spec: ModelSpec, shard: ModelSpec, wl: Training, m: Mapping,
            stages: dict[str, list[Op]], per_stage: int, p_dev: float, micro_batches: int,
            dev: Device, T: float) -> MemoryBudget:
    states = (OPTIMIZER_STATES[wl.optimizer] * 4.0 if wl.optimizer is not Optimizer.ADAFACTOR
              else 0.0)
    master = wl.master_dtype.bytes if wl.master_dtype is not wl.storage_dtype else 0.0
    ms = model_state_bytes(p_dev, int(m.zero), m.zero_shards, wl.storage_dtype.bytes,
                           wl.grad_dtype.bytes, states + master)
    items: dict[str, Num] = {"weights": ms["weights"], "gradients": ms["gradients"]}
    if m.offload_params is not Offload.NONE:  # only the layers being computed stay resident
        layer = sum(lp.total for lp in count_params(shard).layers) / spec.n_layers
        items["weights"] = 2 * layer * wl.storage_dtype.bytes
    if m.offload_optimizer is Offload.NONE:
        items["optimizer"] = ms["optimizer"]
    # activations: the first stage holds the most micro-batches in flight under 1F1B
    first = [o for o in stages["first"] if o.stage is Stage.FORWARD]
    in_flight = float(in_flight_micro_batches(m.schedule, m.pp, micro_batches, 0,
                                              m.virtual_stages))
    view = _stage_view(shard, per_stage)
    a = wl.storage_dtype.bytes
    per_mb = activation_bytes(first, m.recompute, view, T, a, working_set=False)
    working = activation_bytes(first, m.recompute, view, T, a) - per_mb
    items["activations/layers"] = per_mb * in_flight + working
    if m.pp == 1:
        items["activations/logits"] = LOGITS_BYTES * T * shard.vocab_size
    if m.zero >= ZeroStage.PARAMETERS:
        # two layers' full parameters live while gathered (current + prefetched)
        layer = sum(lp.total for lp in count_params(shard).layers) / spec.n_layers
        items["zero3/gathered_params"] = 2 * layer * wl.storage_dtype.bytes
    items["runtime/context"] = RUNTIME_OVERHEAD_BYTES
    items["runtime/comm_buffers"] = COMM_BUFFER_BYTES
    items["runtime/fragmentation"] = FRAGMENTATION * items["activations/layers"]
    return MemoryBudget(items=items, capacity=dev.acc.memory_bytes)


def _stage_view(shard: ModelSpec, layers: int) -> ModelSpec:
    """Full recompute keeps one input per layer of the stage: a spec with the stage's layers."""
    return shard.model_copy(update={"n_layers": layers})


def _infeasible(spec: ModelSpec, cluster: Cluster, rule: str, sentence: str) -> Estimate:
    return Estimate(Phase.TRAIN, spec.id, cluster.accelerator.id, False,
                    f"{sentence} ({rule} rule)",
                    MemoryBudget(items={}, capacity=cluster.accelerator.memory_bytes),
                    {"violated_rule": rule}, {}, ())
