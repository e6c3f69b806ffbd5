"""2:4 sparsity in the operator graph and the memory budget: compressed bytes, which GEMMs run
sparse, what training keeps (ops/sparsity.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelmap.catalog import load_catalog
from accelmap.engine.shapes import inference_precision, inference_shapes
from accelmap.memory.budget import inference_memory, weight_bytes_per_param
from accelmap.models.params import count_params
from accelmap.ops.graph import ByteKind, Stage, forward_ops
from accelmap.ops.sparsity import (
    compressed_bytes_per_param,
    compressed_fraction,
    sparse_params,
    sparse_training_ops,
)
from accelmap.ops.step import training_ops, training_precision
from accelmap.ops.training import backward_ops
from accelmap.units import DType
from accelmap.workload import Inference, Sparsity, Training

CAT = load_catalog()


def test_compressed_fraction_is_half_the_values_plus_two_bits_per_kept_value() -> None:
    # 16-bit: 8 bits of values + 1 bit of index per dense element = 9/16 (PyTorch's
    # compression_factor 9 for fp16/bf16, 10 for int8, over 16)
    assert compressed_fraction(16) == pytest.approx(9 / 16)
    assert compressed_fraction(8) == pytest.approx(10 / 16)
    assert compressed_fraction(4) == pytest.approx(12 / 16)
    assert compressed_bytes_per_param(DType.BF16) == pytest.approx(2 * 9 / 16)
    assert compressed_bytes_per_param(DType.FP8) == pytest.approx(10 / 16)


def test_quantization_scales_keep_their_size() -> None:
    wb = weight_bytes_per_param(DType.INT4, 128)  # 0.5 + 4/128
    assert compressed_bytes_per_param(DType.INT4, wb) == pytest.approx(0.5 * 0.75 + 4 / 128)


def test_sparse_params_are_the_layer_matrices_but_the_router() -> None:
    # Llama has no biases: every attention and FFN parameter of a layer is a matrix
    spec = CAT.models["llama-3.1-8b"]
    layers = count_params(spec).layers
    assert sparse_params(spec) == sum(lp.attention + lp.ffn for lp in layers)
    moe = CAT.models["mixtral-8x7b"]
    router = moe.d_model * moe.moe.num_experts * moe.n_layers
    assert sparse_params(moe) == sum(lp.attention + lp.ffn for lp in count_params(moe).layers
                                     ) - router


def _serving_ops(sparsity: Sparsity, model: str = "llama-3.1-8b") -> list:
    spec = CAT.models[model]
    wl = Inference(batch=4, prompt_len=256, output_len=32, sparsity=sparsity)
    _, dec = inference_shapes(spec, wl)
    return forward_ops(spec, dec, inference_precision(wl))


def test_serving_layers_gemms_read_compressed_weights_head_and_router_stay_dense() -> None:
    for model in ("llama-3.1-8b", "mixtral-8x7b"):
        dense = {o.name: o for o in _serving_ops(Sparsity.NONE, model)}
        sparse = {o.name: o for o in _serving_ops(Sparsity.TWO_FOUR, model)}
        for name, op in sparse.items():
            d = dense[name]
            if op.gemm is not None and name.startswith("layers/") and "router" not in name:
                assert op.sparse
                assert op.bytes[ByteKind.WEIGHTS] == pytest.approx(
                    d.bytes[ByteKind.WEIGHTS] * 9 / 16)
                assert op.flops == d.flops  # dense-equivalent FLOPs: the time model divides
            else:
                assert not op.sparse and op.bytes == d.bytes, name


def test_serving_weight_memory_compressed() -> None:
    spec = CAT.models["llama-3.1-8b"]
    wl = Inference(batch=1, prompt_len=512, output_len=128)
    dense = inference_memory(spec, wl, 80e9).items["weights"]
    sparse = inference_memory(spec, replace(wl, sparsity=Sparsity.TWO_FOUR), 80e9)
    assert dense - sparse.items["weights"] == pytest.approx(
        sparse_params(spec) * (2 - 2 * 9 / 16))


def test_training_forward_and_dgrad_sparse_wgrad_dense_with_dense_gradient() -> None:
    spec = CAT.models["gpt3-125m"]
    wl = Training(batch=2, seq_len=512)
    dense = training_ops(spec, wl)
    sparse = training_ops(spec, replace(wl, sparsity=Sparsity.TWO_FOUR))
    assert [o.name for o in dense] == [o.name for o in sparse]  # no operator added or lost
    for d, s in zip(dense, sparse, strict=True):
        target = d.gemm is not None and d.name.startswith("layers/")
        if target and d.stage in (Stage.FORWARD, Stage.BACKWARD_DGRAD):
            assert s.sparse
            assert s.bytes[ByteKind.WEIGHTS] == pytest.approx(d.bytes[ByteKind.WEIGHTS] * 9 / 16)
        else:
            assert not s.sparse and s.bytes == d.bytes, s.name
        if target and d.stage is Stage.FORWARD:  # W and W^T compressed, kept for backward
            assert s.saved - d.saved == pytest.approx(2 * d.bytes[ByteKind.WEIGHTS] * 9 / 16)


def test_sparse_fp8_training_is_refused() -> None:
    from accelmap.errors import InputError

    p = training_precision(Training(batch=1, seq_len=128, dtype=DType.FP8))
    with pytest.raises(InputError, match="16-bit GEMMs"):
        sparse_training_ops([], backward_ops([], DType.FP32), p)
