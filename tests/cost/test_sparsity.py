"""2:4 sparse GEMM speedups (cost/sparsity.py): the lookup, its caps and fallbacks, the refusal
on parts and dtypes without a 2:4 mode, and the roofline hook."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType

import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.framework import profile
from accelmap.cost.roofline import Device, time_op
from accelmap.cost.sparsity import (
    MAX_SPEEDUP,
    check_supported,
    fitted,
    measured,
    sparse_speedup,
    table,
    unsupported,
)
from accelmap.errors import InputError
from accelmap.ops.graph import ByteKind, Op, Unit
from accelmap.units import DType

CAT = load_catalog()
ACC = CAT.accelerators


def test_h100_bf16_speedup_is_the_median_of_the_measured_compute_bound_rows() -> None:
    s = sparse_speedup(ACC["h100-sxm5-80gb"], DType.BF16)
    rows = [r.speedup for r in measured() if r.gpu == "H100" and r.dtype is DType.BF16
            and r.m >= table()["compute_bound_m"]]
    assert len(rows) >= 10
    assert s.value == pytest.approx(statistics.median(rows))
    assert 1.0 < s.value < 2.0  # faster than dense, never the datasheet's 2x
    assert "H100" in s.source and "SLIDESPARSE-B" in s.source


def test_every_sparse_part_and_dtype_has_a_speedup_within_bounds() -> None:
    for acc in ACC.values():
        if acc.sparsity_2_4 is None:
            continue
        assert acc.sparsity_2_4.architecture in table()["architectures"], acc.id
        for dt in acc.sparsity_2_4.dtypes:
            s = sparse_speedup(acc, dt)
            assert 1.0 <= s.value <= MAX_SPEEDUP, (acc.id, dt)
            assert s.source


def test_caps_and_fallbacks() -> None:
    # RTX 4090 fp8 measures above 2 (a slow dense baseline): capped at the sparse rate's 2x
    assert max(r.speedup for r in measured() if r.gpu == "RTX 4090"
               and r.dtype is DType.FP8) > MAX_SPEEDUP
    assert sparse_speedup(ACC["rtx-4090"], DType.FP8).value == MAX_SPEEDUP
    # Blackwell Ultra's sparse FP4 is only 1.37x its dense FP4
    assert sparse_speedup(ACC["b300"], DType.FP4).value == pytest.approx(1.37)
    # no fp4 measurement: the architecture's fp8 rows
    b200 = sparse_speedup(ACC["b200"], DType.FP4)
    assert b200.value == fitted("blackwell", "fp8").value and "fp8" in b200.source
    # CDNA3: no measured compute gain, none credited
    assert sparse_speedup(ACC["mi300x"], DType.FP8).value == 1.0


@pytest.mark.parametrize("part, why", [
    ("tpu-v5e", "TPU"), ("v100-sxm2-32gb", "Ampere"), ("gaudi3", "asic"),
    ("groq-lpu-v1", "sram-machine"), ("epyc-9654", "cpu"), ("mi250x", "CDNA3")])
def test_parts_without_a_2_4_mode_are_refused_in_one_line(part: str, why: str) -> None:
    msg = unsupported(ACC[part], DType.BF16)
    assert msg is not None and "\n" not in msg
    assert msg.startswith(f"2:4 sparsity is not supported on {part} (")
    assert msg.endswith("); drop --sparsity") and why in msg
    with pytest.raises(InputError, match="not supported"):
        sparse_speedup(ACC[part], DType.BF16)


def test_dtypes_without_a_sparse_mode_are_refused() -> None:
    with pytest.raises(InputError, match="a100-sxm4-80gb for fp8 GEMMs"):
        check_supported(ACC["a100-sxm4-80gb"], DType.FP8)
    with pytest.raises(InputError, match="fp32"):
        check_supported(ACC["h100-sxm5-80gb"], DType.FP32)
    assert unsupported(ACC["h100-sxm5-80gb"], DType.FP8) is None


def test_roofline_divides_compute_by_the_speedup_and_streams_compressed_weights() -> None:
    acc = ACC["h100-sxm5-80gb"]
    dev, fw = Device.of(acc), profile("vllm")
    m, n, k = 8192, 4096, 4096
    op = Op("layers/mlp/up", Unit.MATRIX, DType.BF16, 2.0 * m * n * k,
            {ByteKind.WEIGHTS: 2.0 * n * k, ByteKind.ACTIVATIONS: 2.0 * (m * k + m * n)},
            gemm=(m, n, k), weight_dtype=DType.BF16)
    sparse = replace(op, sparse=True, bytes={**op.bytes,
                                            ByteKind.WEIGHTS: op.bytes[ByteKind.WEIGHTS] * 9 / 16})
    d, s = time_op(op, dev, fw), time_op(sparse, dev, fw)
    speedup = sparse_speedup(acc, DType.BF16).value
    assert float(d.compute_s / s.compute_s) == pytest.approx(speedup)
    assert float(s.memory_s) < float(d.memory_s)
    assert float(d.time_s / s.time_s) == pytest.approx(speedup)  # compute-bound here


def test_benchmark_models_the_compute_bound_rows_within_a_tenth(
        load_benchmark: Callable[[str], ModuleType]) -> None:
    """benchmarks/sparse_gemm.py: the roofline with the fit reproduces the measured
    compute-bound GEMM rows (median error about 0), and the torchao training rows within 10 %."""
    bench = load_benchmark("sparse_gemm")
    errs = []
    for r in measured():
        acc = bench.PART.get(r.gpu)
        if acc and r.m >= table()["compute_bound_m"]:
            shapes = bench.layer_gemms(r.model) if r.model else [(r.n, r.k)]
            errs.append(bench._modelled(acc, r.dtype, shapes, r.m) / r.speedup - 1)
    assert abs(statistics.median(errs)) < 0.03
    assert statistics.fmean(abs(e) for e in errs) < 0.10
    for row in table()["training"]:
        model = bench._modelled(bench.PART[row["gpu"]], DType(row["dtype"]),
                                [(row["n"], row["k"])], row["m"], training=True)
        assert model == pytest.approx(row["speedup"], rel=0.10)
