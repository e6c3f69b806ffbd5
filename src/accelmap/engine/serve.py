"""Serving on several devices: tensor, pipeline and expert parallelism inside a replica, and
replicas side by side.

Per forward pass (prefill of the batch's prompts, or one decode step) each pipeline stage runs
its layers of the tensor/expert-sharded graph; stages run one after the other for a single batch
(latency = sum over stages; Narayanan et al. 2021 sec. 2.2 for why a lone batch cannot fill a
pipeline). Tensor parallelism adds 2 all-reduces of the layer's activations per layer
(Shoeybi et al. 2019 sec. 3), latency-bound in decode, which is why TP decode scales sub-linearly;
expert parallelism adds dispatch and combine all-to-alls per MoE layer; pipeline stages pass
activations once per pass. Memory per device: its share of the weights and of the KV cache
(KV heads split over tp, replicated when tp exceeds them).

Attention data parallelism (``Mapping.dp_attention``; SGLang ``--enable-dp-attention``, LMSYS
blog 2024-12-04 "SGLang v0.4", sec. "Data Parallelism Attention for DeepSeek Models"): each of
the G = tp devices of the group runs attention for its own requests with the whole attention
weights (``rank_geometry``) and holds only their KV cache, so MLA's one latent KV head is no
longer held G times and the group's KV capacity is G times one device's; the dense FFN, the
experts and the LM head stay split over the group and run on all G devices' tokens, gathered
before them and scattered after (one all-gather and one reduce-scatter per layer, in place of
tensor parallelism's two all-reduces and of the experts' all-to-alls: ``serving_comm``).
Assumed: the requests are spread evenly over the G ranks (SGLang's scheduler dispatches them
round-robin or to the shortest queue); a fixed batch B puts ceil(B/G) on the busiest rank,
which sets the step (``attention_share``); expert load imbalance is ``imbalance`` as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from accelmap.cost.collectives import Collective, custom_all_reduce
from accelmap.cost.energy import op_energy_j
from accelmap.cost.execution import ExecutionModel, execution_model, runtime_items
from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.host import HostPass, host_pass
from accelmap.cost.per_token import tdp_j_per_token
from accelmap.cost.roofline import Device, OpTime, time_ops, total_time
from accelmap.engine.error_band import error_band
from accelmap.engine.result import ServeStep, fits
from accelmap.engine.shapes import (
    context_notes,
    device_notes,
    inference_precision,
    inference_shapes,
)
from accelmap.engine.system import System
from accelmap.hardware.schema import LinkRole
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.placement import place_axes
from accelmap.mapping.plan import Mapping
from accelmap.memory.budget import (
    MemoryBudget,
    inference_memory,
    kv_cache_bytes,
    weight_bytes_per_param,
)
from accelmap.models.flops import forward_flops_per_token
from accelmap.models.geometry import Geometry
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import Shape, Unit, forward_ops, kv_per_query_head
from accelmap.workload import Inference


def serve_step(spec: ModelSpec, system: System, wl: Inference, m: Mapping,
               fw: FrameworkProfile, imbalance: float = 1.0, limits: bool = True) -> ServeStep:
    """A serving batch of ``wl.batch`` requests on each of ``m.replicas`` replicas;
    ``limits``: also search the largest batch and context that fit (the planner skips it)."""
    cluster, dev = system.cluster, system.device
    bad = check_serving(spec, cluster, m)
    if bad:
        return ServeStep(spec.id, dev.acc.id, cluster.name, m, False,
                         f"{bad[0].sentence} ({bad[0].rule} rule)",
                         MemoryBudget(items={}, capacity=system.memory_bytes),
                         violated_rule=bad[0].rule, output_len=wl.output_len)
    if not dev.bandwidth:  # no published bandwidth (Coral Edge TPU): say so, do not guess
        return _unestimable(spec, system, wl, m, fw)
    runtime = execution_model(dev.acc)
    memory = serving_memory(spec, wl, m, system.memory_bytes, fw.prefill_chunk_tokens,
                            runtime=runtime, unfused=fw.unfused_transients)
    feasible, reason = fits(memory)
    lim = (_limits(spec, wl, m, system.memory_bytes, fw.prefill_chunk_tokens, runtime)
           if limits else None)
    pre_shape, dec_shape = (replace(sh, attention_share=attention_share(m, wl.batch))
                            for sh in inference_shapes(spec, wl))
    pre, dec = _replica_passes(spec, system, wl, m, fw, imbalance, pre_shape, dec_shape)
    links = serving_links(cluster, m, fw)
    a = wl.stream_dtype.bytes
    # communication per pass (serving_comm) and its seconds with the host work
    pre = pre.finish(serving_comm(spec, links, m, float(pre_shape.tokens), a), dev, fw, True)
    dec = dec.finish(serving_comm(spec, links, m, float(dec_shape.tokens), a), dev, fw, False)
    ttft, tpot = pre.seconds, dec.seconds
    steps = max(wl.output_len - 1, 0)
    total = ttft + steps * tpot
    world = int(m.world)
    out_tokens = wl.batch * wl.output_len * m.replicas
    kind = dev.acc.device_memory.kind
    # energy of one replica's ops: every device of the replica runs its shard of each op
    ops_energy = (op_energy_j([t.op for t in pre.ops], kind)
                  + steps * op_energy_j([t.op for t in dec.ops], kind)) * m.devices_per_replica
    peak, _ = dev.peak(wl.compute_dtype, Unit.MATRIX)
    decode_flops = wl.batch * forward_flops_per_token(spec, int(dec_shape.context), False)
    stream = sum(float(t.op.total_bytes) * t.op.count for t in dec.ops)
    tdp = system.tdp_w
    per_replica_tokens = max(wl.batch * wl.output_len, 1)
    return ServeStep(
        spec.id, dev.acc.id, cluster.name, m, feasible, reason, memory,
        time={**_tree("prefill", pre.ops, pre.comm, pre.host),
              **_tree("decode", dec.ops, dec.comm, dec.host)},
        ops={"prefill": tuple(pre.ops), "decode": tuple(dec.ops)},
        assumptions=(*context_notes(spec, wl.prompt_len + wl.output_len),
                     f"{m.describe_serving()} on {cluster.name}",
                     *device_notes(dev, wl.compute_dtype, fw),
                     *(hp.sentence(what) for what, hp in (("prefill", pre.hp),
                                                          ("decode step", dec.hp)) if hp)),
        error_band=error_band("serve-throughput", fw.band_stack, world,
                              dev.acc.device_class.value),
        latency_error_band=error_band("serve-latency", fw.band_stack, m.devices_per_replica,
                                      dev.acc.device_class.value),
        output_len=wl.output_len, ttft_s=ttft, tpot_s=tpot, total_time_s=total,
        tokens_per_s=out_tokens / total if wl.output_len else 0.0,
        tokens_per_s_per_device=out_tokens / total / world if wl.output_len else 0.0,
        prefill_tokens_per_s=wl.batch * wl.prompt_len * m.replicas / ttft,
        decode_mfu=decode_flops / tpot / (peak * m.devices_per_replica),
        # of the datasheet peak; none when the catalog has no peak (a profile's measured one)
        decode_bandwidth_utilization=stream / tpot / dev.acc.memory_bandwidth / dev.fraction
        if dev.acc.memory_bandwidth else None,
        energy_j_per_token_tdp=tdp_j_per_token(tdp, m.devices_per_replica,
                                               per_replica_tokens / total) if tdp else None,
        energy_j_per_token_ops=ops_energy / per_replica_tokens,
        communication_s={"prefill": pre.comm, "decode_step": dec.comm} if world > 1 else {},
        axes={k: links[k].describe() for k in ("tp", "ep", "pp")} if world > 1 else {},
        max_batch=lim[0] if lim else None, max_context=lim[1] if lim else None)


@dataclass(frozen=True)
class _Pass:
    """One forward pass of a replica (the batch's prefill, or one decode step): its timed ops;
    once ``finish``ed, its communication per kind, its host items, the eager host's pass (None:
    no host term) and its seconds."""

    ops: list[OpTime]
    comm: dict[str, float] = field(default_factory=dict)
    host: dict[str, float] = field(default_factory=dict)
    hp: HostPass | None = None
    seconds: float = 0.0

    def finish(self, comm: dict[str, Any], dev: Device, fw: FrameworkProfile,
               first: bool) -> _Pass:
        """The pass with its communication and host work: the stack's overhead once per pass,
        and once per request batch before its first token (``first``; cost/framework.py); an
        eager stack's host dispatches every op while the device runs (cost/host.py): where it
        is behind, the device waits for it ("queue": max(host, device) - device)."""
        comm = {k: float(v) for k, v in comm.items()}
        host = {"step": fw.step_overhead_s, "request": fw.request_overhead_s} if first else {
            "step": fw.step_overhead_s}
        hp = host_pass(self.ops, dev, fw)
        host["dispatch_wait"] = max(hp.host_s - hp.device_s, 0.0) if hp else 0.0
        seconds = (max(float(total_time(self.ops)), hp.host_s if hp else 0.0)
                   + sum(comm.values()) + fw.step_overhead_s)
        if first:  # the front end's latency (cost/framework.py) only delays the first token
            seconds += fw.request_overhead_s + fw.request_latency_s
            host["request_latency"] = fw.request_latency_s
        return replace(self, comm=comm, host=host, hp=hp, seconds=seconds)


def _replica_passes(spec: ModelSpec, system: System, wl: Inference, m: Mapping,
                    fw: FrameworkProfile, imbalance: float, pre_shape: Shape,
                    dec_shape: Shape) -> tuple[_Pass, _Pass]:
    """The prefill and one decode step of the tensor/expert-sharded graph: a lone batch visits
    the stages one after the other, so its latency is the whole sharded graph."""
    dev = system.device
    shard = rank_geometry(spec, m)
    p = inference_precision(wl)
    pre = time_ops(forward_ops(shard, pre_shape, p, wl.flash_attention, imbalance), dev, fw)
    dec_ops = forward_ops(shard, dec_shape, p, wl.flash_attention, imbalance)
    if fw.decode_kv_per_query_head:
        dec_ops = kv_per_query_head(dec_ops, shard, p)
    dec = time_ops(dec_ops, dev, fw)
    return _Pass(pre), _Pass(dec)


def rank_geometry(spec: ModelSpec, m: Mapping) -> Geometry:
    """One serving rank's share of the model: tensor/expert split as ``m`` says, the attention
    heads split by ``m.attention_tp`` (whole on every rank under DP attention)."""
    return Geometry.of(spec).shard(m.tp, m.ep, etp=m.expert_tp, attention_tp=m.attention_tp)


def attention_share(m: Mapping, batch: int) -> float | None:
    """Under DP attention, the share of a ``batch`` of requests whose attention the busiest of
    the G ranks runs: ceil(batch / G) / batch (requests are whole; the module doc's
    assumption); None without DP attention."""
    if not m.dp_attention or batch < 1:
        return None
    return math.ceil(batch / int(m.attention_dp)) / batch


def serving_links(cluster: Any, m: Mapping, fw: FrameworkProfile | None = None
                  ) -> dict[str, Any]:
    """Where each serving axis runs: tp inside, then pp; expert parallelism splits the
    tensor-parallel group (vLLM ``--enable-expert-parallel``): same devices, same links.
    A stack with a custom all-reduce (``fw.custom_all_reduce``) runs it on NVSwitch-class
    scale-up links (NCCL protocols, not a torus) where it beats NCCL."""
    links = place_axes(cluster, {"tp": m.tp, "pp": m.pp}, order=("tp", "pp"))
    one_shot = custom_all_reduce() if fw is not None and fw.custom_all_reduce else None
    tp = links["tp"]
    up = cluster.tier(LinkRole.SCALE_UP)
    if (one_shot is not None and up is not None and tp.inner.name == up.name
            and tp.inner.simple_latency_s is not None):  # NCCL-class scale-up, not a torus
        # inside one domain only: the hierarchical path never uses the custom kernel
        links["tp"] = replace(tp, inner=replace(tp.inner, one_shot=one_shot))
    links["ep"] = links["tp"]
    return links


def serving_comm(spec: ModelSpec, links: dict[str, Any], m: Mapping, tokens: Any,
                 act_bytes: float) -> dict[str, Any]:
    """Communication of one forward pass over ``tokens`` tokens (scalar or array), seconds per
    axis: 2 all-reduces of the activations per layer under tp (Shoeybi et al. 2019 sec. 3),
    one send per stage boundary. Expert parallelism inside the tp group adds no all-to-all:
    after the attention block's all-reduce every rank of the group holds the same tokens, runs
    them through its own experts (whole under ep = tp, tensor-split under ep < tp) and the
    MoE block's output is the second all-reduce of the layer (vLLM's FusedMoE reduces its
    results over the tensor-parallel group; its all-to-all backends serve data-parallel
    attention with EP, ``docs/design/moe_kernel_features.md``; SGLang's EP MoE and
    TensorRT-LLM's TP-attention + EP-MoE likewise reduce). The ``ep`` key stays, zero.
    Under DP attention (module doc), per layer one all-gather of the group's T tokens to the
    FFN or experts and one reduce-scatter back (SGLang v0.4's DP attention; the ``tp`` key,
    on the same links), and no separate expert all-to-all: every rank's local experts see the
    gathered tokens. DeepEP's all-to-all dispatch/combine mode is not modelled."""
    d = spec.d_model
    if m.dp_attention:
        size = tokens * d * act_bytes  # the gathered activations (nccl-tests' size)
        pp = (m.pp - 1) * links["pp"].time(Collective.SEND_RECV, size / m.attention_dp)
        return {"tp": spec.n_layers * (links["tp"].time(Collective.ALL_GATHER, size)
                                       + links["tp"].time(Collective.REDUCE_SCATTER, size)),
                "pp": pp, "ep": 0.0 * tokens}
    return {"tp": 2 * spec.n_layers * links["tp"].time(Collective.ALL_REDUCE,
                                                       tokens * d * act_bytes),
            "pp": (m.pp - 1) * links["pp"].time(Collective.SEND_RECV, tokens * d * act_bytes),
            "ep": 0.0 * tokens}


def _tree(phase: str, times: list[OpTime], comm: dict[str, float],
          host: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in times:
        key = f"{phase}/{t.op.stage.value}/{t.op.name}"
        out[key] = out.get(key, 0.0) + float(t.total_s)
    out.update({f"{phase}/exposed_comm/{k}": v for k, v in comm.items() if v > 0})
    out.update({f"{phase}/host/{k}": v for k, v in host.items() if v > 0})
    return out


def serving_memory(spec: ModelSpec, wl: Inference, m: Mapping, capacity: float,
                   chunk: int | None, tokens: Any = None,
                   runtime: ExecutionModel | None = None, unfused: bool = False) -> MemoryBudget:
    """One device's share: the sharded model's weights and KV over ceil(L/pp) layers;
    ``unfused``: the stack keeps elementwise outputs next to their inputs (eager). Under DP
    attention the attention weights are whole and the KV cache is the busiest rank's own
    ceil(B/G) requests' (module doc)."""
    stage = rank_geometry(spec, m).first_layers(math.ceil(spec.n_layers / m.pp))
    budget = inference_memory(stage, wl, capacity, tokens=tokens, prefill_chunk=chunk,
                              unfused=unfused)
    if m.dp_attention:
        own = math.ceil(wl.batch / int(m.attention_dp))
        seq = wl.prompt_len + wl.output_len if tokens is None else tokens
        budget.items["kv_cache"] = kv_cache_bytes(stage, own, seq, wl.kv_dtype, wl.kv_block)
    if runtime is not None:  # the class's runtime (cost/execution.py), else the GPU's
        budget = replace(budget, items=runtime_items(budget.items, runtime))
    if m.pp > 1:  # the embedding and head sit on the end stages; charge one of them
        pc = count_params(stage)
        other_end = pc.embedding + pc.lm_head - max(pc.embedding, pc.lm_head)
        budget.items["weights"] = budget.items["weights"] - other_end * weight_bytes_per_param(
            wl.weight_dtype, wl.quant_group)
    return budget


def _limits(spec: ModelSpec, wl: Inference, m: Mapping, capacity: float,
            chunk: int | None, runtime: ExecutionModel | None = None) -> tuple[int, int]:
    """Largest batch at this length and longest context at this batch that fit in memory: by
    the same rule as the estimate's verdict (not over capacity beyond the memory band,
    ``memory.band``), so a batch is feasible exactly when it is at most the largest."""

    def fit(batch: int, seq: int) -> bool:
        w = replace(wl, batch=batch, prompt_len=max(seq - wl.output_len, 1))
        return not bool(np.any(serving_memory(spec, w, m, capacity, chunk, tokens=seq,
                                              runtime=runtime).over))

    def largest(pred: Any, hi_limit: int) -> int:
        if not pred(1):
            return 0
        lo, hi = 1, 2
        while hi <= hi_limit and pred(hi):
            lo, hi = hi, hi * 2
        hi = min(hi, hi_limit + 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if pred(mid) else (lo, mid)
        return lo

    seq = wl.prompt_len + wl.output_len
    return (largest(lambda b: fit(b, seq), 1 << 20),
            largest(lambda s: fit(wl.batch, s), 1 << 24))


def _unestimable(spec: ModelSpec, system: System, wl: Inference, m: Mapping,
                 fw: FrameworkProfile) -> ServeStep:
    """A device whose catalog entry has no memory bandwidth: whether the model fits, and
    plainly that its time cannot be estimated (an infeasible result, not an exception)."""
    acc = system.accelerator
    memory = serving_memory(spec, wl, m, system.memory_bytes, fw.prefill_chunk_tokens,
                            runtime=execution_model(acc))
    ok, why = fits(memory)
    reason = (f"{spec.id} does not fit {acc.id}: {why}" if not ok else
              f"{acc.id} publishes no memory bandwidth, so {spec.id}'s time cannot be "
              "estimated: measure it (`accelmap measure bandwidth`, `accelmap calibrate`) and "
              "pass --profile NAME")
    return ServeStep(spec.id, acc.id, system.cluster.name, m, False, reason, memory,
                     violated_rule="memory" if not ok else "bandwidth",
                     output_len=wl.output_len)
