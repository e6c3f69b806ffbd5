"""Energy of an estimate: the modelled energy (``cost.power``: ops x pJ/FLOP and pJ/byte,
collectives x pJ/bit, static power x time), the average power it implies checked against the
TDP, J/token and J/step beside the two bounds every estimate carries, and for a training run
its kWh and CO2 at a PUE and a grid intensity.

Defaults follow the published carbon accounts they are checked against: PUE 1.1 and 0.385 kg
CO2e per kWh, the US average both Touvron et al. 2023 (LLaMA, sec. 6) and their Table 15 use
(Patterson et al. 2021 use 0.429 for GPT-3; pass ``grid_kg_per_kwh`` for your grid).

    from accelmap import api
    rep = api.energy_report(est, system, grid_kg_per_kwh=0.05)  # a hydro grid

It reads an estimate and its system, so it sits in the engine layer; ``api.energy`` re-exports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from accelmap.cost.per_token import tdp_j_per_token
from accelmap.cost.power import (
    LINK_SOURCE,
    NODE_SOURCE,
    STATIC_SOURCE,
    device_energy,
    link_energy_j,
)
from accelmap.engine.result import Estimate
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.hardware.schema import LinkRole

__all__ = ["GRID_KG_PER_KWH", "PUE", "EnergyReport", "energy_report"]

PUE = 1.1
GRID_KG_PER_KWH = 0.385
GRID_SOURCE = ("US national average 0.385 kg CO2e/kWh, the factor Touvron et al. 2023 (LLaMA, "
               "sec. 6) use; PUE 1.1 as there")


@dataclass(frozen=True)
class EnergyReport:
    accelerator: str
    figures: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, **self.figures, "notes": list(self.notes)}


def _tiers(system: System) -> dict[str, tuple[float, str]]:
    """Axis -> (per-device bandwidth, tier role): dp over the outer tier on a multi-node
    cluster, every other axis over the scale-up tier."""
    cl = system.cluster
    up = cl.tier(LinkRole.SCALE_UP)
    out = cl.tier(LinkRole.SCALE_OUT)
    ubw = up.bandwidth_per_direction.value if up else 0.0
    obw = out.bandwidth_per_direction.value if out else ubw
    tiers = {a: (ubw, "scale-up") for a in ("tp", "cp", "ep", "pp", "prefill", "decode_step")}
    tiers["dp"] = (obw, "scale-out") if cl.nodes > 1 and out else (ubw, "scale-up")
    return tiers


def _flat(comm: dict[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in (comm or {}).items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                out[kk] = out.get(kk, 0.0) + float(vv)
        else:
            out[k] = float(v)
    return out


def energy_report(est: Estimate, system: System, *, pue: float = PUE,
                  grid_kg_per_kwh: float = GRID_KG_PER_KWH,
                  host_w_per_device: float = 0.0) -> EnergyReport:
    """The modelled energy of ``est`` (see the module doc) with the power check.
    ``host_w_per_device``: the server's share per device (CPUs, NICs, switches, fans) added to
    every figure; 0 counts the accelerators alone (a DGX-1's rating leaves (3.5 kW - 8 x 300
    W) / 8 = 137.5 W per V100, a DGX H100's (10.2 kW - 8 x 700 W) / 8 = 575 W per H100)."""
    if not (pue >= 1.0 and math.isfinite(pue)):
        raise InputError(f"--pue {pue}: a PUE is at least 1 (facility / IT energy)")
    if not (host_w_per_device >= 0 and math.isfinite(host_w_per_device)):
        raise InputError(f"host power {host_w_per_device}: give watts per device, 0 or more")
    if not (grid_kg_per_kwh >= 0 and math.isfinite(grid_kg_per_kwh)):
        raise InputError(f"--grid {grid_kg_per_kwh}: give kg CO2e per kWh, 0 or more")
    from accelmap.catalog import load_catalog

    acc = system.accelerator
    de = device_energy(acc, peers=list(load_catalog().accelerators.values()))
    frac = system.device.fraction
    tdp, static = de.tdp_w * frac, de.static_w * frac
    notes = [f"node: {de.node_source}", f"compute energy: {de.overhead_source}", NODE_SOURCE,
             STATIC_SOURCE, LINK_SOURCE]
    if de.tdp_derived:
        notes.insert(0, f"{acc.id} publishes no TDP: derived {tdp:,.0f} W (static + this "
                        "model's power at its dense peak with memory streaming)")
    if not est.feasible:
        return EnergyReport(acc.id, {"tdp_w": tdp, "tdp_derived": de.tdp_derived},
                            (f"the estimate cannot run ({est.reason}): no energy", *notes))
    world = int(est.mapping.world)
    met = est.metrics
    compute_j, memory_j, link_j, seconds, tokens = _dynamic_j(est, de, _tiers(system))
    static_j = static * seconds * world
    host_j = host_w_per_device * seconds * world
    total = compute_j + memory_j + link_j + static_j
    power = total / (seconds * world) if seconds > 0 else 0.0
    limited = power > tdp * 1.001
    if limited:
        notes.insert(0, f"power check: the model gives {power:,.0f} W per device, over the "
                        f"{tdp:,.0f} W TDP: the part would be power-limited (its clock drops "
                        f"and the step stretches); energy taken at the TDP")
        total = tdp * seconds * world
    total += host_j
    figs: dict[str, Any] = {
        "power_w_per_device": min(power, tdp), "power_w_model": power, "tdp_w": tdp,
        "tdp_derived": de.tdp_derived, "power_over_tdp": power / tdp if tdp else None,
        "power_limited": limited,
        "breakdown_j": {"compute": compute_j, "memory": memory_j, "links": link_j,
                        "static": static_j, "host": host_j},
        "host_w_per_device": host_w_per_device,
        "overhead_x_bare_mac": de.overhead, "node_nm": de.nm, "pue": pue,
        "grid_kg_per_kwh": grid_kg_per_kwh, "grid_source": GRID_SOURCE
        if grid_kg_per_kwh == GRID_KG_PER_KWH and pue == PUE else "given",
        # the two bounds the estimate carries (cost/per_token.py): every device at TDP, and
        # operator energy alone; energy_j_per_token (below) is the modelled figure between them
        "energy_j_per_token_tdp": met.get("energy_j_per_token_tdp"),
        "energy_j_per_token_ops": met.get("energy_j_per_token_ops"),
    }
    figs.update(_per_token(est, total, seconds, tokens, tdp if de.tdp_derived else None, pue,
                           grid_kg_per_kwh))
    return EnergyReport(acc.id, figs, tuple(notes))


def _dynamic_j(est: Estimate, de: Any, tiers: dict[str, tuple[float, str]]
               ) -> tuple[float, float, float, float, float | None]:
    """(compute J, memory J, link J, seconds, tokens or None for training) of one step or one
    serving batch over the whole system, from its operators and its communication."""
    m, met = est.mapping, est.metrics
    world = int(m.world)
    comm = _flat(met.get("communication_s"))
    if est.phase.value == "train":
        micro = int(met.get("micro_batches") or 1)
        f, b = de.ops_j([*est.ops.get("forward", ()), *est.ops.get("backward", ())])
        of, ob = de.ops_j(est.ops.get("optimizer", ()))
        shards = int(m.dp) * int(m.tp) * int(m.cp)
        return (f * micro * shards + of * world, b * micro * shards + ob * world,
                link_energy_j(comm, tiers) * world, float(met["step_time_s"]), None)
    steps = max(int(getattr(est, "output_len", 0)) - 1, 0)
    pf, pb = de.ops_j(est.ops.get("prefill", ()))
    df, db = de.ops_j(est.ops.get("decode", ()))
    devices = int(m.devices_per_replica) * int(m.replicas)
    seconds = float(met.get("total_time_s") or 0.0)
    dec = {k: v * steps for k, v in _flat((met.get("communication_s") or {}).get(
        "decode_step")).items()}
    pre = _flat((met.get("communication_s") or {}).get("prefill"))
    link_j = (link_energy_j(pre, {k: tiers["tp"] for k in pre})
              + link_energy_j(dec, {k: tiers["tp"] for k in dec})) * world
    return ((pf + steps * df) * devices, (pb + steps * db) * devices, link_j, seconds,
            float(met.get("tokens_per_s") or 0.0) * seconds)


def _per_token(est: Estimate, total: float, seconds: float, tokens: float | None,
               derived_tdp: float | None, pue: float, grid: float) -> dict[str, Any]:
    """Joules per token (per step and the whole run for training; per request and per
    million tokens for serving), and the TDP bound where the TDP was derived."""
    met = est.metrics
    world = int(est.mapping.world)
    figs: dict[str, Any] = {}
    if est.phase.value == "train":
        tok = float(met["tokens_per_s"]) * seconds
        figs.update(energy_j_per_step=total, energy_j_per_token=total / tok)
        if derived_tdp is not None:
            figs["energy_j_per_token_tdp"] = tdp_j_per_token(derived_tdp, world, tok / seconds)
        ttt = met.get("time_to_train_s")
        if ttt:
            run_j = total / seconds * float(ttt)
            kwh = run_j / 3.6e6 * pue
            figs.update(run_kwh=kwh, run_mwh=kwh / 1000, run_t_co2e=kwh * grid / 1000,
                        run_device_hours=float(ttt) / 3600 * world)
        return figs
    jt = total / tokens if tokens else None
    figs.update(energy_j_per_token=jt, energy_j_per_request=total / (tokens / max(
        int(getattr(est, "output_len", 1)), 1)) if tokens else None)
    if derived_tdp is not None and tokens:
        figs["energy_j_per_token_tdp"] = tdp_j_per_token(derived_tdp, world, tokens / seconds)
    if jt:
        kwh_m = jt * 1e6 / 3.6e6 * pue
        figs.update(kwh_per_million_tokens=kwh_m, kg_co2e_per_million_tokens=kwh_m * grid)
    return figs
