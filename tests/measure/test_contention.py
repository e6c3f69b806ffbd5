"""The load meter: what other processes took of this process's CPUs while it timed."""

from __future__ import annotations

import pytest

from accelmap.measure import contention
from accelmap.measure.contention import Load, LoadMeter, busy_ticks

STAT = """cpu  300 0 30 1000 5 0 3 7 0 0
cpu0 100 0 10 500 2 0 1 2 0 0
cpu1 200 0 20 500 3 0 2 5 0 0
intr 1 2 3
"""


def test_busy_ticks_counts_our_cpus_with_steal() -> None:
    assert busy_ticks(STAT, None) == 300 + 30 + 0 + 3 + 7
    assert busy_ticks(STAT, {"cpu0"}) == 100 + 10 + 1 + 2
    assert busy_ticks(STAT, {"cpu0", "cpu1"}) == busy_ticks(STAT, None)


def test_meter_subtracts_our_own_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # __init__ probes once; then 300 busy ticks, 100 of them ours
    ticks = iter([(0.0, 0.0), (1000.0, 50.0), (1300.0, 150.0)])
    monkeypatch.setattr(contention, "_ticks", lambda: next(ticks))
    clock = iter([10.0, 12.0])
    monkeypatch.setattr(contention.time, "perf_counter", lambda: next(clock))
    m = LoadMeter()
    m.hz, m.available = 100.0, True
    with m:
        pass
    load = m.load()
    assert load is not None and load.others_cores == pytest.approx(1.0) and load.seconds == 2.0
    assert load.busy and "not comparable" in load.sentence(2) and "of 2 cores" in load.sentence(2)
    assert not Load(0.05, 3.0).busy and "rerun" not in Load(0.05, 3.0).sentence()


def test_meter_without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contention, "_ticks", lambda: None)
    m = LoadMeter()
    with m:
        pass
    assert m.load() is None
