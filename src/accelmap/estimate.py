"""estimate(model, device, workload) -> Estimate: the one pure function everything else calls.

Single device (this issue); the distributed engine adds a Mapping. Definitions:

- model FLOPs (for MFU) follow PaLM (Chowdhery et al. 2022, App. B): 6N per token plus
  12 * L * h * d_head * s for attention, i.e. 3 x the forward FLOPs with full (not causal-halved)
  attention; ``models.flops.forward_flops_per_token(causal=False)``;
- hardware FLOPs (for HFU) are what the operator graph executes, recomputation included;
- MFU = model FLOPs per second / dense peak of the training dtype; ``tflops_per_device`` uses
  model FLOPs;
- inference: TTFT = prefill time of the whole prompt batch; TPOT = one decode step at the mean
  context (prompt + output/2: decode time is linear in context); throughput = batch x output /
  (TTFT + (output - 1) x TPOT).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelmap.cost.energy import op_energy_j
from accelmap.cost.framework import Framework, FrameworkProfile, profile
from accelmap.cost.roofline import Device, OpTime, Overlap, time_ops, total_time
from accelmap.memory.budget import MemoryBudget, inference_memory, training_memory
from accelmap.models.flops import forward_flops_per_token
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import (
    Op,
    Precision,
    Shape,
    Stage,
    Unit,
    causal_shape_context,
    forward_ops,
)
from accelmap.ops.training import backward_ops, optimizer_ops, recompute_ops
from accelmap.units import DType
from accelmap.workload import Inference, Phase, Training

Num = Any
# prefix of the assumption line that says where the achievable figures come from
CALIBRATION_NOTE = "calibration: "


@dataclass(frozen=True)
class Estimate:
    phase: Phase
    model: str
    accelerator: str
    feasible: bool
    reason: str | None
    memory: MemoryBudget
    metrics: dict[str, Any]
    times: dict[str, list[OpTime]]  # stage group ("prefill", "decode", "step") -> op times
    assumptions: tuple[str, ...] = field(default=())

    @property
    def calibration(self) -> str | None:
        """'datasheet-derived defaults ...' or 'measured profile ...' (the Device's word)."""
        return next((a.removeprefix(CALIBRATION_NOTE) for a in self.assumptions
                     if a.startswith(CALIBRATION_NOTE)), None)

    def to_dict(self, ops: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase.value,
            "model": self.model,
            "accelerator": self.accelerator,
            "feasible": bool(self.feasible),
            "reason": self.reason,
            **{k: _plain(v) for k, v in self.metrics.items()},
            "memory": {
                "total_bytes": float(self.memory.total),
                "capacity_bytes": self.memory.capacity,
                "margin_bytes": float(self.memory.margin),
                "fits": bool(self.memory.fits),
                "breakdown": self.memory.tree(),
            },
            "calibration": self.calibration,
            "assumptions": list(self.assumptions),
        }
        if ops:
            out["ops"] = {group: [op_row(t) for t in ts] for group, ts in self.times.items()}
        return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def op_row(t: OpTime) -> dict[str, Any]:
    op = t.op
    return {
        "name": op.name,
        "stage": op.stage.value,
        "unit": op.unit.value,
        "dtype": op.dtype.value,
        "count": op.count,
        "flops": float(op.flops),
        "bytes": {k.value: float(v) for k, v in op.bytes.items()},
        "intensity_flop_per_byte": float(op.intensity),
        "compute_s": float(t.compute_s),
        "memory_s": float(t.memory_s),
        "overhead_s": float(t.overhead_s),
        "time_s": float(t.time_s),
        "total_s": float(t.total_s),
        "bound": t.bound,
        "achievable_flops": float(t.achievable_flops),
    }


def _assumptions(dev: Device, dtype: DType, fw: FrameworkProfile) -> list[str]:
    eff, src = dev.matmul_efficiency(dtype)
    peak, peak_src = dev.peak(dtype, Unit.MATRIX)
    notes = [
        f"{CALIBRATION_NOTE}{dev.calibration}",
        f"matmul efficiency {eff:.3f} of dense peak: {src}",
        f"matmul peak {peak / 1e12:.1f} TFLOP/s ({peak_src})",
        f"memory bandwidth {dev.bandwidth / 1e9:.0f} GB/s achievable: {dev.bandwidth_source}",
        f"framework {fw.name.value}: {fw.kernel_overhead_s * 1e6:.2f} us per kernel "
        f"({fw.overhead_source}); elementwise fused: {fw.fuses_elementwise}",
    ]
    if dev.fraction != 1.0:
        notes.append(f"uses {dev.fraction:g} of the catalog device")
    return notes


def context_notes(spec: ModelSpec, tokens: int) -> list[str]:
    """A warning when a sequence runs past the context the model was built for
    (``max_seq_len``, the config's max_position_embeddings): the estimate still holds for the
    arithmetic, but the model's quality there is not what its card reports."""
    if tokens <= spec.max_seq_len:
        return []
    return [f"warning: {tokens:,} tokens per sequence exceed {spec.id}'s context of "
            f"{spec.max_seq_len:,}; the time and memory are extrapolated"]


def training_precision(wl: Training) -> Precision:
    """FP8 training (Transformer Engine, torchao float8) runs the GEMMs in FP8 and keeps weights,
    activations, attention and vector ops in BF16 (NVIDIA Transformer Engine docs, "Using FP8"):
    everything but the GEMMs in the workload's storage dtype."""
    store = wl.storage_dtype
    return Precision(act=store, weight=store, compute=wl.dtype, kv=store, attention=store)


def training_ops(spec: ModelSpec, wl: Training, imbalance: float = 1.0) -> list[Op]:
    s = wl.seq_len
    shape = Shape(
        tokens=wl.batch * s,
        **causal_shape_context(spec, float(s), wl.flash_attention),
        kv_tokens=wl.batch * s,
        sequences=wl.batch,
        logits_tokens=wl.batch * s,
        dropout=wl.dropout,
    )
    p = training_precision(wl)
    fwd = forward_ops(spec, shape, p, flash=wl.flash_attention, imbalance=imbalance,
                      training=True)
    return (fwd + recompute_ops(fwd, wl.recompute, wl.flash_attention)
            + backward_ops(fwd, wl.grad_dtype)
            + optimizer_ops(float(count_params(spec).total), wl))


def estimate_training(spec: ModelSpec, dev: Device, wl: Training,
                      framework: Framework | str = Framework.MEGATRON,
                      overlap: Overlap = Overlap.MAX, imbalance: float = 1.0,
                      price_usd_per_hour: float | None = None) -> Estimate:
    fw = profile(framework)
    ops = training_ops(spec, wl, imbalance)
    times = time_ops(ops, dev, fw, overlap)
    step = total_time(times)
    tokens = wl.tokens_per_step
    model_flops = 3.0 * forward_flops_per_token(spec, wl.seq_len, causal=False) * tokens
    hw_flops = sum(o.flops * o.count for o in ops if o.stage is not Stage.OPTIMIZER)
    peak, _ = dev.peak(wl.dtype, Unit.MATRIX)
    fwd_ops = [o for o in ops if o.stage is Stage.FORWARD]
    memory = training_memory(spec, wl, fwd_ops, dev.acc.memory_bytes * dev.fraction)
    tdp = dev.acc.tdp.value * dev.fraction if dev.acc.tdp else None
    metrics: dict[str, Any] = {
        "step_time_s": step,
        "tokens_per_s": tokens / step,
        "mfu": model_flops / (step * peak),
        "hfu": hw_flops / (step * peak),
        "tflops_per_device": model_flops / step / 1e12,
        "model_flops_per_step": model_flops,
        "hardware_flops_per_step": hw_flops,
        "time_breakdown_s": _breakdown(times),
        "energy_j_per_token_tdp": tdp * step / tokens if tdp else None,
        "energy_j_per_token_ops": op_energy_j(ops, dev.acc.device_memory.kind) / tokens,
    }
    if wl.tokens_to_train:
        seconds = wl.tokens_to_train / metrics["tokens_per_s"]
        metrics["time_to_train_s"] = seconds
        if price_usd_per_hour:
            metrics["cost_to_train_usd"] = seconds / 3600 * price_usd_per_hour
    feasible, reason = fits(memory)
    return Estimate(Phase.TRAIN, spec.id, dev.acc.id, feasible, reason, memory, metrics,
                    {"step": times},
                    tuple(context_notes(spec, wl.seq_len) + _assumptions(dev, wl.dtype, fw)))


def fits(memory: MemoryBudget) -> tuple[bool, str | None]:
    """Whether the budget fits every device, and if not one sentence saying by how much."""
    if np.all(memory.fits):
        return True, None
    need = float(np.max(memory.total)) / 2**30
    have = memory.capacity / 2**30
    return False, (f"needs {need:.1f} GiB per device but the device has {have:.1f} GiB "
                   "(memory rule)")


def _breakdown(times: list[OpTime]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in times:
        key = f"{t.op.stage.value}/{t.op.name}"
        out[key] = out.get(key, 0.0) + float(np.sum(t.total_s))
    return out


def inference_shapes(spec: ModelSpec, wl: Inference) -> tuple[Shape, Shape]:
    b, p, o = wl.batch, wl.prompt_len, wl.output_len
    prefill = Shape(tokens=b * p, kv_tokens=b * p, sequences=b, logits_tokens=b,
                    **causal_shape_context(spec, float(p), wl.flash_attention))
    ctx = p + max(o, 1) / 2  # mean cached length over the decode steps
    decode = Shape(tokens=b, context=ctx, kv_tokens=b * ctx, sequences=b, logits_tokens=b,
                   decode=True)
    return prefill, decode


def inference_precision(wl: Inference) -> Precision:
    from accelmap.memory.budget import weight_bytes_per_param

    return Precision(act=wl.act_dtype, weight=wl.weight_dtype, compute=wl.compute_dtype,
                     kv=wl.kv_dtype,
                     weight_bytes_per_param=weight_bytes_per_param(wl.weight_dtype,
                                                                   wl.quant_group))


def estimate_inference(spec: ModelSpec, dev: Device, wl: Inference,
                       framework: Framework | str = Framework.VLLM,
                       overlap: Overlap = Overlap.MAX, imbalance: float = 1.0) -> Estimate:
    fw = profile(framework)
    prefill_shape, decode_shape = inference_shapes(spec, wl)
    p = inference_precision(wl)
    pre = time_ops(forward_ops(spec, prefill_shape, p, wl.flash_attention, imbalance), dev, fw,
                   overlap)
    dec = time_ops(forward_ops(spec, decode_shape, p, wl.flash_attention, imbalance), dev, fw,
                   overlap)
    ttft = total_time(pre)
    tpot = total_time(dec)
    total = ttft + max(wl.output_len - 1, 0) * tpot
    out_tokens = wl.batch * wl.output_len
    memory = inference_memory(spec, wl, dev.acc.memory_bytes * dev.fraction,
                              prefill_chunk=fw.prefill_chunk_tokens)
    tdp = dev.acc.tdp.value * dev.fraction if dev.acc.tdp else None
    op_energy = (op_energy_j([t.op for t in pre], dev.acc.device_memory.kind)
                 + max(wl.output_len - 1, 0)
                 * op_energy_j([t.op for t in dec], dev.acc.device_memory.kind))
    peak, _ = dev.peak(wl.compute_dtype, Unit.MATRIX)
    decode_flops = wl.batch * forward_flops_per_token(spec, int(decode_shape.context), False)
    metrics: dict[str, Any] = {
        "ttft_s": ttft,
        "tpot_s": tpot,
        "total_time_s": total,
        "tokens_per_s": out_tokens / total if wl.output_len else 0.0,
        "prefill_tokens_per_s": wl.batch * wl.prompt_len / ttft,
        "decode_mfu": decode_flops / tpot / peak,
        # of the datasheet peak; none when the catalog has no peak (a profile's measured one)
        "decode_bandwidth_utilization": sum(float(t.op.total_bytes) * t.op.count for t in dec)
        / tpot / dev.acc.memory_bandwidth / dev.fraction if dev.acc.memory_bandwidth else None,
        "energy_j_per_token_tdp": tdp * total / max(out_tokens, 1) if tdp else None,
        "energy_j_per_token_ops": op_energy / max(out_tokens, 1),
        "time_breakdown_s": {**{f"prefill/{k}": v for k, v in _breakdown(pre).items()},
                             **{f"decode/{k}": v for k, v in _breakdown(dec).items()}},
    }
    metrics.update(_limits(spec, wl, dev, fw.prefill_chunk_tokens))
    feasible, reason = fits(memory)
    return Estimate(Phase.DECODE if wl.output_len else Phase.PREFILL, spec.id, dev.acc.id,
                    feasible, reason, memory, metrics, {"prefill": pre, "decode": dec},
                    tuple(context_notes(spec, wl.prompt_len + wl.output_len)
                          + _assumptions(dev, wl.compute_dtype, fw)))


def _limits(spec: ModelSpec, wl: Inference, dev: Device, chunk: int | None) -> dict[str, int]:
    """Largest batch at this length and longest context at this batch that fit in memory."""
    from dataclasses import replace

    cap = dev.acc.memory_bytes * dev.fraction

    def fits(batch: int, seq: int) -> bool:
        w = replace(wl, batch=batch, prompt_len=max(seq - wl.output_len, 1))
        return bool(inference_memory(spec, w, cap, tokens=seq, prefill_chunk=chunk).fits)

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
    return {
        "max_batch": largest(lambda b: fits(b, seq), 1 << 20),
        "max_context": largest(lambda s: fits(wl.batch, s), 1 << 24),
    }
