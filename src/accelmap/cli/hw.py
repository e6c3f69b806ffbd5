"""`accelmap hw ...`: browse and compare the hardware catalog."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap.cli.common import CatalogOpt, JsonOpt, console, emit_json, fmt, get_catalog

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelmap.catalog import Catalog
    from accelmap.hardware.schema import Accelerator, SystemPreset

app = typer.Typer(help="Browse and compare accelerators and system presets.", no_args_is_help=True)

# Compared when `accelmap hw compare` gets no names: the current training/serving flagships of
# each vendor that the catalog covers.
DEFAULT_COMPARE = ("h100-sxm5-80gb", "h200-sxm", "b200", "mi300x", "tpu-v5p", "tpu-v6e",
                   "gaudi3", "trainium2")

SORT_KEYS = ("id", "name", "class", "vendor", "year", "memory", "bandwidth", "fp64", "fp32",
             "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4", "tdp", "price")


def _pick(query: str, table: Mapping[str, Any], what: str, list_cmd: str, interactive: bool) -> Any:
    """Resolve a name; on a TTY an ambiguous name asks which, elsewhere it is an error."""
    from accelmap.errors import AmbiguousNameError
    from accelmap.lookup import resolve

    try:
        return resolve(query, table, what, list_cmd)
    except AmbiguousNameError as e:
        if not (interactive and sys.stdin.isatty() and sys.stdout.isatty()):
            raise
        for i, c in enumerate(e.candidates, 1):
            typer.echo(f"  {i}. {c}  ({table[c].name})")
        choice = typer.prompt(f"{query!r} matches several {what}s; which one", type=int)
        if not 1 <= choice <= len(e.candidates):
            raise typer.BadParameter(f"choose a number from 1 to {len(e.candidates)}") from None
        return table[e.candidates[choice - 1]]


def accelerator_row(acc: Accelerator) -> dict[str, Any]:
    """The JSON object `hw list` prints for one accelerator (SI units)."""
    return {
        "id": acc.id,
        "name": acc.name,
        "class": acc.device_class.value,
        "vendor": acc.vendor,
        "release_year": acc.release_year,
        "memory_bytes": acc.memory_bytes,
        "memory_kind": acc.device_memory.kind.value,
        "memory_bandwidth_bytes_per_s": acc.memory_bandwidth,
        "peak_flops": {d.value: acc.peak(d) for d in acc.dtypes},
        "tdp_w": acc.tdp.value if acc.tdp else None,
        "price_usd_per_hour": acc.price.usd_per_hour.value if acc.price else None,
    }


def _sort_value(acc: Accelerator, key: str) -> Any:
    from accelmap.hardware.schema import DeviceClass
    from accelmap.units import DType

    simple = {
        "id": acc.id,
        "name": acc.name.lower(),
        "class": list(DeviceClass).index(acc.device_class),
        "vendor": acc.vendor.lower(),
        "year": acc.release_year,
        "memory": acc.memory_bytes,
        "bandwidth": acc.memory_bandwidth,
        "tdp": acc.tdp.value if acc.tdp else None,
        "price": acc.price.usd_per_hour.value if acc.price else None,
    }
    if key in simple:
        return simple[key]
    return acc.peak(DType(key))


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
    sort: Annotated[str, typer.Option(help=f"Sort column: {', '.join(SORT_KEYS)}.")] = "class",
    desc: Annotated[bool, typer.Option("--desc", help="Sort descending.")] = False,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List accelerators, filtered and sorted.

    Examples:
      accelmap hw list --class gpu --min-memory 80GB --sort bf16 --desc
      accelmap hw list --vendor google --json
    """
    from accelmap.errors import InputError
    from accelmap.hardware.schema import DeviceClass
    from accelmap.units import Dimension, parse_quantity

    cat = get_catalog(catalog)
    accs = list(cat.accelerators.values())
    if device_class is not None:
        try:
            wanted = DeviceClass(device_class.lower())
        except ValueError:
            raise InputError(f"unknown class {device_class!r}; use one of "
                             f"{', '.join(c.value for c in DeviceClass)}") from None
        accs = [a for a in accs if a.device_class == wanted]
    if vendor:
        accs = [a for a in accs if vendor.lower() in a.vendor.lower()]
    if min_memory:
        floor = parse_quantity(min_memory, Dimension.BYTES, require_unit=True)
        accs = [a for a in accs if a.memory_bytes >= floor]
    key = sort.lower()
    if key not in SORT_KEYS:
        raise InputError(f"cannot sort by {sort!r}; use one of {', '.join(SORT_KEYS)}")
    present = [a for a in accs if _sort_value(a, key) is not None]
    missing = sorted((a for a in accs if _sort_value(a, key) is None), key=lambda a: a.id)
    present.sort(key=lambda a: (_sort_value(a, key), a.vendor.lower(), a.id), reverse=desc)
    accs = present + missing  # devices without the sorted figure always go last

    if json_out:
        emit_json([accelerator_row(a) for a in accs])
        return
    from rich.table import Table

    from accelmap.hardware.derived import headline_dtype

    table = Table(title=f"{len(accs)} accelerators (dense peaks, per device)", show_lines=False)
    for col, justify in (("id", "left"), ("class", "left"), ("vendor", "left"),
                         ("memory", "right"), ("bandwidth", "right"), ("16-bit peak", "right"),
                         ("fp8/int8", "right"), ("TDP", "right"), ("$/h", "right"),
                         ("year", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    from accelmap.units import DType

    for a in accs:
        head = headline_dtype(a)
        sixteen = a.peak(DType.BF16) or a.peak(DType.FP16)
        eight = a.peak(DType.FP8)
        int8 = eight is None and a.peak(DType.INT8) is not None
        eight = eight or a.peak(DType.INT8)
        table.add_row(
            a.id, a.device_class.value, a.vendor,
            f"{fmt(a.memory_bytes, 'bytes')} {a.device_memory.kind.value}",
            fmt(a.memory_bandwidth, "bandwidth"),
            fmt(sixteen, "flops") if sixteen else f"({head.value if head else '-'})",
            fmt(eight, "flops", integer_ops=int8),
            fmt(a.tdp.value if a.tdp else None, "power"),
            f"{a.price.usd_per_hour.value:.2f}" if a.price else "-",
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
    from accelmap.errors import NotFoundError

    cat = get_catalog(catalog)
    try:
        acc = _pick(name, cat.accelerators, "accelerator", "accelmap hw list", not json_out)
    except NotFoundError:
        from accelmap.lookup import find

        if find(name, cat.systems):
            _show_system(cat, _pick(name, cat.systems, "system", "accelmap hw systems",
                                    not json_out), json_out)
            return
        raise
    _show_accelerator(cat, acc, json_out)


def _sources_of(cat: Catalog, ids: set[str], local: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for sid in sorted(ids):
        src = cat.source(sid, local)
        out[sid] = src.model_dump(mode="json") if src else None
    return out


def _show_accelerator(cat: Catalog, acc: Accelerator, json_out: bool) -> None:
    from accelmap.catalog import EntryKind
    from accelmap.hardware.derived import derive

    d = derive(acc)
    if json_out:
        data = acc.model_dump(mode="json", by_alias=True, exclude={"sources"})
        data["scope"] = {"peaks": "per device, dense", "memory": "per device",
                         "links.bandwidth_per_direction": "per link, per direction"}
        data["derived"] = {
            "ridge_flop_per_byte": {k.value: v for k, v in d.ridge_flop_per_byte.items()},
            "bytes_per_flop": d.bytes_per_flop,
            "memory_bytes_per_usd_hour": d.memory_bytes_per_usd_hour,
            "flops_per_watt": d.flops_per_watt,
        }
        data["sources"] = _sources_of(cat, acc.cited_ids(), acc.sources)
        data["origin"] = cat.origins.get((EntryKind.ACCELERATOR, acc.id))
        emit_json(data)
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
    if acc.tdp:
        t.add_row("TDP", acc.tdp.fmt(), acc.tdp.scope.value, ", ".join(acc.tdp.source),
                  acc.tdp.note or "")
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
    for dtype, ridge in d.ridge_flop_per_byte.items():
        t.add_row(f"ridge point {dtype.value}", f"{ridge:.0f} FLOP/B", "derived", "", "")
    con.print(t)
    _print_doubts_and_sources(cat, acc.doubts, acc.cited_ids(), acc.sources)


def _print_doubts_and_sources(cat: Catalog, doubts: tuple[str, ...], ids: set[str],
                              local: Mapping[str, Any]) -> None:
    con = console()
    if doubts:
        con.print("[bold]Doubts[/bold]")
        for doubt in doubts:
            con.print(f"  - {doubt}")
    con.print("[bold]Sources[/bold]")
    for sid, src in _sources_of(cat, ids, local).items():
        if src:
            con.print(f"  {sid}: {src['title']}" + (f" <{src['url']}>" if src.get("url") else ""),
                      highlight=False)


def _show_system(cat: Catalog, sys_: SystemPreset, json_out: bool) -> None:
    if json_out:
        data = sys_.model_dump(mode="json", exclude={"sources"})
        data["devices"] = sys_.devices
        data["sources"] = _sources_of(cat, sys_.cited_ids(), sys_.sources)
        emit_json(data)
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
    _print_doubts_and_sources(cat, sys_.doubts, sys_.cited_ids(), sys_.sources)


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
    queries = names or [n for n in DEFAULT_COMPARE if n in cat.accelerators]
    accs = [_pick(q, cat.accelerators, "accelerator", "accelmap hw list", not json_out)
            for q in queries]
    if json_out:
        emit_json({"devices": [compare_row(a) for a in accs]})
        return
    _print_compare(accs)


def compare_row(acc: Accelerator) -> dict[str, Any]:
    from accelmap.hardware.derived import derive
    from accelmap.hardware.schema import LinkRole

    d = derive(acc)
    row = accelerator_row(acc)
    row.update({
        "ridge_flop_per_byte": {k.value: v for k, v in d.ridge_flop_per_byte.items()},
        "bytes_per_flop": d.bytes_per_flop,
        "headline_dtype": d.headline.value if d.headline else None,
        "memory_bytes_per_usd_hour": d.memory_bytes_per_usd_hour,
        "flops_per_watt": d.flops_per_watt,
        "flops_per_usd_hour": d.flops_per_usd_hour,
        "scale_up_bandwidth_per_direction": acc.bandwidth_per_direction(LinkRole.SCALE_UP),
        "scale_up_domain": acc.scale_up_domain.value if acc.scale_up_domain else None,
    })
    return row


def _print_compare(accs: list[Accelerator]) -> None:
    from rich.table import Table

    from accelmap.units import DType

    rows = [compare_row(a) for a in accs]
    t = Table(title="Accelerators side by side (dense peaks; per device; datasheet figures)")
    t.add_column("figure")
    for a in accs:
        t.add_column(a.id, justify="right")

    def line(label: str, values: list[str]) -> None:
        t.add_row(label, *values)

    line("vendor / class", [f"{a.vendor} / {a.device_class.value}" for a in accs])
    line("memory", [f"{fmt(r['memory_bytes'], 'bytes')} {r['memory_kind']}" for r in rows])
    line("memory bandwidth", [fmt(r["memory_bandwidth_bytes_per_s"], "bandwidth") for r in rows])
    dtypes = [d for d in DType if any(a.peak(d) for a in accs)]
    for dt in dtypes:
        line(f"peak {dt.value}", [fmt(a.peak(dt), "flops", integer_ops=dt.is_integer)
                                  for a in accs])
    for dt in dtypes:
        vals = [r["ridge_flop_per_byte"].get(dt.value) for r in rows]
        line(f"ridge {dt.value} (FLOP/B)", [f"{v:.0f}" if v else "-" for v in vals])
    line("bytes per FLOP (16-bit)", [f"{r['bytes_per_flop']:.4f}" if r["bytes_per_flop"] else "-"
                                     for r in rows])
    line("scale-up BW / dir", [fmt(r["scale_up_bandwidth_per_direction"] or None, "bandwidth")
                               for r in rows])
    line("scale-up domain", [str(r["scale_up_domain"] or "-") for r in rows])
    line("TDP", [fmt(r["tdp_w"], "power") for r in rows])
    line("TFLOP/s per W (16-bit)", [f"{r['flops_per_watt'] / 1e12:.2f}" if r["flops_per_watt"]
                                    else "-" for r in rows])
    line("price $/device-h", [f"{r['price_usd_per_hour']:.2f}" if r["price_usd_per_hour"]
                              else "-" for r in rows])
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
    cat = get_catalog(catalog)
    systems = sorted(cat.systems.values(), key=lambda s: s.id)
    if json_out:
        emit_json([{
            "id": s.id, "name": s.name, "accelerator": s.accelerator, "devices": s.devices,
            "devices_per_node": s.devices_per_node, "nodes": s.nodes,
            "torus": list(s.torus) if s.torus else None,
            "tiers": [{"name": t.name, "role": t.role.value, "topology": t.topology.value,
                       "domain_size": t.domain_size,
                       "bandwidth_per_direction": t.bandwidth_per_direction.value}
                      for t in s.tiers],
        } for s in systems])
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
