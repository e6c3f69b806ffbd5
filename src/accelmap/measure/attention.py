"""Achievable fused attention: PyTorch's ``scaled_dot_product_attention`` on the device, causal,
forward and backward, at a few sequence lengths and two head dims.

Attention is not a GEMM: PyTorch's CPU kernel (``_scaled_dot_product_flash_attention_for_cpu``,
aten/src/ATen/native/cpu/FlashAttentionKernel.cpp) walks blocks of queries against blocks of keys,
each block a small GEMM with the head dim as its depth, then an exponential and a running sum on
the vector units; its backward recomputes the scores. How close that comes to the GEMM peak
depends on the CPU, the head dim and the sequence length, so it is measured rather than
assumed; the GPU kernels are measured the same way where a user runs this on a GPU.

FLOPs are counted as the operator graph counts them (``ops.graph``): forward 4 x tokens x keys
x heads x head_dim with keys = (s + 1) / 2 per query (causal mean), backward 2.5 x the forward
(FlashAttention-2's recomputation, ``ops.training.FLASH_BACKWARD_FACTOR``), so that ``FLOPs /
time / peak`` is directly the efficiency the roofline multiplies the matrix peak with. Which
kernel PyTorch chose (``torch._fused_sdp_choice``) is stored with every point.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator
from accelmap.measure.backends import Backend
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.timing import time_kernel
from accelmap.measure.torch_backend import TorchBackend
from accelmap.models.flops import causal_mean_keys
from accelmap.ops.training import FLASH_BACKWARD_FACTOR
from accelmap.units import DType

HEAD_DIMS = (64, 128)  # GPT-2/3 and small models; Llama, Mistral, Qwen
SEQS = (64, 128, 256, 512, 1024, 2048, 4096)  # tried in order while the budget lasts
# batch x heads: enough independent (batch, head, query block) tasks for every core
TASKS = 16
MAX_CALL_SHARE = 0.06  # one forward + backward may take at most this share of the budget
FIRST_GUESS_FLOPS = 2e10  # rate assumed before anything is measured (sizes the first call)
# torch.nn.attention.SDPBackend values as torch._fused_sdp_choice returns them
BACKENDS = {0: "math", 1: "flash", 2: "memory-efficient", 3: "cudnn", 4: "overrideable"}


def device_dtype(device_type: str) -> DType:
    """The dtype `measure attention` measures in by default: what the device trains and serves
    in. On a GPU bf16, where PyTorch's SDPA takes the flash kernel (FlashAttention-2 supports
    fp16/bf16 only: Dao 2023, its README; in fp32 SDPA falls back to the memory-efficient
    kernel, as on the H200 of data/gpu); on a CPU fp32."""
    return DType.FP32 if device_type == "cpu" else DType.BF16


@dataclass(frozen=True)
class AttentionPoint:
    seq: int
    head_dim: int
    backward: bool
    flops: float
    seconds: float
    spread: float

    @property
    def keys(self) -> float:
        return float(causal_mean_keys(self.seq))

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds


@dataclass(frozen=True)
class AttentionResult:
    device: str
    dtype: DType
    kernel: str
    peak: float | None
    points: tuple[AttentionPoint, ...]
    measurements: tuple[Measurement, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "dtype": self.dtype.value, "kernel": self.kernel,
                "peak_flops": self.peak,
                "points": [{"seq": p.seq, "head_dim": p.head_dim,
                            "pass": "backward" if p.backward else "forward", "keys": p.keys,
                            "flops_per_s": p.flops_per_s, "seconds": p.seconds,
                            "efficiency": p.flops_per_s / self.peak if self.peak else None}
                           for p in self.points]}


def kernel_name(torch: Any, q: Any, device_type: str) -> str:
    """Which SDPA kernel PyTorch picks for causal q = k = v ('flash (cpu)', 'math', ...)."""
    try:
        choice = int(torch._fused_sdp_choice(q, q, q, None, 0.0, True))
    except (AttributeError, RuntimeError, TypeError):
        return "unknown"
    return f"{BACKENDS.get(choice, str(choice))} ({device_type})"


def measure_attention(be: Backend, acc: Accelerator | None, dtype: DType = DType.FP32,
                      budget: float = 10.0, reps: int = 5) -> AttentionResult:
    """Causal SDPA forward and backward on ``be``'s device (a torch backend) for each head dim
    of ``HEAD_DIMS`` and sequence lengths from ``SEQS`` while ``budget`` seconds last."""
    if not isinstance(be, TorchBackend):
        raise InputError("fused attention is PyTorch's scaled_dot_product_attention: measure it "
                         "with the torch backend (--backend torch)")
    torch = be.torch
    tdt = {DType.FP32: torch.float32, DType.BF16: torch.bfloat16,
           DType.FP16: torch.float16}.get(dtype)
    if tdt is None:
        raise InputError(f"attention is measured in fp32, bf16 or fp16, not {dtype.value}")
    peak = None
    if acc is not None:
        from accelmap.measure.calibrate import matmul_peak

        peak = matmul_peak(acc, dtype)[0] or None
    env = be.environment(acc.id if acc else None)
    deadline = time.perf_counter() + budget
    rate = FIRST_GUESS_FLOPS
    points: list[AttentionPoint] = []
    kernel = "unknown"
    batch, heads = 2, TASKS // 2
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for hd in HEAD_DIMS:
        share_end = time.perf_counter() + (deadline - time.perf_counter()) / (
            len(HEAD_DIMS) - HEAD_DIMS.index(hd))
        for seq in SEQS:
            fwd_flops = 4.0 * batch * seq * float(causal_mean_keys(seq)) * heads * hd
            cost = fwd_flops * (1 + FLASH_BACKWARD_FACTOR) / rate
            left = share_end - time.perf_counter()
            if points and (cost > MAX_CALL_SHARE * budget or cost * (reps + 2) > left):
                break
            qkv = [torch.randn(batch, heads, seq, hd, device=be.dev, dtype=tdt)
                   for _ in range(3)]
            kernel = kernel_name(torch, qkv[0], be.dev.type)
            fwd = _timed(be, lambda qkv=qkv: sdpa(*qkv, is_causal=True), reps, grad=False)
            leaves = [t.requires_grad_(True) for t in qkv]
            grad = torch.ones_like(qkv[0])

            def both(leaves: list[Any] = leaves, grad: Any = grad) -> None:
                sdpa(*leaves, is_causal=True).backward(grad)
                for t in leaves:
                    t.grad = None

            total = _timed(be, both, reps, grad=True)
            points.append(AttentionPoint(seq, hd, False, fwd_flops, fwd[0], fwd[1]))
            if total[0] > fwd[0]:  # the backward is what the pair takes beyond the forward
                points.append(AttentionPoint(seq, hd, True, FLASH_BACKWARD_FACTOR * fwd_flops,
                                             total[0] - fwd[0], total[1]))
            rate = max(fwd_flops / fwd[0], 1.0)
            del qkv, leaves, grad
    return AttentionResult(env.label, dtype, kernel, peak, tuple(points),
                           tuple(_measurement(p, env, dtype, kernel, peak, batch, heads, reps)
                                 for p in points))


def _timed(be: TorchBackend, fn: Any, reps: int, grad: bool) -> tuple[float, float]:
    """(fastest seconds, spread) of ``fn`` over ``reps`` repetitions (the fastest: another
    process can only slow a repetition down; ``measure/overhead.py``); forward-only timings run
    without autograd."""
    ctx = be.torch.enable_grad() if grad else be.torch.no_grad()
    with ctx:
        t = time_kernel(fn, be.synchronize, warmup=1, reps=reps)
    return min(t.times), t.spread


def _measurement(p: AttentionPoint, env: Any, dtype: DType, kernel: str, peak: float | None,
                 batch: int, heads: int, reps: int) -> Measurement:
    pass_ = "backward" if p.backward else "forward"
    return Measurement(
        kind=Kind.ATTENTION, environment=env, dtype=dtype.value,
        label=f"sdpa causal {pass_} b{batch} h{heads} s{p.seq} d{p.head_dim}",
        value=p.flops_per_s, unit="FLOP/s", median=p.flops_per_s, spread=p.spread,
        repetitions=reps,
        settings={"pass": pass_, "seq": p.seq, "keys": p.keys, "head_dim": p.head_dim,
                  "batch": batch, "heads": heads, "flops": p.flops, "seconds": p.seconds,
                  "kernel": kernel, "peak_flops": peak})
