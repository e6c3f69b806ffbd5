"""What an estimate costs: the price in use (catalog quote with its date and source, --price, or
owning), $ per hour of the system, $/M tokens at capacity and at a load, time and $ of a
training run, and renting vs owning with the break-even (``cost.ownership`` states the rules).

    from accelmap import api
    est = api.estimate(spec, system, wl)
    rep = api.cost_report(est, system, ownership="utilization=0.6", load_tokens_per_s=500)
    print(rep.to_dict())

It reads an estimate and its system, so it sits in the engine layer (the rules and formulas are
``cost.ownership``'s); ``api.costs`` re-exports it and parses ``--own``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from accelmap.catalog import Catalog
from accelmap.cost.ownership import (
    OwnedCost,
    Ownership,
    as_ownership,
    owned_cost,
    purchase_prices,
)
from accelmap.cost.per_token import usd_per_million_tokens
from accelmap.cost.whatif import WhatIfCatalog
from accelmap.engine.result import Estimate
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.hardware.listing import NOT_PUBLISHED
from accelmap.hardware.schema import Accelerator, PriceQuote

__all__ = ["CostReport", "cost_report", "plan_money", "price_info"]


def price_info(acc: Accelerator, catalog: Catalog | None = None,
               quote: PriceQuote | None = None) -> dict[str, Any] | None:
    """The price quote as it is cited: $/h, date, market, source ids and titles."""
    q = quote if quote is not None else acc.price
    if q is None:
        return None
    titles = []
    for sid in q.usd_per_hour.source:
        src = (catalog.source(sid, acc.sources) if catalog is not None
               else acc.sources.get(sid))
        titles.append(f"{sid}: {src.title}" if src else sid)
    return {"usd_per_hour": q.usd_per_hour.value, "date": q.date, "market": q.market,
            "sources": titles, "note": q.usd_per_hour.note}


@dataclass(frozen=True)
class CostReport:
    accelerator: str
    devices: int
    price: dict[str, Any] | None  # the price in use
    rent: dict[str, Any] | None  # the rental quote (the catalog's) when owning is in use
    figures: dict[str, Any] = field(default_factory=dict)
    owned: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, "devices": self.devices, "price": self.price,
                "rent": self.rent, **self.figures, "ownership": self.owned,
                "notes": list(self.notes)}


def _rent_quote(acc: Accelerator, catalog: Catalog | None) -> PriceQuote | None:
    """The rental quote behind an owned what-if price (cost.whatif keeps it), else the price."""
    if isinstance(catalog, WhatIfCatalog) and acc.id in catalog.rent:
        return catalog.rent[acc.id]
    return acc.price


def cost_report(est: Estimate, system: System, *, catalog: Catalog | None = None,
                ownership: str | Ownership | None = None,
                load_tokens_per_s: float | None = None) -> CostReport:
    """Money for one estimate. Serving: $/M output tokens at the estimate's throughput and, with
    ``load_tokens_per_s``, at that demand (the devices are paid for all the same). Training:
    device-hours, time and $ for the workload's tokens. Owning: with ``ownership`` (or at the
    defaults, for a part whose purchase price is published), the owned cost per useful
    device-hour and the break-even against the rental quote."""
    acc = system.accelerator
    devices = max(int(system.devices), int(est.mapping.world))
    own = as_ownership(ownership)
    if own is None and isinstance(catalog, WhatIfCatalog):
        own = catalog.whatif.ownership
    notes: list[str] = []
    price = price_info(acc, catalog)
    rent_q = _rent_quote(acc, catalog)
    rent = price_info(acc, catalog, rent_q) if rent_q is not None else None
    owned: OwnedCost | None = None
    if own is not None or acc.id in purchase_prices():
        try:
            owned = owned_cost(acc.id, system.tdp_w, own or Ownership())
        except ValueError as e:
            notes.append(str(e))
    if price is None:
        notes.append(f"{NOT_PUBLISHED}: no cited hourly price for {acc.id}; give --price "
                     "USD/h (per device-hour) or --own purchase=...")
    figures: dict[str, Any] = {}
    rate = price["usd_per_hour"] if price else None
    if rate is not None:
        figures["usd_per_hour_system"] = rate * devices
    m = est.metrics
    if not est.feasible:
        notes.append(f"the estimate cannot run ({est.reason}): no cost per token or per run")
    elif est.phase.value == "train":
        if m.get("time_to_train_s"):
            t = float(m["time_to_train_s"])
            figures.update(time_to_train_s=t, device_hours=t / 3600 * devices,
                           cost_to_train_usd=t / 3600 * devices * rate if rate else None)
            if owned is not None:
                figures["cost_to_train_usd_owned"] = t / 3600 * devices * owned.usd_per_hour
        else:
            notes.append("no --tokens: time and $ of the run not computed")
        tps = m.get("tokens_per_s")
        if tps and rate:
            figures["usd_per_million_tokens"] = usd_per_million_tokens(rate, devices, tps)
    else:
        tps = float(m.get("tokens_per_s") or 0.0)
        if tps > 0 and rate:
            figures["usd_per_million_tokens"] = usd_per_million_tokens(rate, devices, tps)
        if tps > 0 and owned is not None:
            figures["usd_per_million_tokens_owned"] = usd_per_million_tokens(
                owned.usd_per_hour, devices, tps)
        if load_tokens_per_s is not None:
            if not (load_tokens_per_s > 0 and math.isfinite(load_tokens_per_s)):
                raise InputError("--load must be a positive number of output tokens/s")
            figures["load_tokens_per_s"] = load_tokens_per_s
            if tps > 0:
                figures["load_utilization"] = load_tokens_per_s / tps
            if load_tokens_per_s > tps > 0:
                k = math.ceil(load_tokens_per_s / tps)
                notes.append(f"a load of {load_tokens_per_s:,.0f} tok/s is "
                             f"{load_tokens_per_s / tps:.2f}x this system's {tps:,.0f} tok/s: "
                             f"it needs {k} such systems")
                figures["systems_for_load"] = k
            elif rate:
                figures["usd_per_million_tokens_at_load"] = usd_per_million_tokens(
                    rate, devices, load_tokens_per_s)
    owned_d = None
    if owned is not None:
        owned_d = owned.to_dict(rent["usd_per_hour"] if rent else None)
    return CostReport(acc.id, devices, price, rent if rent != price else None, figures,
                      owned_d, tuple(notes))


def plan_money(cluster: Any, metrics: dict[str, Any], catalog: Catalog | None = None,
               ownership: str | Ownership | None = None) -> dict[str, Any]:
    """The money of a plan: the price in use with its source, the cluster's $/h, and renting
    vs owning (with ``ownership``, the catalog's --own, or the defaults for a part whose
    purchase price is published): the owned $/useful hour, the break-even utilization and
    months, and the run's $ or $/M tokens at the owned rate."""
    acc = cluster.accelerator
    own = as_ownership(ownership)
    if own is None and isinstance(catalog, WhatIfCatalog):
        own = catalog.whatif.ownership
    price = price_info(acc, catalog)
    rent_q = _rent_quote(acc, catalog)
    out: dict[str, Any] = {"price": price, "devices": cluster.devices,
                           "usd_per_hour_cluster": price["usd_per_hour"] * cluster.devices
                           if price else None, "ownership": None, "notes": []}
    if rent_q is not None and rent_q is not acc.price:
        out["rent"] = price_info(acc, catalog, rent_q)
    if own is None and acc.id not in purchase_prices():
        out["notes"].append(f"no published purchase price for {acc.id}: owning not compared "
                            "(give --own purchase=USD)")
        return out
    tdp = acc.tdp.value if acc.tdp else None
    try:
        c = owned_cost(acc.id, tdp, own or Ownership())
    except ValueError as e:
        out["notes"].append(str(e))
        return out
    rent = price_info(acc, catalog, rent_q) if rent_q is not None else None
    out["ownership"] = c.to_dict(rent["usd_per_hour"] if rent else None)
    t = metrics.get("time_to_train_s")
    if t:
        out["cost_to_train_usd_owned"] = t / 3600 * cluster.devices * c.usd_per_hour
    tps = metrics.get("tokens_per_s")
    if tps:
        out["usd_per_million_tokens_owned"] = usd_per_million_tokens(
            c.usd_per_hour, cluster.devices, tps)
    return out
