"""Money: renting vs owning, cost per useful device-hour, $/M tokens at a load, break-evens.

Owning one device costs, per hour it does useful work (utilization u, the share of wall-clock
hours it is busy):

    capex/h  = (purchase + other capex) / (years x 8766 h)          paid every hour, busy or not
    energy/h = power x PUE x $/kWh                                   while busy
             + idle power x PUE x $/kWh x (1 - u) / u                idle hours, per busy hour
    opex/h   = opex per year / 8766 h
    owned per useful hour = (capex/h + opex/h) / u + energy/h

Renting costs the quoted price per device-hour (paid for every hour rented). Owning is the
cheaper way to pay when its cost per useful hour is below the rent: the break-even utilization
is the u at which they are equal, and the break-even time the hours of busy use after which
the purchase has paid for itself against renting.

Serving: $/M tokens = devices x price per hour / tokens per hour. At a load below the
system's capacity the devices are still paid for: $/M tokens = devices x price / (load tokens
per hour). Two accelerators break even on $/M tokens when price_B = price_A x (tokens/s per
device of B) / (tokens/s per device of A).

Defaults, each a parameter (``Ownership``): $0.08/kWh (EIA, average US industrial electricity
price 2024, Electric Power Monthly table 5.6.A: 8.1 cents/kWh), PUE 1.56 (Uptime Institute
Global Data Center Survey 2024, the industry average; hyperscale AI halls run 1.1-1.2), 5
years (the straight-line server life Amazon and Meta state in their 2024 10-K filings: 5 and
5.5 years), utilization 1.0 (every hour busy: the floor of the owned cost). Purchase prices
are not catalog figures: ``data/purchase_prices.yaml`` holds the few that are published, each
saying what it covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from accelmap.errors import InputError

HOURS_PER_YEAR = 8766.0  # 365.25 days
USD_PER_KWH = 0.08
USD_PER_KWH_SOURCE = "EIA Electric Power Monthly table 5.6.A: US industrial average 2024, 8.1 c/kWh"
PUE = 1.56
PUE_SOURCE = "Uptime Institute Global Data Center Survey 2024: average PUE 1.56"
YEARS = 5.0
YEARS_SOURCE = "server depreciation life in 2024 10-K filings: Amazon 5 years, Meta 5.5"


@dataclass(frozen=True)
class PurchaseQuote:
    usd: float  # midpoint of the published range
    low: float
    high: float
    covers: str
    date: str
    source: str
    power_w: float | None = None  # wall power per device of what the price covers


@lru_cache(maxsize=1)
def purchase_prices() -> dict[str, PurchaseQuote]:
    from importlib import resources

    import yaml

    data = yaml.safe_load(resources.files("accelmap").joinpath(
        "cost/data/purchase_prices.yaml").read_text(encoding="utf-8"))
    return {k: PurchaseQuote((v["usd"][0] + v["usd"][1]) / 2, v["usd"][0], v["usd"][1],
                             v["covers"], str(v["date"]), v["source"], v.get("power_w"))
            for k, v in data.items()}


@dataclass(frozen=True)
class Ownership:
    """What owning one device costs; None fields take the defaults above or the part's own
    figures (purchase from purchase_prices.yaml, power from its server or its TDP)."""

    purchase_usd: float | None = None
    power_w: float | None = None  # while busy, at the wall, per device
    idle_power_w: float | None = None  # while idle (default: idle_fraction x power)
    usd_per_kwh: float = USD_PER_KWH
    pue: float = PUE
    years: float = YEARS
    utilization: float = 1.0
    other_capex_usd: float = 0.0  # its share of racks, network, facility
    opex_usd_per_year: float = 0.0  # colocation, staff, support per device

    def __post_init__(self) -> None:
        for name in ("usd_per_kwh", "pue", "years", "utilization"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.utilization > 1:
            raise ValueError("utilization is a fraction of hours, at most 1")


@dataclass(frozen=True)
class OwnedCost:
    """Owned cost per useful device-hour and its parts, with what each input came from."""

    usd_per_hour: float
    capex_per_hour: float  # per calendar hour
    energy_per_busy_hour: float
    energy_per_idle_hour: float
    opex_per_hour: float
    purchase_usd: float
    power_w: float
    utilization: float
    sources: dict[str, str] = field(default_factory=dict)

    def breakeven_utilization(self, rent: float) -> float | None:
        """The utilization above which owning beats renting at ``rent`` $/device-hour (None:
        never, the energy alone costs more than the rent); 1.0 or more: only at full use."""
        fixed = self.capex_per_hour + self.opex_per_hour
        margin = rent - self.energy_per_busy_hour
        if margin <= 0:
            return None
        # per calendar hour: fixed + busy u + idle (1 - u) = rent u (renting only busy hours)
        i = self.energy_per_idle_hour
        return (fixed + i) / (margin + i)

    def breakeven_hours(self, rent: float) -> float | None:
        """Busy hours after which buying has paid for itself against renting (None: never)."""
        margin = rent - self.energy_per_busy_hour - self.opex_per_hour
        return self.purchase_usd / margin if margin > 0 else None

    def to_dict(self, rent: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "usd_per_useful_hour": self.usd_per_hour, "capex_per_hour": self.capex_per_hour,
            "energy_per_busy_hour": self.energy_per_busy_hour,
            "energy_per_idle_hour": self.energy_per_idle_hour,
            "opex_per_hour": self.opex_per_hour, "purchase_usd": self.purchase_usd,
            "power_w": self.power_w, "utilization": self.utilization, "sources": self.sources}
        if rent is not None:
            u = self.breakeven_utilization(rent)
            h = self.breakeven_hours(rent)
            out.update(rent_usd_per_hour=rent, breakeven_utilization=u,
                       breakeven_months=h / (HOURS_PER_YEAR / 12) if h is not None else None,
                       cheaper="own" if self.usd_per_hour < rent else "rent")
        return out


# A device idles at a fraction of its busy power. NVIDIA H100 SXM idles near 70-100 W of 700 W;
# the fraction defaults to cost.energy's static share when the energy model names one.
IDLE_FRACTION = 0.15
IDLE_SOURCE = "idle at 15 % of busy power (H100 SXM: ~100 W idle of 700 W, nvidia-smi)"


def owned_cost(acc_id: str, tdp_w: float | None, own: Ownership) -> OwnedCost:
    """Cost per useful device-hour of owning ``acc_id``; ValueError naming what is missing."""
    quote = purchase_prices().get(acc_id)
    sources: dict[str, str] = {}
    if own.purchase_usd is not None:
        purchase = own.purchase_usd
        sources["purchase"] = "given"
    elif quote is not None:
        purchase = quote.usd
        sources["purchase"] = (f"${quote.low:,.0f}-{quote.high:,.0f} ({quote.covers}; "
                               f"{quote.date}): {quote.source}" if quote.low != quote.high else
                               f"${quote.usd:,.0f} ({quote.covers}; {quote.date}): "
                               f"{quote.source}")
    else:
        raise ValueError(f"no published purchase price for {acc_id}: give one (--own "
                         "purchase=30000)")
    if own.power_w is not None:
        power = own.power_w
        sources["power"] = "given"
    elif quote is not None and quote.power_w is not None and own.purchase_usd is None:
        power = quote.power_w
        sources["power"] = f"the server's wall power per device ({quote.source})"
    elif tdp_w is not None:
        power = tdp_w
        sources["power"] = "the device's TDP (no host share)"
    else:
        raise ValueError(f"{acc_id} has no TDP: give the power (--own power=700)")
    idle = own.idle_power_w if own.idle_power_w is not None else IDLE_FRACTION * power
    if own.idle_power_w is None:
        sources["idle"] = IDLE_SOURCE
    kwh = own.usd_per_kwh * own.pue / 1000.0
    sources.update(usd_per_kwh=USD_PER_KWH_SOURCE if own.usd_per_kwh == USD_PER_KWH
                   else "given", pue=PUE_SOURCE if own.pue == PUE else "given",
                   years=YEARS_SOURCE if own.years == YEARS else "given")
    u = own.utilization
    capex = (purchase + own.other_capex_usd) / (own.years * HOURS_PER_YEAR)
    opex = own.opex_usd_per_year / HOURS_PER_YEAR
    busy, idle_h = power * kwh, idle * kwh
    return OwnedCost((capex + opex) / u + busy + idle_h * (1 - u) / u, capex, busy, idle_h,
                     opex, purchase, power, u, sources)


def breakeven_price(price_a: float, tps_per_device_a: float, tps_per_device_b: float) -> float:
    """The price per device-hour at which B's $/M tokens equals A's."""
    return price_a * tps_per_device_b / tps_per_device_a


def parse_ownership(text: str) -> Ownership:
    """'purchase=30000,power=1275,kwh=0.08,pue=1.2,years=5,utilization=0.7,opex=1000,
    other=5000,idle=150' (every key optional)."""
    keys = {"purchase": "purchase_usd", "price": "purchase_usd", "power": "power_w",
            "idle": "idle_power_w", "kwh": "usd_per_kwh", "usd_per_kwh": "usd_per_kwh",
            "pue": "pue", "years": "years", "utilization": "utilization", "util": "utilization",
            "other": "other_capex_usd", "opex": "opex_usd_per_year"}
    args: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        k, _, v = part.partition("=")
        key = keys.get(k.strip().lower())
        if key is None or not v:
            raise ValueError(f"--own {part!r}: use {', '.join(sorted(set(keys)))} as key=value")
        num = v.strip().lower().replace("$", "").replace("usd", "").replace("w", "")
        mult = 1000.0 if num.endswith("k") else 1.0
        try:
            val = float(num.rstrip("k%")) * mult / (100.0 if num.endswith("%") else 1.0)
        except ValueError:
            raise ValueError(f"--own {part!r}: {v!r} is not a number") from None
        if not math.isfinite(val) or val < 0:
            raise ValueError(f"--own {part!r}: must be a non-negative number")
        args[key] = val
    return Ownership(**args)


def as_ownership(text: str | Ownership | None) -> Ownership | None:
    """'purchase=30000,kwh=0.1,pue=1.2,years=5,utilization=0.7' (keys optional), an Ownership,
    or None; a malformed text is one InputError line (``api.costs.ownership``)."""
    if text is None or isinstance(text, Ownership):
        return text
    try:
        return parse_ownership(text)
    except ValueError as e:
        raise InputError(str(e)) from None


def breakeven_rows(rows: list[dict[str, Any]], usd_key: str, tpsd_key: str,
                   price_key: str | None = None, id_key: str = "accelerator"
                   ) -> list[dict[str, Any]]:
    """Each row with ``breakeven_usd_per_h``: the price per device-hour at which it matches the
    cheapest row's $/M tokens (``usd_key``), from tokens/s per device (``tpsd_key``); the
    reference's price is ``price_key`` or follows from its $/M tokens. Rows without a speed
    are left as they are."""
    priced = [r for r in rows if r.get(usd_key) and r.get(tpsd_key)]
    if not priced:
        return rows
    ref = min(priced, key=lambda r: r[usd_key])
    ref_price = (ref.get(price_key) if price_key else None) or (
        ref[usd_key] * ref[tpsd_key] * 3600 / 1e6)
    return [{**r, "breakeven_usd_per_h": breakeven_price(ref_price, ref[tpsd_key], r[tpsd_key]),
             "breakeven_vs": ref[id_key]} if r.get(tpsd_key) else r for r in rows]
