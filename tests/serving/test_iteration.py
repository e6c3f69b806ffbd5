"""The iteration tables are the engine's numbers: a decode-only or prefill-only iteration
costs what ``serve_step`` says for the same batch, and attention is linear in the token count
at a fixed context (which is what lets two evaluations stand for the whole line)."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.cost.roofline import time_ops
from accelmap.engine import estimate
from accelmap.engine.shapes import inference_precision
from accelmap.models.geometry import Geometry
from accelmap.ops.graph import Shape, forward_ops
from accelmap.serving.iteration import EXACT, Curve, IterationCost, grid
from accelmap.units import DType


def _cost(s, max_tokens=20000, max_seqs=256, max_context=4096):  # type: ignore[no-untyped-def]
    return IterationCost(s.spec, s.system, s.wl, s.m, s.fw, max_tokens=max_tokens,
                         max_seqs=max_seqs, max_context=max_context)


def test_grid_is_exact_then_geometric() -> None:
    g = grid(10000)
    assert list(g[:EXACT]) == list(range(1, EXACT + 1))
    assert g[-1] >= 10000
    steps = g[EXACT:] / g[EXACT - 1:-1]
    assert np.allclose(steps, steps[0]) and steps[0] < 1.02


def test_curve_exact_on_points_linear_between() -> None:
    xs = np.array([1.0, 2.0, 3.0, 10.0])
    c = Curve.of(xs, np.array([1.0, 4.0, 9.0, 100.0]), exact=3)
    assert c.at(2) == 4.0
    assert c.at(6.5) == pytest.approx(9.0 + 91.0 / 2)
    assert c.at(0) == 0.0


@pytest.mark.parametrize("model,fw,batch", [("llama-3.1-8b", "vllm", 1),
                                            ("llama-3.1-8b", "tensorrt-llm", 24),
                                            ("mixtral-8x7b", "vllm", 8)])
def test_decode_and_prefill_iterations_match_the_engine(make_setup, model, fw, batch) -> None:  # type: ignore[no-untyped-def]
    s = make_setup(model=model, fw=fw, batch=batch, prompt=700, output=200,
                   hw="h100-sxm5-80gb" if model != "mixtral-8x7b" else "mi300x")
    cost = _cost(s)
    est = estimate(s.spec, s.system, s.wl, s.m, framework=s.fw)
    ctx = 700 + 200 / 2  # the engine's mean decode context
    assert cost.cost(batch, batch, 0, 0, batch, ctx) == pytest.approx(est.tpot_s, rel=1e-9)
    tokens = batch * 700
    assert cost.cost(tokens, batch, tokens, (700 + 1) / 2, 0, 0, admits=True) == pytest.approx(
        est.ttft_s, rel=5e-3)


def test_attention_is_linear_in_the_count(make_setup) -> None:  # type: ignore[no-untyped-def]
    s = make_setup(prompt=1000, output=100)
    cost = _cost(s)
    shard = Geometry.of(s.spec).shard(1, 1, etp=1)
    p = inference_precision(s.wl)
    for n, c, decode in ((64, 1500.0, True), (3000, 700.0, False)):
        ops = forward_ops(shard, Shape(tokens=n, context=c, kv_tokens=n * c if decode else n,
                                       sequences=n if decode else 1, logits_tokens=1,
                                       decode=decode), p, True)
        direct = sum(float(t.total_s) for t in time_ops(ops, s.system.device, s.fw)
                     if t.op.attention_core)
        assert cost.attention(n, c, decode) == pytest.approx(direct, rel=2e-3)


def test_empty_iteration_costs_nothing(make_setup) -> None:  # type: ignore[no-untyped-def]
    assert _cost(make_setup()).cost(0, 0, 0, 0, 0, 0) == 0.0


def test_pre_xqa_decode_streams_an_8bit_kv_group_per_query_head(make_setup) -> None:  # type: ignore[no-untyped-def]
    """TensorRT-LLM < 0.7 (validate.resolve.inference_profile): the KV-cache bytes of decode
    attention grow by heads / KV heads for an 8-bit cache of a GQA model, nothing else moves."""
    from dataclasses import replace

    from accelmap.ops.graph import ByteKind, kv_per_query_head
    from accelmap.validate.resolve import inference_profile

    old, notes = inference_profile("TensorRT-LLM v0.6.1")
    new, _ = inference_profile("TensorRT-LLM v0.17")
    assert old.decode_kv_per_query_head and notes and not new.decode_kv_per_query_head
    s = make_setup(model="llama-3.1-70b", cluster="dgx-h100", tp=8, weights="fp8")
    shard = Geometry.of(s.spec).shard(8, 1, etp=1)
    p = inference_precision(s.wl)
    ops = forward_ops(shard, Shape(tokens=4, context=100.0, kv_tokens=400.0, sequences=4,
                                   logits_tokens=4, decode=True), p, True)
    grown = kv_per_query_head(ops, shard, p)
    for a, b in zip(ops, grown, strict=True):
        if a.attention_core:
            assert b.bytes[ByteKind.KV_CACHE] == pytest.approx(8 * a.bytes[ByteKind.KV_CACHE])
        else:
            assert a == b
    p16 = replace(p, kv=DType.BF16)
    assert kv_per_query_head(ops, shard, p16) == ops  # a 16-bit cache is re-read from L2
