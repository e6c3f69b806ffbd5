"""A real decoder-only transformer in PyTorch, built from a :class:`ModelSpec` (random weights).

Every parameter of :func:`accelmap.models.params.count_params` has a tensor here, matrix by
matrix, so ``sum(p.numel() for p in model.parameters())`` equals ``count_params(spec).total``
exactly (tested for every catalog preset): the self-check nanoGPT makes of its own counts.

How the spec maps onto modules (one ``nn.Linear`` per weight matrix of the counting rules;
Q, K and V are one fused ``qkv`` matrix, gate and up one ``gate_up`` matrix: same parameters,
fewer kernels, as Megatron and vLLM fuse them):

- attention MHA/GQA/MQA: ``qkv`` d -> (h + 2 kv) hd (bias with ``qkv_bias``), K/V heads repeated
  h/kv times for the scores, ``out`` h hd -> d; ``qk_norm`` = RMSNorm over head_dim on q and k;
  PyTorch's fused ``scaled_dot_product_attention`` (causal; the FlashAttention/memory-efficient
  kernels where the device has them), so the estimate assumes flash attention;
- MLA (DeepSeek-V2): q (optionally low-rank with its RMSNorm), ``kv_down`` d -> r_kv + d_rope,
  RMSNorm r_kv, ``kv_up`` r_kv -> h (d_nope + d_v), out; the cache holds the latent (r_kv +
  d_rope per token, as the estimate counts it) and is up-projected at every step (not the
  absorbed-matrix form: decode does extra kv_up work over the context);
- positions: learned table ((max_seq_len + offset) x d), RoPE on ``rope_fraction`` of each head
  (theta 10000), ALiBi and none add nothing (ALiBi's bias is not applied: same FLOPs class);
- FFN: plain ``up``/``down`` or gated ``gate_up``/``down``, activation from the spec;
- MoE: router d -> E (+ a per-expert selection bias when ``router_bias``), softmax top-k
  (weights renormalised over the k), experts run on their routed tokens, shared experts on all
  tokens (optionally sigmoid-gated); dense layers where ``spec.is_moe_layer`` says so;
- norms: ``norms_per_layer`` of RMSNorm / LayerNorm (bias with ``norm_bias``): [0] before
  attention, [1] before the MLP, [2] after attention and [3] after the MLP (Gemma 2); parallel
  blocks (GPT-J, Falcon) add attention and MLP to the same residual;
- embeddings, optional embedding norm, final norm, LM head tied to the token embedding or not
  (bias with ``lm_head_bias``).

Sliding-window layers mask keys older than the window; the static KV cache keeps every
position (the estimate keeps only the window: equal while prompt + output <= window).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelmap.measure.backends import torch_missing
from accelmap.models.schema import Activation, FFNKind, ModelSpec, NormKind, PositionKind

try:
    import torch
    import torch.nn.functional as F
    from torch import Tensor, nn
except ImportError:
    raise torch_missing("the PyTorch model of validate --local") from None

ROPE_THETA = 10_000.0  # Su et al. 2021; the preset's own theta changes no FLOPs or bytes
NORM_EPS = 1e-5  # LlamaConfig's rms_norm_eps for Llama 2 and torch.nn.LayerNorm's default


class RMSNorm(nn.Module):
    """Zhang & Sennrich 2019 (written out: ``nn.RMSNorm`` needs torch >= 2.4)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + NORM_EPS)
        return (x.float() * scale).to(x.dtype) * self.weight


def make_norm(spec: ModelSpec, dim: int) -> nn.Module:
    if spec.norm is NormKind.LAYERNORM:
        return nn.LayerNorm(dim, eps=NORM_EPS, bias=spec.norm_bias)
    return RMSNorm(dim)


def activate(kind: Activation, x: Tensor) -> Tensor:
    if kind is Activation.GELU:
        return F.gelu(x)
    if kind is Activation.GELU_TANH:
        return F.gelu(x, approximate="tanh")
    if kind is Activation.RELU:
        return F.relu(x)
    return F.silu(x)


def rope(x: Tensor, start: int, dims: int) -> Tensor:
    """Rotary embedding on the first ``dims`` features of x [b, heads, t, hd] (half-split form)."""
    if dims <= 0:
        return x
    t = x.shape[-2]
    inv = ROPE_THETA ** (-torch.arange(0, dims, 2, device=x.device, dtype=torch.float32) / dims)
    pos = torch.arange(start, start + t, device=x.device, dtype=torch.float32)
    ang = torch.outer(pos, inv)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    rot, rest = x[..., :dims], x[..., dims:]
    a, b = rot[..., : dims // 2], rot[..., dims // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


@dataclass
class KVCache:
    """Static cache (gpt-fast style): preallocated for ``max_len`` positions per layer."""

    keys: list[Tensor]  # per layer: [b, kv, max_len, hd], or the MLA latent [b, max_len, r]
    values: list[Tensor]  # per layer: [b, kv, max_len, hd], or the MLA rope key [b, max_len, dr]

    @classmethod
    def empty(cls, spec: ModelSpec, batch: int, max_len: int, dtype: torch.dtype,
              device: torch.device | str) -> KVCache:
        if spec.mla is not None:
            k_shape: tuple[int, ...] = (batch, max_len, spec.mla.kv_lora_rank)
            v_shape: tuple[int, ...] = (batch, max_len, spec.mla.qk_rope_head_dim)
        else:
            k_shape = v_shape = (batch, spec.kv_heads, max_len, spec.head_size)
        z = [torch.zeros(s, dtype=dtype, device=device)
             for _ in range(spec.n_layers) for s in (k_shape, v_shape)]
        return cls(z[0::2], z[1::2])

    @property
    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


def _attend(q: Tensor, k: Tensor, v: Tensor, start: int, window: int | None) -> Tensor:
    """Causal SDPA of q [b, h, t, d] over k, v [b, h, start + t, d] (positions 0..start+t-1)."""
    t, s = q.shape[-2], k.shape[-2]
    if window is None or s <= window:
        if t == 1:
            return F.scaled_dot_product_attention(q, k, v)  # one query sees the whole cache
        if start == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rows = torch.arange(start, start + t, device=q.device)[:, None]
    cols = torch.arange(s, device=q.device)[None, :]
    mask = cols <= rows
    if window is not None:
        mask = mask & (cols > rows - window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class Attention(nn.Module):
    """MHA / GQA / MQA with a fused QKV projection."""

    def __init__(self, spec: ModelSpec, layer: int) -> None:
        super().__init__()
        d, h, kv, hd = spec.d_model, spec.n_heads, spec.kv_heads, spec.head_size
        self.h, self.kv, self.hd = h, kv, hd
        self.qkv = nn.Linear(d, (h + 2 * kv) * hd, bias=spec.qkv_bias)
        self.out = nn.Linear(h * hd, d, bias=spec.attn_out_bias)
        self.q_norm = RMSNorm(hd) if spec.qk_norm else None
        self.k_norm = RMSNorm(hd) if spec.qk_norm else None
        rope_dims = int(hd * spec.rope_fraction) // 2 * 2
        self.rope_dims = rope_dims if spec.position is PositionKind.ROPE else 0
        self.window = spec.sliding_window if spec.is_sliding_layer(layer) else None
        self.layer = layer

    def forward(self, x: Tensor, start: int, cache: KVCache | None) -> Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split([self.h * self.hd, self.kv * self.hd, self.kv * self.hd],
                                    dim=-1)
        q = q.view(b, t, self.h, self.hd).transpose(1, 2)
        k = k.view(b, t, self.kv, self.hd).transpose(1, 2)
        v = v.view(b, t, self.kv, self.hd).transpose(1, 2)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = rope(q, start, self.rope_dims), rope(k, start, self.rope_dims)
        if cache is not None:
            cache.keys[self.layer][:, :, start:start + t] = k
            cache.values[self.layer][:, :, start:start + t] = v
            k = cache.keys[self.layer][:, :, :start + t]
            v = cache.values[self.layer][:, :, :start + t]
        if self.kv != self.h:  # GQA/MQA: each K/V head serves h/kv query heads
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        y = _attend(q, k, v, start, self.window)
        return self.out(y.transpose(1, 2).reshape(b, t, self.h * self.hd))


class LatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 sec. 2.1)."""

    def __init__(self, spec: ModelSpec, layer: int) -> None:
        super().__init__()
        m = spec.mla
        assert m is not None
        d, h = spec.d_model, spec.n_heads
        self.h, self.m, self.layer = h, m, layer
        self.q: nn.Module
        if m.q_lora_rank is None:
            self.q = nn.Linear(d, h * m.qk_head_dim, bias=False)
        else:
            self.q = nn.Sequential(nn.Linear(d, m.q_lora_rank, bias=False),
                                   RMSNorm(m.q_lora_rank),
                                   nn.Linear(m.q_lora_rank, h * m.qk_head_dim, bias=False))
        self.kv_down = nn.Linear(d, m.kv_lora_rank + m.qk_rope_head_dim, bias=False)
        self.kv_norm = RMSNorm(m.kv_lora_rank)
        self.kv_up = nn.Linear(m.kv_lora_rank, h * (m.qk_nope_head_dim + m.v_head_dim),
                               bias=False)
        self.out = nn.Linear(h * m.v_head_dim, d, bias=spec.attn_out_bias)
        self.window = spec.sliding_window if spec.is_sliding_layer(layer) else None

    def forward(self, x: Tensor, start: int, cache: KVCache | None) -> Tensor:
        b, t, _ = x.shape
        m, h = self.m, self.h
        q = self.q(x).view(b, t, h, m.qk_head_dim).transpose(1, 2)
        q = torch.cat([q[..., :m.qk_nope_head_dim],
                       rope(q[..., m.qk_nope_head_dim:], start, m.qk_rope_head_dim)], dim=-1)
        c, kr = self.kv_down(x).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        c = self.kv_norm(c)
        kr = rope(kr.unsqueeze(1), start, m.qk_rope_head_dim).squeeze(1)
        if cache is not None:
            cache.keys[self.layer][:, start:start + t] = c
            cache.values[self.layer][:, start:start + t] = kr
            c = cache.keys[self.layer][:, :start + t]
            kr = cache.values[self.layer][:, :start + t]
        s = c.shape[1]
        kv = self.kv_up(c).view(b, s, h, m.qk_nope_head_dim + m.v_head_dim).transpose(1, 2)
        k_nope, v = kv.split([m.qk_nope_head_dim, m.v_head_dim], dim=-1)
        k = torch.cat([k_nope, kr.unsqueeze(1).expand(b, h, s, m.qk_rope_head_dim)], dim=-1)
        y = _attend(q, k, v, start, self.window)
        return self.out(y.transpose(1, 2).reshape(b, t, h * m.v_head_dim))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec, hidden: int) -> None:
        super().__init__()
        self.gated = spec.ffn_kind is FFNKind.GATED
        self.act = spec.activation
        d = spec.d_model
        self.up = nn.Linear(d, 2 * hidden if self.gated else hidden, bias=spec.mlp_bias)
        self.down = nn.Linear(hidden, d, bias=spec.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        if self.gated:
            gate, up = self.up(x).chunk(2, dim=-1)
            return self.down(activate(self.act, gate) * up)
        return self.down(activate(self.act, self.up(x)))


class MoE(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        moe = spec.moe
        assert moe is not None
        d = spec.d_model
        self.top_k = moe.top_k
        self.router = nn.Linear(d, moe.num_experts, bias=False)
        # DeepSeek-V3's aux-loss-free selection bias: used to pick experts, not to weight them
        self.router_bias = (nn.Parameter(torch.zeros(moe.num_experts), requires_grad=False)
                            if moe.router_bias else None)
        self.experts = nn.ModuleList(MLP(spec, moe.expert_ffn_dim)
                                     for _ in range(moe.num_experts))
        self.shared = nn.ModuleList(MLP(spec, moe.shared_ffn)
                                    for _ in range(moe.num_shared_experts))
        self.shared_gate = (nn.Linear(d, 1, bias=False)
                            if moe.shared_expert_gate and moe.num_shared_experts else None)

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        probs = self.router(flat).float().softmax(dim=-1)
        select = probs if self.router_bias is None else probs + self.router_bias
        chosen = select.topk(self.top_k, dim=-1).indices
        weights = probs.gather(-1, chosen)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        if len(self.shared):
            shared = sum((mlp(flat) for mlp in self.shared), torch.zeros_like(flat))
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(flat)) * shared
            out = out + shared
        return out.view(shape)


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, layer: int) -> None:
        super().__init__()
        self.parallel = spec.parallel_block
        self.norms = nn.ModuleList(make_norm(spec, spec.d_model)
                                   for _ in range(spec.norms_per_layer))
        self.attn = (LatentAttention(spec, layer) if spec.mla is not None
                     else Attention(spec, layer))
        self.mlp = MoE(spec) if spec.is_moe_layer(layer) else MLP(spec, spec.ffn_dim)

    def forward(self, x: Tensor, start: int, cache: KVCache | None) -> Tensor:
        n = self.norms
        pre_mlp = n[1] if len(n) > 1 else n[0]
        if self.parallel:
            h = n[0](x)
            return x + self.attn(h, start, cache) + self.mlp(pre_mlp(x) if len(n) > 1 else h)
        a = self.attn(n[0](x), start, cache)
        x = x + (n[2](a) if len(n) > 2 else a)
        f = self.mlp(pre_mlp(x))
        return x + (n[3](f) if len(n) > 3 else f)


class Transformer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        d = spec.d_model
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab_size, d)
        self.pos = (nn.Embedding(spec.max_seq_len + spec.learned_position_offset, d)
                    if spec.position is PositionKind.LEARNED else None)
        self.embed_norm = make_norm(spec, d) if spec.embedding_norm else None
        self.layers = nn.ModuleList(Block(spec, i) for i in range(spec.n_layers))
        self.final_norm = make_norm(spec, d) if spec.final_norm else None
        self.head = nn.Linear(d, spec.vocab_size, bias=spec.lm_head_bias)
        if spec.tied_embeddings:
            self.head.weight = self.embed.weight

    def forward(self, tokens: Tensor, start: int = 0, cache: KVCache | None = None,
                last_only: bool = False) -> Tensor:
        x = self.embed(tokens)
        if self.pos is not None:
            off = self.spec.learned_position_offset
            pos = torch.arange(start + off, start + off + tokens.shape[1], device=tokens.device)
            x = x + self.pos(pos)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        for block in self.layers:
            x = block(x, start, cache)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if last_only:
            x = x[:, -1:]
        return self.head(x)


def parameter_count(model: nn.Module) -> int:
    """Distinct parameters (a tied head is counted once, as ``count_params`` counts it)."""
    return sum(p.numel() for p in model.parameters())


def build(spec: ModelSpec, device: torch.device | str = "cpu",
          dtype: torch.dtype = torch.float32, seed: int = 0) -> Transformer:
    """The model with random weights (PyTorch's default initialisation), on ``device``."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Transformer(spec)
    return model.to(dtype=dtype)

