"""Block-scaled training recipes: which GEMM of a linear layer runs in which format, and the
quantization work around them.

- **NVFP4** (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv 2509.25149, sec. 4):
  the forward (Fprop), activation-gradient (Dgrad) and weight-gradient (Wgrad) GEMMs of the
  linear layers run in NVFP4; a few linear layers stay in BF16 ("selective high-precision
  layers": about 16 % of them in the 12B run, the final blocks); embeddings, the output head,
  norms, non-linearities and attention (softmax, QK^T, PV) stay in BF16. Weights are quantized
  with 16x16 2-D blocks (the same values forward and backward), the Wgrad inputs pass through a
  16x16 random Hadamard transform first, and gradients are rounded stochastically. Master
  weights and the optimizer's moments stay in FP32.
- **MXFP8** (Transformer Engine ``MXFP8BlockScaling``; NeMo/Megatron-Core ``fp8_recipe:
  mxfp8`` on Blackwell): all three GEMMs in MXFP8 (E4M3, 32-value blocks, E8M0 scales: OCP MX
  v1.0); each GEMM input is quantized along the dimension its GEMM reduces over, so every
  tensor is cast twice (row-wise for one GEMM, column-wise for the other): the quantize kernel
  writes two MXFP8 copies, which the FP8 cast op of ``ops.graph`` already counts in training.
  No layer is kept in BF16 beyond the head and attention.
- **MXFP4**: the NVFP4 recipe with MXFP4 tensors, as the NVFP4 paper's MXFP4 comparison runs it
  (sec. 5; MXFP4 needed more tokens for the same loss); no production stack ships it.

- **FP8 row-wise scaling** (torchao ``rowwise``, ``workload.Fp8Scaling``): one scale per row of
  each GEMM input. The forward GEMM runs PyTorch's CUTLASS row-wise kernel with fast
  accumulation, costed as the tensor-wise one (most shapes run at 90-100 % of it:
  pytorch/pytorch#147971). The dgrad and wgrad GEMMs accumulate slowly (torchao
  ``Float8LinearConfig``: ``gemm_config_grad_input``/``grad_weight`` default to
  ``use_fast_accum=False``), and for those torchao calls cuBLAS with unit scales and an fp32
  output, then multiplies the output by the row and column scales and casts it to bf16
  (pytorch/ao PR #1325, ``addmm_float8_unwrapped``: "the rowwise CUTLASS-based kernel is so slow
  without fast-accum"). Each gradient GEMM therefore writes its output in fp32 (2 bytes more per
  element than bf16) and a kernel of its own reads it back and writes bf16 (4 + 2): 8 bytes per
  output element beyond the bf16 GEMM (``ROWWISE_RESCALE_BYTES``). The dgrad output is
  activation-sized whatever the weight's width, once per nn.Linear that torchao converted
  (``Op.parts``: torchtitan's wq, wk, wv and w1, w3 are separate layers), which is why thin
  projections (a TP-sharded wk, wv) run slower in row-wise FP8 than in bf16 (pytorch/torchtitan
  #1207: about 40 % slower, the gain of the large linears lost). The output head stays in bf16
  (torchtitan's float8 converter filters ``output``).
  The quantizing casts also cost more: each input is cast twice, scaled along its rows for one
  GEMM and along its columns for the other (torchao ``hp_tensor_to_float8_dynamic`` with
  ``axiswise_dim`` -1 and 0). A row's scale needs only that row, so that cast reads the tensor
  once, like the tensor-wise cast whose amax the graph folds into the producer; a column's scale
  needs every row, so the column-scaled copy reads the tensor once more after the amax pass:
  1 read + 2 writes of FP8 (4 bytes per element from a 16-bit tensor) become 2 reads + 2 writes
  (6), ``ROWWISE_CAST_FACTOR``.

The quantization kernels are the ``/fp8_cast`` ops of ``ops.graph`` (amax, scale, convert: the
format's ``DType.bytes`` includes its block scales); the Hadamard transform is a 16-point
transform of both Wgrad inputs, 2 x 16 FLOPs per element (``RHT_FLOPS``), run on the vector
units inside the quantize kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelmap.ops.graph import ByteKind, Op, Stage, Unit
from accelmap.units import DType
from accelmap.workload import Fp8Scaling, Training

RHT_SIZE = 16  # the Hadamard block of arXiv 2509.25149 sec. 4.2 (16x16 on Wgrad inputs)
RHT_FLOPS = 2.0 * RHT_SIZE  # a dense 16-point transform: 16 multiply-adds per element
# fp32 GEMM output instead of bf16 (+2), read back (4) and written as bf16 (2) by the rescale
ROWWISE_RESCALE_BYTES = 2.0 + 4.0 + 2.0
ROWWISE_RESCALE_FLOPS = 2.0  # times the row scale and the column scale
ROWWISE_CAST_FACTOR = (2 * 2.0 + 2 * 1.0) / (2.0 + 2 * 1.0)  # bytes per element, 6 against 4
_GRADIENT_STAGES = (Stage.BACKWARD_DGRAD, Stage.BACKWARD_WGRAD)
_NVFP4_PAPER = "arXiv 2509.25149 sec. 4"
_TE_MXFP8 = "Transformer Engine MXFP8BlockScaling; Megatron-Core fp8_recipe mxfp8"


@dataclass(frozen=True)
class TrainingRecipe:
    fmt: DType
    forward: DType
    dgrad: DType
    wgrad: DType
    high_precision_fraction: float  # of the linear layers kept in BF16
    hadamard_wgrad: bool  # 16x16 random Hadamard transform of the Wgrad inputs
    stochastic_rounding: bool  # of the gradients (Dgrad/Wgrad inputs)
    source: str

    def describe(self) -> str:
        kept = (f"{self.high_precision_fraction:.0%} of the linear layers (the last blocks) in "
                "bf16, " if self.high_precision_fraction else "")
        extras = ", ".join(x for x, on in (("16x16 random Hadamard transforms on the Wgrad "
                                            "inputs", self.hadamard_wgrad),
                                           ("stochastic rounding of gradients",
                                            self.stochastic_rounding)) if on)
        return (f"{self.fmt.value} training recipe ({self.source}): forward {self.forward.value}"
                f", dgrad {self.dgrad.value}, wgrad {self.wgrad.value} GEMMs; {kept}output head,"
                " embeddings, norms and attention in bf16"
                f"{'; ' + extras if extras else ''}; every GEMM input quantized by its own "
                f"kernel ({self.fmt.bytes * 8:g} bits per value with its block scales), master "
                "weights and optimizer states fp32")


RECIPES: dict[DType, TrainingRecipe] = {
    # ~16 % of the linear layers in BF16: the 12B run's selective high-precision layers
    DType.NVFP4: TrainingRecipe(DType.NVFP4, DType.NVFP4, DType.NVFP4, DType.NVFP4, 0.16,
                                True, True, _NVFP4_PAPER),
    DType.MXFP4: TrainingRecipe(DType.MXFP4, DType.MXFP4, DType.MXFP4, DType.MXFP4, 0.16,
                                True, True, _NVFP4_PAPER + " (its MXFP4 comparison)"),
    DType.MXFP8: TrainingRecipe(DType.MXFP8, DType.MXFP8, DType.MXFP8, DType.MXFP8, 0.0,
                                False, False, _TE_MXFP8),
}


def recipe(dtype: DType) -> TrainingRecipe | None:
    return RECIPES.get(dtype)


def _stage_format(r: TrainingRecipe, stage: Stage) -> DType:
    if stage is Stage.BACKWARD_DGRAD:
        return r.dgrad
    if stage is Stage.BACKWARD_WGRAD:
        return r.wgrad
    return r.forward


def _in_layers(op: Op) -> bool:
    return op.name.startswith("layers/")


def apply_recipe(ops: list[Op], fmt: DType) -> list[Op]:
    """The step's ops with each linear-layer GEMM in its recipe format (``fmt``'s GEMMs as the
    graph built them), the head in bf16, a share of the layers in bf16, and a Hadamard
    transform before each Wgrad GEMM that the recipe transforms."""
    r = recipe(fmt)
    if r is None:
        return ops
    keep = 1.0 - r.high_precision_fraction
    out: list[Op] = []
    for op in ops:
        if op.name.startswith("lm_head/fp8_cast"):
            continue  # the head runs in bf16: nothing to quantize
        if op.name.endswith("/fp8_cast") or "/fp8_cast/" in op.name:
            out.append(replace(op, count=op.count * keep) if _in_layers(op) else op)
            continue
        if op.unit is not Unit.MATRIX or op.gemm is None or op.dtype is not fmt:
            out.append(op)
            continue
        if not _in_layers(op):  # output head (and any other GEMM outside the blocks)
            out.append(replace(op, dtype=DType.BF16))
            continue
        fmt_op = replace(op, dtype=_stage_format(r, op.stage), count=op.count * keep)
        out.append(fmt_op)
        if r.high_precision_fraction:
            out.append(replace(op, name=f"{op.name}/bf16", dtype=DType.BF16,
                               count=op.count * r.high_precision_fraction))
        if r.hadamard_wgrad and op.stage is Stage.BACKWARD_WGRAD:
            m_, n_, k_ = op.gemm  # wgrad = X^T dY: inputs X (k_ x m_) and dY (k_ x n_)
            out.append(Op(name=f"{op.name}/rht", unit=Unit.VECTOR, dtype=DType.BF16,
                          count=fmt_op.count, flops=RHT_FLOPS * k_ * (m_ + n_), bytes={},
                          stage=op.stage))
    return out


def rowwise_scaling(ops: list[Op]) -> list[Op]:
    """The step's ops under torchao's row-wise FP8 recipe (module docstring): the layers'
    quantizing casts with the column-scaled copy's extra read, and after each FP8 gradient GEMM
    the rescale of its fp32 output."""
    out: list[Op] = []
    for op in ops:
        if "/fp8_cast" in op.name and _in_layers(op):  # the column-scaled copy's extra read
            op = replace(op, bytes={k: v * ROWWISE_CAST_FACTOR for k, v in op.bytes.items()})
        out.append(op)
        if op.unit is not Unit.MATRIX or op.gemm is None or op.dtype is not DType.FP8 \
                or op.stage not in _GRADIENT_STAGES or not _in_layers(op):
            continue
        m_, n_, _k = op.gemm
        # a fused GEMM's dgrad stands for one input gradient per nn.Linear it fuses; its wgrad
        # outputs are the weights, which the parts split rather than repeat
        outputs = len(op.parts) if op.parts and op.stage is Stage.BACKWARD_DGRAD else 1
        elems = m_ * n_ * outputs
        out.append(Op(name=f"{op.name}/rowwise_rescale", unit=Unit.VECTOR, dtype=DType.BF16,
                      count=op.count, flops=ROWWISE_RESCALE_FLOPS * elems,
                      bytes={ByteKind.ACTIVATIONS: ROWWISE_RESCALE_BYTES * elems},
                      stage=op.stage))
    return out


def training_formats(fwd: list[Op], bwd: list[Op], wl: Training) -> tuple[list[Op], list[Op]]:
    """Forward and backward ops in the job's recipe: a block-scaled format's GEMMs and casts
    (``apply_recipe``), and FP8 row-wise scaling's rescales of the gradient GEMMs."""
    fwd, bwd = apply_recipe(fwd, wl.dtype), apply_recipe(bwd, wl.dtype)
    if wl.dtype is DType.FP8 and wl.fp8_scaling is Fp8Scaling.ROWWISE:
        fwd, bwd = rowwise_scaling(fwd), rowwise_scaling(bwd)
    return fwd, bwd
