"""Energy of an estimate (``api.energy_report``): the model lives in ``engine/energy.py`` (the
modelled energy from ``cost.power`` beside the TDP and ops bounds, average power, kWh and CO2 of
a training run); this module re-exports it.

    from accelmap import api
    rep = api.energy_report(est, system, grid_kg_per_kwh=0.05)  # a hydro grid
"""

from __future__ import annotations

from accelmap.engine.energy import GRID_KG_PER_KWH, PUE, EnergyReport, energy_report

__all__ = ["GRID_KG_PER_KWH", "PUE", "EnergyReport", "energy_report"]
