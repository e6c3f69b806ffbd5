"""Accelerator and model names as runs write them -> catalog entries.

A name goes first through the catalog's own forgiving lookup (:func:`catalog_matches`: ids,
aliases, case and punctuation, so ``NVIDIA H100-SXM5-80GB``, ``GB200 (per GPU)``,
``LLAMA3_70B`` and ``llama-3-70b`` all resolve), guarded so that a number in the name must
match a whole number in the entry (``GPT3-5B`` is not ``gpt3-175b``, ``MI300`` is not
``mi300x``). Only where that finds nothing, or several entries, does the explicit table below
decide: it holds the transcription's spellings that the catalog cannot (or must not) settle
alone, each with the assumption it makes. A wrong guess here would silently validate against
the wrong chip, so nothing else is guessed.

``fraction`` < 1 means the row measured part of a catalog device (one GCD of an MI250X is half
the OAM package). ``None`` means the catalog has no such device yet.

:data:`MEMORY_VARIANTS` lists the catalog devices that differ from a name's default only in
memory size: a row whose ``accel_mem_GB`` (verified, not "80?") matches one of them and not the
default is resolved to it (llm-foundry's "A100 40GB" table writes the device as "NVIDIA A100"
with 40 in the memory column).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from accelmap.lookup import Named, find

T = TypeVar("T", bound=Named)


@dataclass(frozen=True)
class MeasuredDevice:
    catalog_id: str | None
    fraction: float = 1.0
    note: str = ""


MEASURED_NAMES: dict[str, MeasuredDevice] = {
    "AMD MI250X (one GCD)": MeasuredDevice("mi250x", 0.5, "one of the two GCDs of the package"),
    "AMD MI300X": MeasuredDevice("mi300x"),
    "AMD MI325X": MeasuredDevice("mi325x"),
    "AMD MI355X": MeasuredDevice("mi355x"),
    "Intel Gaudi 2": MeasuredDevice("gaudi2"),
    "Intel Gaudi 3": MeasuredDevice("gaudi3"),
    "NVIDIA A100": MeasuredDevice("a100-sxm4-80gb", note="variant not stated; SXM 80GB assumed"),
    "NVIDIA A100 (80GB?)": MeasuredDevice("a100-sxm4-80gb", note="80GB SXM assumed"),
    "NVIDIA A100 (DGX A100)": MeasuredDevice("a100-sxm4-80gb", note="DGX A100; 80GB assumed"),
    "NVIDIA A100 PCIe": MeasuredDevice("a100-pcie-80gb"),
    "NVIDIA A100 SXM": MeasuredDevice("a100-sxm4-80gb"),
    "NVIDIA A100 SXM 80GB (power-limited 330W)": MeasuredDevice(
        "a100-sxm4-80gb", note="power-limited to 330 W"),
    "NVIDIA A100 SXM 80GB (power-limited to 330W; 8x node, hybrid cube mesh)": MeasuredDevice(
        "a100-sxm4-80gb", note="power-limited to 330 W"),
    "NVIDIA B200 SXM": MeasuredDevice("b200"),
    "NVIDIA B300 SXM": MeasuredDevice("b300"),
    "NVIDIA GB200 SXM": MeasuredDevice("gb200"),
    "NVIDIA GH200 SXM": MeasuredDevice("gh200"),
    "NVIDIA H100 (HBM2e 96GB variant, 500W power limit; Grand Teton)": MeasuredDevice(
        "h100-sxm5-96gb-hbm2e", note="Grand Teton H100: tensor peaks uncertain +-8.4 % (between "
        "H100 NVL and SXM, torchtitan's benchmark notes)"),
    "NVIDIA H100 SXM": MeasuredDevice("h100-sxm5-80gb"),
    "NVIDIA H100 SXM (DGX-H100)": MeasuredDevice("h100-sxm5-80gb"),
    "NVIDIA H100 SXM 80GB (HBM3)": MeasuredDevice("h100-sxm5-80gb"),
    "NVIDIA H100 SXM?": MeasuredDevice("h100-sxm5-80gb", note="source unsure it was SXM"),
    "NVIDIA H200 SXM": MeasuredDevice("h200-sxm"),
    "NVIDIA H200 SXM 141GB": MeasuredDevice("h200-sxm"),
    "NVIDIA L40S": MeasuredDevice("l40s"),
    "NVIDIA V100 (DGX-2)": MeasuredDevice("v100-sxm2-32gb", note="DGX-2 V100 32GB"),
    "NVIDIA V100 32GB (DGX-2)": MeasuredDevice("v100-sxm2-32gb"),
}

# default catalog id -> catalog ids of the same part with another memory size
MEMORY_VARIANTS: dict[str, tuple[str, ...]] = {
    "a100-sxm4-80gb": ("a100-sxm4-40gb",),
    "a100-sxm4-40gb": ("a100-sxm4-80gb",),
}


def _spaced(label: str) -> str:
    """Lower case, every run of other characters than letters, digits and dots one space."""
    return " " + re.sub(r"[^a-z0-9.]+", " ", label.lower()).strip() + " "


def _number_fits(word: str, entry: Named) -> bool:
    """A word holding a digit (a part number, a size, a version) must stand whole in one of the
    entry's labels: not inside a longer number or name ('5b' is not in 'gpt3 175b', 'mi300' not
    in 'mi300x'), though a version may go on ('llama3' in 'llama3.1', '3' in '3.1')."""
    pattern = re.compile(rf"(?<![0-9a-z.]){re.escape(word)}(?![0-9a-z])")
    return any(pattern.search(_spaced(label)) for label in (entry.id, entry.name,
                                                               *entry.aliases))


def catalog_matches(query: str, entries: Mapping[str, T]) -> list[T]:
    """The catalog lookup's candidates (:func:`accelmap.lookup.find`) whose labels hold each
    number of the query whole (see :func:`_number_fits`)."""
    words = [w for w in re.split(r"[^a-z0-9.]+", query.lower()) if any(c.isdigit() for c in w)]
    return [e for e in find(query, entries) if all(_number_fits(w, e) for w in words)]


def same_size(query: str, entry: Named) -> bool:
    """Whether every model size in the query ('8b', '1.7b', '125m', '1t') stands whole in the
    entry's labels: a preset of another size is another model, never a suggestion."""
    sizes = [w for w in re.split(r"[^a-z0-9.]+", query.lower())
             if re.fullmatch(r"\d+(?:\.\d+)?[kmbt]", w)]
    return all(_number_fits(w, entry) for w in sizes)
