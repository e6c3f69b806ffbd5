"""Cited quantities: a number with its unit, its scope and the sources that back it.

A catalog value is written in YAML as a mapping::

    bf16: {value: 989.4 TFLOP/s, source: S10}
    bandwidth: {value: 3.35 TB/s, source: [S10, S11], note: "SXM5; PCIe is 2.0 TB/s"}
    tdp: {value: 700 W, source: S11, uncertain: true}

``value`` must carry a unit (so that "every number has a unit" is checked by the schema, not by
hope); it is stored as a float in SI base units. The *scope* (per device, per direction of one
link, ...) is fixed by the field's type, so a per-direction link rate can never be read as a
per-device figure. ``derived`` marks values computed from other figures (for example a CPU's peak
from cores x FLOP/cycle x clock); ``uncertain`` marks values the sources do not confirm; the
reference data's doubts travel in ``note``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from accelmap.errors import InputError
from accelmap.units import Dimension, format_quantity, parse_quantity

SOURCE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


class Scope(StrEnum):
    """What one catalog number refers to."""

    PER_DEVICE = "per device"
    PER_LINK_DIRECTION = "per link, per direction"
    PER_DEVICE_DIRECTION = "per device, per direction"
    PER_DEVICE_HOUR = "per device-hour"
    PER_NODE = "per node"
    PER_SYSTEM = "per system"


class Frozen(BaseModel):
    """Base for catalog values: immutable, unknown keys rejected (typos fail loudly).

    ``defer_build``: a class builds its validator on first use, not at import, so a command
    that reads the catalog from its cache (accelmap/cache.py) never pays for building them."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True,
                              defer_build=True)


class Source(Frozen):
    """Where a number comes from: a datasheet, paper section, documentation page or measurement."""

    title: str
    url: str | None = None
    also: tuple[str, ...] = ()


def _as_source_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [s.strip() for s in value.replace(",", ";").split(";") if s.strip()]
    if not isinstance(value, list | tuple) or not value:
        raise ValueError("give at least one source id, for example 'S10' or [S10, S3]")
    for s in value:
        if not isinstance(s, str) or not SOURCE_ID.match(s):
            raise ValueError(f"{s!r} is not a source id (letters, digits, '-', '_' or '.')")
    return tuple(value)


class Cited(Frozen):
    """A quantity with a unit, a fixed scope and one or more sources."""

    dimension: ClassVar[Dimension] = Dimension.BYTES
    scope: ClassVar[Scope] = Scope.PER_DEVICE
    # Hard range of a value in SI units: absurd figures only (1e-300 TB/s, 1e30 TFLOP/s), an
    # input error. Figures past a physical bound are hardware.plausibility's (a warning).
    bounds: ClassVar[tuple[float, float]] = (1.0, 1e18)

    value: float = Field(description="SI base units (prices: USD per device-hour)")
    text: str = Field(description="the value as written in the catalog, with its unit")
    source: tuple[str, ...]
    note: str | None = None
    derived: bool = False
    uncertain: bool = False

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        if isinstance(data, Cited):
            return data
        if not isinstance(data, dict):
            raise ValueError(
                "write a mapping such as {value: '3.35 TB/s', source: S10}, not a bare number"
            )
        data = dict(data)
        raw = data.get("value")
        if raw is None:
            raise ValueError("'value' is missing")
        if not isinstance(raw, str):
            raise ValueError(f"value {raw!r} has no unit: write it as a string such as "
                             f"'{raw} {_example_unit(cls.dimension)}'")
        try:
            si = parse_quantity(raw, cls.dimension, require_unit=True)
        except InputError as e:
            raise ValueError(str(e)) from None
        if si <= 0:
            raise ValueError(f"value {raw!r} must be positive")
        low, high = cls.bounds
        if not low <= si <= high:
            dim = cls.dimension
            raise ValueError(
                f"value {raw!r} is outside {format_quantity(low, dim)} .. "
                f"{format_quantity(high, dim)}: check the number and its unit prefix")
        data["value"] = si
        if "text" in data and data["text"] != raw.strip():
            raise ValueError(f"'text' {data['text']!r} differs from value {raw!r}: leave 'text' "
                             "out (it is filled from 'value')")
        data["text"] = raw.strip()
        return data

    @field_validator("source", mode="before")
    @classmethod
    def _sources(cls, v: Any) -> tuple[str, ...]:
        return _as_source_tuple(v)

    def fmt(self) -> str:
        mark = "~" if self.derived else ""
        doubt = "?" if self.uncertain else ""
        return f"{mark}{format_quantity(self.value, self.dimension)}{doubt}"


def _example_unit(dim: Dimension) -> str:
    return {
        Dimension.BYTES: "GB",
        Dimension.BANDWIDTH: "GB/s",
        Dimension.FLOPS: "TFLOP/s",
        Dimension.POWER: "W",
        Dimension.FREQUENCY: "GHz",
        Dimension.TIME: "us",
        Dimension.PRICE_RATE: "USD/h",
        Dimension.ENERGY: "pJ",
        Dimension.FLOP: "FLOP",
    }[dim]


class PeakRate(Cited):
    """Dense peak compute of one device for one dtype (sparse datasheet figures halved)."""

    dimension = Dimension.FLOPS
    scope = Scope.PER_DEVICE
    bounds = (1e6, 1e19)  # 1 MFLOP/s .. 10 EFLOP/s per device (a wafer: ~1e17)


class Capacity(Cited):
    dimension = Dimension.BYTES
    scope = Scope.PER_DEVICE
    bounds = (1e3, 1e16)  # 1 kB .. 10 PB


class NodeCapacity(Cited):
    """Memory of one node (host DRAM of a DGX, say), not of one device."""

    dimension = Dimension.BYTES
    scope = Scope.PER_NODE
    bounds = (1e3, 1e17)


class DeviceBandwidth(Cited):
    """Memory bandwidth of one device (read+write combined, as datasheets quote it)."""

    dimension = Dimension.BANDWIDTH
    scope = Scope.PER_DEVICE
    bounds = (1e6, 1e18)  # 1 MB/s .. 1 EB/s (a wafer's SRAM: ~2e16)


class LinkBandwidth(Cited):
    """Bandwidth of one link in one direction (NVIDIA's '900 GB/s' NVLink is 18 x 25 GB/s x 2)."""

    dimension = Dimension.BANDWIDTH
    scope = Scope.PER_LINK_DIRECTION
    bounds = (1e3, 1e16)


class TierBandwidth(Cited):
    """What one device can send into a network tier in one direction (all its links together)."""

    dimension = Dimension.BANDWIDTH
    scope = Scope.PER_DEVICE_DIRECTION
    bounds = (1e3, 1e17)


class Power(Cited):
    dimension = Dimension.POWER
    scope = Scope.PER_DEVICE
    bounds = (1e-3, 1e7)  # 1 mW .. 10 MW


class Clock(Cited):
    dimension = Dimension.FREQUENCY
    scope = Scope.PER_DEVICE
    bounds = (1e3, 1e12)


class Latency(Cited):
    dimension = Dimension.TIME
    scope = Scope.PER_DEVICE
    bounds = (1e-12, 1e3)  # 1 ps .. 1000 s


class PriceRate(Cited):
    """USD per device-hour, as providers quote it (kept per hour, not per second, so catalog
    values read as written; cost code divides by 3600)."""

    dimension = Dimension.PRICE_RATE
    scope = Scope.PER_DEVICE_HOUR
    bounds = (1e-6, 1e6)


ID_PATTERN = r"^[a-z0-9][a-z0-9.+-]*$"


class CatalogEntry(Frozen):
    """What every catalog entry (accelerator, system, model) carries besides its own fields."""

    id: str = Field(pattern=ID_PATTERN, max_length=100)
    name: str = Field(max_length=300)
    aliases: tuple[str, ...] = ()
    description: str | None = None
    sources: dict[str, Source] = Field(default_factory=dict)
    doubts: tuple[str, ...] = ()

    @field_validator("aliases", "doubts", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    def cited_ids(self) -> set[str]:
        """All source ids referred to by values in this entry."""
        return collect_source_ids(self)


def collect_source_ids(obj: Any) -> set[str]:
    """Walk a model and gather every 'source' tuple (the ids cited by its values)."""
    found: set[str] = set()
    if isinstance(obj, Frozen):
        for name in type(obj).model_fields:
            value = getattr(obj, name)
            if name == "source" and isinstance(value, tuple):
                found.update(value)
            elif name != "sources":
                found |= collect_source_ids(value)
    elif isinstance(obj, dict):
        for v in obj.values():
            found |= collect_source_ids(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            found |= collect_source_ids(v)
    return found


class CitedCount(Frozen):
    """An integer count with what it counts as its unit: {value: 132, unit: SM, source: S11}."""

    value: int = Field(gt=0, le=100_000_000)  # cores, SMs, tiles: a wafer has ~10^6
    unit: str = Field(min_length=1)
    source: tuple[str, ...]
    note: str | None = None
    uncertain: bool = False

    @field_validator("source", mode="before")
    @classmethod
    def _sources(cls, v: Any) -> tuple[str, ...]:
        return _as_source_tuple(v)

    def fmt(self) -> str:
        return f"{self.value} {self.unit}{'?' if self.uncertain else ''}"
