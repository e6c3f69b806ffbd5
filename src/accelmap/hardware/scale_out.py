"""A run's stated inter-node network ("4 x Omni-Path 100 Gb/s per node", "400 Gb/s RDMA per
GPU", "1600 Gbps node-node RoCE") in place of its node preset's scale-out tier.

A published run's fabric is often not the vendor's reference node: BLOOM's Jean Zay nodes had
four 100 Gb/s Omni-Path links for eight A100 (BigScience 2022 sec. 3.4.1), where a DGX A100 has
eight 200 Gb/s InfiniBand NICs. The statement gives a line rate and its scope: per device
("per GPU"), or per node (``N x`` links, "per node", "node-node"). A node's links serve its
devices equally (the engine shares a device's scale-out bandwidth among the axes that cross
nodes), so a per-node rate is divided by the devices of the node. The preset tier's topology,
latency and collective efficiency stay: only the line rate changes (the technology's own
protocol overheads, TCP over Ethernet against RDMA, are not modelled).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from accelmap.cited import TierBandwidth
from accelmap.hardware.schema import LinkRole, NetworkTier, Topology

_RATE = re.compile(r"(?<![\w.+-])(\d+(?:\.\d+)?)\s*([gt])\s*(?:b(?:it)?\s*(?:ps|/s)|bps|be)\b",
                   re.I)
# no fabric comes near: an NVL72 rack's 72 x 800 Gb/s is 57.6 Tb/s
MAX_GBPS = 1e5
_COUNT = re.compile(r"(?<![\w.])(\d+)\s*[x\u00d7]\s", re.I)
_PER_DEVICE = re.compile(r"\b(?:per|/|each)\s*(?:gpu|device|accelerator|chip|gcd|hpu)\b", re.I)
_PER_NODE = re.compile(r"\b(?:per|/|each)\s*(?:node|host|server)\b|node-?to-?node|node-node|"
                       r"inter-?node", re.I)
_UNSTATED = re.compile(r"^\s*(?:\?|unknown|not stated|n/?a|-)?\s*(?:\(.*\))?\s*$", re.I)
FORMAT = ("a line rate and its scope: '400 Gb/s per GPU', '8 x 200 Gb/s' (links per node), "
          "'1600 Gb/s per node'")


class Scope(StrEnum):
    DEVICE = "per device"
    NODE = "per node"


@dataclass(frozen=True)
class ScaleOut:
    """A stated scale-out line rate, in bits per second per direction, and its scope."""

    bits_per_s: float
    scope: Scope
    text: str
    assumed: bool = False  # the scope was not stated: one link per node assumed

    def per_device_bytes(self, devices_per_node: int) -> float:
        """Bytes per second per direction each device gets."""
        rate = self.bits_per_s / 8.0
        return rate if self.scope is Scope.DEVICE else rate / max(devices_per_node, 1)


def parse_scale_out(text: str) -> ScaleOut | str | None:
    """The statement read (None: nothing stated), or a sentence saying what is missing."""
    t = (text or "").strip()
    if not t or _UNSTATED.match(t):
        return None
    rates = list(_RATE.finditer(t))
    if not rates:
        return f"scale-out {t!r} states no line rate; write {FORMAT}"
    # the inter-node statement: the last rate of "NVLink ...; 8x 200Gb/s IB per node"
    rate = rates[-1]
    gbps = float(rate.group(1)) * (1000.0 if rate.group(2).lower() == "t" else 1.0)
    if not 0 < gbps <= MAX_GBPS:
        return (f"scale-out {t!r} gives {rate.group(0)}, not a line rate between 0 and "
                f"{MAX_GBPS / 1e3:g} Tb/s; write {FORMAT}")
    before = t[:rate.start()]
    clause = before[before.rfind(";") + 1:]  # the count of the same clause ("8x Mellanox ...")
    count = _COUNT.findall(clause)
    after = t[rate.end():]
    links = int(count[-1]) if count else 1
    if not 0 < links * gbps <= MAX_GBPS:
        return (f"scale-out {t!r} gives {links} x {rate.group(0)}, not a rate between 0 and "
                f"{MAX_GBPS / 1e3:g} Tb/s; write {FORMAT}")
    if _PER_DEVICE.search(after) or (not count and _PER_DEVICE.search(clause)):
        return ScaleOut(links * gbps * 1e9, Scope.DEVICE, t)
    if count or _PER_NODE.search(t):
        return ScaleOut(links * gbps * 1e9, Scope.NODE, t)
    # "100 Gbps Ethernet": one such link per node, the common reading of a cluster's fabric
    return ScaleOut(gbps * 1e9, Scope.NODE, t, assumed=True)


def with_scale_out(tiers: tuple[NetworkTier, ...], so: ScaleOut, devices_per_node: int
                   ) -> tuple[tuple[NetworkTier, ...], str]:
    """The tiers with the scale-out tier's line rate replaced (one added after the others
    when the preset has none), and a note saying so."""
    per_device = so.per_device_bytes(devices_per_node)
    bw = TierBandwidth.model_validate(
        {"value": f"{per_device} B/s", "source": ["derived"], "derived": True})
    old = next((t for t in tiers if t.role is LinkRole.SCALE_OUT), None)
    name = f"{so.text} (stated)"
    if old is None:
        new = NetworkTier(name=name, role=LinkRole.SCALE_OUT, topology=Topology.FAT_TREE,
                          domain_size=1_000_000, bandwidth_per_direction=bw)
        out = (*tiers, new)
        was = "none"
    else:
        out = tuple(replace_tier(t, name, bw) if t is old else t for t in tiers)
        was = f"{old.bandwidth_per_direction.value * 8 / 1e9:g} Gb/s per device ({old.name})"
    shared = (f" ({so.bits_per_s / 1e9:g} Gb/s per node over {devices_per_node} devices"
              + ("; its scope not stated: one link per node assumed" if so.assumed else "")
              + ")") if so.scope is Scope.NODE else ""
    note = (f"scale-out as stated: {so.text!r} = {per_device * 8 / 1e9:g} Gb/s per device"
            f"{shared}; the node preset's was {was}")
    return out, note


def replace_tier(tier: NetworkTier, name: str, bw: TierBandwidth) -> NetworkTier:
    """``tier`` with another name and line rate (its topology, domain and latency kept)."""
    return tier.model_copy(update={"name": name, "bandwidth_per_direction": bw})
