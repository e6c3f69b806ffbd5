"""Tile and wave quantization, achievable efficiency provenance."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.efficiency import GemmGeometry, matmul_efficiency, shape_efficiency
from accelmap.units import DType


def test_wave_quantization_133_tiles_on_132_sms() -> None:
    """DESIGN / NVIDIA matmul guide: 133 tiles on 132 SMs take two waves."""
    geo = GemmGeometry(tile=(128, 128), units=132, systolic=0)
    m, n, k = 128 * 7, 128 * 19, 128  # 133 tiles; k too small to split
    assert shape_efficiency(m, n, k, geo) == pytest.approx(133 / 264)


def test_tile_quantization_4097_costs_like_4224() -> None:
    geo = GemmGeometry(tile=(128, 128), units=0, systolic=0)
    assert shape_efficiency(4096, 4097, 4096, geo) == pytest.approx(4097 / 4224)


def test_systolic_padding() -> None:
    geo = GemmGeometry(tile=(128, 128), units=0, systolic=128)
    assert shape_efficiency(1000, 129, 128, geo) == pytest.approx(129 / 256)


def test_measured_and_default_provenance(catalog: Catalog) -> None:
    h100 = matmul_efficiency(catalog.accelerators["h100-sxm5-80gb"], DType.BF16)
    assert h100.measured and "M0005" in h100.source
    loo = matmul_efficiency(catalog.accelerators["h100-sxm5-80gb"], DType.BF16,
                            exclude="h100-sxm5-80gb")
    assert not loo.measured and "median" in loo.source
    l4 = matmul_efficiency(catalog.accelerators["l4"], DType.BF16)
    assert not l4.measured and "NVIDIA gpu" in l4.source
