"""Timing one kernel correctly: warm-up, device synchronisation, repetitions, median, spread.

Each repetition optionally flushes the caches first (the backend writes a buffer larger than the
last-level cache), synchronises the device, runs the kernel ``inner`` times and synchronises
again; the time per call is the repetition's wall time over ``inner``. ``inner`` grows until a
repetition lasts at least ``MIN_REP_S``, so the host-side synchronisation cost (tens of
microseconds on a GPU) stays under a few per cent of what is measured. With ``inner > 1`` only
the first call of a repetition starts from flushed caches. The warm-up calls absorb one-time
costs: kernel selection and JIT (cuBLAS heuristics, oneDNN primitive creation), lazy
allocation, clock ramp-up.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

MIN_REP_S = 2e-3  # a repetition lasts at least this long (sync overhead below ~1 %)
MAX_INNER = 10_000  # calls per repetition, at most
# First kernel of a run: warm up this long (capped by the caller at a share of its budget).
# Measured on a 2-vCPU Xeon VM: the first ~0.45 s of bf16 GEMMs ran 100x slow (10 ms instead
# of 0.06 ms for 256x512x384), however many calls were made.
PROCESS_WARMUP_S = 1.0
PROCESS_WARMUP_SHARE = 0.1  # of the budget, at most


@dataclass(frozen=True)
class Timing:
    """Seconds per call of each repetition."""

    times: tuple[float, ...]
    inner: int  # calls per repetition
    warmup: int  # warm-up calls before the first repetition

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def seconds(self, fastest: bool = False) -> float:
        """The median call time, or the fastest repetition's (``fastest``: on a CPU shared with
        other processes, a repetition they preempted is slower, never faster, so the fastest is
        the one that timed the kernel; on a quiet machine the two differ by ~1 %)."""
        return min(self.times) if fastest else self.median

    @property
    def spread(self) -> float:
        """(max - min) / median of the repetitions."""
        return (max(self.times) - min(self.times)) / self.median

    @property
    def total_calls(self) -> int:
        return self.warmup + self.inner * len(self.times)


def time_kernel(fn: Callable[[], object], sync: Callable[[], None], *, warmup: int = 2,
                reps: int = 5, flush: Callable[[], object] | None = None,
                min_rep_s: float = MIN_REP_S, warmup_s: float = 0.0) -> Timing:
    """Time ``fn`` (one kernel launch) with ``sync`` (the device's synchronise; a no-op on the
    CPU) around every repetition. Warm-up runs ``warmup`` calls and for at least ``warmup_s``
    seconds: some start-up costs are time-, not call-bound (on a CPU the first ~0.5 s of a
    process's GEMMs run up to 100x slow while its thread pool and AMX state come up)."""
    if reps < 1:
        raise ValueError("reps must be at least 1")
    first = math.inf
    calls = 0
    start = time.perf_counter()
    while calls < max(1, warmup) or time.perf_counter() - start < warmup_s:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        first = min(first, time.perf_counter() - t0)
        calls += 1
    inner = int(min(MAX_INNER, max(1, math.ceil(min_rep_s / max(first, 1e-9)))))
    times = []
    for _ in range(reps):
        if flush is not None:
            flush()
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / inner)
    return Timing(times=tuple(times), inner=inner, warmup=calls)


COST_MARGIN = 1.5  # predicted time x this (allocation, first-touch, flushes): a budget, not a model


def predicted_cost(seconds_per_call: float, *, warmup: int, reps: int,
                   min_rep_s: float = MIN_REP_S) -> float:
    """Wall seconds :func:`time_kernel` will take for a kernel of this duration (no flushes)."""
    return max(1, warmup) * seconds_per_call + reps * max(seconds_per_call, min_rep_s)
