"""What an estimate costs: the price in use (catalog quote with its date and source, --price, or
owning), $ per hour of the system, $/M tokens at capacity and at a load, time and $ of a
training run, and renting vs owning with the break-even (``cost.ownership`` states the rules).

    from accelmap import api
    est = api.estimate(spec, system, wl)
    rep = api.cost_report(est, system, ownership="utilization=0.6", load_tokens_per_s=500)
    print(rep.to_dict())

The report lives in ``engine/money.py``, the formulas in ``cost/ownership.py``; this module parses
``--own`` and re-exports them.
"""

from __future__ import annotations

from accelmap.cost.ownership import Ownership, as_ownership, breakeven_rows
from accelmap.engine.money import CostReport, cost_report, plan_money, price_info

__all__ = ["CostReport", "breakeven_rows", "cost_report", "ownership", "plan_money", "price_info"]


def ownership(text: str | Ownership | None) -> Ownership | None:
    """'purchase=30000,kwh=0.1,pue=1.2,years=5,utilization=0.7' (keys optional) or None
    (``cost.ownership.as_ownership``; ``breakeven_rows`` lives there too)."""
    return as_ownership(text)
