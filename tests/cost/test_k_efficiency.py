"""A GEMM's short-reduction loss (cost/efficiency.py k_efficiency): K / (K + k0) against the
measured best shape's K, never above it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.cost.efficiency import DEFAULT_REFERENCE_K, k_efficiency, reference_k
from accelmap.units import DType


def test_by_hand() -> None:
    # k0 = 256, best shape at K = 5120 (A100's MAMF row): K = 768 runs at
    # (768 / 1024) / (5120 / 5376) = 0.75 / 0.95238 = 0.7875 of it
    assert float(k_efficiency(768, 5120.0, k0=256.0)) == pytest.approx(0.7875, rel=1e-9)
    assert float(k_efficiency(5120, 5120.0, k0=256.0)) == pytest.approx(1.0)
    assert float(k_efficiency(16384, 5120.0, k0=256.0)) == 1.0  # capped at the best shape
    assert float(k_efficiency(768, 5120.0, k0=0.0)) == 1.0  # no loss without an overhead


def test_reference_k_reads_the_best_shape() -> None:
    assert reference_k("a100-sxm4-80gb", DType.BF16) == 5120.0  # 1024x10240x5120 (M0002)
    assert reference_k("h100-sxm5-80gb", DType.BF16) == 13312.0  # 2048x2048x13312 (M0005)
    assert reference_k("no-such-part", DType.BF16) == DEFAULT_REFERENCE_K


@given(st.floats(1, 1e6), st.floats(1, 1e6), st.floats(0, 4096), st.floats(64, 65536))
def test_monotone_and_bounded(k1: float, k2: float, k0: float, ref: float) -> None:
    lo, hi = sorted((k1, k2))
    a, b = float(k_efficiency(lo, ref, k0=k0)), float(k_efficiency(hi, ref, k0=k0))
    assert 0 < a <= b <= 1.0


def test_the_measured_overhead_is_the_default() -> None:
    """k0 is the H200 sweep's (cost/data/gemm_k_overhead.yaml), not a fitted parameter: the
    training fit's file does not set it."""
    from accelmap.cost.efficiency import gemm_k_overhead, training_fit

    assert "gemm_k_overhead" not in training_fit()
    assert gemm_k_overhead() == 496.0
