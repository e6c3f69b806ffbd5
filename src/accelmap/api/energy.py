"""Energy of an estimate (``api.energy_report``): the model lives in ``engine/energy.py`` (the
modelled energy from ``cost.power`` beside the TDP and ops bounds, average power, kWh and CO2 of
a training run); this module re-exports it.

    from accelmap import api
    rep = api.energy_report(est, system, grid_kg_per_kwh=0.05)  # a hydro grid
"""

from __future__ import annotations

from accelmap.engine.energy import EnergyReport, energy_report

__all__ = ["EnergyReport", "energy_report"]
