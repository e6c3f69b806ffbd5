"""Listing accelerators: which figures a list can be sorted by, filters, and the sort order.

Light at import (the CLI's help text names the sort keys): the schema loads when a function runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from accelmap.units import DType

if TYPE_CHECKING:
    from accelmap.hardware.schema import Accelerator, DeviceClass

# Compared when no names are given: the current training/serving flagships of each vendor that
# the catalog covers.
DEFAULT_COMPARE = ("h100-sxm5-80gb", "h200-sxm", "b200", "mi300x", "tpu-v5p", "tpu-v6e",
                   "gaudi3", "trainium2")

# What a list sorts by: a field of the entry, or the dense peak of one dtype.
SORT_KEYS = ("id", "name", "class", "vendor", "year", "memory", "bandwidth", "fp64", "fp32",
             "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4", "nvfp4", "mxfp4", "mxfp6",
             "mxfp8", "tdp", "price")


# What a table prints, and a JSON note says, for a price or TDP the catalog does not have: the
# vendor or market publishes none that could be cited (never a silent blank or a guess).
NOT_PUBLISHED = "not published"


def unpublished(acc: Accelerator) -> dict[str, str]:
    """The price and power figures ``acc``'s catalog entry lacks, each with its reason (empty
    when it has both). JSON carries the figure as null and this note beside it."""
    out = {}
    if acc.tdp is None:
        out["tdp_w"] = (f"{NOT_PUBLISHED}: no cited TDP for {acc.id} in the catalog (energy "
                        "at TDP cannot be computed)")
    if acc.price is None:
        out["price_usd_per_hour"] = (f"{NOT_PUBLISHED}: no cited hourly price for {acc.id} in "
                                     "the catalog (cost cannot be computed)")
    return out


def sort_value(acc: Accelerator, key: str) -> Any:
    """The value ``key`` (one of SORT_KEYS) sorts by; None when the device lacks the figure.
    Classes sort in the order of ``DeviceClass`` (GPUs first), names and vendors ignore case."""
    from accelmap.hardware.schema import DeviceClass

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


def select(accelerators: Iterable[Accelerator], device_class: DeviceClass | None = None,
           vendor: str | None = None, min_memory_bytes: float | None = None,
           sort: str = "class", desc: bool = False) -> list[Accelerator]:
    """Accelerators of one class, whose vendor contains ``vendor`` (ignoring case), with at least
    ``min_memory_bytes``, sorted by ``sort`` (vendor and id break ties). Devices without the
    sorted figure always go last, by id, whichever the direction."""
    accs = list(accelerators)
    if device_class is not None:
        accs = [a for a in accs if a.device_class == device_class]
    if vendor:
        accs = [a for a in accs if vendor.lower() in a.vendor.lower()]
    if min_memory_bytes:
        accs = [a for a in accs if a.memory_bytes >= min_memory_bytes]
    present = [a for a in accs if sort_value(a, sort) is not None]
    missing = sorted((a for a in accs if sort_value(a, sort) is None), key=lambda a: a.id)
    present.sort(key=lambda a: (sort_value(a, sort), a.vendor.lower(), a.id), reverse=desc)
    return present + missing
