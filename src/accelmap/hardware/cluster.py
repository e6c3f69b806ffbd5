"""Clusters: an accelerator, how many per node, how many nodes, and the network tiers.

Built from a system preset (``dgx-h100``, ``tpu-v5p-1024``), a shorthand (``64xH100``,
``8x8xh100-sxm5-80gb`` = nodes x devices-per-node x accelerator, ``4xdgx-h100`` = 4 presets), or a
YAML file in the system schema. A shorthand takes its tiers from the preset built on the same
accelerator when the catalog has one, so ``64xH100`` is eight DGX H100 nodes with their NVLink and
InfiniBand; otherwise the accelerator's own links make the tiers, and the cluster says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from accelmap.catalog import Catalog, read_yaml, validate_entry
from accelmap.errors import InputError
from accelmap.hardware.schema import (
    Accelerator,
    LinkRole,
    NetworkTier,
    SystemPreset,
    Topology,
)
from accelmap.lookup import find, normalize, resolve


@dataclass(frozen=True)
class Cluster:
    name: str
    accelerator: Accelerator
    devices_per_node: int
    nodes: int
    tiers: tuple[NetworkTier, ...]
    torus: tuple[int, ...] | None = None
    origin: str = ""  # which preset or rule produced the tiers

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes

    def tier(self, role: LinkRole) -> NetworkTier | None:
        return next((t for t in self.tiers if t.role == role), None)

    @property
    def scale_up_domain(self) -> int:
        """Devices one scale-up tier connects (1 when the cluster has none)."""
        up = self.tier(LinkRole.SCALE_UP)
        return min(up.domain_size, self.devices) if up else 1


def from_preset(preset: SystemPreset, cat: Catalog, nodes: int | None = None) -> Cluster:
    acc = cat.accelerators[preset.accelerator]
    n = preset.nodes if nodes is None else nodes
    torus = preset.torus if nodes is None else None
    return Cluster(preset.name if nodes is None else f"{n} x {preset.name}", acc,
                   preset.devices_per_node, n, preset.tiers, torus, f"preset {preset.id}")


_SHORT = re.compile(r"^\s*(\d+)\s*[x×]\s*(?:(\d+)\s*[x×]\s*)?(.+?)\s*$", re.IGNORECASE)


def _preset_for(acc: Accelerator, cat: Catalog) -> SystemPreset | None:
    """The single-node preset built on this accelerator (the most devices per node)."""
    same = [p for p in cat.systems.values() if p.accelerator == acc.id and p.nodes == 1]
    return max(same, key=lambda p: p.devices_per_node) if same else None


def _generic_tiers(acc: Accelerator, per_node: int) -> tuple[NetworkTier, ...]:
    """Tiers from the device's own links when no preset exists: scale-up within the node at the
    sum of its scale-up links, scale-out at its scale-out links, else at its host link (a PCIe
    card reaches other nodes through the host's NIC; the host link bounds it), else nothing."""
    from accelmap.cited import TierBandwidth

    tiers = []
    up = acc.bandwidth_per_direction(LinkRole.SCALE_UP)
    if up and per_node > 1:
        tiers.append(NetworkTier(
            name="scale-up links (from the accelerator entry)", role=LinkRole.SCALE_UP,
            topology=Topology.SWITCH, domain_size=per_node,
            bandwidth_per_direction=TierBandwidth.model_validate(
                {"value": f"{up} B/s", "source": ["derived"], "derived": True})))
    out = acc.bandwidth_per_direction(LinkRole.SCALE_OUT) or acc.bandwidth_per_direction(
        LinkRole.HOST)
    if out:
        tiers.append(NetworkTier(
            name="scale-out (from the accelerator entry)", role=LinkRole.SCALE_OUT,
            # the outermost tier spans the whole cluster: a domain larger than any cluster
            topology=Topology.FAT_TREE, domain_size=1_000_000,
            bandwidth_per_direction=TierBandwidth.model_validate(
                {"value": f"{out} B/s", "source": ["derived"], "derived": True})))
    return tuple(tiers)


def _accelerator_for_cluster(name: str, cat: Catalog) -> Accelerator:
    """In a cluster, 'H100' means the variant that systems are built from: among ambiguous
    matches, the single one with a multi-device preset wins; otherwise the usual error."""
    from accelmap.errors import AmbiguousNameError

    try:
        return resolve(name, cat.accelerators, "accelerator", "accelmap hw list")
    except AmbiguousNameError as e:
        with_preset = [c for c in e.candidates if _preset_for(cat.accelerators[c], cat)]
        if len(with_preset) == 1:
            return cat.accelerators[with_preset[0]]
        raise


def parse_cluster(spec: str, cat: Catalog) -> Cluster:
    """Resolve a preset id, a shorthand or a YAML file into a Cluster."""
    path = Path(spec).expanduser()
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise InputError(f"no such system file: {spec}")
        data = read_yaml(path)
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "kind"}
        preset = validate_entry(SystemPreset, data, str(path))
        if preset.accelerator not in cat.accelerators:
            raise InputError(f"{path}: field 'accelerator': no accelerator {preset.accelerator!r}")
        return from_preset(preset, cat)
    if find(spec, cat.systems) and not _SHORT.match(spec):
        return from_preset(resolve(spec, cat.systems, "system", "accelmap hw systems"), cat)
    m = _SHORT.match(spec)
    if not m:
        raise InputError(
            f"cannot read cluster {spec!r}: use a preset id (accelmap hw systems), a shorthand "
            "such as 64xH100 or 8x8xh100-sxm5-80gb, or a system YAML file")
    first, second, name = int(m.group(1)), m.group(2), m.group(3)
    if first <= 0 or (second is not None and int(second) <= 0):
        raise InputError(f"cluster {spec!r}: counts must be positive")
    systems = find(name, cat.systems)
    exact = [p for p in systems if normalize(name) in {normalize(x) for x in (p.id, *p.aliases)}]
    if exact or (systems and not find(name, cat.accelerators)):
        system: SystemPreset = (exact[0] if exact else
                                resolve(name, cat.systems, "system", "accelmap hw systems"))
        if second is not None:
            raise InputError(f"cluster {spec!r}: write N x {system.id} (N presets), not NxMx")
        return from_preset(system, cat, nodes=first * system.nodes)
    acc = _accelerator_for_cluster(name, cat)
    base = _preset_for(acc, cat)
    if second is not None:
        nodes, per_node = first, int(second)
    else:
        # no system preset for this device: 8 per node, the common server (HGX/DGX, OAM UBB
        # and most PCIe 8-GPU chassis); "N x M x id" states it otherwise
        per_node = base.devices_per_node if base else min(first, 8)
        if first % per_node:
            raise InputError(f"cluster {spec!r}: {first} devices do not fill whole nodes of "
                             f"{per_node}; write nodes x per-node x {acc.id}")
        nodes = first // per_node
    if base and base.devices_per_node == per_node:
        return Cluster(f"{nodes} x {per_node} x {acc.id}", acc, per_node, nodes, base.tiers,
                       None, f"tiers of preset {base.id}")
    return Cluster(f"{nodes} x {per_node} x {acc.id}", acc, per_node, nodes,
                   _generic_tiers(acc, per_node), None,
                   "tiers derived from the accelerator's links (no matching preset)")
