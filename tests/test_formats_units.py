"""Number formats as they are: block-scale bytes from the specs, the words people write."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.units import BLOCK_FORMATS, DType, parse_dtype


@pytest.mark.parametrize(("dtype", "bits"), [
    (DType.NVFP4, 4 + 8 / 16),  # E2M1 + one E4M3 scale per 16 values (NVIDIA NVFP4)
    (DType.MXFP4, 4 + 8 / 32),  # E2M1 + one E8M0 scale per 32 (OCP MX v1.0 Table 1)
    (DType.MXFP6, 6 + 8 / 32),
    (DType.MXFP8, 8 + 8 / 32),
    (DType.FP4, 4.0), (DType.INT4, 4.0), (DType.FP8, 8.0), (DType.BF16, 16.0),
])
def test_bits_per_value_include_the_block_scales(dtype: DType, bits: float) -> None:
    assert dtype.bytes * 8 == pytest.approx(bits)


def test_block_layouts_are_the_specs() -> None:
    nv, mx4, mx8 = (BLOCK_FORMATS[d] for d in (DType.NVFP4, DType.MXFP4, DType.MXFP8))
    assert (nv.block, nv.scale_format, nv.tensor_scale_bytes) == (16, "E4M3", 4)
    assert (mx4.block, mx4.scale_format, mx4.tensor_scale_bytes) == (32, "E8M0", 0)
    assert (mx8.block, mx8.element_bits) == (32, 8)
    assert DType.NVFP4.element_width is DType.FP4 and DType.MXFP8.element_width is DType.FP8
    assert DType.BF16.block_format is None and DType.BF16.element_width is DType.BF16


@pytest.mark.parametrize(("word", "dtype"), [
    ("NVFP4", DType.NVFP4), ("nv-fp4", DType.NVFP4), ("MXFP4", DType.MXFP4),
    ("mx_fp8", DType.MXFP8), ("fp4", DType.FP4), ("int4", DType.INT4),
    ("float8_e4m3fn", DType.FP8), ("torch.bfloat16", DType.BF16),
])
def test_precision_words(word: str, dtype: DType) -> None:
    assert parse_dtype(word) is dtype


@pytest.mark.parametrize("word", ["nvfp5", "fp3", "mxint8", ""])
def test_unknown_words(word: str) -> None:
    assert parse_dtype(word) is None


@given(st.sampled_from(sorted(BLOCK_FORMATS)))
def test_block_formats_cost_more_than_their_elements_and_less_than_the_next_width(d: DType
                                                                                  ) -> None:
    fmt = BLOCK_FORMATS[d]
    assert fmt.element_bits < d.bytes * 8 <= fmt.element_bits + 0.5
    assert d.bytes * 8 == pytest.approx(fmt.element_bits + fmt.scale_bits / fmt.block)
