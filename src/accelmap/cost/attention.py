"""Achievable throughput of the fused attention kernel, which is not a GEMM.

FlashAttention-2 (the kernel behind PyTorch SDPA, llm-foundry and torchtitan through 2024)
reaches a plateau fraction of the 16-bit dense peak that depends on the GPU generation, and less
at short sequences:

- Ampere (A100): forward up to 73 % of peak (Dao 2023, "FlashAttention-2", sec. 4.1, Fig. 4);
- Hopper (H100): FlashAttention-2 plateaus at 370 of 989 TFLOP/s = 37 % (head dim 128, forward;
  Shah et al. 2024, "FlashAttention-3", Fig. 7), because it does not use wgmma/TMA; at 512
  tokens it reaches 191-309 TFLOP/s. Its backward is slower: 214, 260, 291, 310, 318 and
  322 TFLOP/s at 512 to 16k tokens (same paper, the backward-speed figure, head dim 128,
  H100 SXM5), a plateau of 322 / 989.4 = 33 % on the same ramp (keys / (keys + 300) gives
  0.63-0.98 of it over that range, measured 0.66-1.0).

The ramp with sequence length is fitted to that FlashAttention-3 paper figure (FA2 series, head
dim 128, 512 to 16k keys): efficiency = plateau x keys / (keys + 300). Blackwell and non-NVIDIA
devices have no published measurement in our sources; they keep the GEMM-relative rule of the
roofline (FlashAttention-2 73 % vs cuBLAS 87 % on A100) and say so.

The plateaus are fractions of the peak of the part they were measured on (A100 SXM4 80GB, H100
SXM5 at 700 W). Another part of the same die runs its tensor cores at its own sustained clocks:
a power-limited board (Grand Teton's 500 W H100; the 300 W A100 PCIe) reaches a smaller share
of its peak in a GEMM, and attention, on the same tensor cores under the same limit, loses the
same share. Where the part has its own measured best-shape bf16 GEMM
(``cost/data/achievable_*.yaml``), the plateau is scaled by that efficiency over the measured
part's (:func:`clock_scale`): 585 TFLOP/s at 500 W against 794.5 at 700 W makes the 500 W
board's FlashAttention-2 run at 0.74 of the 700 W SXM's, not at the ratio of their peaks.

Kernel generations are a named feature of a software stack (``FrameworkProfile.attention``):

- ``fa2``: the figures above (PyTorch SDPA, flash-attn 2.x, Megatron-Core/TE 2023+);
- ``fa1``: FlashAttention-1 and the Triton FlashAttention of the same generation
  (flash_attn_triton.py; llm-foundry's MPT ``attn_impl: triton``, needed for ALiBi before
  flash-attn 2.4). FlashAttention-2 is "around 2x faster than FlashAttention" with FA1 at 25-40 %
  of the A100's peak (Dao 2023, abstract and sec. 1), so ``fa1`` runs at half the ``fa2``
  figure on the same device;
- ``cudnn``: Transformer Engine's FusedAttention, cuDNN's SDPA (Megatron-Core and NeMo). TE's
  backend selection (``get_attention_backend``: "Disabling FlashAttention to give
  FusedAttention preference on Hopper+ for performance reasons", compute capability >= 9.0)
  runs it on Hopper and later, FlashAttention-2 before. On H100 SXM5 (head dim 128, bf16)
  Shah et al. 2024's figures measure it at 497-617 TFLOP/s forward and 305-518 backward from
  512 to 16k keys: plateaus 600 and 518 of 989.4, ramps keys / (keys + 80) and keys /
  (keys + 250). Blackwell has no published figure in our sources: the GEMM-relative rule.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np

from accelmap.units import Num

if TYPE_CHECKING:
    from accelmap.hardware.schema import Accelerator

HALF_EFFICIENCY_KEYS = 300.0  # fit to Shah et al. 2024 Fig. 7 (FA2, H100, hd 128)
FA1_OVER_FA2 = 0.5  # Dao 2023: FlashAttention-2 is ~2x FlashAttention(-1)


class AttentionKernel(StrEnum):
    FA2 = "fa2"
    FA1 = "fa1"  # FlashAttention-1 / Triton FlashAttention generation
    # Transformer Engine's FusedAttention (cuDNN's arbitrary-sequence-length SDPA), which TE
    # selects over FlashAttention on Hopper and later (module doc); FlashAttention-2 before
    CUDNN = "cudnn"


KERNEL_SPEED = {AttentionKernel.FA2: 1.0, AttentionKernel.FA1: FA1_OVER_FA2,
                AttentionKernel.CUDNN: 1.0}

# the parts the plateaus were measured on (FlashAttention-2 paper: A100 SXM4 80GB; the
# FlashAttention-3 paper's FA2 series: H100 SXM5)
MEASURED_ON = {"ampere": "a100-sxm4-80gb", "hopper": "h100-sxm5-80gb"}

FA2_PLATEAU: dict[str, tuple[float, str]] = {
    "ampere": (0.73, "FlashAttention-2 on A100, Dao 2023 sec. 4.1"),
    "hopper": (370 / 989.4, "FlashAttention-2 on H100, Shah et al. 2024 Fig. 7"),
}
# the backward kernel's plateau where it is measured apart from the forward's (else the same)
FA2_BACKWARD_PLATEAU: dict[str, tuple[float, str]] = {
    "hopper": (322 / 989.4, "FlashAttention-2 backward on H100, Shah et al. 2024 (backward "
                            "speed, head dim 128)"),
}

# cuDNN's SDPA on H100 SXM5, head dim 128, bf16 (Shah et al. 2024, "FlashAttention-3", the
# forward- and backward-speed figures' cuDNN series): forward 497, 574, 617, 609, 600, 595
# TFLOP/s at 512 to 16k keys, backward 305, 408, 465, 499, 518, 516; plateaus at 8k of 989.4
# and the ramp keys / (keys + k0) through the short-sequence points (forward k0 ~ 80,
# backward ~ 250)
CUDNN_PLATEAU: dict[str, tuple[float, str]] = {
    "hopper": (600 / 989.4, "cuDNN SDPA forward on H100, Shah et al. 2024 Fig. (head dim 128)")}
CUDNN_BACKWARD_PLATEAU: dict[str, tuple[float, str]] = {
    "hopper": (518 / 989.4, "cuDNN SDPA backward on H100, Shah et al. 2024 Fig. (head dim 128)")}
CUDNN_HALF_KEYS = {False: 80.0, True: 250.0}  # forward, backward

# FlashAttention-2's Ampere figure is the A100's (GA100); the GA102/GA10B parts (A10, RTX 3090,
# Jetson Orin) have other SMs and shared memory and keep the GEMM-relative rule.
AMPERE_GA100 = frozenset(("a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-80gb"))


def generation(acc: Accelerator) -> str | None:
    """The generation whose FlashAttention-2 plateau applies to this part, if one does. Every
    Hopper part is a GH100 die (H100 SXM/PCIe/NVL, H800, H20, H200, GH200 and boards such as
    Grand Teton's 96 GB HBM2e H100), named by its catalog architecture."""
    if acc.id in AMPERE_GA100:
        return "ampere"
    sparse = acc.sparsity_2_4
    return "hopper" if sparse is not None and sparse.architecture == "hopper" else None


def attention_plateau(acc: Accelerator, backward: bool = False,
                      kernel: AttentionKernel = AttentionKernel.FA2) -> tuple[float, str] | None:
    """Plateau fraction of dense 16-bit peak for this device's generation and kernel, if
    measured (the backward kernel's where it is measured apart). cuDNN's is measured on Hopper;
    on Ampere Transformer Engine runs FlashAttention-2, whose figures stand."""
    gen = generation(acc)
    if gen is None:
        return None
    if kernel is AttentionKernel.CUDNN and gen in CUDNN_PLATEAU:
        return CUDNN_BACKWARD_PLATEAU[gen] if backward else CUDNN_PLATEAU[gen]
    return FA2_BACKWARD_PLATEAU.get(gen, FA2_PLATEAU[gen]) if backward else FA2_PLATEAU[gen]


def attention_efficiency(acc: Accelerator, keys: Num, backward: bool,
                         kernel: AttentionKernel) -> Num | None:
    """Fraction of dense 16-bit peak the kernel reaches at ``keys`` keys per query on this
    part's generation, where measured: the plateau times its ramp (cuDNN's own on Hopper,
    FlashAttention-2's elsewhere); None where no generation figure exists."""
    plateau = attention_plateau(acc, backward, kernel)
    if plateau is None:
        return None
    own = kernel is AttentionKernel.CUDNN and generation(acc) in CUDNN_PLATEAU
    return plateau[0] * attention_ramp(keys, kernel if own else AttentionKernel.FA2, backward)


def clock_scale(acc: Accelerator) -> float:
    """The share of its generation's plateau this part keeps: its own measured best-shape bf16
    GEMM efficiency over the measured part's (module doc); 1.0 where either is not measured."""
    from accelmap.cost.efficiency import measured_matmul

    gen = generation(acc)
    table = measured_matmul()
    ref = table.get(MEASURED_ON[gen], {}).get("bf16") if gen is not None else None
    own = table.get(acc.id, {}).get("bf16")
    if ref is None or own is None:
        return 1.0
    return float(own["efficiency"]) / float(ref["efficiency"])


def relative_to_gemm() -> float:
    """Attention efficiency as a fraction of the device's best GEMM efficiency, for devices
    with no attention measurement: FlashAttention-2's A100 plateau over the A100's measured
    best-shape bf16 GEMM (achievable_matmul.yaml, M0002: 0.869), i.e. 0.73 / 0.869 ~ 0.84."""
    from accelmap.cost.efficiency import measured_matmul

    return FA2_PLATEAU["ampere"][0] / float(measured_matmul()["a100-sxm4-80gb"]["bf16"]
                                             ["efficiency"])


def attention_ramp(keys: Num, kernel: AttentionKernel = AttentionKernel.FA2,
                   backward: bool = False) -> Num:
    """The share of the plateau at ``keys`` keys per query: keys / (keys + k0)."""
    k = np.asarray(keys, dtype=float)
    k0 = CUDNN_HALF_KEYS[backward] if kernel is AttentionKernel.CUDNN else HALF_EFFICIENCY_KEYS
    return k / (k + k0)
