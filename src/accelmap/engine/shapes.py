"""What a workload asks of the operator graph: token shapes and precisions per phase, and the
notes every estimate carries.

Inference: TTFT = prefill time of the whole prompt batch; TPOT = one decode step at the mean
context (prompt + output/2: decode time is linear in context).
"""

from __future__ import annotations

from dataclasses import replace

from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.roofline import Device
from accelmap.errors import InputError
from accelmap.hardware import plausibility
from accelmap.memory.budget import weight_bytes_per_param
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import Precision, Shape, Unit, causal_shape_context
from accelmap.units import DType
from accelmap.workload import Inference

# prefix of the assumption line that says where the achievable figures come from
CALIBRATION_NOTE = "calibration: "


def inference_precision(wl: Inference) -> Precision:
    """Attention runs in the activations' dtype, in 16 bits under FP8 (Precision.attention):
    an fp32 run (a CPU) computes its attention in fp32."""
    p = Precision(act=wl.act_dtype, weight=wl.weight_dtype, compute=wl.compute_dtype,
                  kv=wl.kv_dtype, attention=wl.stream_dtype,
                  weight_bytes_per_param=weight_bytes_per_param(wl.weight_dtype,
                                                                wl.quant_group),
                  sparsity=wl.sparsity,
                  weight_only=wl.weight_dtype in wl.dequantized_formats)
    if wl.moe_weight_dtype is None:
        return p
    w = wl.moe_weight_dtype
    return replace(p, experts=replace(
        p, weight=w, compute=wl.expert_compute_dtype,
        weight_bytes_per_param=weight_bytes_per_param(w, wl.quant_group),
        weight_only=w in wl.dequantized_formats))


def inference_shapes(spec: ModelSpec, wl: Inference) -> tuple[Shape, Shape]:
    b, p, o = wl.batch, wl.prompt_len, wl.output_len
    prefill = Shape(tokens=b * p, kv_tokens=b * p, sequences=b, logits_tokens=b,
                    **causal_shape_context(spec, float(p), wl.flash_attention))
    ctx = p + max(o, 1) / 2  # mean cached length over the decode steps
    decode = Shape(tokens=b, context=ctx, kv_tokens=b * ctx, sequences=b, logits_tokens=b,
                   decode=True)
    return prefill, decode


def context_notes(spec: ModelSpec, tokens: int) -> list[str]:
    """A warning when a sequence runs past the context the model was built for
    (``max_seq_len``, the config's max_position_embeddings): the estimate still holds for the
    arithmetic, but the model's quality there is not what its card reports."""
    if tokens <= spec.max_seq_len:
        return []
    return [f"warning: {tokens:,} tokens per sequence exceed {spec.id}'s context of "
            f"{spec.max_seq_len:,}; the time and memory are extrapolated"]


def check_serving_context(spec: ModelSpec, prompt: int, output: int) -> None:
    """Serving past the model's context is refused, as serving engines refuse it (vLLM checks
    ``max_model_len`` against the config's ``max_position_embeddings`` and stops with an error
    unless told otherwise, vllm/config.py ``_get_and_verify_max_len``): the model attends no
    further than it was built for. Training past it is context extension, a normal stage of
    pre-training (``context_notes`` warns); serving an extended context means a config that
    says so, which ``--set context=N`` gives."""
    total = prompt + output
    if total <= spec.max_seq_len:
        return
    raise InputError(
        f"--prompt {prompt:,} + --output {output:,} = {total:,} tokens exceed {spec.id}'s "
        f"context of {spec.max_seq_len:,} (max_position_embeddings): shorten them, or add "
        f"--set context={total} to serve it with an extended context (RoPE scaling)")


def device_notes(dev: Device, dtype: DType, fw: FrameworkProfile) -> list[str]:
    """Where the achievable figures come from (every estimate says it), and a warning for each
    physical bound the device's spec breaks."""
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
    # a device spec past a physical bound (hardware/plausibility.py) is estimated all the same
    notes += plausibility.warnings(dev.acc)
    notes += [f"what-if: {w}" for w in dev.acc.what_if]  # figures changed with --set
    return notes
