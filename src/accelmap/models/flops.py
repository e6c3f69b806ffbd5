"""Matrix shapes per layer and FLOPs per token: the summary that ``models show`` prints.

FLOPs per token, forward (one multiply-add = 2 FLOPs):

- every weight matrix a token passes through costs 2 x its parameters (Kaplan et al. 2020,
  arXiv:2001.08361, Table 1: C_forward ~ 2N); the input embedding is a lookup and costs nothing,
  while the LM head is a matmul (also when tied to the embedding);
- attention scores and the weighted sum over values cost 2 * ctx * (h * d_qk) and
  2 * ctx * (h * d_v) per layer (Hoffmann et al. 2022, arXiv:2203.15556, App. F counts both;
  Kaplan's table lists the score term only). ``ctx`` is the number of keys a query attends to:
  the sequence length for full attention, capped at the window on sliding-window layers. For
  causal training over a sequence of length s the average query sees (s + 1) / 2 keys, which is
  what ``causal=True`` uses.

Training (model FLOPs, no recomputation): backward = 2 x forward, so 3 x forward in all
(Kaplan et al. 2020 sec. 2.1; Narayanan et al. 2021 sec. 5.1). Recompute (HFU) is the engine's
business, not the catalog's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.models.params import count_params
from accelmap.models.schema import FFNKind, ModelSpec

BACKWARD_TO_FORWARD = 2.0  # Kaplan et al. 2020 sec. 2.1: backward ~ 2x forward


@dataclass(frozen=True)
class Matrix:
    name: str
    rows: int  # input features
    cols: int  # output features
    copies: int = 1  # e.g. number of routed experts holding this shape

    @property
    def params(self) -> int:
        return self.rows * self.cols * self.copies


@dataclass(frozen=True)
class LayerGroup:
    """Consecutive layers with identical shapes (e.g. DeepSeek-V3's 3 dense then 58 MoE)."""

    first: int
    last: int
    kind: str  # "dense" or "moe", with "+sliding" when the layer uses a window
    matrices: tuple[Matrix, ...]
    params: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


def attention_matrices(spec: ModelSpec) -> list[Matrix]:
    d, h = spec.d_model, spec.n_heads
    if spec.mla is not None:
        m = spec.mla
        out: list[Matrix] = []
        if m.q_lora_rank is None:
            out.append(Matrix("wq", d, h * m.qk_head_dim))
        else:
            out += [Matrix("wq_a", d, m.q_lora_rank), Matrix("wq_b", m.q_lora_rank,
                                                             h * m.qk_head_dim)]
        out += [
            Matrix("wkv_a", d, m.kv_lora_rank + m.qk_rope_head_dim),
            Matrix("wkv_b", m.kv_lora_rank, h * (m.qk_nope_head_dim + m.v_head_dim)),
            Matrix("wo", h * m.v_head_dim, d),
        ]
        return out
    hd, kv = spec.head_size, spec.kv_heads
    return [
        Matrix("wq", d, h * hd),
        Matrix("wk", d, kv * hd),
        Matrix("wv", d, kv * hd),
        Matrix("wo", h * hd, d),
    ]


def ffn_matrices(spec: ModelSpec, hidden: int, prefix: str = "", copies: int = 1) -> list[Matrix]:
    d = spec.d_model
    mats = [Matrix(f"{prefix}up", d, hidden, copies), Matrix(f"{prefix}down", hidden, d, copies)]
    if spec.ffn_kind is FFNKind.GATED:
        mats.insert(0, Matrix(f"{prefix}gate", d, hidden, copies))
    return mats


def layer_matrices(spec: ModelSpec, layer: int) -> list[Matrix]:
    mats = attention_matrices(spec)
    moe = spec.moe
    if moe is None or not spec.is_moe_layer(layer):
        return mats + ffn_matrices(spec, spec.ffn_dim)
    mats.append(Matrix("router", spec.d_model, moe.num_experts))
    if moe.num_shared_experts:
        mats += ffn_matrices(spec, moe.shared_ffn, "shared_", moe.num_shared_experts)
    return mats + ffn_matrices(spec, moe.expert_ffn_dim, "expert_", moe.num_experts)


def layer_groups(spec: ModelSpec) -> list[LayerGroup]:
    params = count_params(spec).layers
    groups: list[LayerGroup] = []
    for i in range(spec.n_layers):
        kind = ("moe" if spec.is_moe_layer(i) else "dense") + (
            "+sliding" if spec.is_sliding_layer(i) else ""
        )
        mats = tuple(layer_matrices(spec, i))
        last = groups[-1] if groups else None
        if last and last.kind == kind and last.matrices == mats and last.last == i - 1:
            groups[-1] = LayerGroup(last.first, i, kind, mats, last.params + params[i].total)
        else:
            groups.append(LayerGroup(i, i, kind, mats, params[i].total))
    return groups


def causal_mean_keys(seq_len: Any, window: int | None = None) -> Any:
    """Mean keys per query of causal attention over ``seq_len`` queries when query i (1-based)
    sees min(i, window) keys: (1/s) sum_i min(i, w) = (s + 1) / 2 for s <= w, else
    w - w (w - 1) / (2 s) (the first w queries ramp up, the rest see w). Arrays work."""
    s = np.asarray(seq_len, dtype=float)
    if window is None:
        return (s + 1) / 2
    w = float(window)
    return np.where(s <= w, (s + 1) / 2, w - w * (w - 1) / (2 * np.maximum(s, 1.0)))


def _attention_flops_per_token(spec: ModelSpec, seq_len: int, causal: bool) -> float:
    if spec.mla is not None:
        d_qk, d_v = spec.mla.qk_head_dim, spec.mla.v_head_dim
    else:
        d_qk = d_v = spec.head_size
    total = 0.0
    for layer in range(spec.n_layers):
        window = spec.sliding_window if spec.is_sliding_layer(layer) else None
        if causal:
            keys = float(causal_mean_keys(seq_len, window))
        else:
            keys = float(min(seq_len, window or seq_len))
        total += 2 * keys * spec.n_heads * (d_qk + d_v)
    return total


def matmul_flops_per_token(spec: ModelSpec) -> float:
    """2 x the weight-matrix elements one token multiplies: routed experts count top_k times."""
    total = 0.0
    for layer in range(spec.n_layers):
        for m in layer_matrices(spec, layer):
            copies = m.copies
            if m.name.startswith("expert_") and spec.moe is not None:
                copies = spec.moe.top_k
            total += 2.0 * m.rows * m.cols * copies
    return total + 2.0 * spec.vocab_size * spec.d_model  # LM head, tied or not


def forward_flops_per_token(spec: ModelSpec, seq_len: int, causal: bool = True) -> float:
    """Model FLOPs of one token's forward pass at sequence length ``seq_len``.

    Biases, norms and activations are vector work of O(d) per token and are left out, as in
    Kaplan et al. (their share is below 0.1 % for every catalog model).
    """
    return matmul_flops_per_token(spec) + _attention_flops_per_token(spec, seq_len, causal)


def training_flops_per_token(spec: ModelSpec, seq_len: int) -> float:
    """Forward + backward model FLOPs per trained token (no recompute)."""
    return (1 + BACKWARD_TO_FORWARD) * forward_flops_per_token(spec, seq_len, causal=True)
