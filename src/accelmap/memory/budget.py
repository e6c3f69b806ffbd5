"""Memory per device as a tree of named items (slash keys), with fits / does not fit and margin.

Structured for sharding: each item is a plain number of bytes for one unsharded replica, and the
distributed engine divides the items it shards (weights by tp*pp, optimizer by the ZeRO degree,
...). Shapes come from :mod:`accelmap.models.geometry`: every function that takes a model takes
a ModelSpec or a Geometry, the whole model or one rank's share. Formulas:

- mixed-precision training with Adam keeps 2 (bf16 weights) + 4 (fp32 master) + 4 (fp32 grads) +
  8 (m, v) bytes per parameter: 18 B/param (Rajbhandari et al. 2020, ZeRO, sec. 3.1 counts 16 with
  fp16 gradients; Megatron keeps fp32 gradient buffers, hence 4: Megatron-LM forces
  ``accumulate_allreduce_grads_in_fp32`` for bf16, ``training/arguments.py`` L310-316, and NeMo
  24.07 reduces in fp32 unless ``optim.grad_sync_dtype`` says otherwise,
  ``megatron_gpt_model.py`` L553). Megatron-LM's distributed optimizer doc
  (``docs/source/distrib_optimizer.md`` L11-15) gives 6 + 12/d bytes for bf16 parameters and
  fp32 gradients over d data-parallel ranks (tested). The master copy costs only its low 16
  bits where Apex's DistributedFusedAdam keeps remainders (NeMo 24.07's default for bf16 with an
  fp32 optimizer: ``megatron_base_model.py`` L802-812; Apex ``distributed_fused_adam.py``
  ``store_param_remainders``), and the moments may be kept in 16 bits (``Training.state_dtype``);
- SGD with momentum and Lion keep one state; Adafactor keeps row and column statistics of
  each matrix, (rows + cols) x 4 bytes (Shazeer & Stern 2018 sec. 3);
- activations: the bytes each forward op saves for backward (ops/graph.py), summed per layer and
  multiplied by the number of layers; selective recompute drops the s x s softmax and dropout
  tensors of the attention core and keeps Q, K, V (Korthikanti et al. 2022 sec. 5), full
  recompute keeps each layer's input (its sequence shard under sequence parallelism: the layer
  input is [s/t, b, h] there, sec. 4.2.2; Megatron-Core checkpoints that shard,
  ``transformer_block.py`` L262, which is why ``distribute_saved_activations`` must be off with
  sequence parallelism, ``transformer_config.py`` L386-388 at 96d6aba) plus one layer's
  activations while it is recomputed;
- KV cache: 2 x kv_heads x head_dim per token per layer (GQA/MQA), or (kv_lora_rank + rope dim)
  per token per layer for MLA (DeepSeek-V2 sec. 2.1.2), rounded up to whole paged blocks
  (Kwon et al. 2023, vLLM, sec. 4.1);
- weight-only INT8/INT4 store one 16-bit scale (and one 16-bit zero point for INT4, as
  gpt-fast's int4 groupwise kernel does) per quantization group;
- 2:4-sparse serving weights: the layers' GEMM matrices stored compressed, 1/2 + 1/bits of their
  dense bytes (ops/sparsity.py); embedding, LM head, router and norms dense.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelmap.memory.allocator import CUDA_CONTEXT_BYTES, allocator_bytes
from accelmap.memory.band import (
    MEMORY_ERROR_BAND,
    MemoryFit,
    allowance,
    elastic_bytes,
    exact_bytes,
    is_over,
    is_tight,
    memory_fit,
)
from accelmap.models.geometry import ExpertSplit, Geometry
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import Op
from accelmap.ops.sparsity import compressed_bytes_per_param, sparse_params
from accelmap.ops.training import norm_up_split, per_op_split
from accelmap.units import DType, Num
from accelmap.workload import Inference, Optimizer, Recompute, Sparsity, Training

LOGITS_BYTES = DType.FP32.bytes  # logits are upcast to fp32 for the softmax/cross-entropy



@dataclass(frozen=True)
class MemoryBudget:
    items: dict[str, Num]  # slash keys -> bytes
    capacity: float
    notes: tuple[str, ...] = field(default=())

    @property
    def total(self) -> Num:
        return sum(self.items.values())

    @property
    def margin(self) -> Num:
        """Bytes left (negative: over capacity)."""
        return self.capacity - self.total

    @property
    def fits(self) -> Num:
        """The central estimate is within capacity (see ``fit`` for the error band)."""
        return self.total <= self.capacity

    @property
    def band(self) -> float:
        """The memory model's relative error band (``memory.band``)."""
        return MEMORY_ERROR_BAND

    @property
    def exact(self) -> Num:
        """Bytes counted exactly (weights, gradients, optimizer states, KV cache)."""
        return exact_bytes(self.items)

    @property
    def elastic(self) -> Num:
        """Bytes the caching allocator gives back under pressure (``memory.band``)."""
        return elastic_bytes(self.items)

    @property
    def allowance(self) -> Num:
        """Bytes the total may exceed capacity by and still not be over (``memory.band``)."""
        return allowance(self.total, self.exact, elastic=self.elastic)

    @property
    def over(self) -> Num:
        """Over capacity by more than the error band, or by exactly counted bytes alone:
        does not fit."""
        return is_over(self.total, self.capacity, exact=self.exact, elastic=self.elastic)

    @property
    def tight(self) -> Num:
        """Within the error band of capacity."""
        return is_tight(self.total, self.capacity, exact=self.exact, elastic=self.elastic)

    @property
    def reclaims(self) -> bool:
        """Fits only if the caching allocator gives its reserve back: over on the estimated
        total, not on the live tensors (``memory.band``)."""
        total = float(np.max(self.total))
        return self.fit is MemoryFit.TIGHT and total * (1.0 - self.band) > self.capacity

    @property
    def fit(self) -> MemoryFit:
        """fits / tight / over (the largest total of a candidate table, with its own reserve)."""
        total = np.asarray(self.total)
        at = int(np.argmax(total)) if total.ndim else 0
        elastic = np.broadcast_to(self.elastic, total.shape).flat[at] if total.ndim else \
            self.elastic
        return memory_fit(float(total.flat[at]), self.capacity,
                          exact=float(np.max(self.exact)), elastic=float(elastic))

    def tree(self) -> dict[str, Any]:
        """Nested dict of the slash keys, each level with its own 'total_bytes'."""
        root: dict[str, Any] = {}
        for key, value in self.items.items():
            node = root
            for part in key.split("/")[:-1]:
                node = node.setdefault(part, {})
            node[key.split("/")[-1]] = float(value) if np.ndim(value) == 0 else value

        def total(node: dict[str, Any]) -> float:
            s = 0.0
            for k, v in list(node.items()):
                if isinstance(v, dict):
                    v["total_bytes"] = total(v)
                    s += v["total_bytes"]
                elif k != "total_bytes":
                    s += v
            return s

        root["total_bytes"] = total(root)
        return root


def weight_bytes_per_param(dtype: DType, group: int = 128) -> float:
    """Storage per weight including quantization scales (and zero points for INT4)."""
    if dtype is DType.INT8:
        return 1.0 + 2.0 / group  # one fp16 scale per group
    if dtype is DType.INT4:
        return 0.5 + 4.0 / group  # fp16 scale + fp16 zero point per group (gpt-fast int4)
    return dtype.bytes


def routed_expert_params(model: ModelSpec | Geometry) -> float:
    """Parameters of the routed experts (the tensors ``Geometry`` splits over expert
    parallelism), of the whole model or of one rank's share."""
    return float(sum(g.count * t.params for g in Geometry.of(model).groups
                     for t in g.tensors if t.ep is ExpertSplit.EXPERTS))


def _tensor_scales(model: ModelSpec | Geometry, dtype: DType, experts: bool | None) -> float:
    """Second-level scales: one FP32 per quantized weight matrix in NVFP4 (``tensor_scale_bytes``),
    per expert copy; ``experts`` True/False: only the routed experts' matrices or only the rest."""
    fmt = dtype.block_format
    if fmt is None or not fmt.tensor_scale_bytes:
        return 0.0
    n = sum(g.count * t.copies for g in Geometry.of(model).groups for t in g.tensors
            if t.is_matrix and (experts is None or (t.ep is ExpertSplit.EXPERTS) == experts))
    return float(n * fmt.tensor_scale_bytes)


def weight_storage_bytes(model: ModelSpec | Geometry, wl: Inference) -> float:
    """Bytes of the served weights: every parameter at ``weight_dtype``'s storage (its block
    scales included, ``DType.bytes``), the routed experts at ``moe_weight_dtype``'s when the
    recipe is mixed, plus NVFP4's FP32 scale per matrix. Like the FP8 and int4 estimates, the
    embedding, norms and head are counted in the weight format too."""
    geo = Geometry.of(model)
    total = float(count_params(geo).total)
    experts = routed_expert_params(geo) if wl.moe_weight_dtype is not None else 0.0
    out = (total - experts) * weight_bytes_per_param(wl.weight_dtype, wl.quant_group)
    if wl.moe_weight_dtype is None:
        return out + _tensor_scales(geo, wl.weight_dtype, None)
    out += experts * weight_bytes_per_param(wl.moe_weight_dtype, wl.quant_group)
    return (out + _tensor_scales(geo, wl.weight_dtype, False)
            + _tensor_scales(geo, wl.moe_weight_dtype, True))


def adafactor_state_bytes(model: ModelSpec | Geometry) -> float:
    total = 0.0
    for g in Geometry.of(model).groups:
        for _ in range(g.count):
            for m in g.matrices:
                total += (m.rows + m.cols) * m.copies * 4.0
    return total


def weight_storage_dtype(wl: Training) -> DType:
    """What the GEMM weights are stored in: FP8 primary weights, else the 16-bit storage."""
    return DType.FP8 if (wl.fp8_params and wl.dtype is DType.FP8) else wl.storage_dtype


def master_bytes_per_param(wl: Training) -> float:
    """The optimizer's master copy per parameter: none when the weights are already stored in
    the master dtype; with Apex's remainders only the bits the weights lack (fp32 - bf16 =
    2 bytes); else the whole master dtype (Rajbhandari et al. 2020 sec. 3.1: fp32)."""
    store = weight_storage_dtype(wl)
    if wl.master_dtype is store:
        return 0.0
    if wl.master_remainders:
        return max(wl.master_dtype.bytes - store.bytes, 0.0)
    return wl.master_dtype.bytes


def optimizer_state_bytes_per_param(model: ModelSpec | Geometry, wl: Training) -> float:
    """Optimizer bytes per parameter beyond weights and gradients: the moments (two for AdamW,
    one for SGD-momentum and Lion, in ``wl.state_dtype``; Adafactor's factored row and column
    statistics in fp32, averaged over the parameters) plus the master copy
    (``master_bytes_per_param``; Rajbhandari et al. 2020, ZeRO sec. 3.1: K = 12 for
    mixed-precision Adam)."""
    if wl.optimizer is Optimizer.ADAFACTOR:
        states = adafactor_state_bytes(model) / float(count_params(model).total)
    else:
        states = wl.optimizer.fp32_states * wl.state_dtype.bytes
    return states + master_bytes_per_param(wl)


def kv_bytes_per_token(model: ModelSpec | Geometry, dtype: DType) -> float:
    """KV-cache bytes one token adds, summed over layers."""
    geo = Geometry.of(model)
    return float(geo.n_layers * geo.kv_width * dtype.bytes)


def kv_cache_bytes(model: ModelSpec | Geometry, batch: Num, tokens: Num, dtype: DType,
                   block: int) -> Num:
    """Paged KV cache: every sequence holds whole blocks; sliding-window layers keep a window."""
    geo = Geometry.of(model)
    per_layer_width = kv_bytes_per_token(geo, dtype) / geo.n_layers
    blocks = np.ceil(np.asarray(tokens, dtype=float) / block) * block
    window = geo.sliding_window
    total: Num = 0.0
    for layer in range(geo.n_layers):
        kept = blocks
        if geo.is_sliding_layer(layer) and window is not None:
            kept = np.minimum(blocks, np.ceil(window / block) * block)
        total = total + kept * per_layer_width
    return batch * total


def activation_bytes(ops: list[Op], recompute: Recompute, model: ModelSpec | Geometry,
                     tokens: Num, act_bytes: float, working_set: bool = True,
                     fp8_cache: bool = False) -> Num:
    """Activations kept for backward across all layers, by recompute policy. ``tokens``: the
    tokens of each layer's input on this rank (the sequence shard, T / tp, under sequence
    parallelism), which full recompute keeps. ``working_set`` adds, under full recompute, the
    one layer whose activations live again while it is recomputed (count it once per device,
    not once per micro-batch in flight). ``fp8_cache``: FP8 training, whose DeepSeek-V3 policy
    keeps the MoE SwiGLU input in FP8 (``norm_up_split``)."""
    layer_ops = [o for o in ops if o.name.startswith("layers/")]
    other = sum(o.saved * o.count for o in ops if not o.name.startswith("layers/"))
    if recompute is Recompute.FULL:
        # Checkpoint only each layer's input; during backward one layer's activations live again.
        # (With several layer groups, e.g. dense + MoE, one layer of each is counted: a small
        # overestimate on the safe side.)
        one_layer = sum(o.saved for o in layer_ops) if working_set else 0.0
        geo = Geometry.of(model)
        return geo.n_layers * tokens * geo.d_model * act_bytes + one_layer + other
    if recompute is Recompute.PER_OP:  # the kept op outputs + each block's checkpointed input
        geo = Geometry.of(model)
        kept, _ = per_op_split(layer_ops, act_bytes)
        # as under full recompute, one block's activations live again while it re-runs
        one_layer = sum(o.saved for o in layer_ops) if working_set else 0.0
        return geo.n_layers * tokens * geo.d_model * act_bytes + kept + one_layer + other
    if recompute is Recompute.NORM_UP:  # DeepSeek-V3's: norms and up-projections re-run
        return norm_up_split(layer_ops, fp8_cache)[0] + other
    if recompute is Recompute.SELECTIVE:  # keep Q, K, V; drop the s x s tensors (sec. 5)
        return sum((o.saved - o.selective_dropped) * o.count for o in layer_ops) + other
    return sum(o.saved * o.count for o in layer_ops) + other


# Elementwise outputs an unfused (eager) stack keeps next to their inputs at the prefill peak,
# in MLP hidden widths per token: a plain MLP holds up(x) and act(up(x)); a gated one gate_up
# (2 x ffn), act(gate) and act(gate) * up. A fused stack holds the widest GEMM output only.
UNFUSED_TRANSIENTS = {"plain": 2.0, "gated": 4.0}


def inference_memory(model: ModelSpec | Geometry, wl: Inference, capacity: float,
                     tokens: Num | None = None, prefill_chunk: int | None = None,
                     unfused: bool = False) -> MemoryBudget:
    """Weights + KV cache for the whole request (prompt + output) + the largest temporaries,
    of the whole model or of one rank's share (a sharded geometry). ``unfused``: an eager
    stack's MLP keeps the activation's output next to its input (``UNFUSED_TRANSIENTS``:
    2 x ffn plain, 4 x ffn gated, against 1 and 2 fused)."""
    geo = Geometry.of(model)
    seq = wl.prompt_len + wl.output_len if tokens is None else tokens
    wb = weight_bytes_per_param(wl.weight_dtype, wl.quant_group)
    weights = weight_storage_bytes(geo, wl)
    if wl.sparsity is not Sparsity.NONE:  # the layers' GEMM weights compressed (ops/sparsity.py)
        weights -= sparse_params(geo) * (wb - compressed_bytes_per_param(wl.weight_dtype, wb))
    items: dict[str, Num] = {
        "weights": weights,
        "kv_cache": kv_cache_bytes(geo, wl.batch, seq, wl.kv_dtype, wl.kv_block),
    }
    # Peak temporary during prefill: the widest intermediate (gate+up, or up, or QKV) of one
    # layer for the prompt tokens of one prefill pass, plus last-position logits in fp32.
    up: float = 2 if geo.gated else 1
    if unfused:
        up = UNFUSED_TRANSIENTS["gated" if geo.gated else "plain"]
    widest = max(up * geo.ffn, (geo.heads + 2 * geo.kv_heads) * geo.head_dim,
                 up * geo.expert_ffn if geo.is_moe else 0)
    prompt_tokens = wl.batch * wl.prompt_len
    if prefill_chunk is not None:
        prompt_tokens = np.minimum(prompt_tokens, prefill_chunk)
    items["activations/peak"] = prompt_tokens * (widest + 2 * geo.d_model) * wl.act_dtype.bytes
    items["activations/logits"] = wl.batch * geo.vocab * LOGITS_BYTES
    items["runtime/context"] = CUDA_CONTEXT_BYTES
    # The paged KV pool is allocated up front in whole blocks (rounding counted above; Kwon et al.
    # 2023 report under 4 % waste), so only the activations fragment.
    items["runtime/fragmentation"] = allocator_bytes(items["activations/peak"])
    return MemoryBudget(items=items, capacity=capacity)
