"""`accelmap hw ...`: browse and compare the hardware catalog."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap import api
from accelmap.cli.common import CatalogOpt, JsonOpt, console, emit_json, fmt, get_catalog

if TYPE_CHECKING:
    from accelmap.api import Accelerator, Catalog
    from accelmap.api.hardware import Chooser, SpecComparison, SystemPreset

app = typer.Typer(help="Browse and compare accelerators and system presets.", no_args_is_help=True)


def _chooser(interactive: bool) -> Chooser:
    """On a terminal, an ambiguous name asks which one; elsewhere it stays an error."""

    def choose(query: str, what: str, entries: list[Any]) -> Any:
        if not (interactive and sys.stdin.isatty() and sys.stdout.isatty()):
            return None
        for i, entry in enumerate(entries, 1):
            typer.echo(f"  {i}. {entry.id}  ({entry.name})")
        choice = typer.prompt(f"{query!r} matches several {what}s; which one", type=int)
        if not 1 <= choice <= len(entries):
            raise typer.BadParameter(f"choose a number from 1 to {len(entries)}")
        return entries[choice - 1]

    return choose


@app.command("list")
def list_cmd(
    device_class: Annotated[
        str | None,
        typer.Option("--class", help="gpu, tpu, asic, sram-machine, fpga, edge-npu or cpu."),
    ] = None,
    vendor: Annotated[str | None, typer.Option(help="Vendor name (case-insensitive part).")] = None,
    min_memory: Annotated[
        str | None, typer.Option(help="Only devices with at least this memory, e.g. '80GB'.")
    ] = None,
    sort: Annotated[str, typer.Option(
        help=f"Sort column: {', '.join(api.SORT_KEYS)}.")] = "class",
    desc: Annotated[bool, typer.Option("--desc", help="Sort descending.")] = False,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List accelerators, filtered and sorted.

    Examples:
      accelmap hw list --class gpu --min-memory 80GB --sort bf16 --desc
      accelmap hw list --vendor google --json
    """
    accs = api.list_accelerators(device_class, vendor, min_memory, sort, desc,
                                 get_catalog(catalog))
    if json_out:
        emit_json([api.hardware.accelerator_row(a) for a in accs])
        return
    from rich.table import Table

    table = Table(title=f"{len(accs)} accelerators (dense peaks, per device)", show_lines=False)
    for col, justify in (("id", "left"), ("class", "left"), ("vendor", "left"),
                         ("memory", "right"), ("bandwidth", "right"), ("16-bit peak", "right"),
                         ("fp8/int8", "right"), ("TDP", "right"), ("$/h", "right"),
                         ("year", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for a in accs:
        d = api.hardware.derived_figures(a)
        table.add_row(
            a.id, a.device_class.value, a.vendor,
            f"{fmt(a.memory_bytes, 'bytes')} {a.device_memory.kind.value}",
            fmt(a.memory_bandwidth, "bandwidth"),
            fmt(d.peak_16bit, "flops") if d.peak_16bit
            else f"({d.headline.value if d.headline else '-'})",
            fmt(d.peak_8bit, "flops", integer_ops=d.peak_8bit_is_integer),
            fmt(a.tdp.value, "power") if a.tdp else api.hardware.NOT_PUBLISHED,
            f"{a.price.usd_per_hour.value:.2f}" if a.price else api.hardware.NOT_PUBLISHED,
            str(a.release_year),
        )
    console().print(table)


@app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(help="Accelerator or system id, alias or part of a name.")],
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show every field of one accelerator (or system preset) with its sources.

    Examples:
      accelmap hw show h100-sxm5-80gb
      accelmap hw show mi300x --json
      accelmap hw show dgx-h100
    """
    cat = get_catalog(catalog)
    entry = api.find_hardware(name, cat, _chooser(not json_out))
    if isinstance(entry, api.Accelerator):
        _show_accelerator(cat, entry, json_out)
    else:
        _show_system(cat, entry, json_out)


def _show_accelerator(cat: Catalog, acc: Accelerator, json_out: bool) -> None:
    if json_out:
        emit_json(api.hardware.accelerator_details(acc, cat))
        return
    from rich.table import Table

    con = console()
    con.print(f"[bold]{acc.name}[/bold]  ({acc.id})")
    con.print(f"{acc.vendor} · {acc.device_class.value} · {acc.form_factor or '-'} · "
              f"{acc.release_year}" + (f" · aliases: {', '.join(acc.aliases)}" if acc.aliases
                                       else ""))
    if acc.description:
        con.print(acc.description)

    t = Table(title="Dense peak compute, per device")
    for c in ("unit", "dtype", "peak", "source", "note"):
        t.add_column(c)
    for unit, table in (("matrix", acc.matrix), ("vector", acc.vector)):
        for dtype, v in table.items():
            t.add_row(unit, dtype.value, v.fmt(), ", ".join(v.source), v.note or "")
    con.print(t)

    t = Table(title="Memory, per device")
    for c in ("level", "kind", "role", "capacity", "bandwidth", "source", "note"):
        t.add_column(c)
    for m in acc.memory:
        srcs = sorted(set(m.capacity.source) | set(m.bandwidth.source if m.bandwidth else ()))
        notes = "; ".join(n for n in (m.capacity.note, m.bandwidth.note if m.bandwidth else None)
                          if n)
        t.add_row(m.name, m.kind.value, m.role.value, m.capacity.fmt(),
                  m.bandwidth.fmt() if m.bandwidth else "-", ", ".join(srcs), notes)
    con.print(t)

    t = Table(title="Other figures")
    for c in ("figure", "value", "scope", "source", "note"):
        t.add_column(c)
    cu = acc.compute_units
    if cu:
        t.add_row("compute units", cu.count.fmt(), "per device", ", ".join(cu.count.source),
                  cu.count.note or "")
        if cu.clock:
            t.add_row("clock", cu.clock.fmt(), "per device", ", ".join(cu.clock.source),
                      cu.clock.note or "")
        if cu.matrix_tile:
            t.add_row("matrix tile", " x ".join(map(str, cu.matrix_tile)), "per unit", "", "")
    missing = api.hardware.unpublished(acc)
    if acc.tdp:
        t.add_row("TDP", acc.tdp.fmt(), acc.tdp.scope.value, ", ".join(acc.tdp.source),
                  acc.tdp.note or "")
    else:
        t.add_row("TDP", api.hardware.NOT_PUBLISHED, "per device", "", missing["tdp_w"])
    for link in acc.links:
        bw = link.bandwidth_per_direction
        t.add_row(f"link: {link.name} ({link.role.value})",
                  f"{link.count} x {bw.fmt()} = {fmt(link.aggregate_per_direction, 'bandwidth')}",
                  bw.scope.value, ", ".join(bw.source), bw.note or "")
    if acc.scale_up_domain:
        s = acc.scale_up_domain
        t.add_row("scale-up domain", s.fmt(), "per system", ", ".join(s.source), s.note or "")
    if acc.price:
        p = acc.price
        t.add_row("price", f"{p.usd_per_hour.fmt()} ({p.market}, {p.date})",
                  p.usd_per_hour.scope.value, ", ".join(p.usd_per_hour.source),
                  p.usd_per_hour.note or "")
    else:
        t.add_row("price", api.hardware.NOT_PUBLISHED, "per device-hour", "",
                  missing["price_usd_per_hour"])
    for dtype, ridge in api.hardware.derived_figures(acc).ridge_flop_per_byte.items():
        t.add_row(f"ridge point {dtype.value}", f"{ridge:.0f} FLOP/B", "derived", "", "")
    con.print(t)
    _print_plausibility(api.hardware.accelerator_details(acc, cat)["plausibility"])
    _print_doubts_and_sources(cat, acc)


def _print_plausibility(findings: list[dict[str, Any]]) -> None:
    """Physical bounds the part breaks: unexplained ones as warnings, explained ones noted."""
    if not findings:
        return
    con = console()
    con.print("[bold]Plausibility[/bold]")
    for f in findings:
        mark = "explained" if f["explained"] else "warning"
        con.print(f"  {mark}: implausible {f['message']}", markup=False, highlight=False)


def _print_doubts_and_sources(cat: Catalog, entry: Accelerator | SystemPreset) -> None:
    con = console()
    if entry.doubts:
        con.print("[bold]Doubts[/bold]")
        for doubt in entry.doubts:
            con.print(f"  - {doubt}")
    con.print("[bold]Sources[/bold]")
    for sid, src in api.hardware.sources(entry, cat).items():
        if src:
            con.print(f"  {sid}: {src['title']}" + (f" <{src['url']}>" if src.get("url") else ""),
                      highlight=False)


def _show_system(cat: Catalog, sys_: SystemPreset, json_out: bool) -> None:
    if json_out:
        emit_json(api.hardware.system_details(sys_, cat))
        return
    from rich.table import Table

    con = console()
    acc = cat.accelerators[sys_.accelerator]
    con.print(f"[bold]{sys_.name}[/bold]  ({sys_.id})")
    con.print(f"{sys_.nodes} node(s) x {sys_.devices_per_node} x {acc.name} = {sys_.devices} "
              "devices" + (f"; torus {' x '.join(map(str, sys_.torus))}" if sys_.torus else ""))
    if sys_.description:
        con.print(sys_.description)
    t = Table(title="Network tiers (bandwidth per device, per direction)")
    for c in ("tier", "role", "topology", "domain", "bandwidth", "latency", "in-network", "source"):
        t.add_column(c)
    for tier in sys_.tiers:
        bw = tier.bandwidth_per_direction
        t.add_row(tier.name, tier.role.value, tier.topology.value, str(tier.domain_size),
                  bw.fmt(), tier.latency.fmt() if tier.latency else "-",
                  "yes" if tier.in_network_reduction else "no", ", ".join(bw.source))
    con.print(t)
    _print_doubts_and_sources(cat, sys_)


@app.command("compare")
def compare_cmd(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Accelerators to compare (default: this generation's flagships)."),
    ] = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Compare accelerators side by side, with derived figures.

    Derived: ridge point per dtype (FLOP per byte of memory traffic), bytes per FLOP, memory
    per dollar-hour, FLOP/s per watt and per dollar-hour.

    Examples:
      accelmap hw compare
      accelmap hw compare h100-sxm5-80gb mi300x tpu-v5p --json
    """
    cat = get_catalog(catalog)
    choose = _chooser(not json_out)
    accs = [api.find_accelerator(q, cat, choose) for q in names] if names else None
    comparison = api.compare_specs(accs, cat)
    if json_out:
        emit_json(comparison.to_dict())
        return
    _print_compare(comparison)


def _print_compare(comparison: SpecComparison) -> None:
    from rich.table import Table

    accs, rows = comparison.devices, comparison.rows
    t = Table(title="Accelerators side by side (dense peaks; per device; datasheet figures)")
    t.add_column("figure")
    for a in accs:
        t.add_column(a.id, justify="right")

    def line(label: str, values: list[str]) -> None:
        t.add_row(label, *values)

    line("vendor / class", [f"{a.vendor} / {a.device_class.value}" for a in accs])
    line("memory", [f"{fmt(r['memory_bytes'], 'bytes')} {r['memory_kind']}" for r in rows])
    line("memory bandwidth", [fmt(r["memory_bandwidth_bytes_per_s"], "bandwidth") for r in rows])
    for dt in comparison.dtypes:
        line(f"peak {dt.value}", [fmt(a.peak(dt), "flops", integer_ops=dt.is_integer)
                                  for a in accs])
    for dt in comparison.dtypes:
        vals = [r["ridge_flop_per_byte"].get(dt.value) for r in rows]
        line(f"ridge {dt.value} (FLOP/B)", [f"{v:.0f}" if v else "-" for v in vals])
    line("bytes per FLOP (16-bit)", [f"{r['bytes_per_flop']:.4f}" if r["bytes_per_flop"] else "-"
                                     for r in rows])
    line("scale-up BW / dir", [fmt(r["scale_up_bandwidth_per_direction"] or None, "bandwidth")
                               for r in rows])
    line("scale-up domain", [str(r["scale_up_domain"] or "-") for r in rows])
    line("TDP", [fmt(r["tdp_w"], "power") if r["tdp_w"] else api.hardware.NOT_PUBLISHED
                 for r in rows])
    line("TFLOP/s per W (16-bit)", [f"{r['flops_per_watt'] / 1e12:.2f}" if r["flops_per_watt"]
                                    else "-" for r in rows])
    line("price $/device-h", [f"{r['price_usd_per_hour']:.2f}" if r["price_usd_per_hour"]
                              else api.hardware.NOT_PUBLISHED for r in rows])
    line("GB per $/h", [f"{r['memory_bytes_per_usd_hour'] / 1e9:.1f}"
                        if r["memory_bytes_per_usd_hour"] else "-" for r in rows])
    line("TFLOP/s per $/h", [f"{r['flops_per_usd_hour'] / 1e12:.0f}" if r["flops_per_usd_hour"]
                             else "-" for r in rows])
    console().print(t)
    console().print("Datasheet ratios, not achieved throughput; `accelmap hw show ID` lists "
                    "every source and doubt.")


@app.command("systems")
def systems_cmd(catalog: CatalogOpt = None, json_out: JsonOpt = False) -> None:
    """List system presets (nodes, pods, slices) with their network tiers.

    Example:
      accelmap hw systems --json
    """
    systems = api.list_systems(get_catalog(catalog))
    if json_out:
        emit_json([api.hardware.system_row(s) for s in systems])
        return
    from rich.table import Table

    t = Table(title=f"{len(systems)} system presets")
    for c in ("id", "accelerator", "devices", "shape", "scale-up / dir", "scale-out / dir"):
        t.add_column(c)
    for s in systems:
        up = [x for x in s.tiers if x.role == "scale-up"]
        out = [x for x in s.tiers if x.role == "scale-out"]
        shape = (" x ".join(map(str, s.torus)) if s.torus
                 else f"{s.nodes} x {s.devices_per_node}")
        t.add_row(s.id, s.accelerator, str(s.devices), shape,
                  up[0].bandwidth_per_direction.fmt() if up else "-",
                  out[0].bandwidth_per_direction.fmt() if out else "-")
    console().print(t)
