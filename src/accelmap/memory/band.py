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
  or the bytes counted exactly (``EXACT_ITEMS``: weights, gradients, optimizer states, the KV
  cache: parameter and token counts x bytes, no model in them) alone exceed C: the band is
  the error of what the memory model estimates and cannot make room for those. In bytes: over
  <=> -margin > min(band x T, T - exact), the band's downside allowance (``allowance``);
- **tight**: in between: within the model's measured error of capacity. Not "does not fit";
  the planner leaves tight plans out unless asked (``include_tight``).

The caching allocator's reserve beyond the live tensors (``ELASTIC_ITEMS``: the fitted
fragmentation of ``memory.allocator``) is what the allocator keeps when the device has room,
not what the job needs: when cudaMalloc fails, PyTorch's allocator frees a cached block that
is not split, then all of them, and retries before it raises out-of-memory (pytorch/pytorch
``c10/cuda/CUDACachingAllocator.cpp``, the allocator's header comment; counted as
``num_alloc_retries``). The fits of memory.csv measure ``reserved_bytes.all.peak`` on devices
with room to spare. So the reserve E can make a plan tight, never over: over is
(T - E) x (1 - band) > C; a plan that needs its reserve to fit is tight (it may pay alloc
retries: cudaFree synchronises the device).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from accelmap.units import Num

MEMORY_ERROR_BAND = 0.0951
BAND_SOURCE = ("p90 |predicted - measured| / measured peak memory on memory.csv Y0093, Y0095, "
               "Y0099, Y0101, Y0103, Y0105 (held out of the allocator fit; "
               "benchmarks/memory_error.py)")


# top-level memory items that are counts x bytes, not estimates (memory/budget.py keys)
EXACT_ITEMS = ("weights", "gradients", "optimizer", "kv_cache")
# items the caching allocator gives back under pressure (module doc): never make a plan "over"
ELASTIC_ITEMS = ("runtime/fragmentation",)


def exact_bytes(items: dict[str, Num]) -> Num:
    """The bytes of ``items`` that are counted exactly (``EXACT_ITEMS``)."""
    return sum((v for k, v in items.items() if k.split("/")[0] in EXACT_ITEMS), 0.0)


def elastic_bytes(items: dict[str, Num]) -> Num:
    """The bytes of ``items`` the caching allocator gives back under pressure
    (``ELASTIC_ITEMS``)."""
    return sum((v for k, v in items.items() if k in ELASTIC_ITEMS), 0.0)


def allowance(total: Num, exact: Num = 0.0, band: float = MEMORY_ERROR_BAND,
              elastic: Num = 0.0) -> Num:
    """Bytes by which a total may exceed capacity and still not be 'over': the allocator's
    reserve plus the band's share of the rest, at most the estimated (not exactly counted)
    bytes."""
    t, e = np.asarray(total), np.asarray(elastic)
    return np.minimum(e + band * (t - e), t - np.asarray(exact))


class MemoryFit(StrEnum):
    FITS = "fits"
    TIGHT = "tight"  # within the memory model's error band of capacity
    OVER = "over"  # over capacity by more than the band


def is_over(total: Num, capacity: Num, band: float = MEMORY_ERROR_BAND,
            exact: Num = 0.0, elastic: Num = 0.0) -> Num:
    live = np.asarray(total) - np.asarray(elastic)  # what the allocator cannot give back
    return (live * (1.0 - band) > capacity) | (np.asarray(exact) > capacity)


def is_tight(total: Num, capacity: Num, band: float = MEMORY_ERROR_BAND,
             exact: Num = 0.0, elastic: Num = 0.0) -> Num:
    t = np.asarray(total)
    return (t * (1.0 + band) > capacity) & ~is_over(t, capacity, band, exact, elastic)


def memory_fit(total: float, capacity: float, band: float = MEMORY_ERROR_BAND,
               exact: float = 0.0, elastic: float = 0.0) -> MemoryFit:
    """fits / tight / over for one total (see the module doc)."""
    if bool(is_over(total, capacity, band, exact, elastic)):
        return MemoryFit.OVER
    if bool(is_tight(total, capacity, band, exact, elastic)):
        return MemoryFit.TIGHT
    return MemoryFit.FITS
