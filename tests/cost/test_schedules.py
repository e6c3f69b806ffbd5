"""Pipeline bubbles and in-flight activations against the papers and Megatron's warm-up counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.cost.schedules import (
    Schedule,
    bubble_over_ideal,
    bubble_over_total,
    in_flight_micro_batches,
)
from accelmap.errors import InputError


def test_gpipe_and_1f1b_bubble() -> None:
    """Narayanan et al. 2021 sec. 2.2: (p-1)/m of ideal; (p-1)/(m+p-1) of the total step."""
    for s in (Schedule.GPIPE, Schedule.ONE_F_ONE_B):
        assert bubble_over_ideal(s, 8, 32) == pytest.approx(7 / 32)
        assert bubble_over_total(s, 8, 32) == pytest.approx(7 / 39)
        assert bubble_over_ideal(s, 8, 32) == pytest.approx(7 / 32)


def test_interleaving_divides_the_bubble_by_v() -> None:
    plain = bubble_over_ideal("1f1b", 8, 32)
    for v in (2, 3, 4):
        assert bubble_over_ideal("interleaved-1f1b", 8, 32, v) == pytest.approx(plain / v)


def test_zb_h1_is_a_third_of_1f1b() -> None:
    """Qi et al. 2024 sec. 2.1 (t_F = t_B = t_W)."""
    assert bubble_over_ideal("zb-h1", 4, 8) == pytest.approx(3 / 8 / 3)


def test_no_pipeline_no_bubble_one_in_flight() -> None:
    for s in Schedule:
        assert bubble_over_ideal(s, 1, 16, 2) == 0.0
        assert in_flight_micro_batches(s, 1, 16, 0, 2) == 1.0


def test_in_flight_1f1b_and_gpipe() -> None:
    assert in_flight_micro_batches("1f1b", 8, 32, 0) == 8  # first stage holds p
    assert in_flight_micro_batches("1f1b", 8, 32, 7) == 1  # last stage holds one
    assert in_flight_micro_batches("1f1b", 8, 4, 0) == 4  # fewer micro-batches than stages
    assert in_flight_micro_batches("gpipe", 8, 32, 3) == 32
    assert in_flight_micro_batches("zb-h1", 8, 32, 0) == 8  # ZB-H1 keeps 1F1B's memory


def test_in_flight_interleaved_matches_megatron_warmup() -> None:
    """Megatron: warm-up 2(p-s-1) + (v-1)p chunk-forwards, +1, each chunk 1/v of the stage."""
    p, m, v = 4, 16, 2
    assert in_flight_micro_batches("interleaved-1f1b", p, m, 0, v) == pytest.approx(
        p + (p - 1) / v)
    assert in_flight_micro_batches("interleaved-1f1b", p, m, 3, v) == pytest.approx(
        ((v - 1) * p + 1) / v)
    assert in_flight_micro_batches("interleaved-1f1b", p, m, 0, 1) == p  # v = 1 is 1F1B
    assert in_flight_micro_batches("interleaved-1f1b", 8, 2, 0, 2) == pytest.approx(2.0)


def test_array_friendly() -> None:
    p = np.array([1, 2, 4, 8])
    b = bubble_over_ideal("1f1b", p, 8)
    assert b == pytest.approx((p - 1) / 8)
    held = in_flight_micro_batches("1f1b", p, 8, np.zeros(4))
    assert held == pytest.approx([1, 2, 4, 8])


def test_bad_input_says_why() -> None:
    with pytest.raises(InputError, match=">= 1"):
        bubble_over_ideal("1f1b", 0, 8)
    with pytest.raises(ValueError):
        bubble_over_ideal("pipedream", 2, 8)


@settings(max_examples=200, deadline=None)
@given(p=st.integers(1, 128), m=st.integers(1, 4096), v=st.integers(1, 8),
       s=st.sampled_from(list(Schedule)))
def test_bubble_properties(p: int, m: int, v: int, s: Schedule) -> None:
    ideal = bubble_over_ideal(s, p, m, v)
    total = bubble_over_total(s, p, m, v)
    assert 0.0 <= total < 1.0 and ideal >= total
    assert ideal <= bubble_over_ideal(Schedule.GPIPE, p, m) + 1e-12
    assert bubble_over_ideal(s, p, m + 1, v) <= ideal + 1e-12


@settings(max_examples=200, deadline=None)
@given(p=st.integers(1, 64), m=st.integers(1, 512), v=st.integers(1, 6),
       s=st.sampled_from(list(Schedule)), data=st.data())
def test_in_flight_properties(p: int, m: int, v: int, s: Schedule, data: st.DataObject) -> None:
    stage = data.draw(st.integers(0, p - 1))
    held = in_flight_micro_batches(s, p, m, stage, v)
    assert 0.0 < held <= m + 1e-12
    assert held <= in_flight_micro_batches(s, p, m, 0, v) + 1e-12  # the first stage holds most
