"""Matrix shapes per layer and FLOPs per token: the summary that ``models show`` prints,
derived from the tensors of :mod:`accelmap.models.geometry` (the one spelling of the weights).

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
business, not the catalog's: it adds the recomputed FLOPs in this same full-attention
convention (``attention_flops_per_token`` converts what flash attention executes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.models.geometry import ExpertSplit, Geometry
from accelmap.models.schema import ModelSpec

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


def layer_matrices(model: ModelSpec | Geometry, layer: int) -> list[Matrix]:
    """The weight matrices of one layer (the geometry's 2-D tensors)."""
    g = Geometry.of(model).group_of(layer)
    return [Matrix(t.name, t.rows, t.cols, t.copies) for t in g.matrices]


def layer_groups(model: ModelSpec | Geometry) -> list[LayerGroup]:
    return [LayerGroup(g.first, g.last, g.kind,
                       tuple(Matrix(t.name, t.rows, t.cols, t.copies) for t in g.matrices),
                       g.params_per_layer * g.count)
            for g in Geometry.of(model).groups]


def causal_mean_keys(seq_len: Any, window: int | None = None, chunked: bool = False) -> Any:
    """With ``chunked`` (Llama 4's chunked attention), query i sees ((i - 1) mod w) + 1 keys,
    from its chunk's start: q = floor(s / w) full chunks give w (w + 1) / 2 each and the
    remainder r = s - q w gives r (r + 1) / 2, over s queries.

    Mean keys per query of causal attention over ``seq_len`` queries when query i (1-based)
    sees min(i, window) keys: (1/s) sum_i min(i, w) = (s + 1) / 2 for s <= w, else
    w - w (w - 1) / (2 s) (the first w queries ramp up, the rest see w). Arrays work."""
    s = np.asarray(seq_len, dtype=float)
    if window is None:
        return (s + 1) / 2
    w = float(window)
    if chunked:
        full = np.floor(s / w)
        r = s - full * w
        return (full * w * (w + 1) / 2 + r * (r + 1) / 2) / np.maximum(s, 1.0)
    return np.where(s <= w, (s + 1) / 2, w - w * (w - 1) / (2 * np.maximum(s, 1.0)))


def _attention_flops_per_token(geo: Geometry, seq_len: int, causal: bool) -> float:
    d_qk, d_v = geo.qk_head_dim, geo.v_head_dim
    total = 0.0
    for layer in range(geo.n_layers):
        window = geo.sliding_window if geo.is_sliding_layer(layer) else None
        if causal:
            keys = float(causal_mean_keys(seq_len, window, geo.chunked))
        else:
            keys = float(min(seq_len, window or seq_len))
        total += 2 * keys * geo.heads * (d_qk + d_v)
    return total


def attention_flops_per_token(model: ModelSpec | Geometry, seq_len: int, causal: bool,
                              masked: bool = False) -> float:
    """Attention-core FLOPs of one token's forward pass: ``causal`` counts each query's causal
    mean of keys (what FlashAttention executes), otherwise every key of the sequence (the
    window's on sliding layers: PaLM's model-FLOPs convention); ``masked`` counts the full
    s x s score matrix on every layer, sliding ones too (naive attention masks after)."""
    geo = Geometry.of(model)
    if masked:
        return 2.0 * seq_len * geo.heads * (geo.qk_head_dim + geo.v_head_dim) * geo.n_layers
    return _attention_flops_per_token(geo, seq_len, causal)


def matmul_flops_per_token(model: ModelSpec | Geometry) -> float:
    """2 x the weight-matrix elements one token multiplies: routed experts count top_k times."""
    geo = Geometry.of(model)
    total = 0.0
    for g in geo.groups:
        for _ in range(g.count):
            for m in g.matrices:
                copies = geo.top_k if m.ep is ExpertSplit.EXPERTS else m.copies
                total += 2.0 * m.rows * m.cols * copies
    return total + 2.0 * geo.vocab * geo.d_model  # LM head, tied or not


def forward_flops_per_token(model: ModelSpec | Geometry, seq_len: int,
                            causal: bool = True) -> float:
    """Model FLOPs of one token's forward pass at sequence length ``seq_len``.

    Biases, norms and activations are vector work of O(d) per token and are left out, as in
    Kaplan et al. (their share is below 0.1 % for every catalog model).
    """
    geo = Geometry.of(model)
    return matmul_flops_per_token(geo) + _attention_flops_per_token(geo, seq_len, causal)


def training_flops_per_token(model: ModelSpec | Geometry, seq_len: int) -> float:
    """Forward + backward model FLOPs per trained token (no recompute)."""
    return (1 + BACKWARD_TO_FORWARD) * forward_flops_per_token(model, seq_len, causal=True)
