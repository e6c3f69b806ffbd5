"""What-ifs on a device: "what if this chip had 6.7 TB/s", without copying its YAML.

``--set NAME=VALUE`` on any command changes one figure of the accelerators the command uses
(``ID:NAME=VALUE`` changes one part only). NAME follows the catalog's fields; VALUE carries a
unit (``6.7TB/s``, ``2.5PFLOP/s``, ``500MB``, ``900W``, ``2.5USD/h``) or is a factor
(``x2``: twice the part's own figure). A changed figure is a cited value whose source is
``what-if`` and whose note keeps the published figure, and the part lists its changes in
``what_if`` (every estimate repeats them in its assumptions), so a what-if result can never
be mistaken for a catalog one. The plausibility checks (hardware/plausibility.py) run on the
changed part as on any other: "what if H100 had 20 TB/s of HBM3" is answered, with a warning
that no 8 stacks of HBM3 deliver it.

Pure functions over :class:`Accelerator` and :class:`NetworkTier` values; the catalog-wide and
system-wide application lives above (``api.whatif``, ``search.sensitivity``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from accelmap.cited import (
    Capacity,
    Cited,
    DeviceBandwidth,
    LinkBandwidth,
    PeakRate,
    Power,
    PriceRate,
    Source,
    TierBandwidth,
)
from accelmap.errors import InputError
from accelmap.hardware.schema import (
    Accelerator,
    Link,
    LinkRole,
    MemoryKind,
    MemoryLevel,
    MemoryRole,
    NetworkTier,
    PriceQuote,
)
from accelmap.units import Dimension, DType, format_quantity, parse_quantity

C = TypeVar("C", bound=Cited)

SOURCE_ID = "what-if"
WHATIF_SOURCE = Source(title="what-if: a figure changed with --set (not a published figure)")


@dataclass(frozen=True)
class Field:
    """One figure a what-if can change: its canonical name, what it measures, and what it is."""

    name: str
    dimension: Dimension | None  # None: a factor only (compute = every peak)
    help: str
    aliases: tuple[str, ...] = ()


_DTYPE_FIELDS = tuple(Field(d.value, Dimension.FLOPS,
                            f"dense {d.value} peak (matrix units; vector when the part has only "
                            "vector units for it)", (f"matrix.{d.value}",)) for d in DType)
FIELDS: tuple[Field, ...] = (
    Field("memory_bandwidth", Dimension.BANDWIDTH,
          "bandwidth of the device memory (HBM/GDDR/LPDDR; SRAM on SRAM machines)",
          ("bandwidth", "hbm_bandwidth", "memory.bandwidth")),
    Field("memory_capacity", Dimension.BYTES, "capacity of the device memory",
          ("memory", "capacity", "hbm", "memory.capacity")),
    Field("sram", Dimension.BYTES, "on-chip SRAM capacity (L2, scratchpads; added when the part "
          "lists none)", ("sram_capacity", "onchip", "l2")),
    Field("sram_bandwidth", Dimension.BANDWIDTH, "on-chip SRAM bandwidth", ()),
    *_DTYPE_FIELDS,
    *(Field(f"vector.{d.value}", Dimension.FLOPS, f"dense {d.value} peak of the vector units")
      for d in DType),
    Field("compute", None, "every dense peak at once (a factor: compute=x2)", ("flops", "peak")),
    Field("tdp", Dimension.POWER, "thermal design power", ("power",)),
    Field("price", Dimension.PRICE_RATE, "price of one device-hour (USD/h)",
          ("usd_per_hour", "price.usd_per_hour")),
    Field("scale_up_bandwidth", Dimension.BANDWIDTH,
          "scale-up bandwidth of one device, per direction (NVLink, ICI, Infinity Fabric: all "
          "its links together; NVIDIA's '900 GB/s' for H100 counts both directions, 450 GB/s "
          "per direction)", ("nvlink", "nvlink_bandwidth", "ici_bandwidth", "scale_up")),
    Field("scale_out_bandwidth", Dimension.BANDWIDTH,
          "scale-out bandwidth of one device, per direction (InfiniBand, RoCE, DCN)",
          ("scale_out", "network_bandwidth", "ib_bandwidth")),
    Field("host_bandwidth", Dimension.BANDWIDTH, "host link bandwidth, per direction (PCIe)",
          ("pcie", "pcie_bandwidth")),
)
_BY_NAME: dict[str, Field] = {n: f for f in FIELDS for n in (f.name, *f.aliases)}

_EXAMPLE = {Dimension.BANDWIDTH: "6.7TB/s", Dimension.BYTES: "500MB",
            Dimension.FLOPS: "2.5PFLOP/s", Dimension.POWER: "1000W",
            Dimension.PRICE_RATE: "2.5USD/h"}

# factor form: x2, *2, 2x, x0.5
_FACTOR = re.compile(r"^\s*(?:[x*×]\s*([0-9.eE+-]+)|([0-9.eE+-]+)\s*[x×])\s*$")


@dataclass(frozen=True)
class Override:
    """One ``--set``: a field, on every part or on ``target`` only, to a value or by a factor."""

    field: Field
    text: str  # as the user wrote it: 'memory_bandwidth=6.7TB/s'
    value: float | None = None  # SI (USD/h for prices)
    factor: float | None = None
    target: str | None = None  # accelerator id (resolved by the caller), None = every part

    def applies_to(self, acc_id: str) -> bool:
        return self.target is None or self.target == acc_id

    def new_value(self, old: float | None, where: str) -> float:
        if self.value is not None:
            return self.value
        assert self.factor is not None
        if old is None:
            raise InputError(f"--set {self.text}: {where} has no {self.field.name} to scale; "
                             f"give an absolute value with a unit")
        return old * self.factor


def field_names() -> list[str]:
    return [f.name for f in FIELDS]


def lookup_field(name: str) -> Field:
    """The field ``name`` means (canonical name or alias), or one InputError with the closest
    names."""
    key = name.strip().lower().replace("-", "_")
    if key in _BY_NAME:
        return _BY_NAME[key]
    near = difflib.get_close_matches(key, list(_BY_NAME), n=3, cutoff=0.5)
    near = list(dict.fromkeys(_BY_NAME[n].name for n in near))
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise InputError(f"unknown --set name {name.strip()!r}{hint} (hardware names: "
                     f"{', '.join(f.name for f in FIELDS if '.' not in f.name)})")


def parse_value(field: Field, text: str, where: str) -> tuple[float | None, float | None]:
    """(value in SI, factor): '6.7TB/s' -> (6.7e12, None); 'x2' -> (None, 2.0)."""
    m = _FACTOR.match(text)
    if m:
        try:
            k = float(m.group(1) or m.group(2))
        except ValueError:
            raise InputError(f"--set {where}: cannot read the factor {text!r} (write x2 or "
                             "x0.5)") from None
        if not k > 0:
            raise InputError(f"--set {where}: the factor must be positive")
        return None, k
    if field.dimension is None:
        raise InputError(f"--set {where}: {field.name} takes a factor such as x2")
    if field.dimension is Dimension.PRICE_RATE:
        text = text.replace("USD/hour", "USD/h").replace("$/hour", "$/h")
        if re.fullmatch(r"\s*\$\s*[0-9.]+\s*(/h)?\s*", text):  # '$2.5' or '$2.5/h'
            text = text.replace("$", "").replace("/h", "") + " USD/h"
    try:
        v = parse_quantity(text, field.dimension, require_unit=field.dimension
                           is not Dimension.PRICE_RATE)
    except InputError as e:
        raise InputError(f"--set {where}: {e}; {field.name} is written like "
                         f"{field.name}={_EXAMPLE[field.dimension]}") from None
    if not v > 0:
        raise InputError(f"--set {where}: {field.name} must be positive")
    return v, None


def parse_override(text: str) -> Override:
    """'NAME=VALUE' or 'ID:NAME=VALUE' (the id is resolved later, against the catalog)."""
    if "=" not in text:
        raise InputError(f"--set {text!r}: write NAME=VALUE, e.g. memory_bandwidth=6.7TB/s "
                         "(names: accelmap whatif-names)")
    name, _, raw = text.partition("=")
    target = None
    if ":" in name:
        target, _, name = name.partition(":")
        target = target.strip() or None
    field = lookup_field(name)
    value, factor = parse_value(field, raw, text.strip())
    return Override(field, text.strip(), value, factor, target)


# -- applying ------------------------------------------------------------------------------------
def _cited(cls: type[C], value: float, old: Cited | None) -> C:
    was = f"what-if; published {old.text}" if old is not None else "what-if; not in the catalog"
    text = (f"{value:.6g} USD/h" if cls.dimension is Dimension.PRICE_RATE
            else format_quantity(value, cls.dimension, digits=6))
    return cls.model_validate({"value": text,
                               "source": [SOURCE_ID], "note": was})


def _set_memory(acc: Accelerator, o: Override, pick: Callable[[MemoryLevel], bool],
                attr: str, cls: type[Cited], add: MemoryLevel | None) -> Accelerator:
    levels = list(acc.memory)
    idx = next((i for i, m in enumerate(levels) if pick(m)), None)
    if idx is None:
        if add is None or o.value is None:
            raise InputError(f"--set {o.text}: {acc.id} lists no such memory level; give an "
                             "absolute value to add one")
        levels.append(add.model_copy(update={attr: _cited(cls, o.value, None)}))
    else:
        lv = levels[idx]
        old = getattr(lv, attr)
        new = o.new_value(old.value if old is not None else None, acc.id)
        levels[idx] = lv.model_copy(update={attr: _cited(cls, new, old)})
    return acc.model_copy(update={"memory": tuple(levels)})


def _is_sram(m: MemoryLevel) -> bool:
    return m.kind is MemoryKind.SRAM and m.role is MemoryRole.ONCHIP


def _sram_level(acc: Accelerator, capacity: float) -> MemoryLevel:
    return MemoryLevel(name="SRAM (what-if)", kind=MemoryKind.SRAM, role=MemoryRole.ONCHIP,
                       capacity=_cited(Capacity, capacity, None))


def _set_peak(acc: Accelerator, o: Override, dtype: DType, unit: str | None) -> Accelerator:
    if unit is None:
        unit = "vector" if dtype in acc.vector and dtype not in acc.matrix else "matrix"
    table = dict(acc.matrix if unit == "matrix" else acc.vector)
    old = table.get(dtype)
    table[dtype] = _cited(PeakRate, o.new_value(old.value if old else None, acc.id), old)
    return acc.model_copy(update={unit: table})


def _scale_peaks(acc: Accelerator, k: float) -> Accelerator:
    def scaled(t: dict[DType, PeakRate]) -> dict[DType, PeakRate]:
        return {d: _cited(PeakRate, v.value * k, v) for d, v in t.items()}

    return acc.model_copy(update={"matrix": scaled(acc.matrix), "vector": scaled(acc.vector)})


LINK_FIELDS = _ROLE = {"scale_up_bandwidth": LinkRole.SCALE_UP,
                       "scale_out_bandwidth": LinkRole.SCALE_OUT,
                       "host_bandwidth": LinkRole.HOST}


def _set_links(acc: Accelerator, o: Override, role: LinkRole) -> Accelerator:
    mine = acc.links_by_role(role)
    total = acc.bandwidth_per_direction(role) if mine else None
    new = o.new_value(total, acc.id)
    if not mine:
        link = Link(name=f"{role.value} (what-if)", role=role, count=1,
                    bandwidth_per_direction=_cited(LinkBandwidth, new, None))
        return acc.model_copy(update={"links": (*acc.links, link)})
    k = new / (total or 1.0)
    links = tuple(
        lk.model_copy(update={"bandwidth_per_direction": _cited(
            LinkBandwidth, lk.bandwidth_per_direction.value * k, lk.bandwidth_per_direction)})
        if lk.role is role else lk for lk in acc.links)
    return acc.model_copy(update={"links": links})


def _apply_one(acc: Accelerator, o: Override) -> Accelerator:
    name = o.field.name
    if name == "memory_bandwidth":
        return _set_memory(acc, o, lambda m: m.role is MemoryRole.DEVICE, "bandwidth",
                           DeviceBandwidth, None)
    if name == "memory_capacity":
        return _set_memory(acc, o, lambda m: m.role is MemoryRole.DEVICE, "capacity", Capacity,
                           None)
    if name in ("sram", "sram_bandwidth"):
        attr, cls = (("capacity", Capacity) if name == "sram" else ("bandwidth", DeviceBandwidth))
        if acc.device_memory.kind is MemoryKind.SRAM and not any(map(_is_sram, acc.memory)):
            pick: Callable[[MemoryLevel], bool] = lambda m: m.role is MemoryRole.DEVICE  # noqa
        else:
            pick = _is_sram
        add = _sram_level(acc, o.value) if o.value is not None and attr == "capacity" else None
        return _set_memory(acc, o, pick, attr, cls, add)
    if name == "compute":
        return _scale_peaks(acc, o.new_value(1.0, acc.id))
    if name.startswith("vector."):
        return _set_peak(acc, o, DType(name.removeprefix("vector.")), "vector")
    if name in DType._value2member_map_:
        return _set_peak(acc, o, DType(name), None)
    if name == "tdp":
        return acc.model_copy(update={"tdp": _cited(
            Power, o.new_value(acc.tdp.value if acc.tdp else None, acc.id), acc.tdp)})
    if name == "price":
        old = acc.price.usd_per_hour if acc.price else None
        quote = PriceQuote(usd_per_hour=_cited(PriceRate, o.new_value(
            old.value if old else None, acc.id), old), date=_today(), market="what-if (--set)")
        return acc.model_copy(update={"price": quote})
    if name in _ROLE:
        return _set_links(acc, o, _ROLE[name])
    raise AssertionError(name)  # pragma: no cover - every field has a branch


def _today() -> str:
    """A what-if price has no market date; PriceQuote wants one: the month it was asked."""
    import datetime

    return datetime.date.today().strftime("%Y-%m")


def describe(o: Override, before: Accelerator, after: Accelerator) -> str:
    """'h100-sxm5-80gb memory_bandwidth 3.35 TB/s -> 6.7 TB/s' for the assumptions."""
    a, b = figure(before, o.field.name), figure(after, o.field.name)
    dim = o.field.dimension or Dimension.FLOPS
    fa = "none" if a is None else format_quantity(a, dim)
    fb = "none" if b is None else format_quantity(b, dim)
    return f"{after.id} {o.field.name} {fa} -> {fb} (--set {o.text})"


def figure(acc: Accelerator, name: str) -> float | None:
    """The current value of one what-if field (SI; compute: the best bf16-or-widest peak)."""
    f = _BY_NAME[name].name
    if f == "memory_bandwidth":
        return acc.memory_bandwidth
    if f == "memory_capacity":
        return acc.memory_bytes
    if f in ("sram", "sram_bandwidth"):
        lv = next((m for m in acc.memory if _is_sram(m)), None)
        if lv is None and acc.device_memory.kind is MemoryKind.SRAM:
            lv = acc.device_memory
        if lv is None:
            return None
        return lv.capacity.value if f == "sram" else (lv.bandwidth.value if lv.bandwidth
                                                      else None)
    if f == "compute":
        return acc.peak(DType.BF16) or max((acc.peak(d) or 0.0) for d in DType)
    if f.startswith("vector."):
        v = acc.vector.get(DType(f.removeprefix("vector.")))
        return v.value if v else None
    if f in DType._value2member_map_:
        return acc.peak(DType(f))
    if f == "tdp":
        return acc.tdp.value if acc.tdp else None
    if f == "price":
        return acc.price.usd_per_hour.value if acc.price else None
    if f in _ROLE:
        return acc.bandwidth_per_direction(_ROLE[f]) or None
    raise AssertionError(f)  # pragma: no cover


def apply(acc: Accelerator, overrides: Sequence[Override], strict: bool = False
          ) -> Accelerator:
    """``acc`` with every override that applies to it. A factor on a figure the part lacks is
    skipped when the override is catalog-wide (``strict`` False and no target) and is an error
    when it names this part."""
    out, notes = acc, []
    for o in overrides:
        if not o.applies_to(acc.id):
            continue
        try:
            new = _apply_one(out, o)
        except InputError:
            if strict or o.target is not None:
                raise
            continue
        notes.append(describe(o, out, new))
        out = new
    if not notes:
        return acc
    return out.model_copy(update={"what_if": (*acc.what_if, *notes),
                                  "sources": {**acc.sources, SOURCE_ID: WHATIF_SOURCE}})


def scale(acc: Accelerator, resource: str, k: float) -> Accelerator:
    """``acc`` with one resource (a field name) times ``k``: sensitivity and sweeps."""
    f = lookup_field(resource)
    return apply(acc, [Override(f, f"{f.name}=x{k:g}", factor=k)])


def apply_tiers(acc_id: str, tiers: Iterable[NetworkTier], overrides: Sequence[Override]
                ) -> tuple[NetworkTier, ...]:
    """Network tiers of a system built on ``acc_id`` with the scale-up/scale-out what-ifs: the
    tier's per-device bandwidth becomes the value (or times the factor)."""
    out = []
    for t in tiers:
        for o in overrides:
            role = _ROLE.get(o.field.name)
            if role is None or role is not t.role or not o.applies_to(acc_id):
                continue
            old = t.bandwidth_per_direction
            t = t.model_copy(update={"bandwidth_per_direction": _cited(
                TierBandwidth, o.new_value(old.value, acc_id), old)})
        out.append(t)
    return tuple(out)


def overrides_for(acc_id: str, overrides: Sequence[Override]) -> list[Override]:
    return [o for o in overrides if o.applies_to(acc_id)]
