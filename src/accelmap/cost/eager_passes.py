"""Memory passes of the written-out elementwise operators of the reference eager transformer
(``measure/torch_model.py``), where the operator graph counts one read and one write per
element (``ops/graph.py`` ``_vector``; its backward twice that, ``ops/training.py``).

Eager PyTorch runs each written-out line as its own kernel, and every kernel reads its inputs
from and writes its output to device memory: an unfused stack pays each pass (Ivanov et al.,
"Data movement is all you need", MLSys 2021, sec. 3: elementwise and normalisation operators
are memory-bound and take a share of the step far above their FLOPs). Each operator below lists
its kernels as (tensors read, tensors written) per element of the graph op, in three dtypes:

- ``s``: the stream (the residual stream and what the norms take; fp32 under autocast with fp32
  parameters, as validate --local trains; the weights' dtype otherwise),
- ``c``: the compute dtype (autocast's bf16/fp16, the GEMMs' inputs and outputs),
- ``f``: fp32 (RMSNorm's written-out arithmetic, ``x.float()``).

A cast to the same dtype is a no-op in PyTorch (``Tensor.to`` returns ``self``) and costs no
pass. Half-width operands (RoPE's rotated halves) count 1/2 per element of the op. Broadcast
tables (RoPE's cos/sin, the norm weight) are small and not counted. Backward lists are the
autograd formulas of each kernel (tools/autograd/derivatives.yaml), reading the saved inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from accelmap.units import DType

Pass = tuple[Sequence[str], Sequence[str], float]  # reads, writes, share of the op's elements

# RMSNorm written out (torch_model.RMSNorm): x.float(); pow(2); mean(-1) (reads only); a second
# x.float(); x * rsqrt(...); .to(x.dtype); * weight. Then, under autocast, the GEMM it feeds
# casts its output to the compute dtype (the cast autocast inserts before the matmul).
RMSNORM_FWD: Sequence[Pass] = [(("s",), ("f",), 1), (("f",), ("f",), 1), (("f",), (), 1),
                           (("s",), ("f",), 1), (("f",), ("f",), 1), (("f",), ("s",), 1),
                           (("s",), ("s",), 1), (("s",), ("c",), 1)]
# backward: the cast's (c -> s); mul by weight: dx = g*w, dw = sum(g*y) (reads g and y);
# to(): cast back; x*scale: dx = g*scale, dscale = sum(g*x); pow: 2x*g; the two paths into x
# summed; x.float() twice: the cast back to s.
RMSNORM_BWD: Sequence[Pass] = [(("c",), ("s",), 1), (("s",), ("s",), 1), (("s", "s"), (), 1),
                           (("s",), ("f",), 1), (("f",), ("f",), 1), (("f", "f"), (), 1),
                           (("f", "f"), ("f",), 1), (("f", "f"), ("f",), 1),
                           (("f",), ("s",), 1)]
# RoPE written out (torch_model.rope) on q and k in the compute dtype: a*cos, b*sin, their
# difference, b*cos, a*sin, their sum (each on half the features), then cat with the rest.
ROPE_FWD: Sequence[Pass] = [(("c",), ("c",), 0.5)] * 4 + [(("c", "c"), ("c",), 0.5)] * 2 \
    + [(("c",), ("c",), 1)]
# backward: the cat's slices are views; each product's gradient (g*cos, g*sin) and the two
# gradients of a and of b summed
ROPE_BWD: Sequence[Pass] = [(("c",), ("c",), 0.5)] * 4 + [(("c", "c"), ("c",), 0.5)] * 2 \
    + [(("c",), ("c",), 1)]
# gated MLP (torch_model.MLP): silu(gate) and its product with up, over the hidden width
GATED_ACT_FWD: Sequence[Pass] = [(("c",), ("c",), 1), (("c", "c"), ("c",), 1)]
# backward: d(up) = g*silu(gate), d(silu) = g*up, silu's backward, the chunk's gradient
# written into the [T, 2 x hidden] buffer (both halves)
GATED_ACT_BWD: Sequence[Pass] = [(("c", "c"), ("c",), 1), (("c", "c"), ("c",), 1),
                             (("c", "c"), ("c",), 1), (("c",), ("c",), 2)]
# residual add: x (stream) + branch output (compute dtype) -> stream
RESIDUAL_FWD: Sequence[Pass] = [(("s", "c"), ("s",), 1)]

PASSES: Mapping[str, tuple[Sequence[Pass], Sequence[Pass] | None]] = {
    "norm": (RMSNORM_FWD, RMSNORM_BWD), "final_norm": (RMSNORM_FWD, RMSNORM_BWD),
    "attention/rope": (ROPE_FWD, ROPE_BWD),
    "mlp/act": (GATED_ACT_FWD, GATED_ACT_BWD),
    "residual": (RESIDUAL_FWD, None),
}


def bytes_per_element(passes: Sequence[Pass], stream: DType, compute: DType) -> float:
    """Bytes the kernels move per element of the op; a cast to its own dtype moves nothing."""
    size = {"s": stream.bytes, "c": compute.bytes, "f": DType.FP32.bytes}
    total = 0.0
    for reads, writes, share in passes:
        if len(reads) == 1 and len(writes) == 1 and reads[0] != writes[0] \
                and size[reads[0]] == size[writes[0]] and _same(reads[0], writes[0], stream,
                                                                 compute):
            continue  # .float() / .to() of a tensor already in that dtype
        total += share * (sum(size[r] for r in reads) + sum(size[w] for w in writes))
    return total


def _same(a: str, b: str, stream: DType, compute: DType) -> bool:
    dt = {"s": stream, "c": compute, "f": DType.FP32}
    return dt[a] is dt[b]


Table = Mapping[str, tuple[Sequence[Pass], Sequence[Pass] | None]]


def eager_factor(name: str, backward: bool, stream: DType, compute: DType,
                 table: Table = PASSES) -> float:
    """How many times the graph's activation bytes the written-out eager op moves (1.0 for an
    op not written out). The graph counts 2 x compute bytes per element forward, 4 x backward."""
    base = name.removesuffix("/backward").removesuffix("/recompute")
    for key in sorted(table, key=len, reverse=True):
        if base == key or base.endswith("/" + key):
            fwd, bwd = table[key]
            passes = bwd if backward else fwd
            if passes is None:
                return 1.0
            graph = (4.0 if backward else 2.0) * compute.bytes
            return bytes_per_element(passes, stream, compute) / graph
    return 1.0
