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
"""

from __future__ import annotations

import math
from typing import Any

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.collectives import Collective
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.cost.roofline import Device, time_ops, total_time
from accelmap.estimate import (
    CALIBRATION_NOTE,
    Estimate,
    context_notes,
    fits,
    inference_precision,
    inference_shapes,
)
from accelmap.hardware.cluster import Cluster
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.placement import place_axes
from accelmap.mapping.plan import ServeMapping
from accelmap.memory.budget import inference_memory
from accelmap.models.geometry import Geometry
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import forward_ops
from accelmap.workload import Inference, Phase


def parallel_inference(spec: ModelSpec, cluster: Cluster, wl: Inference, m: ServeMapping,
                       framework: Framework | str = Framework.VLLM,
                       imbalance: float = 1.0,
                       profile: CalibrationProfile | None = None) -> Estimate:
    """``profile``: a measured calibration of the cluster's accelerator (accelmap calibrate)."""
    fw = framework_profile(framework)
    dev = Device.of(cluster.accelerator, profile=profile)
    bad = check_serving(spec, cluster, m)
    if bad:
        from accelmap.memory.budget import MemoryBudget

        return Estimate(Phase.DECODE, spec.id, dev.acc.id, False,
                        f"{bad[0].sentence} ({bad[0].rule} rule)",
                        MemoryBudget(items={}, capacity=dev.acc.memory_bytes),
                        {"violated_rule": bad[0].rule}, {}, ())
    shard = Geometry.of(spec).shard(m.tp, m.ep, etp=max(m.tp // m.ep, 1))
    p = inference_precision(wl)
    pre_shape, dec_shape = inference_shapes(spec, wl)
    # a lone batch visits the stages one after the other: its latency is the whole sharded graph
    pre = time_ops(forward_ops(shard, pre_shape, p, wl.flash_attention, imbalance), dev, fw)
    dec = time_ops(forward_ops(shard, dec_shape, p, wl.flash_attention, imbalance), dev, fw)
    # expert parallelism splits the tensor-parallel group (vLLM): same devices, same links
    links = place_axes(cluster, {"tp": m.tp, "pp": m.pp}, order=("tp", "pp"))
    links["ep"] = links["tp"]
    a, d = wl.act_dtype.bytes, spec.d_model
    layers = spec.n_layers
    moe_layers = spec.n_moe_layers

    def comm(tokens: float) -> dict[str, float]:
        out = {"tp": 2 * layers * float(links["tp"].time(Collective.ALL_REDUCE, tokens * d * a)),
               "pp": (m.pp - 1) * float(links["pp"].time(Collective.SEND_RECV, tokens * d * a))}
        out["ep"] = (2 * moe_layers * float(links["ep"].time(
            Collective.ALL_TO_ALL, tokens * spec.moe.top_k * d * a)) if spec.moe else 0.0)
        return out

    pre_comm = comm(float(pre_shape.tokens))
    dec_comm = comm(float(dec_shape.tokens))
    ttft = float(total_time(pre)) + sum(pre_comm.values())
    tpot = float(total_time(dec)) + sum(dec_comm.values())
    total = ttft + max(wl.output_len - 1, 0) * tpot
    out_tokens = wl.batch * wl.output_len * m.replicas
    memory = _memory(spec, shard, wl, m, dev, fw.prefill_chunk_tokens)
    metrics: dict[str, Any] = {
        "ttft_s": ttft,
        "tpot_s": tpot,
        "total_time_s": total,
        "tokens_per_s": out_tokens / total if wl.output_len else 0.0,
        "tokens_per_s_per_device": out_tokens / total / m.world if wl.output_len else 0.0,
        "communication_s": {"prefill": pre_comm, "decode_step": dec_comm},
        "axes": {k: links[k].describe() for k in ("tp", "ep", "pp")},
    }
    feasible, reason = fits(memory)
    return Estimate(Phase.DECODE if wl.output_len else Phase.PREFILL, spec.id, dev.acc.id,
                    feasible, reason, memory, metrics, {"prefill": pre, "decode": dec},
                    (*context_notes(spec, wl.prompt_len + wl.output_len),
                     f"tp={m.tp} pp={m.pp} ep={m.ep} x {m.replicas} replicas on {cluster.name}",
                     f"{CALIBRATION_NOTE}{dev.calibration}"))


def _memory(spec: ModelSpec, shard: Geometry, wl: Inference, m: ServeMapping, dev: Device,
            chunk: int | None) -> Any:
    """One device's share: the sharded geometry's weights and KV over ceil(L/pp) layers."""
    stage = shard.first_layers(math.ceil(spec.n_layers / m.pp))
    budget = inference_memory(stage, wl, dev.acc.memory_bytes, prefill_chunk=chunk)
    if m.pp > 1:  # the embedding and head sit on the end stages; charge one of them
        from accelmap.models.params import count_params

        pc = count_params(stage)
        extra = (pc.total - pc.embedding - pc.lm_head) + max(pc.embedding, pc.lm_head)
        budget.items["weights"] = budget.items["weights"] * extra / pc.total
    return budget
