"""NeMo's performance-table models (issue 24: five published NeMo 24.07 rows lacked a preset):
the recipes' shapes, counted by hand."""

from __future__ import annotations

from accelmap.catalog import Catalog
from accelmap.models.params import count_params


def test_gpt3_5b_by_hand(catalog: Catalog) -> None:
    # NeMo gpt3/5b.yaml: 24 layers, d 4096, FFN 4d, learned positions over 2048, biases,
    # LayerNorms with bias, GPT-2 BPE vocabulary 50,257 tied to the output layer
    d, layers = 4096, 24
    per_layer = 12 * d * d + 9 * d + 4 * d  # QKV, out, up, down weights; their biases; 2 LNs
    want = layers * per_layer + 50257 * d + 2048 * d + 2 * d
    assert count_params(catalog.models["gpt3-5b"]).total == want == 5_047_365_632


def test_nemotron_340b_by_hand(catalog: Catalog) -> None:
    # Nemotron-4 340B report Table 1: 96 layers, d 18432, 96 heads of 192, 8 KV heads, squared
    # ReLU FFN of 4d without biases, untied 256,000-token embeddings
    d, layers, kv = 18432, 96, 8 * 192
    per_layer = d * (d + 2 * kv) + d * d + 2 * d * 4 * d + 2 * 2 * d
    want = layers * per_layer + 2 * 256000 * d + 2 * d
    assert count_params(catalog.models["nemotron-4-340b"]).total == want
    assert abs(want / 340e9 - 1) < 0.01  # the report's "340B"
