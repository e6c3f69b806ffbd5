"""The memory model's own error, and what it makes of a plan near capacity (DESIGN: "a published
configuration that ran cannot be 'does not fit': memory carries its own error band").

``MEMORY_ERROR_BAND`` is the p90 of |predicted - measured| / measured peak memory on the measured
rows of memory.csv held out of the allocator fit (``memory.allocator``): Y0093, Y0095, Y0099,
Y0101, Y0103, Y0105 (torchtitan, Llama 3.1 8B/70B/405B, FSDP2 with TP, PP and CP, full
activation checkpointing). ``python benchmarks/memory_error.py --fit`` recomputes it, and
``tests/memory/test_published.py`` checks that this is that figure.

A plan's total T against the capacity C:

- **fits**: T x (1 + band) <= C: it fits even if the model under-predicts by the band;
- **over**: T x (1 - band) > C: it does not fit even if the model over-predicts by the band;
- **tight**: in between: within the model's measured error of capacity. Not "does not fit";
  the planner leaves tight plans out unless asked (``include_tight``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import numpy as np

Num = Any

MEMORY_ERROR_BAND = 0.0951
BAND_SOURCE = ("p90 |predicted - measured| / measured peak memory on memory.csv Y0093, Y0095, "
               "Y0099, Y0101, Y0103, Y0105 (held out of the allocator fit; "
               "benchmarks/memory_error.py)")


class MemoryFit(StrEnum):
    FITS = "fits"
    TIGHT = "tight"  # within the memory model's error band of capacity
    OVER = "over"  # over capacity by more than the band


def is_over(total: Num, capacity: Num, band: float = MEMORY_ERROR_BAND) -> Num:
    return np.asarray(total) * (1.0 - band) > capacity


def is_tight(total: Num, capacity: Num, band: float = MEMORY_ERROR_BAND) -> Num:
    t = np.asarray(total)
    return (t * (1.0 + band) > capacity) & ~is_over(t, capacity, band)


def memory_fit(total: float, capacity: float, band: float = MEMORY_ERROR_BAND) -> MemoryFit:
    """fits / tight / over for one total (see the module doc)."""
    if bool(is_over(total, capacity, band)):
        return MemoryFit.OVER
    if bool(is_tight(total, capacity, band)):
        return MemoryFit.TIGHT
    return MemoryFit.FITS
