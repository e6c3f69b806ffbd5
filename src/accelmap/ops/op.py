"""One operator of the graph and the precision it runs at: its unit (matrix or vector), bytes by
kind, stage (forward, recompute, backward) and the FLOPs it does (``ops.graph`` builds the list;
``ops.sparsity``, ``ops.training`` and ``ops.adapters`` derive from it). These values sit below
the graph so that the modules the graph calls (2:4 sparsity) can read them without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from accelmap.units import DType, Num
from accelmap.workload import Sparsity


class Unit(StrEnum):
    MATRIX = "matrix"
    VECTOR = "vector"


class ByteKind(StrEnum):
    WEIGHTS = "weights"
    ACTIVATIONS = "activations"
    KV_CACHE = "kv_cache"
    GRADIENTS = "gradients"
    OPTIMIZER = "optimizer"


class Stage(StrEnum):
    FORWARD = "forward"
    RECOMPUTE = "recompute"  # forward work redone for backward (recompute policies)
    BACKWARD_DGRAD = "backward/dgrad"  # gradient w.r.t. activations
    BACKWARD_WGRAD = "backward/wgrad"  # gradient w.r.t. weights
    OPTIMIZER = "optimizer"


@dataclass(frozen=True)
class Op:
    name: str  # slash key, e.g. "layers/attention/qkv"
    unit: Unit
    dtype: DType
    flops: Num
    bytes: dict[ByteKind, Num]
    count: Num = 1  # occurrences; fractional for a pipeline stage's share of a layer group
    stage: Stage = Stage.FORWARD
    gemm: tuple[Num, Num, Num] | None = None  # (m, n, k) for tile and wave quantization
    saved: Num = 0.0  # activation bytes kept for backward (no recompute)
    attention_core: bool = False  # recomputed under selective recompute
    selective_dropped: Num = 0.0  # part of ``saved`` that selective recompute does not keep
    fusable: bool = False  # elementwise op a fused kernel can absorb (no own memory pass)
    model_flops: Num | None = None  # when the work differs from the model FLOPs (recompute)
    weight_dtype: DType | None = None  # storage format of the weights this op streams
    attention_keys: Num | None = None  # keys per query of an attention kernel (efficiency ramp)
    head_dim: Num | None = None  # query/key head dim of an attention kernel (measured curves)
    frozen: bool = False  # weights not trained (LoRA base): no weight gradient (ops/adapters.py)
    sparse: bool = False  # runs on 2:4-sparse weights (ops/sparsity.py, cost/sparsity.py)
    # vector-unit work of converting weight-only weights inside the GEMM (W4A16), overlapped
    # with its loads and tensor-core work (cost/roofline.py)
    dequant_flops: Num = 0.0
    # the output widths of the separate nn.Linear layers one fused GEMM stands for, in the
    # order a PyTorch model calls them (wq, wk, wv; w1, w3): per-op checkpointing counts them
    parts: tuple[Num, ...] | None = None

    @property
    def total_bytes(self) -> Num:
        return sum(self.bytes.values())

    @property
    def intensity(self) -> Num:
        """Arithmetic intensity, FLOP per byte moved (Williams et al. 2009)."""
        return self.flops / np.maximum(self.total_bytes, 1.0)


@dataclass(frozen=True)
class Precision:
    act: DType = DType.BF16  # activations and matmul inputs
    weight: DType = DType.BF16  # weights as stored
    compute: DType = DType.BF16  # matmul precision (FP8 for FP8 serving)
    kv: DType = DType.BF16
    weight_bytes_per_param: float | None = None  # incl. quantization scales, if not weight.bytes
    # Attention runs in 16 bits even in FP8 training and serving (Transformer Engine keeps the
    # attention core and vector ops in BF16; FP8 applies to the GEMMs).
    attention: DType = DType.BF16
    # What a GEMM keeps of its input for the weight gradient; None = the activation dtype.
    # Transformer Engine's FP8 linears keep the FP8 cast (module/linear.py, saved_inputmat;
    # module/layernorm_linear.py keeps ln_out in FP8), torchao's keep 16 bits.
    saved_gemm_input: DType | None = None
    # 2:4-sparse weights in the layers' GEMMs (serving; training applies ops.sparsity itself)
    sparsity: Sparsity = Sparsity.NONE
    # weights dequantized inside the GEMM (weight-only: int8/int4, or FP4 on a part without FP4
    # tensor cores): the kernel converts each weight once per row tile (``DEQUANT_FLOPS``)
    weight_only: bool = False
    # the routed experts' own precision in a mixed recipe (``--moe-weights``); None: as above
    experts: Precision | None = None
    # FP8 (per-tensor) scales taken from the tensor being cast (torchao ``Float8Linear``'s
    # dynamic scaling), not from an amax history (Transformer Engine ``DelayedScaling``): the
    # amax must be known before any value is scaled, so the cast is a memory pass of its own
    # and cannot be folded into the kernel that produced its input (ops.graph)
    fp8_dynamic_scaling: bool = False

    @property
    def wbytes(self) -> float:
        return self.weight_bytes_per_param or self.weight.bytes

    @property
    def for_experts(self) -> Precision:
        return self.experts or self
