"""Achievable memory bandwidth: copy, read and write kernels over buffers far above the caches.

Buffers follow STREAM's rule (McCalpin, STREAM FAQ: "each array must be at least 4 times the
size of the sum of all the last-level caches"): the smallest is ``LLC_FACTOR`` x the on-chip
memory, then ``SIZE_FACTORS`` multiples of it, all within ``MEMORY_FRACTION`` of the free memory.
The on-chip memory is the catalog's (all on-chip levels together, since caches may be
exclusive), else what the runtime reports (``/sys`` or ``lscpu`` on the CPU, the L2 size on a
GPU), else ``DEFAULT_LLC``. Before every repetition a buffer of ``FLUSH_FACTOR`` x that size is
written, so no repetition starts with its data in cache. Bytes are counted the STREAM way
(copy = 2 x buffer). The result is achieved bytes/s per kernel and size, and its ratio to the
catalog's memory bandwidth when the accelerator is known.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator, MemoryRole
from accelmap.measure.backends import STREAM_KINDS, Backend, get_backend
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.shapes import MEMORY_FRACTION
from accelmap.measure.timing import (
    COST_MARGIN,
    PROCESS_WARMUP_S,
    PROCESS_WARMUP_SHARE,
    Timing,
    predicted_cost,
    time_kernel,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

DEFAULT_LLC = 256 * 2**20  # bytes, when neither the catalog nor the runtime knows the caches
LLC_FACTOR = 4  # STREAM: arrays at least 4x the sum of the last-level caches
SIZE_FACTORS = (1, 2)  # buffer sizes: these multiples of LLC_FACTOR x cache
MIN_BUFFER = 64 * 2**20  # never smaller than this (timer resolution on small caches)
FLUSH_FACTOR = 2  # flush buffer: this many times the cache size


def cache_size(acc: Accelerator | None, be: Backend) -> tuple[float, str]:
    """(bytes of on-chip memory to defeat, where the figure comes from)."""
    if acc is not None:
        onchip = sum(m.capacity.value for m in acc.memory if m.role == MemoryRole.ONCHIP)
        if onchip:
            return onchip, f"catalog on-chip memory of {acc.id}"
    runtime = be.cache_bytes()
    if runtime:
        return runtime, "reported by the runtime (/sys, lscpu or device properties)"
    return float(DEFAULT_LLC), "default 256 MiB (cache size unknown)"


def buffer_sizes(cache: float, free: float | None) -> list[int]:
    """Buffer sizes in bytes (MiB multiples): LLC_FACTOR x cache x SIZE_FACTORS, capped so a
    copy's two buffers and the flush buffer stay within MEMORY_FRACTION of ``free``."""
    sizes = [max(MIN_BUFFER, LLC_FACTOR * cache * f) for f in SIZE_FACTORS]
    if free:
        cap = (free * MEMORY_FRACTION - FLUSH_FACTOR * cache) / 2
        sizes = [min(s, cap) for s in sizes]
    out = sorted({int(s // 2**20) * 2**20 for s in sizes if s >= 2**20})
    if not out:
        raise InputError(f"not enough free memory ({(free or 0) / 2**30:.3g} GiB) for a "
                         "bandwidth buffer above the caches")
    return out


@dataclass(frozen=True)
class BandwidthPoint:
    kind: str  # copy, read, write
    buffer_bytes: int
    bytes_per_call: float
    timing: Timing
    catalog: float | None  # catalog memory bandwidth, B/s
    fastest: bool = False  # the fastest repetition, not the median (CPU: Timing.seconds)

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_per_call / self.timing.seconds(self.fastest)

    @property
    def efficiency(self) -> float | None:
        return self.bytes_per_s / self.catalog if self.catalog else None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "buffer_bytes": self.buffer_bytes,
                "bytes_per_call": self.bytes_per_call, "bytes_per_s": self.bytes_per_s,
                "efficiency": self.efficiency, "seconds_median": self.timing.median,
                "spread": self.timing.spread, "repetitions": len(self.timing.times)}


@dataclass(frozen=True)
class BandwidthResult:
    device: str
    backend: str
    accelerator_id: str | None
    catalog: float | None
    cache_bytes: float
    cache_source: str
    points: tuple[BandwidthPoint, ...]
    measurements: tuple[Measurement, ...]
    elapsed_s: float
    budget_s: float

    def best(self, kind: str | None = None) -> BandwidthPoint | None:
        pts = [p for p in self.points if kind is None or p.kind == kind]
        return max(pts, key=lambda p: p.bytes_per_s) if pts else None

    @property
    def best_bytes_per_s(self) -> float:
        best = self.best()
        return best.bytes_per_s if best else 0.0

    def to_dict(self) -> dict[str, Any]:
        best = {k: b.to_dict() for k in STREAM_KINDS if (b := self.best(k))}
        return {"device": self.device, "backend": self.backend,
                "accelerator_id": self.accelerator_id, "catalog_bytes_per_s": self.catalog,
                "cache_bytes": self.cache_bytes, "cache_source": self.cache_source,
                "best_bytes_per_s": self.best_bytes_per_s, "best": best,
                "points": [p.to_dict() for p in self.points], "elapsed_s": self.elapsed_s,
                "budget_s": self.budget_s}


def measure_bandwidth(device: str = "cpu", acc: Accelerator | None = None,
                      budget_s: float = 20.0, *, kinds: Sequence[str] = STREAM_KINDS,
                      sizes: Sequence[int] | None = None, backend: str | Backend | None = None,
                      warmup: int = 1, reps: int = 5, flush: bool = True) -> BandwidthResult:
    """Run each kernel over each buffer size, smallest first, within ``budget_s`` seconds (a
    size predicted to overrun is skipped; the first kernel always runs)."""
    if budget_s <= 0:
        raise InputError(f"the budget must be positive seconds, got {budget_s}")
    for k in kinds:
        if k not in STREAM_KINDS:
            raise InputError(f"unknown bandwidth kernel {k!r}: use {', '.join(STREAM_KINDS)}")
    be = get_backend(device, backend) if backend is None or isinstance(backend, str) else backend
    cache, cache_from = cache_size(acc, be)
    sizes = sorted(sizes) if sizes else buffer_sizes(cache, be.free_memory())
    catalog = acc.memory_bandwidth if acc else None
    flusher = be.flusher(int(FLUSH_FACTOR * cache)) if flush else None
    start = time.perf_counter()
    deadline = start + budget_s
    points: list[BandwidthPoint] = []
    rates: dict[str, float] = {}
    alloc_rate = 0.0  # bytes/s of allocating and first-touching buffers (slow in VMs)

    def cost(kind: str, size: int) -> float:
        rate = rates.get(kind) or max(rates.values())
        per_call = size * (2 if kind == "copy" else 1) / rate
        flush_s = FLUSH_FACTOR * cache / rate if flush else 0.0
        return (predicted_cost(per_call, warmup=warmup, reps=reps) + reps * flush_s) * COST_MARGIN

    for size in sizes:
        if points and alloc_rate and time.perf_counter() + 2 * size / alloc_rate + min(
                cost(k, size) for k in kinds) > deadline:
            break
        t0 = time.perf_counter()
        kernels = be.streams(size)
        alloc_rate = 2 * size / max(time.perf_counter() - t0, 1e-9)
        for kind in kinds:
            if points and time.perf_counter() + cost(kind, size) > deadline:
                continue
            fn, moved = kernels.pop(kind)
            first = PROCESS_WARMUP_S if not points else 0.0
            timing = time_kernel(fn, be.synchronize, warmup=warmup, reps=reps, flush=flusher,
                                 warmup_s=min(first, PROCESS_WARMUP_SHARE * budget_s))
            points.append(BandwidthPoint(kind, size, moved, timing, catalog,
                                         fastest=be.device == "cpu"))
            rates[kind] = points[-1].bytes_per_s
            del fn
        del kernels
        be.release()
    flusher = None
    be.release()
    env = be.environment(acc.id if acc else None)
    records = tuple(_record(p, env, cache, cache_from, flush) for p in points)
    return BandwidthResult(device=env.label, backend=be.name,
                           accelerator_id=acc.id if acc else None,
                           catalog=catalog, cache_bytes=cache, cache_source=cache_from,
                           points=tuple(points), measurements=records,
                           elapsed_s=time.perf_counter() - start, budget_s=budget_s)


def _record(p: BandwidthPoint, env: Environment, cache: float, cache_from: str,
            flush: bool) -> Measurement:
    t = p.timing
    return Measurement(
        kind=Kind.BANDWIDTH, environment=env, dtype="fp32",
        label=f"{p.kind} {p.buffer_bytes / 2**20:g} MiB", value=p.bytes_per_s,
        unit="B/s", median=p.bytes_per_s, spread=t.spread, repetitions=len(t.times),
        settings={"kernel": p.kind, "buffer_bytes": p.buffer_bytes,
                  "bytes_per_call": p.bytes_per_call, "backend": env.backend, "warmup": t.warmup,
                  "inner": t.inner, "flush": flush, "seconds_median": t.median,
                  "seconds": list(t.times), "cache_bytes": cache, "cache_source": cache_from,
                  "catalog_bytes_per_s": p.catalog, "efficiency": p.efficiency,
                  "statistic": "fastest repetition" if p.fastest else "median"})
