"""A power-limited board of a measured die: its own published GEMM rate, and attention that
loses the same share of the die's measured plateau (cost/attention.py ``clock_scale``)."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.attention import clock_scale
from accelmap.cost.efficiency import matmul_efficiency
from accelmap.units import DType

GRAND_TETON = "h100-sxm5-96gb-hbm2e"


def test_the_500w_board_runs_its_published_gemm_rate(catalog: Catalog) -> None:
    """FBGEMM PR #2546 measured 585 TFLOP/s bf16 on a 500 W H100: the fraction is of the
    catalog's midpoint peak, so the rate it gives back is the measured one."""
    acc = catalog.accelerators[GRAND_TETON]
    e = matmul_efficiency(acc, DType.BF16)
    assert e.measured and "FBGEMM PR 2546" in e.source
    assert acc.matrix[DType.BF16].value * e.value == pytest.approx(585.2e12, rel=1e-3)
    fp8 = matmul_efficiency(acc, DType.FP8)
    assert fp8.measured and acc.matrix[DType.FP8].value * fp8.value == pytest.approx(
        1141.4e12, rel=1e-3)


def test_attention_keeps_the_gemm_share_of_the_measured_part(catalog: Catalog) -> None:
    acc = catalog.accelerators
    assert clock_scale(acc["h100-sxm5-80gb"]) == 1.0  # the FA3 paper's part
    assert clock_scale(acc[GRAND_TETON]) == pytest.approx(0.6414 / 0.803, rel=1e-3)
    # the rate that gives: 585 / 794.5 of the 700 W part's FlashAttention-2, not 912.5 / 989.4
    rate = acc[GRAND_TETON].matrix[DType.BF16].value * clock_scale(acc[GRAND_TETON])
    ref = acc["h100-sxm5-80gb"].matrix[DType.BF16].value
    assert rate / ref == pytest.approx(585.2 / 794.5, rel=2e-3)
    assert clock_scale(acc["h200-sxm"]) == 1.0  # no bf16 row of its own: nothing to scale by
    assert clock_scale(acc["b200"]) == 1.0  # no measured plateau for its generation


def test_the_500w_board_does_not_speak_for_unmeasured_peers(catalog: Catalog) -> None:
    """An H200 has no bf16 row: it borrows the median of measured NVIDIA GPUs, which the 500 W
    board (0.64 of its peak) must not drag below the 700 W H100's 0.80."""
    h200 = matmul_efficiency(catalog.accelerators["h200-sxm"], DType.BF16)
    assert not h200.measured and "median" in h200.source
    assert h200.value >= matmul_efficiency(catalog.accelerators["h100-sxm5-80gb"],
                                           DType.BF16).value
