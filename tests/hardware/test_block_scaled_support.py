"""Per-part support of the microscaling formats in the catalog, with sources."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.hardware.schema import BlockScaledSupport
from accelmap.units import DType

BLACKWELL = ("b200", "gb200", "b300", "gb300", "b100")


@pytest.mark.parametrize("part", BLACKWELL)
def test_blackwell_runs_nvfp4_and_mxfp4_at_the_fp4_rate(catalog: Catalog, part: str) -> None:
    acc = catalog.accelerators[part]
    assert acc.native_fp4 is DType.NVFP4
    fp4 = acc.matrix[DType.FP4].value
    for d in (DType.NVFP4, DType.MXFP4):
        assert acc.runs_natively(d) and acc.peak(d) == fp4
    assert acc.peak(DType.MXFP8) == acc.matrix[DType.FP8].value
    assert acc.block_scaled is not None and acc.block_scaled.source


def test_blackwell_ultra_fp4_is_higher_than_blackwell(catalog: Catalog) -> None:
    a = catalog.accelerators
    assert a["b300"].peak(DType.NVFP4) > a["b200"].peak(DType.NVFP4)
    assert a["gb300"].peak(DType.NVFP4) > a["gb200"].peak(DType.NVFP4)
    # and the FP8 rate did not move with it: only FP4 grew on Blackwell Ultra
    assert a["b300"].peak(DType.MXFP8) == a["b200"].peak(DType.MXFP8)


@pytest.mark.parametrize("part", ["mi355x", "mi350x"])
def test_cdna4_runs_mx_formats_not_nvfp4(catalog: Catalog, part: str) -> None:
    acc = catalog.accelerators[part]
    assert acc.native_fp4 is DType.MXFP4
    assert acc.runs_natively(DType.MXFP6) and not acc.runs_natively(DType.NVFP4)
    assert acc.peak(DType.NVFP4) is None
    # CDNA4 runs FP6 at its FP4 rate (AMD CDNA 4 white paper), above its FP8 rate
    assert acc.peak(DType.MXFP6) == acc.matrix[DType.FP4].value > acc.matrix[DType.FP8].value


def test_mi350x_is_mi355x_at_a_lower_clock_and_power(catalog: Catalog) -> None:
    a, b = catalog.accelerators["mi350x"], catalog.accelerators["mi355x"]
    ratio = a.matrix[DType.FP8].value / b.matrix[DType.FP8].value
    assert ratio == pytest.approx(2.2 / 2.4, rel=1e-3)
    assert a.tdp is not None and b.tdp is not None and a.tdp.value < b.tdp.value
    assert a.memory_bytes == b.memory_bytes


@pytest.mark.parametrize("part", ["h100-sxm5-80gb", "h200-sxm", "mi300x", "a100-sxm4-80gb"])
def test_hopper_cdna3_and_older_have_no_fp4_tensor_cores(catalog: Catalog, part: str) -> None:
    acc = catalog.accelerators[part]
    assert acc.native_fp4 is None and acc.block_scaled is None
    assert all(acc.peak(d) is None for d in (DType.NVFP4, DType.MXFP4, DType.MXFP8))


def test_support_lists_only_block_formats() -> None:
    with pytest.raises(ValueError, match="microscaling formats only"):
        BlockScaledSupport(dtypes=(DType.FP8,), source=("F1",))
