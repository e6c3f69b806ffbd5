"""Operator graph against hand calculations and published formulas."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.memory.budget import activation_bytes
from accelmap.models.flops import forward_flops_per_token
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import ByteKind, Precision, Shape, Stage, Unit, forward_ops
from accelmap.ops.step import training_ops
from accelmap.workload import Recompute, Training


def gpt(h: int = 1024, a: int = 16, layers: int = 4, vocab: int = 50304, s: int = 2048
        ) -> ModelSpec:
    return ModelSpec(id="gpt", name="gpt", family="gpt", n_layers=layers, d_model=h, n_heads=a,
                     ffn_dim=4 * h, ffn_kind="plain", activation="gelu", vocab_size=vocab,
                     max_seq_len=s, position="learned", norm="layernorm", qkv_bias=True,
                     attn_out_bias=True, mlp_bias=True, tied_embeddings=True)


def shape(b: int, s: int, dropout: bool = True) -> Shape:
    return Shape(tokens=b * s, context=float(s), kv_tokens=b * s, sequences=b,
                 logits_tokens=b * s, dropout=dropout)


@pytest.mark.parametrize(("b", "s", "h", "a"), [(1, 2048, 1024, 16), (4, 1024, 2048, 32)])
def test_korthikanti_activation_memory(b: int, s: int, h: int, a: int) -> None:
    """Korthikanti et al. 2022 eq. (1)-(2): per layer s*b*h*(34 + 5*a*s/h) bytes without
    recomputation (16-bit activations, 1-byte dropout masks); selective leaves 34*s*b*h; full
    recompute keeps the 2*s*b*h layer input (sec. 4-5)."""
    spec = gpt(h, a)
    ops = [o for o in forward_ops(spec, shape(b, s), Precision(), flash=False)
           if o.name.startswith("layers/")]
    L = spec.n_layers
    none = activation_bytes(ops, Recompute.NONE, spec, b * s, 2.0)
    assert none == pytest.approx(L * s * b * h * (34 + 5 * a * s / h))
    selective = activation_bytes(ops, Recompute.SELECTIVE, spec, b * s, 2.0)
    assert selective == pytest.approx(L * 34 * s * b * h)
    full = activation_bytes(ops, Recompute.FULL, spec, b * s, 2.0)
    one_layer = s * b * h * (34 + 5 * a * s / h)
    assert full == pytest.approx(L * 2 * s * b * h + one_layer)


def test_megatron_hardware_flops_with_full_recompute(catalog: Catalog) -> None:
    """Narayanan et al. 2021 eq. (3): 96 B s l h^2 (1 + s/6h + V/16lh) FLOPs per iteration with
    activation recomputation (counts the full s x s attention)."""
    spec = catalog.models["megatron-1.7b"]
    B, s = 4, 2048
    wl = Training(batch=B, seq_len=s, recompute=Recompute.FULL, flash_attention=False)
    ops = training_ops(spec, wl)
    matrix = sum(o.flops * o.count for o in ops
                 if o.unit is Unit.MATRIX and o.stage is not Stage.OPTIMIZER)
    l, h, V = spec.n_layers, spec.d_model, spec.vocab_size
    assert matrix == pytest.approx(96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)))


def test_forward_matmul_flops_match_model_summary(catalog: Catalog) -> None:
    spec = catalog.models["llama-3.1-8b"]
    s, b = 4096, 2
    sh = Shape(tokens=b * s, context=float(s), kv_tokens=b * s, sequences=b, logits_tokens=b * s)
    matrix = sum(o.flops * o.count for o in forward_ops(spec, sh, Precision(), flash=True)
                 if o.unit is Unit.MATRIX)
    assert matrix == pytest.approx(b * s * forward_flops_per_token(spec, s, causal=False))


def test_decode_reads_every_weight_once(catalog: Catalog) -> None:
    spec = catalog.models["llama-2-7b"]
    sh = Shape(tokens=1, context=100.0, kv_tokens=100.0, sequences=1, logits_tokens=1,
               decode=True)
    ops = forward_ops(spec, sh, Precision())
    weights = sum(o.bytes.get(ByteKind.WEIGHTS, 0.0) * o.count for o in ops
                  if o.name != "embedding")
    pc = count_params(spec)
    # every parameter but the embedding table is read once (the embedding reads one row),
    # the norm weights included: Llama 2 7B has 65 RMSNorms of 4096 (2 per layer + final)
    assert weights == pytest.approx(2.0 * (pc.total - pc.embedding), rel=1e-9)
    norm_bytes = sum(o.bytes.get(ByteKind.WEIGHTS, 0.0) * o.count for o in ops
                     if "norm" in o.name)
    assert norm_bytes == pytest.approx(2.0 * 65 * 4096)
    kv = sum(o.bytes.get(ByteKind.KV_CACHE, 0.0) * o.count for o in ops)
    assert kv == pytest.approx(100 * 32 * 2 * 4096 * 2)  # 0.5 MiB per token for Llama-2-7B


def test_moe_decode_touches_few_experts(catalog: Catalog) -> None:
    spec = catalog.models["mixtral-8x7b"]
    one = Shape(tokens=1, context=10.0, kv_tokens=10.0, sequences=1, logits_tokens=1, decode=True)
    many = Shape(tokens=512, context=10.0, kv_tokens=5120.0, sequences=512, logits_tokens=512,
                 decode=True)

    def expert_weight_bytes(s: Shape) -> float:
        return sum(o.bytes[ByteKind.WEIGHTS] * o.count for o in forward_ops(spec, s, Precision())
                   if o.name.startswith("layers/moe/experts") and ByteKind.WEIGHTS in o.bytes)

    # one token reads top-2 of 8 experts; 512 tokens read (nearly) all 8
    assert expert_weight_bytes(many) / expert_weight_bytes(one) == pytest.approx(4.0, rel=1e-3)
