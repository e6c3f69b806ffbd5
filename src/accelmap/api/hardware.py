"""Hardware: find, list, show and compare accelerators and system presets.

Names are forgiving (``accelmap.lookup``): a name that matches several entries raises
``AmbiguousNameError`` listing them, unless a ``choose`` callback picks one (the CLI asks on a
terminal). Rows are plain, JSON-ready dicts in SI units.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from accelmap.catalog import Catalog, EntryKind, load_catalog
from accelmap.errors import AmbiguousNameError, InputError, NotFoundError
from accelmap.hardware.derived import DerivedFigures, compared_dtypes, derive
from accelmap.hardware.listing import (
    DEFAULT_COMPARE,
    NOT_PUBLISHED,
    SORT_KEYS,
    select,
    unpublished,
)
from accelmap.hardware.schema import Accelerator, DeviceClass, LinkRole, SystemPreset
from accelmap.lookup import Named, find, resolve
from accelmap.units import Dimension, DType, parse_quantity

__all__ = ["DEFAULT_COMPARE", "NOT_PUBLISHED", "Chooser", "DerivedFigures",
           "DeviceClass", "SpecComparison", "SystemPreset", "accelerator_details",
           "accelerator_row", "compare_specs", "derived_figures", "find_accelerator",
           "find_hardware", "find_system", "list_accelerators", "list_systems", "sources",
           "spec_row", "system_details", "system_row", "unpublished"]

T = TypeVar("T", bound=Named)

# Picks one of several entries a name matched: (query, what, candidates) -> the entry, or None
# to leave the name ambiguous (an AmbiguousNameError).
Chooser = Callable[[str, str, list[Any]], Any]


def _cat(catalog: Catalog | None) -> Catalog:
    return catalog if catalog is not None else load_catalog()


def _resolve(query: str, table: Mapping[str, T], what: str, list_cmd: str,
             choose: Chooser | None) -> T:
    try:
        return resolve(query, table, what, list_cmd)
    except AmbiguousNameError as e:
        picked: T | None = (choose(query, what, [table[c] for c in e.candidates]) if choose
                             else None)
        if picked is None:
            raise
        return picked


# -- find ---------------------------------------------------------------------------------------
def find_accelerator(name: str, catalog: Catalog | None = None,
                     choose: Chooser | None = None) -> Accelerator:
    """One accelerator by id, alias or part of a name ("h100 sxm", "mi300x")."""
    return _resolve(name, _cat(catalog).accelerators, "accelerator", "accelmap hw list", choose)


def find_system(name: str, catalog: Catalog | None = None,
                choose: Chooser | None = None) -> SystemPreset:
    """One system preset (node, pod, slice) by id, alias or part of a name ("dgx-h100")."""
    return _resolve(name, _cat(catalog).systems, "system", "accelmap hw systems", choose)


def find_hardware(name: str, catalog: Catalog | None = None,
                  choose: Chooser | None = None) -> Accelerator | SystemPreset:
    """An accelerator, or a system preset when no accelerator matches ``name``."""
    cat = _cat(catalog)
    try:
        return find_accelerator(name, cat, choose)
    except NotFoundError:
        if find(name, cat.systems):
            return find_system(name, cat, choose)
        raise


# -- list ---------------------------------------------------------------------------------------
def list_accelerators(device_class: str | DeviceClass | None = None, vendor: str | None = None,
                      min_memory: str | float | None = None, sort: str = "class",
                      desc: bool = False, catalog: Catalog | None = None) -> list[Accelerator]:
    """The catalog's accelerators of one class (gpu, tpu, asic, sram-machine, fpga, edge-npu,
    cpu), of a vendor (case-insensitive part of the name), with at least ``min_memory`` ('80GB',
    or bytes), sorted by one of SORT_KEYS (a field, or a dtype's dense peak); those without the
    sorted figure come last."""
    from accelmap.api.parse import choice

    cat = _cat(catalog)
    wanted = choice(DeviceClass, device_class, "class") if device_class is not None else None
    floor = None
    if min_memory is not None:
        floor = (parse_quantity(min_memory, Dimension.BYTES, require_unit=True)
                 if isinstance(min_memory, str) else float(min_memory))
    key = sort.lower()
    if key not in SORT_KEYS:
        raise InputError(f"cannot sort by {sort!r}; use one of {', '.join(SORT_KEYS)}")
    return select(cat.accelerators.values(), wanted, vendor, floor, key, desc)


def list_systems(catalog: Catalog | None = None) -> list[SystemPreset]:
    """The catalog's system presets, by id."""
    return sorted(_cat(catalog).systems.values(), key=lambda s: s.id)


def accelerator_row(acc: Accelerator) -> dict[str, Any]:
    """One accelerator's headline figures (what `hw list --json` prints; SI units)."""
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
        "not_published": unpublished(acc),
    }


def system_row(preset: SystemPreset) -> dict[str, Any]:
    """One system preset with its network tiers (what `hw systems --json` prints)."""
    s = preset
    return {
        "id": s.id, "name": s.name, "accelerator": s.accelerator, "devices": s.devices,
        "devices_per_node": s.devices_per_node, "nodes": s.nodes,
        "torus": list(s.torus) if s.torus else None,
        "tiers": [{"name": t.name, "role": t.role.value, "topology": t.topology.value,
                   "domain_size": t.domain_size,
                   "bandwidth_per_direction": t.bandwidth_per_direction.value}
                  for t in s.tiers],
    }


# -- show ---------------------------------------------------------------------------------------
def derived_figures(acc: Accelerator) -> DerivedFigures:
    """Datasheet ratios: ridge point per dtype, bytes per FLOP, memory per $/h, FLOP/s per W and
    per $/h, and the 16-bit and 8-bit peaks (``hardware.derived``)."""
    return derive(acc)


def sources(entry: Accelerator | SystemPreset, catalog: Catalog | None = None
            ) -> dict[str, dict[str, Any] | None]:
    """The sources an entry cites, by id (its own first, then the catalog's shared ones); None
    for an id that neither holds."""
    cat = _cat(catalog)
    out = {}
    for sid in sorted(entry.cited_ids()):
        src = cat.source(sid, entry.sources)
        out[sid] = src.model_dump(mode="json") if src else None
    return out


def accelerator_details(acc: Accelerator, catalog: Catalog | None = None) -> dict[str, Any]:
    """Every field of an accelerator, with the scope of its figures, the derived figures, its
    sources, the file it came from and the physical bounds it breaks (what `hw show --json`
    prints)."""
    cat = _cat(catalog)
    d = derive(acc)
    data = acc.model_dump(mode="json", by_alias=True, exclude={"sources"})
    data["scope"] = {"peaks": "per device, dense", "memory": "per device",
                     "links.bandwidth_per_direction": "per link, per direction"}
    data["derived"] = {
        "ridge_flop_per_byte": {k.value: v for k, v in d.ridge_flop_per_byte.items()},
        "bytes_per_flop": d.bytes_per_flop,
        "memory_bytes_per_usd_hour": d.memory_bytes_per_usd_hour,
        "flops_per_watt": d.flops_per_watt,
    }
    data["not_published"] = unpublished(acc)
    data["sources"] = sources(acc, cat)
    data["origin"] = cat.origins.get((EntryKind.ACCELERATOR, acc.id))
    # physical bounds the part breaks (accelmap.hardware.plausibility); explained ones say so
    data["plausibility"] = [f.to_dict() for f in cat.plausibility.get(acc.id, ())]
    return data


def system_details(preset: SystemPreset, catalog: Catalog | None = None) -> dict[str, Any]:
    """Every field of a system preset, its device count and sources."""
    data = preset.model_dump(mode="json", exclude={"sources"})
    data["devices"] = preset.devices
    data["sources"] = sources(preset, catalog)
    return data


# -- datasheets side by side (accelmap hw compare); compare_accelerators runs a job on each ------
def spec_row(acc: Accelerator) -> dict[str, Any]:
    """``accelerator_row`` plus the derived figures and the scale-up network."""
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


@dataclass(frozen=True)
class SpecComparison:
    """Accelerators side by side: the devices, one ``spec_row`` each, and the dtypes any of
    them has a peak for (in DType order)."""

    devices: tuple[Accelerator, ...]
    rows: tuple[dict[str, Any], ...]
    dtypes: tuple[DType, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"devices": list(self.rows)}


def compare_specs(accelerators: Sequence[Accelerator | str] | None = None,
                  catalog: Catalog | None = None) -> SpecComparison:
    """Accelerators' datasheets side by side (entries or names; none given: this generation's
    flagships, DEFAULT_COMPARE, that the catalog holds): peaks, memory, links and the figures
    derived from them. No workload runs; ``compare_accelerators`` runs one model on each."""
    cat = _cat(catalog)
    wanted: Iterable[Accelerator | str] = accelerators or [
        n for n in DEFAULT_COMPARE if n in cat.accelerators]
    accs = tuple(a if isinstance(a, Accelerator) else find_accelerator(a, cat) for a in wanted)
    return SpecComparison(accs, tuple(spec_row(a) for a in accs), tuple(compared_dtypes(accs)))
