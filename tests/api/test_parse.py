"""api.parse: text to values, one clear InputError per mistake."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.errors import InputError


def test_dtype_names_and_library_spellings() -> None:
    assert api.dtype("bf16") is api.DType.BF16
    assert api.dtype("bfloat16") is api.DType.BF16
    assert api.dtype(api.DType.FP8) is api.DType.FP8


def test_dtype_unknown_lists_the_choices() -> None:
    with pytest.raises(InputError, match=r"unknown weight dtype 'bf17'; use one of fp64, .*int4"):
        api.dtype("bf17", "weight")
    with pytest.raises(InputError, match=r"^unknown dtype 'x'"):
        api.dtype("x")


def test_choice_ignores_case_and_lists_values() -> None:
    assert api.choice(api.Phase, "Decode", "phase") is api.Phase.DECODE
    assert api.choice(api.Phase, api.Phase.TRAIN, "phase") is api.Phase.TRAIN
    with pytest.raises(InputError, match="unknown phase 'nope'; use one of train, prefill, decode"):
        api.choice(api.Phase, "nope", "phase")


def test_phase() -> None:
    assert api.phase("PREFILL") is api.Phase.PREFILL
    with pytest.raises(InputError, match="unknown phase"):
        api.phase("serve")


@pytest.mark.parametrize(("text", "value"), [
    ("2T", 2e12), ("300B", 3e11), ("1.5e12", 1.5e12), ("16M", 1.6e7), ("4k", 4e3), ("2G", 2e9),
    (" 7 ", 7.0), (5, 5.0),
])
def test_count(text: str | float, value: float) -> None:
    assert api.count(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "-3", "abc", "inf", "nan", "", "T"])
def test_count_rejects(text: str) -> None:
    with pytest.raises(InputError, match="positive token count"):
        api.count(text)
