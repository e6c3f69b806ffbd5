"""Alignment: a GEMM whose model dimensions are not 16-byte multiples runs slower on a GPU.

NVIDIA's "Matrix Multiplication Background User's Guide" (sec. 2.2 "Tensor Core
Requirements", Fig. 2) and the cuBLAS documentation ("Tensor Core usage": leading dimensions
and pointers 16-byte aligned) say why: Tensor Core kernels load operands with 128-bit vector
loads; cuBLAS 11+ still runs a GEMM whose dimensions are not multiples of 8 fp16/bf16 elements
on Tensor Cores, but with kernels of narrower alignment, about half as fast in the guide's
A100 figure (K = 8192 against its unaligned neighbours; read from the figure, so an
approximate constant: ``ALIGNMENT_PENALTY``). The guide's advice is multiples of 8 elements
(16 bytes), best 64 (128 bytes) on A100; Karpathy's nanoGPT pads GPT-2's vocabulary from
50257 to 50304 "for efficiency" (model.py) for this reason.

The model dimensions of a GEMM are n and k (m is the token count), or m and n for a weight
gradient (k is the token count there). Frameworks that pad the vocabulary of the LM head
themselves lose nothing on it: Megatron-LM (``--make-vocab-size-divisible-by``, default 128),
vLLM and SGLang (``DEFAULT_VOCAB_PADDING_SIZE = 64`` in vLLM's vocab_parallel_embedding.py).
TPUs pad to the MXU instead (cost/efficiency.py); the other classes are left alone.
"""

from __future__ import annotations

from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.hardware.schema import Accelerator, DeviceClass
from accelmap.ops.graph import Op

ALIGN_BYTES = 16
ALIGNMENT_PENALTY = 0.5
VOCAB_PADDING: dict[Framework, int] = {Framework.MEGATRON: 128, Framework.VLLM: 64,
                                       Framework.SGLANG: 64}


def model_dims(op: Op) -> tuple[float, ...]:
    """The GEMM's dimensions that come from the model (not the token count)."""
    assert op.gemm is not None
    m, n, k = op.gemm
    return (m, n) if op.name.endswith("wgrad") else (n, k)


def misaligned(op: Op) -> bool:
    if op.gemm is None:
        return False
    b = op.dtype.bytes
    return any(round(float(d) * b) % ALIGN_BYTES for d in model_dims(op))


def alignment_efficiency(op: Op, acc: Accelerator, fw: FrameworkProfile) -> float:
    """1.0, or ALIGNMENT_PENALTY for a GPU GEMM with a model dimension off 16 bytes (the LM
    head excepted under a framework that pads the vocabulary)."""
    if acc.device_class is not DeviceClass.GPU or op.gemm is None:
        return 1.0
    if op.name.startswith("lm_head") and fw.name in VOCAB_PADDING:
        return 1.0
    return ALIGNMENT_PENALTY if misaligned(op) else 1.0
