"""Cost tables: the price in use with its date and source, $/M tokens, a run's $, owning."""

from __future__ import annotations

from typing import Any

from accelmap.cli.common import console, fmt


def _usd(v: float | None, per: str = "") -> str:
    if v is None:
        return "-"
    text = f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.3g}" if abs(v) < 1 else f"${v:,.2f}"
    return text + per


def _quote(p: dict[str, Any] | None) -> str:
    if p is None:  # the estimate table already says 'not published' once
        return "no catalog quote (give --price USD/h, or --own)"
    src = "; ".join(s.split(":")[0] for s in p["sources"])
    return f"{_usd(p['usd_per_hour'], '/h')} per device ({p['market']}, {p['date']}; {src})"


def print_cost(d: dict[str, Any]) -> None:
    """``api.cost_report(...).to_dict()`` as a table."""
    from rich.table import Table

    t = Table(title="Cost")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row("price in use", _quote(d["price"]))
    if d.get("rent"):
        t.add_row("renting (catalog quote)", _quote(d["rent"]))
    if d.get("usd_per_hour_system") is not None:
        t.add_row(f"system ({d['devices']} devices)", _usd(d["usd_per_hour_system"], "/h"))
    if d.get("usd_per_million_tokens") is not None:
        t.add_row("$ per million output tokens" if "time_to_train_s" not in d
                  else "$ per million training tokens",
                  _usd(d["usd_per_million_tokens"]))
    if d.get("usd_per_million_tokens_at_load") is not None:
        t.add_row(f"$ per million tokens at {d['load_tokens_per_s']:,.0f} tok/s "
                  f"({d['load_utilization']:.0%} of capacity)",
                  _usd(d["usd_per_million_tokens_at_load"]))
    if d.get("time_to_train_s") is not None:
        t.add_row("time to train", fmt(d["time_to_train_s"], "time"))
        t.add_row("device-hours", f"{d['device_hours']:,.0f}")
        t.add_row("cost to train (price in use)", _usd(d.get("cost_to_train_usd")))
    own = d.get("ownership")
    if own:
        u, fixed = own["utilization"], own["capex_per_hour"] + own["opex_per_hour"]
        t.add_row(f"owning: $ per useful device-hour (utilization {own['utilization']:.0%})",
                  _usd(own["usd_per_useful_hour"], "/h") + f" (capex and opex "
                  f"{_usd(fixed / u)} + energy {_usd(own['usd_per_useful_hour'] - fixed / u)})")
        if d.get("usd_per_million_tokens_owned") is not None:
            t.add_row("owning: $ per million output tokens",
                      _usd(d["usd_per_million_tokens_owned"]))
        if d.get("cost_to_train_usd_owned") is not None:
            t.add_row("owning: cost to train", _usd(d["cost_to_train_usd_owned"]))
        if own.get("rent_usd_per_hour") is not None:
            u, months = own.get("breakeven_utilization"), own.get("breakeven_months")
            t.add_row(f"rent at {_usd(own['rent_usd_per_hour'], '/h')} vs own: break-even",
                      "never (energy alone costs more than the rent)" if u is None else
                      f"owning wins above {u:.0%} utilization; pays back after "
                      f"{months:,.1f} months of busy use" if u <= 1 else
                      f"renting wins even at full use (needs {u:.0%})")
    console().print(t)
    for n in d.get("notes", []):
        if not n.startswith("not published"):
            console().print(f"note: {n}", highlight=False)
    if own:
        for k, v in own["sources"].items():
            console().print(f"assumption: owning {k}: {v}", highlight=False)


def print_money(d: dict[str, Any]) -> None:
    """``api.costs.plan_money(...)``: the price in use, the cluster's $/h, renting vs owning."""
    con = console()
    con.print(f"price in use: {_quote(d['price'])}"
              + (f"; {d['devices']} devices {_usd(d['usd_per_hour_cluster'], '/h')}"
                 if d.get("usd_per_hour_cluster") else ""), highlight=False)
    if d.get("rent"):
        con.print(f"renting (catalog quote): {_quote(d['rent'])}", highlight=False)
    own = d.get("ownership")
    if own:
        line = (f"owning: {_usd(own['usd_per_useful_hour'], '/h')} per useful device-hour at "
                f"{own['utilization']:.0%} utilization")
        if d.get("cost_to_train_usd_owned") is not None:
            line += f"; cost to train owned {_usd(d['cost_to_train_usd_owned'])}"
        elif d.get("usd_per_million_tokens_owned") is not None:
            line += f"; {_usd(d['usd_per_million_tokens_owned'])} per million tokens owned"
        con.print(line, highlight=False)
        u = own.get("breakeven_utilization")
        if own.get("rent_usd_per_hour") is not None:
            con.print("rent vs own: " + (
                "renting wins (the energy alone costs more than the rent)" if u is None else
                f"owning wins above {u:.0%} utilization and pays back after "
                f"{own['breakeven_months']:,.1f} months of busy use" if u <= 1 else
                f"renting wins even at full use (owning needs {u:.0%})"), highlight=False)
    for n in d.get("notes", []):
        con.print(f"note: {n}", highlight=False)


def print_energy(d: dict[str, Any]) -> None:
    """``api.energy_report(...).to_dict()``: modelled power and energy beside the bounds."""
    from rich.table import Table

    if "energy_j_per_token" not in d:
        return
    t = Table(title="Energy (modelled: ops x pJ/FLOP and pJ/byte, links, static power)")
    t.add_column("figure")
    t.add_column("value", justify="right")
    tdp = f"{d['tdp_w']:,.0f} W" + (" derived" if d["tdp_derived"] else "")
    t.add_row("power per device (model) vs TDP",
              f"{d['power_w_model']:,.0f} W of {tdp} ({d['power_over_tdp']:.0%})"
              + (" [red]power-limited[/red]" if d["power_limited"] else ""))
    if d.get("energy_j_per_token") is not None:
        t.add_row("energy per token (model)", f"{d['energy_j_per_token']:.3g} J")
    lo, hi = d.get("energy_j_per_token_ops"), d.get("energy_j_per_token_tdp")
    t.add_row("bounds: ops+bytes only / TDP x time",
              f"{lo:.3g} J / {hi:.3g} J" if lo is not None and hi is not None else "-")
    if d.get("energy_j_per_step") is not None:
        t.add_row("energy per step", f"{d['energy_j_per_step'] / 1e3:,.1f} kJ")
    if d.get("run_mwh") is not None:
        t.add_row(f"training run (PUE {d['pue']:g})",
                  f"{d['run_mwh']:,.1f} MWh, {d['run_t_co2e']:,.1f} t CO2e at "
                  f"{d['grid_kg_per_kwh']:g} kg/kWh, {d['run_device_hours']:,.0f} device-h")
    if d.get("kwh_per_million_tokens") is not None:
        t.add_row(f"per million tokens (PUE {d['pue']:g})",
                  f"{d['kwh_per_million_tokens']:.3g} kWh, "
                  f"{d['kg_co2e_per_million_tokens']:.3g} kg CO2e at {d['grid_kg_per_kwh']:g} "
                  "kg/kWh")
    b = d["breakdown_j"]
    tot = sum(b.values()) or 1.0
    t.add_row("where it goes", ", ".join(f"{k} {v / tot:.0%}" for k, v in b.items()))
    console().print(t)
    for n in d.get("notes", [])[:2]:
        console().print(f"assumption: {n}", highlight=False)
