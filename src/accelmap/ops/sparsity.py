"""2:4 structured sparsity of the weight GEMMs: which operators run on sparse weights and what
those weights weigh. Bytes only; how much faster a sparse GEMM computes is cost/sparsity.py's.

Compressed format. Of every four weights along a GEMM's reduction dimension two are kept, each
with a 2-bit index of its place in the group: 2 bits of metadata per kept value, i.e. 1 bit per
dense element (Mishra et al. 2021, "Accelerating Sparse Deep Neural Networks", arXiv 2104.08378,
sec. 3; NVIDIA, "Exploiting NVIDIA Ampere Structured Sparsity with cuSPARSELt", 2020: "half the
size of the original matrix with a small amount of metadata"). A matrix of b-bit weights keeps
b/2 + 1 bits per dense element, ``1/2 + 1/b`` of its dense bytes: 9/16 for 16-bit weights and
10/16 for 8-bit ones, the sizes PyTorch allocates for the compressed tensor
(``torch/sparse/semi_structured.py``: compression_factor 9 for fp16/bf16, 10 for int8, over 16),
12/16 for 4-bit ones. Quantization scales of weight-only INT8/INT4 keep their size (assumed:
Sparse-Marlin keeps one scale per group of the dense layout).

Which GEMMs: the layers' weight matrices (attention projections, MLP, shared and routed
experts), as Neural Magic's 2:4 Sparse Llama checkpoints and PyTorch's semi-structured tutorial
prune them; not the embedding, the LM head (both tutorials leave it dense) nor the MoE router
(d x E, too narrow to gain); the attention core has no weights.

Serving: the forward GEMMs read the compressed weights (``forward_ops`` with
``Precision.sparsity``). Training (``sparse_training_ops``), as torchao's accelerated 2:4
training runs it (``SemiSparseLinear``, pytorch/ao ``torchao/sparsity/training``, from xFormers):
the parameter stays dense; each forward prunes and compresses it into W and W^T
(``torch._sparse_semi_structured_tile``) and keeps both for the backward, so the forward
Y = X W and the activation gradient dX = dY W^T run sparse, while the weight gradient
dW = X^T dY is a dense GEMM that yields a dense gradient (straight-through estimator). Master
weights, gradients and optimizer states stay dense, as in Mishra et al. sec. 4's recipe (train
dense, prune, retrain with the mask). The prune-and-compress kernel is not an operator here:
it is inside torchao's measured forward + backward times, which benchmarks/sparse_gemm.py
compares with this model (1.19x modelled, 1.24-1.27x measured). FP8 GEMMs are not modelled for
training (no public 2:4 FP8 training stack).
"""

from __future__ import annotations

from dataclasses import replace

from accelmap.errors import InputError
from accelmap.models.geometry import Geometry
from accelmap.models.schema import ModelSpec
from accelmap.ops.op import ByteKind, Op, Precision, Stage
from accelmap.units import DType

KEPT_PER_GROUP = 2 / 4  # 2:4: half the values are kept
INDEX_BITS = 2  # metadata per kept value: its position among the four
# Training keeps the compressed weight and its transpose for the backward (torchao
# _SparsifyFunc: packed and packed_t)
TRAINING_COPIES = 2

# stages whose GEMM multiplies by the sparse weight (or its transpose)
SPARSE_STAGES = (Stage.FORWARD, Stage.RECOMPUTE, Stage.BACKWARD_DGRAD)


def compressed_fraction(bits: float) -> float:
    """Compressed / dense bytes of a 2:4-sparse matrix of ``bits``-bit values:
    (bits/2 + 2 bits x 1/2) / bits = 1/2 + 1/bits."""
    if bits <= 0:
        raise ValueError(f"bits per value must be positive, got {bits}")
    return KEPT_PER_GROUP + KEPT_PER_GROUP * INDEX_BITS / bits


def compressed_bytes_per_param(weight: DType, wbytes: float | None = None) -> float:
    """Bytes per dense parameter of a compressed weight stored in ``weight``; ``wbytes`` the
    dense storage incl. quantization scales (memory.budget.weight_bytes_per_param), whose scale
    part is kept as it is."""
    dense = weight.bytes if wbytes is None else wbytes
    return weight.bytes * compressed_fraction(weight.bytes * 8) + (dense - weight.bytes)


def is_target(name: str) -> bool:
    """A layer's weight GEMM (its dgrad, wgrad and recompute copies too), router and LoRA
    adapters (small dense matrices beside the base, ops/adapters.py) excepted."""
    return name.startswith("layers/") and "/router" not in name and "/lora_" not in name


def sparse_params(model: ModelSpec | Geometry) -> float:
    """Parameters stored 2:4-sparse: the layers' matrices but the router, of the whole model or
    one rank's share."""
    geo = Geometry.of(model)
    return float(sum(g.count * sum(t.params for t in g.matrices if t.name != "router")
                     for g in geo.groups))


def _sparse(op: Op, factor: float, keep_copies: bool) -> Op:
    weights = op.bytes.get(ByteKind.WEIGHTS)
    if weights is None:
        return replace(op, sparse=True)
    extra = TRAINING_COPIES * weights * factor if keep_copies else 0.0
    return replace(op, sparse=True, bytes={**op.bytes, ByteKind.WEIGHTS: weights * factor},
                   saved=op.saved + extra)


def sparse_weights(ops: list[Op], p: Precision, training: bool = False) -> list[Op]:
    """The operators with the layers' weight GEMMs on 2:4-sparse weights: compressed weight
    bytes and ``sparse`` set in the forward, recompute and dgrad passes; wgrad stays dense.
    ``training``: each forward GEMM also keeps W and W^T compressed for its backward."""
    factor = compressed_bytes_per_param(p.weight, p.wbytes) / p.wbytes
    out = []
    for op in ops:
        if op.gemm is not None and is_target(op.name) and op.stage in SPARSE_STAGES:
            op = _sparse(op, factor, training and op.stage is Stage.FORWARD)
        out.append(op)
    return out


def sparse_training_ops(fwd: list[Op], bwd: list[Op], p: Precision
                        ) -> tuple[list[Op], list[Op]]:
    """Forward and backward (+ recompute) operators of a 2:4-sparse training step, derived from
    the dense ones (whose wgrad GEMMs already count the dense gradient)."""
    if p.compute.bytes < 2:
        raise InputError(f"2:4 sparse training is modelled for 16-bit GEMMs (torchao's "
                         f"SemiSparseLinear runs fp16/bf16), not {p.compute.value}: train in "
                         "bf16 or drop --sparsity")
    return sparse_weights(fwd, p, training=True), sparse_weights(bwd, p, training=True)
