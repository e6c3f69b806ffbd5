"""Number formats on a part: what ``fp4`` means there, which formats its matrix units run, and
what a job asks of a part that cannot run them.

- ``fp4`` is the device's native 4-bit format (``Accelerator.native_fp4``): NVFP4 on NVIDIA
  Blackwell (16-value blocks, E4M3 scales, an FP32 scale per tensor: NVIDIA's NVFP4 blog),
  MXFP4 on CDNA4 (32-value blocks, E8M0 scales: OCP MX v1.0). On a part without FP4 tensor
  cores it is the vendor's checkpoint format (NVFP4 on NVIDIA, MXFP4 elsewhere), served
  weight-only.
- Serving weights in a microscaling format the part does not run (``block_scaled`` in its
  catalog entry) are dequantized inside the GEMM: W4A16 (vLLM's Marlin FP4 kernels on Hopper
  and Ampere; ROCm's on CDNA3) -- the GEMM runs at the 16-bit rate, the weights stream at their
  4.x bits, and the conversion costs vector work (``ops.graph.DEQUANT_FLOPS``). On a part that
  runs them, the GEMM is W4A4 on the FP4 tensor cores, its activations quantized first.
- A KV cache is stored in fp8 by every stack, in nvfp4 by TensorRT-LLM on Blackwell
  (``KvCacheConfig dtype='nvfp4'``, TensorRT-LLM 1.1); no public stack stores it in MXFP4/MXFP6/
  MXFP8, so those are refused.
- Training in a microscaling format needs the tensor cores to run it for all three GEMMs
  (forward, dgrad, wgrad): NVFP4 and MXFP8 recipes (ops/recipes.py) on Blackwell, MXFP8/MXFP4 on
  CDNA4; elsewhere one line says why and which word to use instead.
"""

from __future__ import annotations

from dataclasses import replace

from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator
from accelmap.ops.recipes import recipe
from accelmap.units import DType
from accelmap.workload import LOW_PRECISION_GEMM, Inference, Training

BLACKWELL_PARTS = "b200, gb200, b300, gb300"


def native(acc: Accelerator, dtype: DType) -> DType:
    """``fp4`` as the part's own 4-bit format; every other word is itself."""
    if dtype is not DType.FP4:
        return dtype
    own = acc.native_fp4
    if own is not None:
        return own
    return DType.NVFP4 if acc.vendor.upper() == "NVIDIA" else DType.MXFP4


def resolve_inference(acc: Accelerator, wl: Inference, model_id: str | None = None,
                      has_experts: bool = True) -> tuple[Inference, list[str]]:
    """The workload as it runs on ``acc`` (``fp4`` resolved, weight-only formats marked) and
    the assumption lines that say so; InputError for a KV format no stack stores, and for a
    routed-expert format on a model without routed experts (the recipe would be said, not
    run)."""
    if wl.moe_weight_dtype is not None and not has_experts:
        raise InputError(f"--moe-weights {wl.moe_weight_dtype.value}: {model_id or 'the model'} "
                         "has no routed experts; drop --moe-weights or use --weights")
    w, moe, kv = native(acc, wl.weight_dtype), wl.moe_weight_dtype, native(acc, wl.kv_dtype)
    moe = native(acc, moe) if moe is not None else None
    _check_kv(acc, kv)
    stored = [d for d in (w, moe) if d is not None and d in LOW_PRECISION_GEMM]
    dequant = frozenset(d for d in stored if not acc.runs_natively(d))
    out = replace(wl, weight_dtype=w, moe_weight_dtype=moe, kv_dtype=kv,
                  dequantized_formats=dequant)
    notes = [_format_note(acc, d, d in dequant, out) for d in dict.fromkeys(stored)]
    if kv.block_format is not None:
        notes.append(f"KV cache in {kv.value}: {kv.bytes * 8:g} bits per value with its block "
                     "scales")
    if moe is not None:
        notes.append(f"mixed recipe: routed experts in {moe.value}, attention, dense and shared "
                     f"GEMMs in {w.value} (as NVIDIA's DeepSeek-R1-FP4 checkpoints)")
    return out, notes


def _format_note(acc: Accelerator, d: DType, dequantized: bool, wl: Inference) -> str:
    fmt = d.block_format
    layout = (f"{fmt.element_bits}-bit values, one {fmt.scale_format} scale per {fmt.block}"
              f"{' and one FP32 per tensor' if fmt.tensor_scale_bytes else ''}: "
              f"{fmt.bits_per_value:g} bits per weight ({fmt.source})" if fmt else "4-bit")
    if dequantized:
        return (f"{d.value} weights ({layout}) run weight-only on {acc.id}, whose matrix units "
                f"have no {d.value} mode: dequantized to {wl.gemm_dtype(d).value} inside the "
                "GEMM (W4A16, Marlin-style), the GEMM at the 16-bit rate")
    return (f"{d.value} weights ({layout}) run on {acc.id}'s block-scaled tensor cores, the "
            "activations quantized to it before each GEMM (W4A4 / W8A8)")


def _check_kv(acc: Accelerator, kv: DType) -> None:
    if kv.bytes >= 2 or kv in (DType.FP8, DType.INT8, DType.INT4):
        return
    if kv is DType.NVFP4:
        if acc.runs_natively(DType.NVFP4):
            return
        raise InputError(f"KV cache nvfp4 (--kv, kv_precision): an NVFP4 KV cache is "
                         f"TensorRT-LLM's on Blackwell ({BLACKWELL_PARTS}); {acc.id} has no "
                         "NVFP4 tensor cores: use fp8")
    raise InputError(f"KV cache {kv.value} (--kv, kv_precision): no public serving stack "
                     f"stores the KV cache in "
                     f"{kv.value} (TensorRT-LLM: fp8, nvfp4 on Blackwell; vLLM, SGLang: fp8): "
                     "use fp8 or nvfp4")


def resolve_training(acc: Accelerator, wl: Training) -> Training:
    """``fp4`` as the part's own format; InputError when the part cannot run the recipe's
    GEMMs (a microscaling recipe computes forward, dgrad and wgrad in the format)."""
    dt = native(acc, wl.dtype)
    if dt.block_format is None:
        return wl if dt is wl.dtype else replace(wl, dtype=dt)
    if not acc.runs_natively(dt):
        parts = BLACKWELL_PARTS + ("" if dt is DType.NVFP4 else ", mi355x, mi350x")
        has = (f"runs {', '.join(d.value for d in acc.block_scaled.dtypes)}"
               if acc.block_scaled else "has no block-scaled tensor cores")
        raise InputError(
            f"training in {dt.value} runs every linear layer's forward, dgrad and wgrad GEMM "
            f"in {dt.value}, which {acc.id}'s matrix units cannot run ({acc.id} {has}): train "
            f"in fp8 or bf16 there, or on a part that runs {dt.value} ({parts})")
    return wl if dt is wl.dtype else replace(wl, dtype=dt)


def resolve_formats(acc: Accelerator, wl: Training | Inference, model_id: str | None = None,
                    has_experts: bool = True) -> tuple[Training | Inference, list[str]]:
    """Either workload as it runs on ``acc``, with the lines that say how (training's recipe
    lines come from ops/recipes.py in the estimate itself)."""
    if isinstance(wl, Inference):
        return resolve_inference(acc, wl, model_id, has_experts)
    out = resolve_training(acc, wl)
    r = recipe(out.dtype)
    return out, ([r.describe()] if r is not None else [])
