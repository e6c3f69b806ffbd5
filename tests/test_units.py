"""Units: parsing datasheet strings into SI and back (hand-checked conversions)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.errors import InputError
from accelmap.units import Dimension, DType, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "dim", "si"),
    [
        ("3.35 TB/s", Dimension.BANDWIDTH, 3.35e12),
        ("400 Gb/s", Dimension.BANDWIDTH, 50e9),  # one NDR port: 400e9 bit/s / 8
        ("80 GB", Dimension.BYTES, 80e9),
        ("80 GiB", Dimension.BYTES, 80 * 2**30),
        ("989.4 TFLOP/s", Dimension.FLOPS, 989.4e12),
        ("1978.9 TOPS", Dimension.FLOPS, 1978.9e12),
        ("2.5 PFLOP/s", Dimension.FLOPS, 2.5e15),
        ("700 W", Dimension.POWER, 700.0),
        ("1.98 GHz", Dimension.FREQUENCY, 1.98e9),
        ("3 us", Dimension.TIME, 3e-6),
        ("25 ms", Dimension.TIME, 25e-3),
        ("2.69 USD/h", Dimension.PRICE_RATE, 2.69),
        ("0.9 pJ", Dimension.ENERGY, 0.9e-12),
    ],
)
def test_parse_known_values(text: str, dim: Dimension, si: float) -> None:
    assert parse_quantity(text, dim) == pytest.approx(si, rel=1e-12)


@pytest.mark.parametrize("bad", ["", "fast", "3 parsecs", "1e999 B", "GB 80"])
def test_parse_rejects_garbage(bad: str) -> None:
    with pytest.raises(InputError):
        parse_quantity(bad)


def test_dimension_mismatch_names_both() -> None:
    with pytest.raises(InputError, match="bandwidth quantity"):
        parse_quantity("80 GB", Dimension.BANDWIDTH)


def test_bare_number_needs_unit_when_required() -> None:
    assert parse_quantity("80", Dimension.BYTES) == 80.0
    with pytest.raises(InputError, match="no unit"):
        parse_quantity("80", Dimension.BYTES, require_unit=True)
    with pytest.raises(InputError):
        parse_quantity(80)


def test_dtype_sizes() -> None:
    assert DType.BF16.bytes == 2 and DType.FP8.bytes == 1 and DType.INT4.bytes == 0.5
    assert DType.TF32.bytes == 4  # stored in 32-bit words


def test_format() -> None:
    assert format_quantity(3.35e12, Dimension.BANDWIDTH) == "3.35 TB/s"
    assert format_quantity(80e9, Dimension.BYTES) == "80 GB"
    assert format_quantity(2**30, Dimension.BYTES, binary=True) == "1 GiB"
    assert format_quantity(3e-6, Dimension.TIME) == "3 µs"
    assert format_quantity(7200.0, Dimension.TIME) == "2 h"
    assert format_quantity(3 * 86400.0, Dimension.TIME) == "3 d"
    assert format_quantity(1500.0, Dimension.TIME) == "25 min"
    assert format_quantity(999.0, Dimension.TIME) == "999 s"


@given(st.floats(min_value=1e-3, max_value=1e20, allow_nan=False),
       st.sampled_from([Dimension.BYTES, Dimension.BANDWIDTH, Dimension.FLOPS, Dimension.POWER]))
def test_format_parse_round_trip(value: float, dim: Dimension) -> None:
    text = format_quantity(value, dim, digits=12)
    assert math.isclose(parse_quantity(text, dim), value, rel_tol=1e-9)
