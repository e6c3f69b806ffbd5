"""Memory items against hand calculations and published per-parameter figures."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.engine import estimate
from accelmap.memory.budget import (
    inference_memory,
    kv_bytes_per_token,
    kv_cache_bytes,
    weight_bytes_per_param,
)
from accelmap.models.params import count_params
from accelmap.units import DType
from accelmap.workload import Inference, Optimizer, Training


@pytest.mark.parametrize(
    ("model_id", "per_token"),
    [
        ("llama-2-7b", 32 * 2 * 4096 * 2),  # MHA: 0.5 MiB per token in bf16
        ("llama-3.1-70b", 80 * 2 * 8 * 128 * 2),  # GQA 8 kv heads: 320 KiB
        ("deepseek-v3", 61 * (512 + 64) * 2),  # MLA latent 512 + rope 64 (DeepSeek-V2 sec 2.1)
    ],
)
def test_kv_bytes_per_token(catalog: Catalog, model_id: str, per_token: int) -> None:
    assert kv_bytes_per_token(catalog.models[model_id], DType.BF16) == per_token


def test_paged_blocks_round_up(catalog: Catalog) -> None:
    spec = catalog.models["llama-2-7b"]
    per = kv_bytes_per_token(spec, DType.BF16)
    assert kv_cache_bytes(spec, 3, 17, DType.BF16, 16) == 3 * 32 * per


def test_sliding_window_caps_kv(catalog: Catalog) -> None:
    spec = catalog.models["mistral-7b"]  # every layer slides over 4096 tokens
    per = kv_bytes_per_token(spec, DType.BF16)
    assert kv_cache_bytes(spec, 1, 32768, DType.BF16, 16) == 4096 * per


def test_zero_paper_16_bytes_per_param(catalog: Catalog) -> None:
    """Rajbhandari et al. 2020 sec. 3.1: mixed-precision Adam keeps 2+2+12 = 16 bytes/param."""
    spec = catalog.models["gpt3-1.3b"]
    P = count_params(spec).total
    wl = Training(batch=1, seq_len=128, grad_dtype=DType.BF16, optimizer=Optimizer.ADAMW)
    mem = estimate(spec, catalog.accelerators["a100-sxm4-80gb"], wl).memory
    model_states = (mem.items["weights"] + mem.items["gradients"]
                    + mem.items["optimizer/master_weights"] + mem.items["optimizer/states"])
    assert model_states == 16 * P


def test_quantized_weights_with_scales() -> None:
    assert weight_bytes_per_param(DType.INT4, 32) == pytest.approx(0.5 + 4 / 32)
    assert weight_bytes_per_param(DType.INT8, 128) == pytest.approx(1 + 2 / 128)


def test_fits_and_margin(catalog: Catalog) -> None:
    spec = catalog.models["llama-2-70b"]
    small = inference_memory(spec, Inference(batch=1, prompt_len=128, output_len=128), 80e9)
    assert not small.fits and small.margin < 0  # 70B in bf16 is 138 GB
    int4 = inference_memory(spec, Inference(batch=1, prompt_len=128, output_len=128,
                                            weight_dtype=DType.INT4), 80e9)
    assert int4.fits and int4.margin > 0
    tree = int4.tree()
    assert tree["total_bytes"] == pytest.approx(float(int4.total))
    assert tree["activations"]["total_bytes"] > 0
