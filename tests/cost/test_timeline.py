"""The replayed pipeline schedules agree with the closed forms of cost/schedules.py."""

from __future__ import annotations

from itertools import pairwise

import pytest

from accelmap.cost.schedules import bubble_over_ideal
from accelmap.cost.timeline import MAX_PASSES, makespan, pipeline_timeline
from accelmap.errors import InputError


@pytest.mark.parametrize(("schedule", "p", "m", "v"), [
    ("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("1f1b", 8, 3, 1), ("interleaved-1f1b", 4, 8, 2),
    ("interleaved-1f1b", 8, 16, 4), ("zb-h1", 4, 8, 1), ("zb-h1", 8, 4, 1), ("1f1b", 1, 4, 1)])
def test_makespan_is_ideal_plus_the_bubble(schedule: str, p: int, m: int, v: int) -> None:
    t_f, t_b = 1.0, 2.0
    passes = pipeline_timeline(schedule, p, m, v, t_f=t_f, t_b=t_b)
    ideal = m * (t_f + t_b)
    assert makespan(passes) / ideal - 1 == pytest.approx(bubble_over_ideal(schedule, p, m, v))


def test_every_pass_once_and_stages_never_overlap() -> None:
    passes = pipeline_timeline("interleaved-1f1b", 4, 8, 2, t_f=1.0, t_b=2.0)
    assert len(passes) == 4 * 8 * 2 * 2
    assert len({(x.stage, x.kind, x.micro_batch, x.chunk) for x in passes}) == len(passes)
    for s in range(4):
        mine = sorted((x for x in passes if x.stage == s), key=lambda x: x.start)
        assert all(a.end <= b.start + 1e-12 for a, b in pairwise(mine))
    zb = pipeline_timeline("zb-h1", 4, 8, t_f=1.0, t_b=2.0)
    assert sorted({x.kind for x in zb}) == ["B", "F", "W"]


def test_sends_delay_the_step() -> None:
    a = makespan(pipeline_timeline("1f1b", 4, 8, t_f=1.0, t_b=2.0))
    b = makespan(pipeline_timeline("1f1b", 4, 8, t_f=1.0, t_b=2.0, send=0.1))
    assert b > a


def test_bad_input_says_why() -> None:
    with pytest.raises(InputError, match="unknown pipeline schedule"):
        pipeline_timeline("2f2b", 4, 8, t_f=1.0, t_b=2.0)
    with pytest.raises(InputError, match=">= 1"):
        pipeline_timeline("1f1b", 0, 8, t_f=1.0, t_b=2.0)
    with pytest.raises(InputError, match="too large"):
        pipeline_timeline("1f1b", 64, MAX_PASSES, t_f=1.0, t_b=2.0)
    with pytest.raises(InputError, match="DualPipe timeline is not drawn"):
        pipeline_timeline("dualpipe", 4, 8, t_f=1.0, t_b=2.0)
