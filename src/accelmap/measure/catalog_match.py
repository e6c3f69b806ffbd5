"""Which catalog accelerator a measured device is, from the name and memory its runtime reports
(the environment record's ``device_name`` and ``memory_bytes``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accelmap.catalog import Catalog
    from accelmap.hardware.schema import Accelerator

# Words in a device name that never occur in catalog names (vendor, marketing, memory kind).
_NOISE = {"nvidia", "amd", "intel", "geforce", "tesla", "instinct", "hbm3", "hbm3e", "hbm2e",
          "hbm2", "gddr6", "gddr6x", "gddr7", "generation", "tm", "r", "graphics"}


def _tokens(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9.]+", text.lower()) if w}


def match_gpu(name: str, memory_bytes: float, catalog: Catalog) -> Accelerator | None:
    """The catalog accelerator a device name means ('NVIDIA H100 80GB HBM3' as torch reports
    it), or None. Every model word of the name must be a whole word of the entry's id, name or
    aliases ('h200' is not 'gh200'); among several, a PCIe part only when the name says PCIe,
    then entries whose id has the words, then the closest memory size (H100 SXM5 80 GB vs H100
    NVL 94 GB)."""
    from accelmap.lookup import find

    words = [w for w in _tokens(name) - _NOISE if not re.fullmatch(r"\d+gb", w)]
    if not words:
        return None
    found = [a for a in catalog.accelerators.values()
             if set(words) <= set().union(*(_tokens(x) for x in (a.id, a.name, *a.aliases)))]
    found = found or find(" ".join(words), catalog.accelerators)
    if not found:
        return None
    pcie = "pcie" in name.lower()

    def rank(acc: Accelerator) -> tuple[bool, bool, float]:
        # the id itself names the part ('b200', not the alias 'b200-nvl72' of gb200)
        return (("pcie" in acc.id) != pcie, not set(words) <= _tokens(acc.id),
                abs(acc.memory_bytes - memory_bytes))

    return min(found, key=rank)
