"""Which catalog accelerator a measured device is: the one ``--hw`` names, else the one the name
and memory its runtime reports mean (the environment record's ``device_name`` and
``memory_bytes``), else, on a CPU, the local description with peaks derived from its ISA flags.
The answer is the record's ``accelerator_id``: the entry every row is filed under and compared
with."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accelmap.catalog import Catalog
    from accelmap.hardware.schema import Accelerator
    from accelmap.measure.environment import Environment

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


# Words of a CPU model name that name no part ('Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz').
_CPU_GENERIC = {"r", "tm", "c", "cpu", "gpu", "processor", "graphics", "nvidia", "amd", "intel",
                "apple", "corporation", "device"}


def _cpu_words(text: str) -> list[str]:
    text = re.sub(r"@.*$", "", re.sub(r"\((r|tm|c)\)", " ", text, flags=re.IGNORECASE))
    return [w for w in re.split(r"[^a-z0-9.+]+", text.lower()) if w and w not in _CPU_GENERIC]


def match_cpu(name: str, cores: int, catalog: Catalog) -> Accelerator | None:
    """The catalog CPU a model name means: the only entry that the longest leading run of its
    model words (with a digit among them) finds, and only with this machine's core count (a VM
    slice of the same model has a fraction of the datasheet's peaks)."""
    from accelmap.lookup import find

    words = _cpu_words(name)
    for i in range(len(words), 0, -1):
        query = " ".join(words[:i])
        hits = find(query, catalog.accelerators) if any(c.isdigit() for c in query) else []
        if len(hits) > 1:
            return None
        if hits:
            units = hits[0].compute_units
            return hits[0] if units is None or units.count.value == cores else None
    return None


def match_accelerator(hw: str | None, env: Environment, catalog: Catalog
                      ) -> tuple[Accelerator | None, str]:
    """(accelerator, how it was chosen) for ``--hw`` (a catalog id or name; 'local' = this CPU's
    description), else from the device the record describes; None where nothing matches."""
    from accelmap.hardware.local import is_local_id, local_cpu
    from accelmap.lookup import resolve
    from accelmap.measure.environment import host_cpu

    if hw is not None:
        if hw == "local" or is_local_id(hw):
            return local_cpu(), "--hw"
        return resolve(hw, catalog.accelerators, "accelerator", "accelmap hw list"), "--hw"
    name = env.device_name or env.device
    if env.device_type == "cpu":
        acc = match_cpu(name, host_cpu().cores, catalog)
        if acc is not None:
            return acc, f"guessed from the device name {name!r}"
        return local_cpu(), "local CPU description (peaks derived from ISA flags)"
    acc = match_gpu(name, env.memory_bytes or 0.0, catalog)
    if acc is not None:
        return acc, f"recognised from the device name {name!r} and its memory"
    return None, f"no catalog entry recognised from {name!r}; pass --hw to compare"
