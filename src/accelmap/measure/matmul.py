"""Maximum achievable matmul FLOPS: a shape sweep derived from the device's structure.

Three phases share the time budget (absolute deadlines, so time a phase leaves over goes to the
next): the whole-wave :func:`~accelmap.measure.shapes.ladder`, smallest first, until a rung would
not finish in time (``LADDER_SHARE``); :func:`~accelmap.measure.shapes.variants` of the two
fastest rungs (other aspect ratios and depths, ``VARIANT_SHARE``); then
:func:`~accelmap.measure.shapes.refine` around the best shape, again around a new best, until
the budget is spent. The time of the next shape is predicted from the last measured rate, which
is pessimistic because the rate grows with size; the first rung always runs. A shape far
slower than a smaller one is timed twice (``RETRY_BELOW``).

On a CPU the sweep also times ``SKINNY`` shapes (after the ladder), few rows against a weight
matrix (the GEMMs of decoding and small batches): a CPU has no tile to pad them to, but with
few rows each loaded weight feeds few multiply-adds, so they run far below the square shapes of
the same FLOPs, and the efficiency-vs-size curve (``calibrate.envelope``) then holds them at the
small sizes where only they live. They are timed one call at a time from flushed caches: a
decode step streams every weight matrix once, so the weights come from memory, not from the
cache a back-to-back loop would keep them in (on a 2-core EPYC VM a warm 4 x 4096 x 256 GEMM
took 183 us, the same GEMM inside a decode step ~300 us).

The result is the best FLOP/s and its shape, the efficiency against the catalog's dense peak
when the accelerator is known, the efficiency-vs-size curve, and one :class:`Measurement` per
shape (``value`` and ``median``: FLOP/s at the median time; the times are in ``settings``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator
from accelmap.measure.backends import Backend, get_backend
from accelmap.measure.bandwidth import FLUSH_FACTOR, cache_size
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.shapes import (
    Gemm,
    Structure,
    generic_structure,
    ladder,
    refine,
    structure,
    variants,
)
from accelmap.measure.timing import (
    COST_MARGIN,
    PROCESS_WARMUP_S,
    PROCESS_WARMUP_SHARE,
    Timing,
    predicted_cost,
    time_kernel,
)
from accelmap.units import DType
from accelmap.units import parse_dtype as units_parse_dtype

SKINNY_SHARE = 0.15  # of the budget, at most: the skinny shapes on a CPU (SKINNY)
SKINNY_REPS = 9  # repetitions of one cold call each
LADDER_SHARE = 0.5  # of the budget: the whole-wave ladder (the efficiency-vs-size curve)
VARIANT_SHARE = 0.25  # then aspect-ratio and depth variants of the two fastest rungs
VARIANT_SEEDS = 2  # rungs whose variants are tried
REFINE_ROUNDS = 3  # refine around a new best at most this often
MAX_CALL_SHARE = 0.05  # one GEMM call may take at most this share of the budget
FIRST_GUESS = 0.8  # of the dense peak: rate assumed before anything is measured (time cap)
# A shape slower than this share of the best smaller shape is timed once more and the faster
# timing kept: on shared (virtual) machines whole repetitions can stall behind a descheduled
# thread (seen on a 2-vCPU VM: 256x512x384 bf16 at 15 GFLOP/s, 2 TFLOP/s a minute later).
RETRY_BELOW = 0.25
# CPU only: rows x (columns, depth) of decode-like GEMMs (a weight matrix of a small model's
# projection, of a larger one's, and a wide one), timed after the ladder
SKINNY = tuple((m, n, k) for m in (1, 4, 16, 64) for n, k in ((768, 256), (1024, 1024),
                                                              (4096, 1024)))


def parse_dtype(value: DType | str) -> DType:
    """A dtype the user asked to measure, or one sentence naming the accepted ones."""
    dt = value if isinstance(value, DType) else units_parse_dtype(value)
    if dt is None:
        raise InputError(f"unknown dtype {value!r}: use one of "
                         f"{', '.join(d.value for d in DType)}")
    return dt


@dataclass(frozen=True)
class SweepPoint:
    gemm: Gemm
    timing: Timing
    phase: str  # "ladder", "variant" or "refine"
    peak: float | None  # catalog dense peak, FLOP/s
    fastest: bool = False  # the fastest repetition, not the median (CPU: Timing.seconds)

    @property
    def flops_per_s(self) -> float:
        return self.gemm.flops / self.timing.seconds(self.fastest)

    @property
    def efficiency(self) -> float | None:
        return self.flops_per_s / self.peak if self.peak else None

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.gemm.label, "m": self.gemm.m, "n": self.gemm.n, "k": self.gemm.k,
                "flops": self.gemm.flops, "flops_per_s": self.flops_per_s,
                "efficiency": self.efficiency, "seconds_median": self.timing.median,
                "spread": self.timing.spread, "repetitions": len(self.timing.times),
                "inner": self.timing.inner, "phase": self.phase}


@dataclass(frozen=True)
class SweepResult:
    device: str
    backend: str
    dtype: DType
    accelerator_id: str | None
    peak: float | None
    peak_derived: bool  # the peak is derived (cores x FLOP/cycle x clock), not a datasheet's
    structure: Structure
    points: tuple[SweepPoint, ...]
    measurements: tuple[Measurement, ...]
    elapsed_s: float
    budget_s: float

    @property
    def best(self) -> SweepPoint:
        return max(self.points, key=lambda p: p.flops_per_s)

    @property
    def best_flops_per_s(self) -> float:
        return self.best.flops_per_s

    @property
    def best_shape(self) -> str:
        return self.best.gemm.label

    @property
    def efficiency(self) -> float | None:
        return self.best.efficiency

    @property
    def curve(self) -> tuple[SweepPoint, ...]:
        """The fastest shape of each GEMM size (FLOPs), smallest first."""
        by_size: dict[float, SweepPoint] = {}
        for p in self.points:
            if p.gemm.flops not in by_size or p.flops_per_s > by_size[p.gemm.flops].flops_per_s:
                by_size[p.gemm.flops] = p
        return tuple(by_size[f] for f in sorted(by_size))

    def efficiency_curve(self) -> tuple[tuple[float, float], ...]:
        """(GEMM FLOPs, efficiency vs dense peak) points; empty when the peak is unknown."""
        return tuple((p.gemm.flops, p.efficiency) for p in self.curve
                     if p.efficiency is not None)

    def to_dict(self) -> dict[str, Any]:
        s = self.structure
        return {"device": self.device, "backend": self.backend, "dtype": self.dtype.value,
                "accelerator_id": self.accelerator_id, "peak_flops": self.peak,
                "peak_derived": self.peak_derived, "best_flops_per_s": self.best_flops_per_s,
                "best_shape": self.best_shape, "efficiency": self.efficiency,
                "structure": {"tile": list(s.tile), "k_step": s.k_step, "units": s.units,
                              "memory_bytes": s.memory_bytes},
                "curve": [p.to_dict() for p in self.curve],
                "points": [p.to_dict() for p in self.points],
                "elapsed_s": self.elapsed_s, "budget_s": self.budget_s}


def device_structure(acc: Accelerator | None, be: Backend) -> Structure:
    """The catalog's structure, with the compute units and free memory the runtime reports."""
    units, free = be.compute_units(), be.free_memory()
    if acc is None:
        return generic_structure(units or 1, free) if free else generic_structure(units or 1)
    memory = min(acc.memory_bytes, free) if free else acc.memory_bytes
    return structure(acc, units=units, memory_bytes=memory)


def sweep(device: str = "cpu", dtype: DType | str = DType.BF16, acc: Accelerator | None = None,
          budget_s: float = 30.0, *, backend: str | Backend | None = None, warmup: int = 2,
          reps: int = 5, flush: bool | None = None, max_shapes: int | None = None
          ) -> SweepResult:
    """Sweep GEMM shapes on ``device`` for ``budget_s`` seconds and return the best.

    ``flush`` (default: on for accelerators, off on the CPU, whose large last-level cache makes
    each flush cost more than small GEMMs) writes 2x the last-level cache before every
    repetition; ``max_shapes`` caps the number of shapes measured (tests).
    """
    if budget_s <= 0:
        raise InputError(f"the budget must be positive seconds, got {budget_s}")
    dt = parse_dtype(dtype)
    be = get_backend(device, backend) if backend is None or isinstance(backend, str) else backend
    peak_entry = acc.peak_entry(dt) if acc else None
    peak = peak_entry[1].value if peak_entry else None
    s = device_structure(acc, be)
    elem = dt.bytes
    max_flops = peak * FIRST_GUESS * budget_s * MAX_CALL_SHARE if peak else None
    do_flush = be.device != "cpu" if flush is None else flush
    flusher = be.flusher(int(FLUSH_FACTOR * cache_size(acc, be)[0])) if do_flush else None
    start = time.perf_counter()
    sw = _Sweeper(be, dt, acc, peak, budget_s, warmup, reps, flusher, max_shapes)
    points = sw.points
    for g in ladder(s, elem, max_flops):
        if not sw.measure(g, "ladder", start + LADDER_SHARE * budget_s):
            break
    if not points:
        raise InputError(f"no GEMM shape fits {s.memory_bytes / 2**30:.3g} GiB on {be.device}")
    if be.device == "cpu":  # after the ladder's first shape has warmed the process up
        skinny_end = time.perf_counter() + SKINNY_SHARE * budget_s
        for m, n, k in SKINNY:
            sw.measure(Gemm(m, n, k), "skinny", skinny_end)
        sw.cold.clear()
    seeds = sorted(points, key=lambda p: -p.flops_per_s)[:VARIANT_SEEDS]
    for seed in seeds:
        for g in variants(seed.gemm, s, elem, max_flops):
            sw.measure(g, "variant", start + (LADDER_SHARE + VARIANT_SHARE) * budget_s)
    tried: set[Gemm] = set()
    for _ in range(REFINE_ROUNDS):
        best = max(points, key=lambda p: p.flops_per_s).gemm
        if best in tried:
            break
        tried.add(best)
        for g in refine(best, s, elem, max_flops):
            sw.measure(g, "refine", start + budget_s)
    be.release()
    elapsed = time.perf_counter() - start
    derived = bool(peak_entry and peak_entry[1].derived)
    env = be.environment(acc.id if acc else None)
    records = tuple(_record(p, env, dt, s, do_flush, derived, budget_s) for p in points)
    return SweepResult(device=env.label, backend=be.name, dtype=dt,
                       accelerator_id=acc.id if acc else None, peak=peak, peak_derived=derived,
                       structure=s, points=tuple(points), measurements=records,
                       elapsed_s=elapsed, budget_s=budget_s)


class _Sweeper:
    """The sweep's measuring: the points so far, the rate that sizes the next shapes (a square
    GEMM's) and the flusher of the skinny shapes (made on first use)."""

    def __init__(self, be: Backend, dt: DType, acc: Accelerator | None, peak: float | None,
                 budget_s: float, warmup: int, reps: int, flusher: Any,
                 max_shapes: int | None) -> None:
        self.be, self.dt, self.acc, self.peak, self.budget_s = be, dt, acc, peak, budget_s
        self.warmup, self.reps, self.flusher, self.max_shapes = warmup, reps, flusher, max_shapes
        self.points: list[SweepPoint] = []
        self.rate = peak * FIRST_GUESS if peak else 0.0
        self.cold: list[Any] = []

    def measure(self, g: Gemm, phase: str, deadline: float) -> bool:
        """Measure ``g`` unless done, over the shape cap, or predicted past ``deadline``;
        skinny shapes one call per repetition from flushed caches."""
        be, dt, points, warmup, reps = self.be, self.dt, self.points, self.warmup, self.reps
        if any(p.gemm == g for p in points) or (self.max_shapes and
                                                len(points) >= self.max_shapes):
            return True
        if points and self.rate > 0:
            cost = predicted_cost(g.flops / self.rate, warmup=warmup, reps=reps) * COST_MARGIN
            if time.perf_counter() + cost > deadline:
                return False
        fn = be.matmul(g.m, g.n, g.k, dt)
        first = PROCESS_WARMUP_S if not points else 0.0
        if phase == "skinny":
            if not self.cold:
                self.cold.append(self.flusher or be.flusher(
                    int(FLUSH_FACTOR * cache_size(self.acc, be)[0])))
            timing = time_kernel(fn, be.synchronize, warmup=warmup, reps=max(reps, SKINNY_REPS),
                                 flush=self.cold[0], min_rep_s=0.0)
        else:
            timing = time_kernel(fn, be.synchronize, warmup=warmup, reps=reps,
                                 flush=self.flusher,
                                 warmup_s=min(first, PROCESS_WARMUP_SHARE * self.budget_s))
        smaller = [p.flops_per_s for p in points if p.gemm.flops <= g.flops]
        if smaller and g.flops / timing.seconds(be.device == "cpu") < RETRY_BELOW * max(smaller):
            again = time_kernel(fn, be.synchronize, warmup=warmup, reps=reps, flush=self.flusher)
            timing = min(timing, again, key=lambda t: t.median)
        del fn
        be.release()
        points.append(SweepPoint(g, timing, phase, self.peak, fastest=be.device == "cpu"))
        if phase != "skinny":  # the rate that sizes the next shapes is a square GEMM's
            self.rate = points[-1].flops_per_s
        return True


def _record(p: SweepPoint, env: Environment, dt: DType, s: Structure, flush: bool,
            derived: bool, budget_s: float) -> Measurement:
    t = p.timing
    return Measurement(
        kind=Kind.MATMUL, environment=env, dtype=dt.value, label=p.gemm.label,
        value=p.flops_per_s, unit="FLOP/s", median=p.flops_per_s, spread=t.spread,
        repetitions=len(t.times),
        settings={"m": p.gemm.m, "n": p.gemm.n, "k": p.gemm.k, "flops": p.gemm.flops,
                  "phase": p.phase, "backend": env.backend, "warmup": t.warmup, "inner": t.inner,
                  "flush": flush, "seconds_median": t.median, "seconds": list(t.times),
                  "peak_flops": p.peak, "peak_derived": derived, "efficiency": p.efficiency,
                  "tile": list(s.tile), "k_step": s.k_step, "units": s.units,
                  "budget_s": budget_s,
                  "statistic": "fastest repetition" if p.fastest else "median"})
