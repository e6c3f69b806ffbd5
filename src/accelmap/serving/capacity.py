"""The highest request rate a serving mapping sustains under latency constraints.

MLPerf Inference's Server scenario (inference_policies, "Scenarios" and the llama2-70b latency
constraints: TTFT p99 <= 2 s, TPOT p99 <= 200 ms) reports the largest Poisson query rate whose
run still meets the per-request latency percentiles; a submitter finds it by trying rates.
:func:`max_rate` does the same on the simulator (:func:`max_rate_split` on disaggregated
prefill and decode pools): bisection on the rate between 0 and the
offline throughput in requests/s (no Poisson stream is served faster than every request queued
at once), a fixed number of steps, every run with the same seed. The seed makes the arrival
pattern the same exponential gaps scaled by 1 / rate (``requests.make``), and the same lengths,
so a higher rate only brings the same requests earlier and the percentiles grow with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from accelmap.cost.framework import FrameworkProfile
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.serving.disagg import Disaggregation, DisaggRun, run_disaggregated
from accelmap.serving.metrics import PERCENTILES, Slo
from accelmap.serving.scenario import Load, Scenario, ServingRun, run
from accelmap.serving.speculative import Speculation
from accelmap.workload import Inference

BISECTION_STEPS = 12  # rate resolution: offline requests/s / 2**12, well under 0.1 %


RunT = TypeVar("RunT", ServingRun, DisaggRun)


@dataclass(frozen=True)
class Capacity(Generic[RunT]):
    """The highest rate found (requests/s over all replicas) and the run at that rate; ``rate``
    None when even the lowest rate tried breaks a constraint (or the mapping cannot serve).
    ``RunT``: a colocated run (``max_rate``) or a disaggregated one (``max_rate_split``)."""

    rate: float | None
    run: RunT | None
    offline: RunT
    tried: tuple[tuple[float, bool], ...]  # (rate, constraints met) in the order tried


def meets(metrics: dict[str, object], slo: Slo, percentile: int = 99) -> bool:
    """Whether a run's ``percentile`` TTFT and TPOT are within ``slo``."""
    key = f"p{percentile}"
    for limit, name in ((slo.ttft_s, "ttft_s"), (slo.tpot_s, "tpot_s")):
        if limit is None:
            continue
        dist = metrics.get(name)
        value = dist.get(key) if isinstance(dist, dict) else None
        if value is None or value > limit:
            return False
    return True


def max_rate(spec: ModelSpec, system: System, wl: Inference, m: Mapping,
             fw: FrameworkProfile, load: Load, slo: Slo, percentile: int = 99,
             steps: int = BISECTION_STEPS, speculation: Speculation | None = None
             ) -> Capacity[ServingRun]:
    """Bisect on the Poisson rate (see the module docstring); ``load`` gives the requests,
    lengths, seed and scheduler caps (its scenario and rate are replaced); ``speculation``:
    every trial with that drafter (``scenario.run``)."""
    return bisect_rate(lambda ld: run(spec, system, wl, m, fw, ld, speculation=speculation),
                       load, slo, percentile, steps)


def max_rate_split(spec: ModelSpec, system: System, wl: Inference, d: Disaggregation,
                   fw: FrameworkProfile, load: Load, slo: Slo, percentile: int = 99,
                   steps: int = BISECTION_STEPS, speculation: Speculation | None = None
                   ) -> Capacity[DisaggRun]:
    """``max_rate`` on the prefill and decode pools of ``d`` (``disagg.run_disaggregated``)."""
    return bisect_rate(lambda ld: run_disaggregated(spec, system, wl, d, fw, ld,
                                                    speculation=speculation),
                       load, slo, percentile, steps)


def bisect_rate(trial: Callable[[Load], RunT], load: Load, slo: Slo, percentile: int = 99,
                steps: int = BISECTION_STEPS) -> Capacity[RunT]:
    """The bisection of the module docstring over runs of ``trial`` (the load at a rate)."""
    if percentile not in PERCENTILES:
        raise InputError(f"latency constraints are checked at p{'/p'.join(map(str, PERCENTILES))}"
                         f", not p{percentile}")
    if slo.ttft_s is None and slo.tpot_s is None:
        raise InputError("a highest-rate search needs a TTFT or TPOT limit")
    offline = trial(replace(load, scenario=Scenario.OFFLINE, rate=None, concurrency=None))
    if not offline.feasible:
        return Capacity(None, None, offline, ())
    lo, hi = 0.0, float(offline.metrics["requests_per_s"])
    best: RunT | None = None
    tried: list[tuple[float, bool]] = []
    for _ in range(steps):
        mid = (lo + hi) / 2
        r = trial(replace(load, scenario=Scenario.SERVER, rate=mid, concurrency=None))
        ok = r.feasible and meets(r.metrics, slo, percentile)
        tried.append((mid, ok))
        if ok:
            lo, best = mid, r
        else:
            hi = mid
    return Capacity(lo if best is not None else None, best, offline, tuple(tried))
