"""api.parse: text to values, one clear InputError per mistake."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.errors import InputError


def test_dtype_names_and_library_spellings() -> None:
    assert api.parse.dtype("bf16") is api.DType.BF16
    assert api.parse.dtype("bfloat16") is api.DType.BF16
    assert api.parse.dtype(api.DType.FP8) is api.DType.FP8


def test_dtype_unknown_lists_the_choices() -> None:
    with pytest.raises(InputError, match=r"unknown weight dtype 'bf17'; use one of fp64, .*int4"):
        api.parse.dtype("bf17", "weight")
    with pytest.raises(InputError, match=r"^unknown dtype 'x'"):
        api.parse.dtype("x")


def test_choice_ignores_case_and_lists_values() -> None:
    assert api.parse.choice(api.Phase, "Decode", "phase") is api.Phase.DECODE
    assert api.parse.choice(api.Phase, api.Phase.TRAIN, "phase") is api.Phase.TRAIN
    with pytest.raises(InputError, match="unknown phase 'nope'; use one of train, prefill, decode"):
        api.parse.choice(api.Phase, "nope", "phase")


def test_phase() -> None:
    assert api.parse.phase("PREFILL") is api.Phase.PREFILL
    with pytest.raises(InputError, match="unknown phase"):
        api.parse.phase("serve")


@pytest.mark.parametrize(("text", "value"), [
    ("2T", 2e12), ("300B", 3e11), ("1.5e12", 1.5e12), ("16M", 1.6e7), ("4k", 4e3), ("2G", 2e9),
    (" 7 ", 7.0), (5, 5.0),
])
def test_count(text: str | float, value: float) -> None:
    assert api.parse.count(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "-3", "abc", "inf", "nan", "", "T"])
def test_count_rejects(text: str) -> None:
    with pytest.raises(InputError, match="positive token count"):
        api.parse.count(text)


def test_batch_tokens_binary_k_and_m() -> None:
    assert api.parse.batch_tokens("4M") == 4 * 2**20
    assert api.parse.batch_tokens("0.5m") == 2**19  # GPT-3's 0.5M
    assert api.parse.batch_tokens("512K") == 512 * 2**10
    # else a count
    assert api.parse.batch_tokens("2e6") == 2e6 and api.parse.batch_tokens("1B") == 1e9
    assert api.parse.batch_tokens(4096) == 4096
    with pytest.raises(InputError, match="positive token count"):
        api.parse.batch_tokens("lots")


@pytest.mark.parametrize(("text", "seconds"), [
    ("500ms", 0.5), ("2s", 2.0), ("2", 2.0), ("5min", 300.0), ("5m", 300.0), ("3h", 10800.0),
    ("60d", 60 * 86400.0), (" 1.5 w ", 1.5 * 604800.0), (0.25, 0.25)])
def test_duration_units(text: str | float, seconds: float) -> None:
    assert api.parse.duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5x", "fast", "-1s", "1.2.3s", ""])
def test_duration_errors(text: str) -> None:
    with pytest.raises(InputError, match=r"as a duration: write e.g. 500ms, 2s, 60d"):
        api.parse.duration(text)


@pytest.mark.parametrize("text", [".", "0", "0s", 0.0, float("inf"), float("nan"), "inf",
                                  "1e400s", "999999999999d"])
def test_duration_is_positive_finite_and_bounded(text: str | float) -> None:
    with pytest.raises(InputError, match="duration"):
        api.parse.duration(text)


def test_counts_are_bounded() -> None:
    assert api.parse.count("15T") == 15e12
    for bad in ("inf", "nan", "1e400", "-2T", "0", "1e30", "T", ""):
        with pytest.raises(InputError):
            api.parse.count(bad)


def test_global_batch_is_at_least_one_sequence() -> None:
    assert api.parse.sequences_per_step("4M", 4096) == 1024
    with pytest.raises(InputError, match="less than one sequence of --seq 8192"):
        api.parse.sequences_per_step("4K", 8192)
    with pytest.raises(InputError, match="less than one sequence"):
        api.parse.sequences_per_step("1", 2048)


def test_framework_matches_the_job() -> None:
    assert api.parse.framework("VLLM", train=False) == "vllm"
    assert api.parse.framework("megatron", train=True) == "megatron"
    assert api.parse.framework(None, train=True) is None
    with pytest.raises(InputError, match="vllm is a serving stack; training takes one of"):
        api.parse.framework("vllm", train=True)
    with pytest.raises(InputError, match="megatron is a training stack; serving takes"):
        api.parse.framework("megatron", train=False)
    with pytest.raises(InputError, match="unknown framework"):
        api.parse.framework("bogus", train=True)
