"""Training on a cluster: one optimizer step of a mapped model, per device.

Per micro-batch the slowest pipeline stage runs its share of the sharded operator graph
(models/geometry.py) forward and backward; communication per axis uses the tier that axis lands
on (mapping/placement.py) and the alpha-beta collectives (cost/collectives.py):

- TP: per layer 2 all-reduces forward and 2 backward of the layer's activations (T x d), or the
  same volume as all-gather + reduce-scatter with sequence parallelism (Korthikanti et al. 2022
  sec. 4.2.2); exposed unless --tp-comm-overlap hides it behind the GEMMs;
- CP: ring attention passes K and V around the cp ranks (cp - 1 steps per layer, twice in
  backward for dK, dV), overlapped with the attention compute (Megatron-Core CP);
- EP: all-to-all dispatch and combine per MoE layer, forward and backward (exposed);
- PP: one send/recv of the activations per micro-batch per direction on the critical path;
- DP: gradient all-reduce (ZeRO 0) or reduce-scatter + parameter all-gather (ZeRO >= 1, the
  distributed optimizer) in buckets, overlapped with the last micro-batch's backward and the
  next forward, the last bucket exposed (Megatron overlap-grad-reduce / overlap-param-gather;
  cost/overlap.py);
- ZeRO-3 / FSDP: parameters all-gathered layer by layer in forward and backward and gradients
  reduce-scattered every micro-batch, each layer's gather under the previous layer's compute,
  the first gathers and the last reduce-scatter exposed; HSDP inside the shard group plus an
  all-reduce across replicas (cost/overlap.py).
Communication hidden under compute still slows it: ``cost.overlap.contention()`` seconds per
second hidden.

Step = m x (forward + backward + exposed per micro-batch on the slowest stage) + bubble +
exposed DP + optimizer + contention. The stages hold the layers Megatron-LM's split gives them
(Mapping.stage_layers), the first also the embedding, the last the head and loss; the bubble is
the other stages' time per micro-batch, scaled by the schedule, plus the point-to-point sends of
warm-up and cool-down (cost/schedules.py ``bubble_time``; (p - 1)/(v m) of ideal for equal
stages, Narayanan et al. 2021 sec. 2.2). Memory is that of the stage with the most activations
in flight.
MFU counts model FLOPs (PaLM convention) over world x peak.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from accelmap.cost import overlap as ov
from accelmap.cost.collectives import Collective
from accelmap.cost.energy import op_energy_j
from accelmap.cost.execution import execution_model, external_link_bandwidth, runtime_items
from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.per_token import tdp_j_per_token
from accelmap.cost.roofline import Device, time_ops, total_time
from accelmap.cost.schedules import (
    Schedule,
    bubble_time,
    in_flight_first_second_last,
    in_flight_micro_batches,
    schedule_names,
)
from accelmap.engine.error_band import error_band
from accelmap.engine.profile import LayerProfile, is_embed, is_layer, layer_profile
from accelmap.engine.result import TrainStep, fits
from accelmap.engine.shapes import context_notes, device_notes
from accelmap.engine.system import System
from accelmap.hardware.schema import DeviceClass, LinkRole
from accelmap.mapping.constraints import TrainingJob, check_training
from accelmap.mapping.mesh import describe_mesh
from accelmap.mapping.placement import place_axes
from accelmap.mapping.plan import RANK_ORDER, Axis, CpComm, Mapping
from accelmap.memory.band import elastic_bytes, exact_bytes
from accelmap.memory.budget import MemoryBudget, master_bytes_per_param
from accelmap.memory.stack import MemoryStack, fp8_weights, memory_stack
from accelmap.memory.training import training_items
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import Op, Unit
from accelmap.ops.training import grad_accumulation_ops, optimizer_ops
from accelmap.units import Num
from accelmap.workload import LoraTarget, PipeSends, Recompute, Training

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
    # stage-to-stage sends under an interleaved schedule run beside the compute (Megatron-Core
    # --overlap-p2p-communication); None: the stack's (memory.stack.MemoryStack.p2p_overlap)
    pp_p2p: bool | None = None


# Stage kinds, in the order StageTimes and the memory of compose stack them.
FIRST, MIDDLE, LAST = 0, 1, 2


@dataclass(frozen=True)
class StageTimes:
    """The pipeline's stages as the step sees them: layers on the first, each middle and the
    last stage (Mapping.stage_layers), the forward and backward time of one micro-batch on
    the slowest (critical) stage, and the sum over all stages of their forward + backward
    time (what warm-up and cool-down cross). The first stage holds the embedding, the last
    the head and loss; with pp = 1 one stage holds everything, with pp = 2 there is no
    middle stage."""

    pp: Num
    first_layers: Num
    middle_layers: Num
    last_layers: Num
    single: Num  # one stage holds everything
    first_critical: Num  # the first stage is the slowest
    middle_critical: Num  # else a middle one is; else the last
    fwd: Num
    bwd: Num
    total: Num  # sum over stages of forward + backward per micro-batch
    critical_layers: Num  # layers on the critical stage

    @property
    def critical(self) -> Num:
        """FIRST, MIDDLE or LAST."""
        return np.where(self.first_critical, FIRST,
                        np.where(self.middle_critical, MIDDLE, LAST))


def stage_times(prof: LayerProfile, m: Mapping) -> StageTimes:
    """Every stage's layers (Megatron-LM's split, Mapping.stage_layers: L / pp each by
    default) and the critical (slowest) stage among the first, the middle ones and the last.
    Ties go to the first stage, then the middle: a kind that does not exist never wins (with
    pp = 1 the middle and last hold L layers but no embedding, with pp = 2 the middle none)."""
    pp = np.asarray(m.pp, dtype=float)
    first, middle, last = m.stage_layers(prof.n_layers)
    single = pp <= 1
    layer = prof.layer_fwd_s + prof.layer_bwd_s
    ends_f = prof.embed_fwd_s + single * prof.head_fwd_s  # one stage holds the head too
    ends_b = prof.embed_bwd_s + single * prof.head_bwd_s
    head = prof.head_fwd_s + prof.head_bwd_s
    t_first = first * layer + (ends_f + ends_b)
    t_mid = middle * layer
    t_last = last * layer + head
    total = t_first + np.maximum(pp - 2, 0) * t_mid + (pp > 1) * t_last
    # DualPipe: an end device holds the first stage of one copy and the last of the other and
    # runs half the micro-batches through each (cost/schedules.py), so the two ends count as
    # one stage of their mean time, layers and forward share ("first"; the last never wins)
    dual = dualpipe(m)
    t_first = np.where(dual, (t_first + t_last) / 2, t_first)
    t_last = np.where(dual, t_first, t_last)
    slowest = np.maximum(np.maximum(t_first, t_mid), t_last)
    is_first = t_first >= slowest
    is_mid = ~is_first & (t_mid >= slowest)
    layers = np.where(is_first, np.where(dual, (first + last) / 2, first),
                      np.where(is_mid, middle, last))
    ends_fwd = np.where(dual, (ends_f + prof.head_fwd_s) / 2, ends_f)
    fwd = (layers * prof.layer_fwd_s + is_first * ends_fwd
           + ~(is_first | is_mid) * prof.head_fwd_s)
    return StageTimes(pp, first, middle, last, single, is_first, is_mid, fwd, slowest - fwd,
                      total, layers)


def dualpipe(m: Mapping) -> Num:
    """Where the mapping runs DualPipe over a pipeline (cost/schedules.py): each device holds
    stage r of one model copy and stage p-1-r of the other."""
    return (schedule_names(m.schedule) == Schedule.DUALPIPE.value) & (np.asarray(m.pp) > 1)


def wgrad_share(prof: LayerProfile) -> float:
    """ZB-H1's W pass (the weight-gradient GEMMs) as a share of a layer's forward + backward,
    from the operator graph (Qi et al. 2024 assume a third)."""
    return prof.layer_wgrad_s / max(prof.layer_fwd_s + prof.layer_bwd_s, 1e-30)


def stage_in_flight(m: Mapping, micro: Num, stage: Num) -> Num:
    """Micro-batches whose activations ``stage`` holds at its peak (cost/schedules.py)."""
    return in_flight_micro_batches(m.schedule, m.pp, micro, stage, m.virtual_stages)


@dataclass(frozen=True)
class Communication:
    """What a step communicates (``comm``) and what of it the step waits for (``exposed``),
    per axis, in seconds: per micro-batch for tp, cp, ep and pp, per step for dp; ``z3_mb``
    the ZeRO-3 gathers and reduce-scatters left exposed per micro-batch, ``tail`` the
    data-parallel reduction after the last backward, ``contention`` the compute stretched by
    what runs hidden under it. Arrays over a candidate table."""

    comm: dict[str, Num]
    exposed: dict[str, Num]
    z3_mb: Num
    tail: Num
    contention: Num
    links: dict[str, Any] | None


@dataclass(frozen=True)
class StepDetail:
    """The breakdowns behind a step's figures (``compose(..., detail=True)``): FLOPs and
    utilisation, micro-batches and the pipeline, the optimizer, energy, communication per
    axis per step, and the memory items of the stage that holds the most."""

    hfu: Num
    tflops_per_device: Num
    hardware_tflops_per_device: Num
    model_flops_per_step: Num
    hardware_flops_per_step: Num
    micro_batches: Num
    bubble_s: Num
    compute_forward_s: Num
    compute_backward_s: Num
    first_stage_critical: Num
    critical_stage: Num
    layers_on_critical_stage: Num
    stage_layers: tuple[Num, Num, Num]
    peak_memory_stage: Num
    optimizer_s: Num
    grad_accumulation_s: Num  # the stack's own accumulation passes (GradAccumulation), a step
    contention_s: Num
    optimizer_ops: list[Op]
    energy_j_per_step_ops: Num
    exposed: dict[str, Num]
    comm: dict[str, Num]
    memory_items: dict[str, Num]
    links: dict[str, Any] | None  # None when the times came from the distinct-pairs shortcut


@dataclass(frozen=True)
class StepFigures:
    """``compose``'s answer for one mapping or a candidate table: the figures the planner
    ranks by, and (``detail``) their breakdowns."""

    step_time_s: Num
    tokens_per_s: Num
    tokens_per_s_per_device: Num
    mfu: Num
    memory_total: Num
    memory_exact: Num  # what the memory band cannot cover (memory.band)
    memory_elastic: Num  # what the caching allocator gives back under pressure (memory.band)
    world: Num
    detail: StepDetail | None = None


def recomputed_tp_collectives(m: Mapping) -> Num:
    """TP collectives a layer's recompute runs again, in all-reduces of T x d (``one``; an
    all-gather or a reduce-scatter is half of one). Full recompute re-runs the layer's forward,
    its two all-reduces (or all-gather + reduce-scatter pairs under sequence parallelism) with
    it: Megatron-LM's checkpointed forward is the module's own (Korthikanti et al. 2022 sec. 5:
    full recompute costs a second forward pass), and so is torchtitan's ``checkpoint_wrapper``
    around each block. torchtitan's per-op checkpointing keeps the outputs of its save list,
    which holds the reduce-scatters (``_c10d_functional.reduce_scatter_tensor``) but neither
    the all-gathers nor all-reduces: under sequence parallelism the two all-gathers into the
    attention and the feed-forward block run again (one), without it the two all-reduces
    (two). Selective recompute (the attention core, no collective inside) and DeepSeek-V3's
    norm/up-projection policy re-run none."""
    policy = m.policy
    if policy is Recompute.FULL:
        return 2.0
    if policy is Recompute.PER_OP:
        return np.where(np.asarray(m.sequence_parallel, dtype=bool), 1.0, 2.0)
    return 0.0


def _tensor_parallel(prof: LayerProfile, m: Mapping, overlap: OverlapPolicy, per_stage: Num,
                     one: Num) -> tuple[Num, Num]:
    """TP traffic of a micro-batch on the critical stage and what of it is exposed: 4
    collectives per layer (2 forward, 2 backward; fewer for a parallel block:
    ``profile.tp_collectives``) of T x d activations, ``one`` each (an
    all-gather and a reduce-scatter under sequence parallelism), and those the recompute runs
    again (:func:`recomputed_tp_collectives`). With TP comm overlap, what each all-gather or
    reduce-scatter takes beyond the GEMM it is fused with (LayerProfile.layer_tp_pairs), plus
    what the overlap's SM margin costs the GEMMs (cost/overlap.py, 4.;
    LayerProfile.layer_tp_overlap_s); the recomputed forward's collectives are the forward's,
    overlapped alike: the same exposed share."""
    fwd = prof.tp_forward_collectives
    base = (fwd + prof.tp_backward_collectives) * per_stage * one
    # the recompute re-runs the forward's collectives (two for sequential blocks): a parallel
    # block's one (engine/profile.py tp_collectives)
    tp_t = base + recomputed_tp_collectives(m) * fwd / 2.0 * per_stage * one
    overlapped = np.asarray(m.tp_comm_overlap, dtype=bool) | overlap.tp
    if prof.layer_tp_pairs:  # each all-gather or reduce-scatter (half of ``one``) behind its GEMM
        unhidden = per_stage * sum(np.maximum(one / 2 - g, 0.0) for g in prof.layer_tp_pairs)
    else:
        unhidden = np.maximum(base - per_stage * prof.layer_gemm_s, 0.0)  # beyond the GEMMs
    exposed_share = (unhidden + per_stage * prof.layer_tp_overlap_s) / np.maximum(base, 1e-30)
    return tp_t, np.where(overlapped, tp_t * exposed_share, tp_t)


def _zero3(ct: dict[str, Any], overlap: OverlapPolicy, units: Num, t_fwd: Num, t_bwd: Num,
           once: Num) -> tuple[Num, Num, Num, Num]:
    """ZeRO-3 / FSDP traffic of the critical stage, each layer one wrapped unit
    (cost/overlap.py, 2.): per micro-batch (all, exposed) and per step (all, exposed).

    Every micro-batch gathers each layer's 16-bit parameters for the forward and again for the
    backward (reshard after forward) and reduce-scatters its gradients, the next layer's
    gather running under the current layer's compute. Where ``once``, PyTorch FSDP under
    pipeline parallelism, the stage is gathered once a step: torchtitan does not reshard after
    forward when pp is on (``reshard_after_forward = not pp_enabled``, apply_fsdp in
    models/llama3/infra/parallelize.py) and torch.distributed.pipelining syncs gradients on
    the last micro-batch only (``backward_maybe_with_nosync``): one gather chain under the
    first forward and one reduce-scatter chain under the last backward, the memory
    memory/training.py charges (the stage held gathered)."""
    ag_l, rs_l = ct["dp_ag_layer"], ct["dp_rs_layer"]
    ends = 2 * ct["dp_ag_ends"] + ct["dp_rs_ends"]  # embedding and head units, left exposed
    per_mb = units * (2 * ag_l + rs_l) + ends
    if overlap.zero3_prefetch:
        per_mb_exposed = (ov.per_layer_exposed(ag_l, ag_l, t_fwd / units, units)
                          + ov.per_layer_exposed(ag_l + rs_l, ag_l + rs_l, t_bwd / units, units)
                          + ends)
    else:
        per_mb_exposed = per_mb
    per_mb_exposed = np.minimum(per_mb_exposed, per_mb)
    step = units * (ag_l + rs_l) + ends
    step_exposed = step
    if overlap.zero3_prefetch:
        step_exposed = np.minimum(ov.per_layer_exposed(ag_l, ag_l, t_fwd / units, units)
                                  + ov.per_layer_exposed(rs_l, rs_l, t_bwd / units, units)
                                  + ends, step)
    return (np.where(once, 0.0, per_mb), np.where(once, 0.0, per_mb_exposed),
            np.where(once, step, 0.0), np.where(once, step_exposed, 0.0))


def _distributed_optimizer(ct: dict[str, Any], overlap: OverlapPolicy, m: Mapping, zero: Num,
                           p_dev: Num, t_fwd: Num, t_bwd: Num) -> tuple[Num, Num]:
    """ZeRO 0-2's traffic a step and what of it is exposed (cost/overlap.py, 3.): the
    distributed optimizer reduce-scatters the gradients and all-gathers the parameters, ZeRO-0
    all-reduces the gradients, both bucketed and overlapped with the last backward / the next
    forward, the last bucket exposed."""
    sharded = zero >= 1
    n_buckets = ov.buckets(p_dev, m.grad_group)
    grad = np.where(sharded, ct["dp_rs"], ct["dp_ar"]) + (n_buckets - 1) * ct["dp_latency"]
    gather = np.where(sharded, ct["dp_ag"], 0.0) + np.where(sharded, n_buckets - 1, 0) \
        * ct["dp_latency"]
    last_grad, last_gather = grad / n_buckets, gather / n_buckets
    tail = (np.maximum(grad - t_bwd, last_grad) if overlap.dp_grad_reduce else grad) + (
        np.maximum(gather - t_fwd, last_gather) if overlap.dp_param_gather else gather)
    return grad + gather, np.minimum(tail, grad + gather)


def _communication(prof: LayerProfile, system: System, wl: Training, overlap: OverlapPolicy,
                   m: Mapping, st: StageTimes, micro: Num, p_dev: Num,
                   stack: MemoryStack) -> Communication:
    """Every axis's communication and what of it is exposed (cost/overlap.py), as the
    training ``stack`` runs it (``memory.stack.MemoryStack``: whether a pipeline stage's
    ZeRO-3 parameters stay gathered across its micro-batches, whether its sends split over
    the tensor-parallel group)."""
    a, g = wl.storage_dtype.bytes, wl.grad_dtype.bytes
    per_stage, single, t_fwd, t_bwd = st.critical_layers, st.single, st.fwd, st.bwd
    cp, zero = np.asarray(m.cp), np.asarray(m.zero)
    ct, links = _collective_times(system.cluster, m, prof, a, g, stack.p2p_over_tp)
    if external_link_bandwidth(system.device.acc) is not None:
        # SwarmX broadcasts the weights and reduces the gradients on their way to and from the
        # external tier, which the offload terms of compose charge over the system I/O: the
        # wafers run no data-parallel collective among themselves (Hall et al. 2023 sec. 3)
        own = ~np.asarray(m.offloads_params, dtype=bool)
        ct = {k: (v * own if k.startswith("dp_") else v) for k, v in ct.items()}
    comm: dict[str, Num] = {}
    exposed: dict[str, Num] = {}
    comm["tp"], exposed["tp"] = _tensor_parallel(prof, m, overlap, per_stage, ct["tp"])
    # CP: (cp - 1) ring steps of this rank's K and V chunk per layer, 3x for fwd + bwd (dK, dV);
    # an all-gather moves the same bytes before the attention it feeds: none hides (CpComm)
    cp_t = 3 * per_stage * (cp - 1) * ct["cp"]
    comm["cp"] = cp_t
    ring = overlap.cp_ring and m.cp_comm is CpComm.P2P
    exposed["cp"] = np.maximum(cp_t - per_stage * prof.layer_attn_s, 0.0) if ring else cp_t
    # EP: dispatch + combine, forward and backward, of T x top_k tokens of width d
    ep_t = 4 * np.ceil(prof.n_moe_layers / st.pp) * ct["ep"]
    comm["ep"] = ep_t
    exposed["ep"] = 0.0 * ep_t if overlap.ep_all_to_all else ep_t
    pp_t, exposed["pp"] = _pipeline_sends(wl, overlap, m, st, ct, stack)
    comm["pp"] = pp_t
    # DualPipe runs each forward chunk beside another micro-batch's backward chunk, each
    # hiding the other's all-to-all and stage-to-stage sends (DeepSeek-V3 sec. 3.2.1, "both
    # all-to-all and PP communication can be fully hidden"): what outlasts the pair's compute
    # stays exposed, all-to-all first
    dual = dualpipe(m)
    room = t_fwd + t_bwd
    exposed["ep"] = np.where(dual, np.maximum(ep_t - room, 0.0), exposed["ep"])
    exposed["pp"] = np.where(dual, np.maximum(pp_t - np.maximum(room - ep_t, 0.0), 0.0),
                             exposed["pp"])

    z3 = zero >= 3
    once = z3 & stack.gather_stage_under_pp & ~np.asarray(single, dtype=bool)
    z3_mb, z3_exposed, z3_step, z3_step_exposed = _zero3(ct, overlap, per_stage, t_fwd, t_bwd,
                                                         once)
    # HSDP (shard_group < dp): the gathers and reduce-scatters above run inside the shard
    # group; each step the gradient shards are all-reduced across the dp / group replicas
    # (PyTorch FSDP HYBRID_SHARD, Zhao et al. 2023 sec. 3.4), under the last backward
    hsdp_ar = ct["dp_replica_ar"]
    hsdp_tail = np.maximum(hsdp_ar - t_bwd, hsdp_ar / ov.buckets(p_dev, m.grad_group))
    z3_step, z3_tail = z3_step + hsdp_ar, z3_step_exposed + hsdp_tail
    grad_gather, tail = _distributed_optimizer(ct, overlap, m, zero, p_dev, t_fwd, t_bwd)
    comm["dp"] = np.where(z3, z3_mb * micro + z3_step, grad_gather)
    exposed["dp"] = np.where(z3, z3_exposed * micro + z3_tail, tail)

    # contention: communication hidden under compute stretches that compute
    # TP comm overlap moves its all-gathers and reduce-scatters peer to peer on the copy engines
    # (cost/overlap.py, 4.): no NCCL kernel takes SMs from the GEMMs it hides behind
    # DualPipe hides its expert all-to-all with DeepSeek's own kernels on a fixed set of SMs
    # (cost/overlap.py, 5.): that traffic costs the compute of those SMs, not NCCL's contention
    ep_hidden = ov.hidden(comm["ep"], exposed["ep"])
    dual_ep = np.where(dualpipe(m), ep_hidden, 0.0)
    hidden_mb = (ov.hidden(comm["cp"], exposed["cp"]) + ep_hidden - dual_ep
                 + ov.hidden(pp_t, exposed["pp"])
                 + np.where(z3, ov.hidden(z3_mb, z3_exposed), 0.0))
    hidden_step = np.where(z3, ov.hidden(z3_step, z3_tail), ov.hidden(grad_gather, tail))
    contention = (ov.contention() * (micro * hidden_mb + hidden_step)
                  + ov.DUALPIPE_CONTENTION * micro * dual_ep)
    return Communication(comm, exposed, np.where(z3, z3_exposed, 0.0),
                         np.where(z3, z3_tail, tail), contention, links)


def _accumulation_time(p_dev: Num, wl: Training, dev: Device, fw: FrameworkProfile,
                       micro: Num) -> Num:
    """Seconds per micro-batch of a stack that adds each micro-batch's gradients up in a pass
    of its own (workload.GradAccumulation): memory-bound, after every backward on every stage;
    autograd's first micro-batch writes its gradient fresh."""
    acc_ops = grad_accumulation_ops(p_dev, wl)
    if not acc_ops:
        return 0.0
    share = 1.0 if wl.grad_accumulation.first_micro_batch else (micro - 1) / micro
    return total_time(time_ops(acc_ops, dev, fw)) * share


def compose(prof: LayerProfile, system: System, wl: Training, fw: FrameworkProfile,
            overlap: OverlapPolicy, m: Mapping, detail: bool = True) -> StepFigures:
    """Step time, memory and (``detail``) their breakdowns for one mapping or a table of
    candidates that share ``prof`` (the same tp, ep, cp, micro-batch and recompute).

    The mapping's pp, dp, vpp, ZeRO stage, shard group and offload may be numpy arrays (the
    planner evaluates thousands at once); every branch on them is an ``np.where``. ``estimate``
    calls this with one mapping, so the planner and ``estimate`` share one implementation."""
    dev = system.device
    micro = m.micro_batches(wl.batch)
    st = stage_times(prof, m)
    t_fwd, t_bwd = st.fwd, st.bwd
    # DualPipe's two model copies: a device reduces and updates both of its stages
    p_dev = params_per_device(prof, st.pp) * np.where(dualpipe(m), 2, 1)
    c = _communication(prof, system, wl, overlap, m, st, micro, p_dev, memory_stack(fw.name))
    t_acc = _accumulation_time(p_dev, wl, dev, fw, micro)
    host = _host_bandwidth(dev)
    ex = {**c.exposed, "act_offload": _activation_offload(prof, m, st, host)}
    per_mb = (t_fwd + t_bwd + ex["tp"] + ex["cp"] + ex["ep"] + ex["pp"] + ex["act_offload"]
              + c.z3_mb + t_acc)
    opt_shards = np.where(np.asarray(m.zero) >= 1, m.zero_shards, 1)
    opt_ops = optimizer_ops(p_dev / opt_shards, wl)
    t_opt = total_time(time_ops(opt_ops, dev, fw))
    # ZeRO-Offload (Ren et al. 2021): gradients go to the host, updated parameters come back
    t_opt = t_opt + np.where(m.offloads_optimizer,
                             2 * p_dev / opt_shards * wl.grad_dtype.bytes / host, 0.0)
    # ZeRO-Infinity (Rajbhandari et al. 2021): parameters stream in for forward and backward of
    # every micro-batch, prefetched behind compute
    fetch = 2 * (p_dev * wl.storage_dtype.bytes + frozen_per_device(prof, st.pp)) / host
    per_mb = per_mb + np.where(m.offloads_params, np.maximum(fetch - (t_fwd + t_bwd), 0.0), 0.0)
    comm = {**c.comm, "offload": np.where(m.offloads_params, fetch * micro, 0.0)}
    # Warm-up and cool-down: the other stages' busy time per micro-batch -- each stage's
    # compute with the per-layer exposed communication the critical stage shows -- and the
    # stage-to-stage sends of the first forward and the last backward (cost/schedules.py)
    busy = per_mb - ex["pp"]
    bubble_s = bubble_time(m.schedule, st.pp, micro, m.virtual_stages, slowest=busy,
                           stages_total=st.total * busy / (t_fwd + t_bwd),
                           send=np.where(st.single, 0.0,
                                         c.comm["pp"] / (2 * np.asarray(m.virtual_stages))),
                           w_share=wgrad_share(prof), b_share=t_bwd / (t_fwd + t_bwd))
    step = micro * per_mb + bubble_s + c.tail + t_opt + c.contention

    # memory: the stage with the most activations in flight -- the first under 1F1B with an
    # even split, but fewer layers on it (an uneven split), GPipe's equal in-flight counts or
    # a large head and logits on the last stage can move the peak
    items, peak_first, peak_mid = _peak_stage_memory(prof, wl, m, st, micro, fw)
    items = runtime_items(items, execution_model(dev.acc))
    tokens, world = wl.batch * wl.seq_len, m.world
    model_flops = prof.model_flops_per_token * tokens
    peak, _ = dev.peak(wl.dtype, Unit.MATRIX)
    figures = StepFigures(step, tokens / step, tokens / step / world,
                          model_flops / (step * world * peak), sum(items.values()),
                          exact_bytes(items), elastic_bytes(items), world)
    if not detail:  # the planner's hot path: ranking needs no breakdowns
        return figures
    dp, tp, cp = np.asarray(m.dp, dtype=float), np.asarray(m.tp), np.asarray(m.cp)
    L = prof.n_layers
    # HFU's numerator: the model FLOPs plus what recompute runs again, one convention
    # (engine/profile.py _recompute_flops), so HFU >= MFU
    hw_flops = model_flops + prof.layer_recompute_flops * L * micro * dp * tp * cp
    energy = ((prof.layer_energy_j * L + prof.ends_energy_j) * micro * dp * tp * cp
              + op_energy_j(opt_ops, dev.acc.device_memory.kind) * world)
    per_step = ("tp", "cp", "ep", "pp", "act_offload")  # per micro-batch: x micro-batches
    return replace(figures, detail=StepDetail(
        hfu=hw_flops / (step * world * peak),
        tflops_per_device=model_flops / step / world / 1e12,
        hardware_tflops_per_device=hw_flops / step / world / 1e12,
        model_flops_per_step=model_flops, hardware_flops_per_step=hw_flops,
        micro_batches=micro, bubble_s=bubble_s,
        compute_forward_s=micro * t_fwd, compute_backward_s=micro * t_bwd,
        first_stage_critical=st.first_critical, critical_stage=st.critical,
        layers_on_critical_stage=st.critical_layers,
        stage_layers=(st.first_layers, st.middle_layers, st.last_layers),
        peak_memory_stage=np.where(peak_first, FIRST, np.where(peak_mid, MIDDLE, LAST)),
        optimizer_s=t_opt, contention_s=c.contention, optimizer_ops=opt_ops,
        grad_accumulation_s=t_acc * micro, energy_j_per_step_ops=energy,
        exposed={k: (v * micro if k in per_step else v) for k, v in ex.items()},
        comm={k: (v * micro if k in per_step else v) for k, v in comm.items()},
        memory_items=items, links=c.links))


def _peak_stage_memory(prof: LayerProfile, wl: Training, m: Mapping, st: StageTimes,
                       micro: Num, fw: FrameworkProfile) -> tuple[dict[str, Num], Num, Num]:
    """Memory items of the stage with the most activations in flight, and whether that is the
    first stage, else a middle one (else the last). Each stage keeps its own layers' saved
    activations for every micro-batch in flight, its embedding or head inputs too, and the
    last stage one fp32 logits buffer. Under 1F1B stage s holds min(p - s, m) micro-batches,
    so the first stage holds the most with an even split; with fewer layers on the first
    stage (an uneven split, the embedding counted as a layer) the second can hold more, and
    under GPipe, where every stage holds m, the last with its head inputs and logits. Among
    the middle stages the second (s = 1) holds the most."""
    pp = np.asarray(m.pp, dtype=float)
    single = pp <= 1
    held = in_flight_first_second_last(m.schedule, pp, micro, m.virtual_stages)
    # DualPipe: an end device holds the first stage of one model copy and the last of the
    # other, a middle device two middle stages (cost/schedules.py): "first" is the end device,
    # with both stages' parameters (DeepSeek-V3 Table 2: 2x), and the last is not apart;
    # device 1 holds stage 1's p - 1 micro-batches and stage p - 2's two
    dual = dualpipe(m)
    held = (held[0], held[1] + dual * np.minimum(2.0, micro), held[2])
    la = prof.layer_act_bytes
    # activation bytes in flight on the first, second and last stage; a kind that does not
    # exist never wins: pp = 2 has no middle (its "second" is the last, compared as such), and
    # with pp = 1 the first stage is everything (head inputs and logits included)
    first = ((la * st.first_layers + prof.embed_act_bytes + single * prof.head_act_bytes)
             * held[0] + single * prof.logits_bytes)
    middle = la * st.middle_layers * held[1] * (pp > 2)
    last = ((la * st.last_layers + prof.head_act_bytes) * held[2] + prof.logits_bytes) * ~single
    first = np.where(dual, first + last, first)
    last = np.where(dual, 0.0, last)
    is_first = (first >= middle) & (first >= last)
    is_mid = ~is_first & (middle >= last)
    dual_end = dual & is_first  # with its last stage's: held[2] micro-batches
    last_like = ~(is_first | is_mid) | single | dual_end
    layers = np.where(is_first, st.first_layers, np.where(is_mid, st.middle_layers,
                                                          st.last_layers))
    in_flight = np.where(is_first, held[0], np.where(is_mid, held[1], held[2]))
    acts = (la * (layers - offloaded_layers(m, layers)) * in_flight
            + dual_end * la * st.last_layers * held[2])
    ends = ((is_first * prof.embed_act_bytes + (last_like & ~dual_end) * prof.head_act_bytes)
            * in_flight + dual_end * prof.head_act_bytes * held[2])
    logits = last_like * prof.logits_bytes
    # the layers whose parameters the device holds: both stages' under DualPipe
    layers = layers + dual * np.where(is_first, st.last_layers, np.where(is_mid, layers, 0.0))
    params = (prof.layer_params * layers + is_first * prof.embed_params
              + last_like * prof.head_params)
    a = wl.storage_dtype.bytes
    master = master_bytes_per_param(wl)
    stack = memory_stack(fw.name)
    items = training_items(
        params=params, layer_params=prof.layer_params, zero=np.asarray(m.zero),
        zero_shards=m.zero_shards, weight_bytes=a, grad_bytes=wl.grad_dtype.bytes,
        master_bytes=master, state_bytes=prof.optimizer_bytes_per_param - master,
        offload_optimizer=m.offloads_optimizer, offload_params=m.offloads_params,
        layer_acts=acts, working=prof.working_bytes, ends_acts=ends, logits=logits,
        world=m.world, stage_layer_params=prof.layer_params * layers, pp=pp,
        fp8=fp8_weights(wl, stack), stack=stack,
        frozen=(prof.layer_frozen_bytes * layers + is_first * prof.embed_frozen_bytes
                + last_like * prof.head_frozen_bytes),
        frozen_layer=prof.layer_frozen_bytes)
    return items, is_first, is_mid


def _host_bandwidth(dev: Any) -> float:
    """Bytes/s per direction to where offloaded state lives: the external tier of a
    weight-streaming part (cost/execution.py), else the host link."""
    stream = external_link_bandwidth(dev.acc)
    return float(stream[0] if stream else dev.acc.bandwidth_per_direction(LinkRole.HOST)
                 or HOST_FALLBACK_BW)


def offloaded_layers(m: Mapping, layers: Num) -> Num:
    """Layers of a stage whose saved activations sit in host memory (Mapping.
    offload_activations): at most all but the stage's last, whose backward follows its
    forward at once (Transformer Engine's CPU offload context keeps it on the device)."""
    return np.minimum(m.offload_activations, np.maximum(np.asarray(layers, dtype=float) - 1, 0))


def _activation_offload(prof: LayerProfile, m: Mapping, st: StageTimes, host_bw: float) -> Num:
    """What a micro-batch waits for of its offloaded activations on the critical stage: they
    leave over the host link during the forward and come back ahead of the backward, each
    overlapped with that pass's compute (Transformer Engine's offload runs on its own stream,
    a layer ahead); only a transfer that outlasts its pass is exposed."""
    if not m.offload_activations:
        return 0.0
    move = prof.layer_act_bytes * offloaded_layers(m, st.critical_layers) / host_bw
    return np.maximum(move - st.fwd, 0.0) + np.maximum(move - st.bwd, 0.0)


def params_per_device(prof: LayerProfile, pp: Num) -> Num:
    """Parameters one device of the first pipeline stage holds (its layers' tp/ep shard plus
    the embedding; the head too when there is one stage)."""
    per_stage = np.ceil(prof.n_layers / np.asarray(pp))
    return (prof.layer_params * per_stage + prof.embed_params
            + np.where(np.asarray(pp) <= 1, prof.head_params, 0))


def frozen_per_device(prof: LayerProfile, pp: Num) -> Num:
    """Bytes of frozen base weights (LoRA/QLoRA) one device of the first stage holds, laid
    out as ``params_per_device``."""
    per_stage = np.ceil(prof.n_layers / np.asarray(pp))
    return (prof.layer_frozen_bytes * per_stage + prof.embed_frozen_bytes
            + np.where(np.asarray(pp) <= 1, prof.head_frozen_bytes, 0))


def _pipeline_sends(wl: Training, overlap: OverlapPolicy, m: Mapping, st: StageTimes,
                    ct: dict[str, Num], stack: MemoryStack) -> tuple[Num, Num]:
    """PP, a micro-batch: activations out and gradients back, once per model chunk (a device
    with v chunks sends each chunk's output on and its input gradient back, Narayanan et al.
    2021 sec. 2.2.2: interleaving "increases the amount of communication" v times), and what
    of it is exposed. With the sends overlapped (Megatron-Core runs them asynchronously beside
    the next chunk, for interleaved schedules only: megatron/training/arguments.py turns
    overlap_p2p_comm off without virtual stages), only what outlasts a micro-batch's compute
    waits; blocking sends (DeepSpeed's engine, workload.PipeSends) never overlap."""
    v = np.asarray(m.virtual_stages, dtype=float)
    pp_t = np.where(st.single, 0.0, v * stage_sends(wl.pp_sends, ct, st.pp))
    p2p = (stack.p2p_overlap if overlap.pp_p2p is None else overlap.pp_p2p) \
        and not wl.pp_sends.blocking
    return pp_t, np.where(p2p & (v > 1), np.maximum(pp_t - (st.fwd + st.bwd), 0.0), pp_t)


def stage_sends(sends: PipeSends, ct: dict[str, Num], pp: Num) -> Num:
    """The stage-to-stage transfers one micro-batch of one model chunk waits for on a busy
    stage (``ct``: _collective_times). Batched (Megatron): its activation out and its gradient
    back, one exchange each. Blocking (DeepSpeed's ``TrainSchedule``, every send and receive a
    call of its own): a middle stage waits for its input to arrive and its output to leave,
    its output's gradient to arrive and its input's to leave -- each transfer twice, once on
    each of the two stages it joins; with two stages, neither has both neighbours and each
    transfer is waited for once. A discrete-event run of the schedule agrees to within three
    transfers a step (tests/engine/test_pipe_sends.py). Before DeepSpeed 0.5.4 the gradient
    went whole."""
    if sends is PipeSends.BATCHED:
        return 2 * ct["pp"]
    grad = ct["pp_whole"] if sends is PipeSends.BLOCKING_WHOLE_GRAD else ct["pp_part"]
    return np.where(np.asarray(pp) > 2, 2.0, 1.0) * (ct["pp_part"] + grad)


def _collective_times(cluster: Any, m: Mapping, prof: LayerProfile, a: float, g: float,
                      p2p_over_tp: bool = False) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every collective a step needs, for each (pp, dp) pair. They depend on nothing else once
    tp, cp and ep are fixed, so a large candidate table is reduced to its few distinct (pp, dp)
    pairs first (the planner's hot path); the answer is the same either way.
    ``p2p_over_tp``: a stage-to-stage send is split over the tp ranks (Megatron's scatter/
    gather, ``memory.stack.MemoryStack.p2p_over_tp``)."""
    tp, cp, ep, pp, dp = m.tp, m.cp, m.ep, m.pp, m.dp
    group = m.zero_group
    shape = np.broadcast(pp, dp, group).shape
    scalar_axes = all(np.ndim(x) == 0 for x in (tp, cp, ep))
    if scalar_axes and int(np.prod(shape)) > 64:
        # one float key per (pp, dp, group): each below 2^20 devices, so 20 bits apiece
        pp_b, dp_b, g_b = (np.broadcast_to(x, shape).ravel().astype(float)
                           for x in (pp, dp, group))
        key = (pp_b * 2.0**20 + dp_b) * 2.0**20 + g_b
        uniq, inv = np.unique(key, return_inverse=True)
        g_u = np.mod(uniq, 2.0**20)
        rest = (uniq - g_u) / 2.0**20
        dp_u = np.mod(rest, 2.0**20)
        triples = Mapping(dp=dp_u, tp=tp, pp=(rest - dp_u) / 2.0**20, cp=cp, ep=ep,
                          shard_group=g_u)
        times, _ = _collective_times(cluster, triples, prof, a, g, p2p_over_tp)
        return {k: v[np.ravel(inv)].reshape(shape) for k, v in times.items()}, None
    # Dense axes fill the world in Megatron-Core's rank order (mapping.plan.RANK_ORDER: tp
    # innermost, then cp and dp, pp outermost); expert parallelism is carved out of dp x cp next
    # to tp, so its group is placed separately. Gradients are reduced, and ZeRO shards, over
    # dp x cp (Mapping.grad_group: every cp rank holds the whole layer's weights), a contiguous
    # group of dp * cp ranks of stride tp.
    A = Axis
    links = place_axes(cluster, {A.TP: tp, A.CP: cp, A.DP: dp, A.PP: pp}, order=RANK_ORDER)
    links[A.EP] = place_axes(cluster, {A.TP: tp, A.EP: ep}, order=(A.TP, A.EP))[A.EP]
    # The data-parallel reduction and gather of ZeRO 0-2 run in the step's tail (after the last
    # backward, before the next forward: Megatron-Core's --overlap-grad-reduce buckets of the
    # last micro-batch, --overlap-param-gather of the first), when the pipeline's stage-to-stage
    # sends -- one activation per micro-batch, T x d bytes against the dp group's whole
    # parameter set -- have drained: the NIC is the dp group's alone, not shared with pp
    # (placement.place_axes shares it between axes that move data at the same time).
    links[A.DP] = place_axes(cluster, {A.TP: tp, A.DP: m.grad_group, A.PP: pp},
                             order=(A.TP, A.DP, A.PP), share_scale_out=False)[A.DP]
    # ZeRO-3 / FSDP shard group (all of dp x cp unless HSDP), and the replicas across groups
    shard = place_axes(cluster, {A.TP: tp, A.SHARD: m.zero_shards,
                                 A.REPLICA: np.asarray(m.grad_group) / m.zero_shards, A.PP: pp},
                       order=(A.TP, A.SHARD, A.REPLICA, A.PP))
    links[A.SHARD], links[A.REPLICA] = shard[A.SHARD], shard[A.REPLICA]
    p_dev = params_per_device(prof, pp)
    ends = np.maximum(p_dev - np.ceil(prof.n_layers / np.asarray(pp)) * prof.layer_params, 0.0)
    ends_frozen = np.maximum(frozen_per_device(prof, pp) - np.ceil(prof.n_layers / np.asarray(pp))
                             * prof.layer_frozen_bytes, 0.0)
    T, d = prof.T, prof.d_model
    # a stage's output, T x d: each tp rank sends its 1/t (its sequence shard under sequence
    # parallelism; else a chunk the receiving stage all-gathers over the tp group's links)
    split = p2p_over_tp & (np.asarray(tp) > 1)
    gather = np.where(split & ~np.asarray(m.sequence_parallel, dtype=bool),
                      links["tp"].time(Collective.ALL_GATHER, T * d * a), 0.0)
    times = {
        "tp": links["tp"].time(Collective.ALL_REDUCE, T * d * a),
        "cp": links["cp"].time(Collective.SEND_RECV, T * prof.kv_width * a),
        "ep": links["ep"].time(Collective.ALL_TO_ALL, T * prof.top_k * d * a),
        "pp": links["pp"].time(Collective.SEND_RECV, T * d * a / np.where(split, tp, 1))
        + gather,
        # DeepSpeed's PartitionedTensor: 1/t of the tensor from each rank, all-gathered over
        # the tp group on arrival; and the whole tensor from each rank (workload.PipeSends)
        "pp_part": links["pp"].time(Collective.SEND_RECV, T * d * a / np.asarray(tp))
        + np.where(np.asarray(tp) > 1, links["tp"].time(Collective.ALL_GATHER, T * d * a), 0.0),
        "pp_whole": links["pp"].time(Collective.SEND_RECV, T * d * a),
        "dp_ag": links["dp"].time(Collective.ALL_GATHER, p_dev * a),
        "dp_rs": links["dp"].time(Collective.REDUCE_SCATTER, p_dev * g),
        "dp_ar": links["dp"].time(Collective.ALL_REDUCE, p_dev * g),
        # one layer of a ZeRO-3 / FSDP unit, and the fixed cost of one more bucket
        "dp_ag_layer": links["shard"].time(Collective.ALL_GATHER,
                                           prof.layer_params * a + prof.layer_frozen_bytes),
        "dp_rs_layer": links["shard"].time(Collective.REDUCE_SCATTER, prof.layer_params * g),
        "dp_replica_ar": links["replica"].time(Collective.ALL_REDUCE,
                                               p_dev * g / np.asarray(m.zero_shards, dtype=float)),
        "dp_latency": links["dp"].time(Collective.REDUCE_SCATTER, 1.0),
        "dp_ag_ends": links["shard"].time(Collective.ALL_GATHER, ends * a + ends_frozen),
        "dp_rs_ends": links["shard"].time(Collective.REDUCE_SCATTER, ends * g),
    }
    return {k: np.broadcast_to(v, shape) for k, v in times.items()}, links


def train_step(spec: ModelSpec, system: System, wl: Training, m: Mapping,
               fw: FrameworkProfile, overlap: OverlapPolicy | None = None,
               imbalance: float = 1.0) -> TrainStep:
    """One optimizer step: ``wl.batch`` is the global batch in sequences; ``m`` splits it."""
    cluster, dev = system.cluster, system.device
    m = m.with_recompute(wl.recompute)  # the mapping owns it; the workload's wish, once
    overlap = overlap or OverlapPolicy(tp=m.tp_comm_overlap)
    if overlap.pp_p2p is None:  # the stack's, reported as such
        overlap = replace(overlap, pp_p2p=memory_stack(fw.name).p2p_overlap)
    violations = check_training(TrainingJob(spec, cluster, wl.batch, wl.seq_len), m)
    if violations:
        v = violations[0]
        return TrainStep(spec.id, dev.acc.id, cluster.name, m, False,
                         f"{v.sentence} ({v.rule} rule)",
                         MemoryBudget(items={}, capacity=system.memory_bytes),
                         violated_rule=v.rule)
    prof = layer_profile(spec, dev, fw, wl, m, imbalance)
    r = compose(prof, system, wl, fw, overlap, m)
    d = r.detail
    assert d is not None  # detail=True
    items = {k: float(v) for k, v in d.memory_items.items() if float(v) > 0}
    memory = MemoryBudget(items=items, capacity=system.memory_bytes)
    step, tps = float(r.step_time_s), float(r.tokens_per_s)
    tdp = system.tdp_w
    world = int(m.world)
    tokens = wl.batch * wl.seq_len
    time_to_train = wl.tokens_to_train / tps if wl.tokens_to_train else None
    price = system.price_usd_per_hour
    feasible, reason = fits(memory)
    bubble = float(d.bubble_s) / max(float(d.compute_forward_s + d.compute_backward_s), 1e-30)
    assumptions = (
        *context_notes(spec, wl.seq_len),
        f"mapping {m.describe()} on {cluster.name} ({cluster.origin})",
        *_mesh_note(m, cluster),
        f"framework {fw.name.value}; overlap {overlap}",
        f"pipeline schedule {Schedule(str(m.schedule)).value}, "
        f"{round(float(d.micro_batches))} micro-batches, bubble {bubble:.3f} of ideal"
        + ("" if wl.pp_sends is PipeSends.BATCHED or m.pp <= 1 else
           f", stage sends {wl.pp_sends.value} (each waited for on both of its stages)"),
        *_stage_notes(m, d),
        *device_notes(dev, wl.dtype, fw),
        *prof.host_notes,
        *_finetune_notes(wl, prof),
        *_stream_notes(dev.acc, m, r),
    )
    return TrainStep(
        spec.id, dev.acc.id, cluster.name, m, feasible, reason, memory,
        time=_time_tree(prof, d),
        ops={"forward": prof.forward, "backward": prof.backward,
             "optimizer": tuple(time_ops(d.optimizer_ops, dev, fw))},
        assumptions=assumptions,
        step_time_s=step, tokens_per_s=tps,
        tokens_per_s_per_device=float(r.tokens_per_s_per_device), mfu=float(r.mfu),
        hfu=float(d.hfu), tflops_per_device=float(d.tflops_per_device),
        hardware_tflops_per_device=float(d.hardware_tflops_per_device),
        model_flops_per_step=float(d.model_flops_per_step),
        hardware_flops_per_step=float(d.hardware_flops_per_step),
        micro_batches=round(float(d.micro_batches)), bubble_fraction=float(d.bubble_s) / step,
        communication_s={k: float(v) for k, v in d.comm.items()
                         if k != "offload" or float(v) > 0} if world > 1 or m.offloads_params
        else {},
        axes={k: d.links[k].describe() for k in ("tp", "cp", "ep", "pp", "dp")}
        if d.links and world > 1 else {},
        overlap_policy=overlap.__dict__,
        energy_j_per_token_tdp=tdp_j_per_token(tdp, world, tokens / step) if tdp else None,
        energy_j_per_token_ops=float(d.energy_j_per_step_ops) / tokens,
        error_band=error_band("train", fw.name.value, world, dev.acc.device_class.value),
        time_to_train_s=time_to_train,
        cost_to_train_usd=time_to_train / 3600 * price * world
        if time_to_train and price else None)


def _stream_notes(acc: Any, m: Mapping, r: StepFigures) -> list[str]:
    """What weight streaming (cost/execution.py) does to this step, or why it is off."""
    link = external_link_bandwidth(acc)
    if link is None or r.detail is None:
        return []
    if not m.offloads_params:
        return [f"{acc.id} trains by weight streaming from its external tier; this mapping "
                "keeps the weights resident on the wafer instead (give offload to stream)"]
    d = r.detail
    fetch = float(d.comm["offload"])
    step = float(r.step_time_s)
    compute = float(d.compute_forward_s + d.compute_backward_s)
    return [f"weight streaming (Cerebras; Hall et al. 2023): weights and optimizer in the "
            f"external tier, {link[0] / 1e9:,.0f} GB/s per direction ({link[1]}); the weights "
            f"stream in twice per micro-batch, {fetch:.2f} s a step of which "
            f"{max(step - compute, 0):.2f} s is not under compute; the wafers exchange no "
            "gradients (SwarmX reduces them); no published training run of this class "
            "validates these figures"]


def _finetune_notes(wl: Training, prof: LayerProfile) -> list[str]:
    """What a LoRA/QLoRA step assumed (ops/adapters.py)."""
    ad = wl.adapters
    if ad is None:
        return []
    targets = ",".join(t.value for t in LoraTarget if t in ad.targets)
    base = (f"base frozen in NF4 ({ad.base_bytes_per_param or 0:.4f} B/param with"
            f"{'' if ad.double_quant else 'out'} double quantization), dequantized to 16 bits "
            "before each forward and dgrad matmul" if ad.quantized_base
            else f"base frozen in {wl.storage_dtype.value}")
    notes = [f"{ad.method.value} fine-tune: rank {ad.rank} adapters on {targets} "
             f"({prof.layer_params * prof.n_layers / 1e6:.3g}M trainable per device); {base}; "
             "no weight gradients, gradients or optimizer states for the base; model FLOPs "
             "= 4 x base + 6 x adapter parameters per token (+ attention)"]
    if ad.paged_optimizer:
        notes.append("paged optimizer (bitsandbytes): its states are counted on the device; "
                     "under memory pressure they page to host memory instead of failing")
    return notes


def _mesh_note(m: Mapping, cluster: Any) -> list[str]:
    """On TPUs the mapping as MaxText/GSPMD names it: ICI axes inside a slice, DCN across
    slices (a slice = the ICI scale-up domain)."""
    if cluster.accelerator.device_class is not DeviceClass.TPU or not m.is_scalar:
        return []
    slices = max(int(cluster.devices) // max(int(cluster.scale_up_domain), 1), 1)
    return [f"MaxText/GSPMD mesh: {describe_mesh(m, slices)} ({slices} slice"
            f"{'s' if slices > 1 else ''} of {cluster.scale_up_domain} chips on ICI"
            f"{', DCN between them' if slices > 1 else ''})"]


def _stage_notes(m: Mapping, r: StepDetail) -> tuple[str, ...]:
    """The split and where the pipeline is slowest and fullest, for pp > 1."""
    if m.pp <= 1:
        return ()
    first, middle, last = (round(float(x), 2) for x in r.stage_layers)
    names = ("first", "middle", "last")
    split = (f"{first:g} + {m.pp - 2} x {middle:g} + {last:g}" if m.pp > 2
             else f"{first:g} + {last:g}")
    if Schedule(str(m.schedule)) is Schedule.DUALPIPE:  # a device holds stages r, p - 1 - r
        names = ("end (first + last)", "middle", "end (first + last)")
        return (f"pipeline split {split} layers (embedding on the first stage, head and loss "
                f"on the last); DualPipe: each device holds stage r of one model copy and "
                f"stage {m.pp - 1} - r of the other; slowest device: "
                f"{names[int(r.critical_stage)]}; memory of a {names[int(r.peak_memory_stage)]}"
                " device (it holds the most)",)
    return (f"pipeline split {split} layers (embedding on the first stage, head and loss on "
            f"the last); slowest stage: {names[int(r.critical_stage)]}; memory of the "
            f"{names[int(r.peak_memory_stage)]} stage (it holds the most)",)


def _time_tree(prof: LayerProfile, r: StepDetail) -> dict[str, float]:
    """Seconds per step on the critical pipeline stage, phase -> operator, plus the bubble,
    the optimizer and the exposed communication per axis."""
    micro = float(r.micro_batches)
    critical = int(r.critical_stage)
    layers = float(r.layers_on_critical_stage)
    # one stage holds everything (pp = 1: Mapping.stage_layers gives L for each kind)
    single = all(float(x) == prof.n_layers for x in r.stage_layers)
    out: dict[str, float] = {}
    for t in (*prof.forward, *prof.backward):
        name = t.op.name
        if is_layer(name):
            share = layers / prof.n_layers
        elif is_embed(name):
            share = 1.0 if (critical == FIRST or single) else 0.0
        else:
            share = 1.0 if (critical == LAST or single) else 0.0
        if share:
            key = f"{t.op.stage.value}/{name}"
            out[key] = out.get(key, 0.0) + float(t.total_s) * share * micro
    out["bubble"] = float(r.bubble_s)
    out["optimizer"] = float(r.optimizer_s)
    if float(r.grad_accumulation_s) > 0:
        out["grad_accumulation"] = float(r.grad_accumulation_s)
    if float(r.contention_s) > 0:  # compute stretched by the communication it hides
        out["contention"] = float(r.contention_s)
    for k, v in r.exposed.items():
        if float(v) > 0:
            out[f"exposed_comm/{k}"] = float(v)
    return out
