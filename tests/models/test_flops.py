"""Attention FLOPs on sliding-window layers: the mean keys per query, summed by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.catalog import Catalog
from accelmap.models.flops import causal_mean_keys, forward_flops_per_token
from accelmap.ops.graph import Precision, Shape, causal_shape_context, forward_ops


def _by_hand(s: int, w: int | None) -> float:
    return sum(min(i, w or s) for i in range(1, s + 1)) / s


@pytest.mark.parametrize(("s", "w", "want"), [
    (8192, 4096, 3072.25),  # 4096 - 4096 x 4095 / 16384
    (4096, 4096, 2048.5),   # window not reached: the plain causal mean
    (7, None, 4.0),
])
def test_causal_mean_keys_hand_values(s: int, w: int | None, want: float) -> None:
    assert float(causal_mean_keys(s, w)) == pytest.approx(want)
    assert float(causal_mean_keys(s, w)) == pytest.approx(_by_hand(s, w))


@given(st.integers(1, 3000), st.integers(1, 3000))
def test_causal_mean_keys_is_the_sum(s: int, w: int) -> None:
    assert float(causal_mean_keys(s, w)) == pytest.approx(_by_hand(s, w))


def test_graph_and_model_flops_agree_on_sliding_layers(catalog: Catalog) -> None:
    # Mistral 7B: every layer has a 4096-token window; at 32k the mean query sees 3840.1 keys
    spec = catalog.models["mistral-7b"]
    s = 32768
    shape = Shape(tokens=s, kv_tokens=s, sequences=1, logits_tokens=s,
                  **causal_shape_context(spec, float(s), flash=True))
    ops = forward_ops(spec, shape, Precision(), flash=True)
    graph = sum(float(o.flops) * o.count for o in ops)
    assert shape.window_context == pytest.approx(_by_hand(s, 4096))
    assert graph / s == pytest.approx(forward_flops_per_token(spec, s, causal=True), rel=0.01)
