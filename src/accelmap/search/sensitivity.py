"""Which resource binds: the elasticity of time to each resource, d log time / d log resource.

For each resource R of the system (every dense peak together, device-memory bandwidth,
scale-up and scale-out bandwidth) the estimate is run again with R x k and R / k (k = 1.05,
a central difference) and the elasticity is

    e_R = (ln t(R k) - ln t(R / k)) / (2 ln k)

-1 means time is inversely proportional to R (R binds entirely), 0 that R does not matter.
Scaling every resource by k scales every term that depends on one by 1/k, so
1 + sum_R e_R is the share of time that none of them moves: kernel launches, fixed
latencies, host work ("fixed latency and overhead"). The time measured is the step time
(training), TTFT and TPOT (serving). A system without scale-out (one node) reports none.

``system_with`` builds the what-if system: the accelerator with the overrides
(hardware/whatif.py), the cluster's network tiers changed alike, and the achievable
bandwidth scaled with the datasheet figure (a measured profile's figure too).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelmap.cost.roofline import Device
from accelmap.engine import System
from accelmap.engine.result import Estimate
from accelmap.errors import InputError
from accelmap.hardware import whatif
from accelmap.hardware.schema import LinkRole

STEP = 1.05  # +-5 %: small enough to stay on one side of a tile or batch boundary in most cases

RESOURCES: dict[str, str] = {
    "compute": "compute (every dense peak)",
    "memory_bandwidth": "memory bandwidth",
    "scale_up_bandwidth": "scale-up bandwidth",
    "scale_out_bandwidth": "scale-out bandwidth",
}


def system_with(system: System, overrides: Sequence[whatif.Override]) -> System:
    """``system`` with hardware what-ifs: its accelerator, its tiers and its achievable
    memory bandwidth."""
    acc = system.accelerator
    links = [o for o in overrides if o.field.name in whatif.LINK_FIELDS]
    acc2 = whatif.apply(acc, [o for o in overrides if o not in links], strict=True)
    # a link what-if changes the cluster's tier; the part's own links only where it has some
    acc2 = whatif.apply(acc2, [dataclasses.replace(o, target=None) for o in links])
    tiers = whatif.apply_tiers(acc.id, system.cluster.tiers, links)
    for o in links:
        if not any(t.role is whatif.LINK_FIELDS[o.field.name] for t in tiers) and \
                whatif.figure(acc2, o.field.name) == whatif.figure(acc, o.field.name):
            raise InputError(f"--set {o.text}: {acc.id} here has no such link to change")
    cluster = dataclasses.replace(system.cluster, accelerator=acc2, tiers=tiers)
    dev = system.device
    old, new = acc.memory_bandwidth, acc2.memory_bandwidth
    if dev.profile is not None and dev.profile.bandwidth and old and new:
        dev2 = dataclasses.replace(dev, acc=acc2, bandwidth=dev.bandwidth * new / old)
    else:
        dev2 = Device.of(acc2, fraction=dev.fraction, exclude=dev.exclude_measurement,
                         profile=dev.profile)
    return System(cluster, dev2)


def scaled(system: System, resource: str, k: float) -> System:
    f = whatif.lookup_field(resource)
    return system_with(system, [whatif.Override(f, f"{f.name}=x{k:g}", factor=k)])


def _times(est: Estimate) -> dict[str, float]:
    m = est.metrics
    keys = ("step_time_s",) if "step_time_s" in m else ("ttft_s", "tpot_s")
    return {k: float(m[k]) for k in keys if m.get(k) is not None and float(m[k]) > 0}


def _has(system: System, resource: str) -> bool:
    role = {"scale_up_bandwidth": LinkRole.SCALE_UP,
            "scale_out_bandwidth": LinkRole.SCALE_OUT}.get(resource)
    if role is None:
        return True
    tier = system.cluster.tier(role)
    if tier is None or system.devices <= 1:
        return False
    return not (role is LinkRole.SCALE_OUT and system.cluster.nodes <= 1)


@dataclass(frozen=True)
class Sensitivity:
    """Elasticities per timed figure and resource, and which resource binds each figure."""

    elasticity: dict[str, dict[str, float]]  # figure -> resource -> d ln t / d ln R
    step: float = STEP

    def binding(self, figure: str) -> tuple[str, float] | None:
        e = self.elasticity.get(figure)
        if not e:
            return None
        r = min(e, key=lambda k: e[k])
        return r, e[r]

    def fixed_share(self, figure: str) -> float:
        """1 + sum of elasticities: the share of time no resource moves."""
        return 1.0 + sum(self.elasticity.get(figure, {}).values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": f"central difference, resource x{self.step:g} and "
                                         f"/{self.step:g}: d ln time / d ln resource",
                               "figures": {}}
        for fig, e in self.elasticity.items():
            b = self.binding(fig)
            out["figures"][fig] = {"elasticity": e, "binding": b[0] if b else None,
                                   "fixed_latency_share": self.fixed_share(fig)}
        return out


def sensitivity(run: Callable[[System], Estimate], system: System,
                base: Estimate | None = None, step: float = STEP,
                resources: Sequence[str] = tuple(RESOURCES)) -> Sensitivity | None:
    """Elasticities of ``run(system)``'s times; None when the base estimate is infeasible."""
    est = base if base is not None else run(system)
    if not est.feasible:
        return None
    figures = _times(est)
    out: dict[str, dict[str, float]] = {f: {} for f in figures}
    for r in resources:
        if not _has(system, r):
            continue
        try:
            up, down = run(scaled(system, r, step)), run(scaled(system, r, 1 / step))
        except InputError:  # a resource the part lacks: no elasticity
            continue
        if not (up.feasible and down.feasible):
            continue
        tu, td = _times(up), _times(down)
        for f in figures:
            if f in tu and f in td:
                out[f][r] = (math.log(tu[f]) - math.log(td[f])) / (2 * math.log(step))
    return Sensitivity(out, step)
