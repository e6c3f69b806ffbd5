"""LoRA and QLoRA on the operator graph: frozen base weights, low-rank adapters beside the
targeted projections, and QLoRA's dequantization.

- LoRA (Hu et al. 2021, sec. 4.1, eq. 3): h = W0 x + B A x with A (r x k) and B (d x r), W0
  frozen. Each targeted projection gets two GEMMs, A over its input and B over A's output,
  added to the base output: 2 T r (k + d) FLOPs forward. The adapters train as usual (dgrad
  and wgrad); the frozen projections need only their activation gradient, so their
  weight-gradient GEMMs vanish (``Op.frozen``; ops/training.py), which is where LoRA's
  training speedup comes from (Hu et al. 2021 sec. 4.2: 25 % on GPT-3 175B).
- Under tensor parallelism each adapter follows its base layer (Megatron/NeMo
  ``ParallelLinearAdapter``): beside a column-parallel projection A is whole and B is split,
  beside a row-parallel one A is split and B whole -- r x (rows + cols) of the rank's shard
  of the matrix, which is what the sharded geometry gives.
- Saved activations: A reads the input the base projection already keeps (one tensor, saved
  once); B keeps its r-wide input. Dropout on the adapter path is off (PEFT's default
  lora_dropout = 0).
- QLoRA (Dettmers et al. 2023 sec. 3): the frozen block matrices are stored in NF4 with
  double-quantized constants and dequantized to 16 bits before every matmul that reads them
  -- in the forward and again for the activation gradient (bitsandbytes ``MatMul4Bit``:
  ``dequantize_4bit`` then a 16-bit matmul). Each dequantization reads the 4-bit weights and
  writes 16-bit ones; the GEMM then streams the 16-bit copy. The output head and embedding
  stay in 16 bits (QLoRA's qlora.py quantizes the Linear layers of the blocks only).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelmap.models.geometry import Geometry, Group
from accelmap.ops.graph import ByteKind, Op, Unit
from accelmap.units import DType
from accelmap.workload import Adapters, LoraTarget

Q, K, V, O = LoraTarget.Q, LoraTarget.K, LoraTarget.V, LoraTarget.O
GATE, UP, DOWN = LoraTarget.GATE, LoraTarget.UP, LoraTarget.DOWN

# which geometry tensors each projection op of ops/graph.py multiplies, by adapter target
_TENSORS: dict[str, tuple[tuple[LoraTarget, str], ...]] = {
    "layers/attention/qkv": ((Q, "wq"), (K, "wk"), (V, "wv")),
    "layers/attention/q": ((Q, "wq"),),
    "layers/attention/q_down": ((Q, "wq_a"),),
    "layers/attention/q_up": ((Q, "wq_b"),),
    "layers/attention/kv_down": ((K, "wkv_a"), (V, "wkv_a")),
    "layers/attention/kv_up": ((K, "wkv_b"), (V, "wkv_b")),
    "layers/attention/out": ((O, "wo"),),
    "layers/mlp/up": ((GATE, "gate"), (UP, "up")),
    "layers/mlp/down": ((DOWN, "down"),),
    "layers/moe/experts/up": ((GATE, "expert_gate"), (UP, "expert_up")),
    "layers/moe/experts/down": ((DOWN, "expert_down"),),
    "layers/moe/shared/up": ((GATE, "shared_gate"), (UP, "shared_up")),
    "layers/moe/shared/down": ((DOWN, "shared_down"),),
}

# NF4 dequantization: a 16-entry table lookup and two scale multiplies per weight
DEQUANT_FLOPS = 3.0


def _tensors(group: Group, op_name: str, targets: frozenset[LoraTarget]) -> list[Any]:
    """The group's tensors behind ``op_name`` that carry an adapter (each once: MLA's shared
    kv_down serves both K and V)."""
    names: list[str] = []
    for target, key in _TENSORS.get(op_name, ()):
        if target in targets and key not in names and _has(group, key):
            names.append(key)
    return [group.tensor(n) for n in names]


def _has(group: Group, key: str) -> bool:
    return any(t.name == key for t in group.tensors)


def adapter_params(geo: Geometry, targets: frozenset[LoraTarget], rank: int,
                   top_k: int | None = None) -> float:
    """Adapter parameters of ``geo`` (the whole model, or one rank's shard): r x (rows + cols)
    of every targeted matrix, per copy, over every layer. ``top_k``: only those one token runs
    through, the adapters of top_k routed experts (as active parameters count experts)."""
    total = 0.0
    for g in geo.groups:
        seen: set[str] = set()
        for name in _TENSORS:
            for t in _tensors(g, name, targets):
                if t.name not in seen:
                    seen.add(t.name)
                    copies = t.active(top_k) // t.size if top_k else t.copies
                    total += g.count * copies * rank * (t.rows + t.cols)
    return total


def _adapter_ops(op: Op, tensors: list[Any], rank: int, act: DType) -> list[Op]:
    m = op.gemm[0] if op.gemm is not None else 0.0
    copies = max(t.copies for t in tensors)
    rows = tensors[0].rows
    width = rank * len(tensors)  # the A matrices of a fused projection share its input
    cols = float(sum(t.cols for t in tensors))
    a = act.bytes
    w_a = copies * width * rows * a
    w_b = copies * rank * cols * a
    return [
        Op(name=f"{op.name}/lora_a", unit=Unit.MATRIX, dtype=act, count=op.count,
           flops=2.0 * m * width * rows, gemm=(m, width, rows), weight_dtype=act,
           bytes={ByteKind.WEIGHTS: w_a, ByteKind.ACTIVATIONS: (m * rows + m * width) * a}),
        # B's output is added to the base projection's: read it and write the sum
        Op(name=f"{op.name}/lora_b", unit=Unit.MATRIX, dtype=act, count=op.count,
           flops=2.0 * m * cols * rank, gemm=(m, cols, rank), weight_dtype=act,
           saved=m * width * a,
           bytes={ByteKind.WEIGHTS: w_b, ByteKind.ACTIVATIONS: (m * width + 2 * m * cols) * a}),
    ]


def _dequant(op: Op, nf4_bytes: float) -> Op:
    """One NF4 -> 16-bit dequantization of ``op``'s weights (read 4-bit, write 16-bit)."""
    w = op.bytes.get(ByteKind.WEIGHTS, 0.0)
    wdt = op.weight_dtype or op.dtype
    params = w / wdt.bytes
    return Op(name=f"{op.name}/dequant", unit=Unit.VECTOR, dtype=wdt, count=op.count,
              flops=DEQUANT_FLOPS * params,
              bytes={ByteKind.WEIGHTS: params * nf4_bytes, ByteKind.ACTIVATIONS: w})


def adapt_forward(fwd: list[Op], geo: Geometry, ad: Adapters, act: DType) -> list[Op]:
    """The forward graph of a LoRA/QLoRA fine-tune: every base weight frozen, the adapter
    GEMMs after each targeted projection, and (QLoRA) a dequantization before each block
    matrix. ``geo`` is the geometry ``fwd`` was built from (its groups in the same order)."""
    groups = iter(geo.groups)
    group: Group | None = None
    nf4 = ad.base_bytes_per_param
    out: list[Op] = []
    for op in fwd:
        if op.name == "layers/attention/norm":  # the first op of each layer group
            group = next(groups)
        has_weights = ByteKind.WEIGHTS in op.bytes and op.bytes[ByteKind.WEIGHTS] is not None
        if not has_weights:
            out.append(op)
            continue
        frozen = replace(op, frozen=True)
        if nf4 is not None and op.gemm is not None and op.name.startswith("layers/"):
            out.append(_dequant(frozen, nf4))
        out.append(frozen)
        if group is not None and op.gemm is not None and op.name in _TENSORS:
            tensors = _tensors(group, op.name, ad.targets)
            if tensors:
                out += _adapter_ops(op, tensors, ad.rank, act)
    return out


def is_dequant(op: Op) -> bool:
    return op.name.endswith("/dequant")
