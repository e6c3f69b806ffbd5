"""The scheduler caps ``trtllm-bench throughput`` picks itself when a run states none.

TensorRT-LLM >= 1.0 benchmarks its PyTorch backend with ``trtllm-bench throughput``. Without
``--max_batch_size`` / ``--max_num_tokens`` it does not take the LLM API's defaults (2048 /
8192): ``get_settings`` (tensorrt_llm/bench/benchmark/utils/general.py) asks
``get_benchmark_engine_settings`` (bench/build/build.py), which runs the tuning heuristic of
bench/build/tuning.py (``calc_engine_setting``, ``finetune_setting``). Restated in our words:

1. KV bytes per token as the heuristic counts them: 2 x layers x max(tp, kv heads) x head size x
   bytes per KV element (1 for an FP8 cache, 0.5 for NVFP4, else 2). Kv heads and head size are
   config.json's ``num_key_value_heads`` and ``head_dim`` (else hidden / heads). An MLA model
   (DeepSeek-V3/R1) lists 128 kv heads and no head_dim, so its cache is priced as 128 heads of 56
   values: about 25 x the 576-value latent the runtime stores.
2. Engine size: the checkpoint's safetensors element count x bytes per element of its
   ``quant_algo`` (NVFP4 0.5; FP8 and FP8 block scales 1; none 2). A packed NVFP4 tensor counts
   two values per element and its FP8 block scales one element per 16 values.
3. Requests the cache holds: (devices x device memory in GiB (NVML's total) - engine size) x the
   KV fraction (``--kv_cache_free_gpu_mem_fraction``, 0.90 by default) / (KV bytes per token x
   (mean ISL + mean OSL)).
4. Raw batch = min(requests, 4096) / pp; raw tokens = min(raw batch x (1 + ISL / OSL), 32768).
   ``max_batch_size`` rounds the raw batch up: to 32s with a floor of 64 below 256, to 128s
   below 1024, else to 256s. ``max_num_tokens`` rounds the raw tokens up: to 256s with a floor
   of 2048 below 4096, to 512s below 8192, else to 1024s.
5. A checkpoint whose ``quant_algo`` the heuristic does not tune (MXFP4 as gpt-oss ships, INT4 /
   INT8 weight-only) keeps ``BuildConfig``'s 2048 / 8192.
6. Chunked prefill is off unless asked (``--enable_chunked_context`` defaults to False), and then
   ``max_num_tokens`` is raised to the longest prompt + ``max_batch_size``.

Under attention DP every rank's executor runs with these caps (serving/scenario.py
``CAPS_PER_RANK``). A flag the run states replaces its heuristic value, as trtllm-bench's runtime
options do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelmap.models.params import count_mtp_params, count_params
from accelmap.models.schema import ModelSpec
from accelmap.units import DType
from accelmap.workload import Inference

GIB = 1024**3
SOURCE = ("trtllm-bench's own caps (TensorRT-LLM bench/build/tuning.py calc_engine_setting; "
          "chunked prefill off, trtllm-bench throughput's default)")
DEFAULT_KV_FRACTION = 0.90  # trtllm-bench throughput --kv_cache_free_gpu_mem_fraction
BUILD_DEFAULTS = (2048, 8192)  # BuildConfig max_batch_size / max_num_tokens (untuned formats)
MAX_REQUESTS = 4096  # "Cap total batch size to avoid decoder buffer size becoming too large"
MAX_TOKENS = 32768  # "Cap num tokens to avoid TRT activation buffer becoming too large"
NVFP4_BLOCK = 16  # values per FP8 (E4M3) block scale of NVFP4
# bytes per checkpoint element of the quant_algos the heuristic tunes (tuning.py BYTES_PER_ELEM)
ELEMENT_BYTES = {DType.NVFP4: 0.5, DType.FP4: 0.5, DType.FP8: 1.0, DType.BF16: 2.0,
                 DType.FP16: 2.0, DType.FP32: 2.0}


@dataclass(frozen=True)
class BenchCaps:
    """A rank's scheduler caps and whether prompts are chunked, with how they were found."""

    max_batch: int
    max_tokens: int
    chunked: bool
    note: str


# finetune_setting's rounding (module doc, step 4): (below, round up to) steps, then the floor
BATCH_STEPS = ((256, 32), (1024, 128), (math.inf, 256))
BATCH_FLOOR = 64
TOKEN_STEPS = ((4096, 256), (8192, 512), (math.inf, 1024))
TOKEN_FLOOR = 2048  # "Set min to 2048 to ensure Ctx/Gen overlap efficiency"


def _round_up(raw: float, steps: tuple[tuple[float, int], ...], floor: int) -> int:
    """``raw`` rounded up to the step of the first band it lies below; the first band's result
    is at least ``floor``."""
    for i, (below, step) in enumerate(steps):
        if raw < below:
            up = step * math.ceil(raw / step)
            return max(floor, up) if i == 0 else up
    raise AssertionError("the last band is unbounded")


def _round_batch(raw: float) -> int:
    return _round_up(raw, BATCH_STEPS, BATCH_FLOOR)


def _round_tokens(raw: float) -> int:
    return _round_up(raw, TOKEN_STEPS, TOKEN_FLOOR)


def checkpoint_elements(spec: ModelSpec, wl: Inference) -> float:
    """Safetensors elements of the checkpoint: the model, its MTP module as stored, and the
    4-bit tensors packed two values an element plus one block scale per 16 values."""
    params = count_params(spec)
    total = float(params.total + count_mtp_params(spec).stored)
    four_bit = 0.0
    if wl.weight_dtype.is_4bit_float:  # every layer GEMM (the embedding and head stay 16-bit)
        four_bit = float(params.total - params.embedding - params.lm_head
                         - params.breakdown.get("layers/norms", 0))
    elif wl.expert_weight_dtype.is_4bit_float:  # the routed experts (--moe-weights)
        four_bit = float(params.breakdown.get("layers/moe", 0))
    return total - four_bit + four_bit * (0.5 + 1.0 / NVFP4_BLOCK)


def checkpoint_format(wl: Inference) -> DType | None:
    """The checkpoint's quant_algo as the heuristic reads it, or None where it is not tuned
    (MXFP4, integer weight-only): 4-bit experts make the checkpoint NVFP4."""
    formats = (wl.weight_dtype, wl.expert_weight_dtype)
    if any(f not in ELEMENT_BYTES for f in formats):
        return None
    if any(f.is_4bit_float for f in formats):
        return DType.NVFP4
    return DType.FP8 if DType.FP8 in formats else DType.BF16


def kv_element_bytes(kv: DType) -> float:
    return {DType.FP8: 1.0, DType.NVFP4: 0.5}.get(kv, 2.0)


def bench_caps(spec: ModelSpec, wl: Inference, tp: int, pp: int, device_bytes: float,
               max_prompt: int, kv_fraction: float | None = None) -> BenchCaps:
    """trtllm-bench's caps for ``spec`` served as ``wl`` on tp x pp devices of ``device_bytes``
    (module doc), for requests of mean lengths ``wl.prompt_len`` / ``wl.output_len`` whose
    longest prompt is ``max_prompt``."""
    fmt = checkpoint_format(wl)
    if fmt is None:
        batch, tokens = BUILD_DEFAULTS
        how = (f"{wl.expert_weight_dtype.value} is not a format its heuristic tunes: "
               f"BuildConfig's {batch} / {tokens}")
    else:
        head = spec.head_dim or spec.d_model // spec.n_heads
        kv_per_token = 2 * spec.n_layers * max(tp, spec.kv_heads) * head * kv_element_bytes(
            wl.kv_dtype)
        engine = checkpoint_elements(spec, wl) * ELEMENT_BYTES[fmt]
        fraction = DEFAULT_KV_FRACTION if kv_fraction is None else kv_fraction
        cache = (device_bytes * tp * pp - engine) * fraction
        requests = cache / (kv_per_token * (wl.prompt_len + wl.output_len))
        if requests < 1:
            batch, tokens = BUILD_DEFAULTS
            how = "its heuristic finds no room for a request: BuildConfig's defaults"
        else:
            raw = min(requests, MAX_REQUESTS) / pp
            batch = _round_batch(raw)
            tokens = _round_tokens(min(raw * (1 + wl.prompt_len / max(wl.output_len, 1)),
                                       MAX_TOKENS))
            how = (f"its heuristic prices the KV cache at {kv_per_token / 1024:.0f} KiB a token "
                   f"and the engine at {engine / GIB:.0f} GiB: {requests:,.0f} requests")
    tokens = max(tokens, max_prompt + batch)  # chunked prefill off: a whole prompt per pass
    return BenchCaps(batch, tokens, False,
                     f"{SOURCE}: {how}; max_batch_size {batch}, max_num_tokens {tokens} a rank")
