"""The memory band's verdicts (memory/band.py): fits / tight / over, and the caching allocator's
reserve, which can make a plan tight but never over."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from accelmap.memory.band import (
    MEMORY_ERROR_BAND,
    MemoryFit,
    allowance,
    elastic_bytes,
    is_over,
    memory_fit,
)
from accelmap.memory.budget import MemoryBudget

GB = 1e9
B = MEMORY_ERROR_BAND


def test_verdicts_by_hand() -> None:
    cap = 80 * GB
    assert memory_fit(cap / (1 + B) - GB, cap) is MemoryFit.FITS
    assert memory_fit(cap, cap) is MemoryFit.TIGHT
    assert memory_fit(cap / (1 - B) + GB, cap) is MemoryFit.OVER
    # the same total, 17 GB of it the allocator's reserve: 83 GB live is within the band
    total = 100 * GB
    assert memory_fit(total, 85.5 * GB) is MemoryFit.OVER
    assert memory_fit(total, 85.5 * GB, elastic=17 * GB) is MemoryFit.TIGHT
    # live tensors over by more than the band stay over, reserve or not
    assert memory_fit(120 * GB, 85.5 * GB, elastic=17 * GB) is MemoryFit.OVER
    # exactly counted bytes over capacity: over whatever the reserve
    assert memory_fit(100 * GB, 85.5 * GB, exact=90 * GB, elastic=10 * GB) is MemoryFit.OVER


def test_budget_reads_the_reserve_from_its_items() -> None:
    items = {"weights": 6 * GB, "activations/layers": 77 * GB, "runtime/fragmentation": 17 * GB}
    assert elastic_bytes(items) == 17 * GB
    mem = MemoryBudget(items=items, capacity=85.5 * GB)
    assert mem.fit is MemoryFit.TIGHT and mem.reclaims and not bool(mem.over)
    # 100 GB total, 83 GB live: the allowance covers the reserve and the band of the rest
    assert float(mem.allowance) == 17 * GB + B * 83 * GB
    without = MemoryBudget(items={k: v for k, v in items.items() if "fragm" not in k},
                           capacity=70 * GB)
    assert without.fit is MemoryFit.OVER and not without.reclaims


@given(total=st.floats(1e6, 1e12), share=st.floats(0, 1), cap=st.floats(1e6, 1e12))
def test_the_reserve_never_turns_a_plan_over(total: float, share: float, cap: float) -> None:
    """Over with its reserve counted as given back implies over without it; and the allowance
    is exactly the margin at which the verdict turns over."""
    elastic = share * total
    assert not bool(is_over(total, cap, elastic=elastic)) or bool(is_over(total, cap))
    over = bool(is_over(total, cap, elastic=elastic))
    room = float(allowance(total, elastic=elastic))
    if abs((total - cap) - room) > 1e-9 * max(total, cap):  # off the boundary's rounding
        assert over == (total - cap > room)
