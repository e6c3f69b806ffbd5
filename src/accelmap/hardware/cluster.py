"""Clusters: an accelerator, how many per node, how many nodes, and the network tiers.

Built from a system preset (``dgx-h100``, ``tpu-v5p-1024``), a shorthand (``64xH100``,
``8x8xh100-sxm5-80gb`` = nodes x devices-per-node x accelerator, ``4xdgx-h100`` = 4 presets), or a
YAML file in the system schema. ``NxID`` (and ``--hw ID --devices N``) works for any N of any
accelerator (``of_devices``):

- with presets on the accelerator, the smallest scale-up domain that holds N devices gives the
  tiers: ``2xH100`` is a partial DGX H100 node, ``64xtpu-v5e`` an 8x8 slice of the v5e pod's ICI
  torus; N equal to a sliced preset is that preset (``256xtpu-v5e``); beyond the largest domain,
  whole domains over the preset's outer tier (``64xH100`` = 8 DGX nodes over InfiniBand,
  ``512xtpu-v5e`` = 2 pods over DCN);
- N that is not a multiple of the node (``12xH100`` = one node of 8 and one of 4) is modelled as
  equal nodes of gcd(node, remainder) devices (3 x 4), so no group spans a node boundary the
  machine has;
- without a preset, the accelerator's own catalog links make the tiers: nodes of its scale-up
  domain over its scale-up links (Groq C2C, Tenstorrent Ethernet, UPI), beyond them its
  scale-out links (CS-3 100 GbE, a Jetson's 10 GbE, DCN), else its host link (a PCIe card
  reaches other nodes through the host's NIC);
- a multi-device cluster that no link of the catalog can join is a one-line InputError naming
  what is missing; one device needs no network.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from accelmap.catalog import Catalog, read_yaml, validate_entry
from accelmap.cited import TierBandwidth
from accelmap.errors import InputError
from accelmap.files import is_file
from accelmap.hardware.schema import (
    MAX_DEVICES,
    Accelerator,
    LinkRole,
    NetworkTier,
    SystemPreset,
    Topology,
)
from accelmap.lookup import find, normalize, report, resolve


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
    _check_size(n * preset.devices_per_node, preset.id)
    torus = preset.torus if nodes is None else None
    # '4 x <preset>' counts presets, not their nodes (a TPU slice spans many hosts)
    copies = (f"{n // preset.nodes} x " if n % preset.nodes == 0
              else f"{n} nodes of ")
    return Cluster(preset.name if nodes is None else f"{copies}{preset.name}", acc,
                   preset.devices_per_node, n, preset.tiers, torus, f"preset {preset.id}")


def _check_size(devices: int, what: str) -> None:
    """At most MAX_DEVICES devices: a count past any machine ever built is a typo."""
    if devices > MAX_DEVICES:
        raise InputError(f"{devices:,} devices of {what} is more than the {MAX_DEVICES:,} a "
                         "cluster may have; check the count")


_SHORT = re.compile(r"^\s*(\d+)\s*[x×]\s*(?:(\d+)\s*[x×]\s*)?(.+?)\s*$", re.IGNORECASE)

# Devices per node when neither a preset nor the accelerator's scale_up_domain says: the common
# server (HGX/DGX, OAM UBB and most PCIe 8-GPU chassis). A part with no scale-up and no host
# link is a computer of its own (a Jetson module, a CS-3, a CPU socket without a cited
# interconnect): one per node.
SERVER_DEVICES = 8


def _preset_for(acc: Accelerator, cat: Catalog) -> SystemPreset | None:
    """The single-node preset built on this accelerator (the most devices per node)."""
    same = [p for p in cat.systems.values() if p.accelerator == acc.id and p.nodes == 1]
    return max(same, key=lambda p: p.devices_per_node) if same else None


def _unit(p: SystemPreset) -> int:
    """Devices one scale-up domain of a preset holds: a node (DGX: 8), or a whole slice when
    the scale-up tier spans hosts (TPU ICI, Trn2 UltraServer)."""
    up = max((t.domain_size for t in p.tiers if t.role == LinkRole.SCALE_UP), default=1)
    return max(p.devices_per_node, min(up, p.devices))


def _shrink(tiers: tuple[NetworkTier, ...], size: int) -> tuple[NetworkTier, ...]:
    """The tiers with every scale-up domain larger than ``size`` cut to ``size`` devices. A
    full mesh keeps its per-peer link rate: the device's tier bandwidth drops to the links that
    reach the ``size - 1`` peers (x (size-1)/(D-1)). A domain of one device has no peer, so no
    scale-up tier at all (9 x MI300X = 8 + 1, modelled as 9 domains of 1: every group crosses
    the scale-out tier, as the group holding the ninth device does; not a 0 B/s tier)."""
    out = []
    for t in tiers:
        if t.role == LinkRole.SCALE_UP and size < 2:
            continue
        if t.role == LinkRole.SCALE_UP and t.domain_size > size:
            upd: dict[str, object] = {"domain_size": size}
            if t.topology is Topology.FULL_MESH and t.domain_size > 1:
                bw = t.bandwidth_per_direction
                frac = (size - 1) / (t.domain_size - 1)
                upd["bandwidth_per_direction"] = TierBandwidth.model_validate({
                    "value": f"{bw.value * frac} B/s", "source": list(bw.source),
                    "derived": True,
                    "note": f"{bw.text} x {size - 1}/{t.domain_size - 1}: the links to the "
                            f"{size - 1} peers of a {size}-device domain"})
            t = t.model_copy(update=upd)
        out.append(t)
    return tuple(out)


def shrink_tiers(tiers: tuple[NetworkTier, ...], size: int) -> tuple[NetworkTier, ...]:
    """``_shrink`` for callers outside this module (validate/layout.py: part of each node)."""
    return _shrink(tiers, size)


def _sub_torus(torus: tuple[int, ...] | None, n: int) -> tuple[int, ...] | None:
    """A slice of ``n`` devices shaped like the class's torus: the most even shape of the same
    rank whose dimensions divide the full torus's, in its order (8x8 of 16x16, 4x4x2 of
    4x4x4); None when none fits."""
    if torus is None:
        return None
    best: tuple[int, ...] | None = None

    def walk(i: int, left: int, dims: tuple[int, ...]) -> None:
        nonlocal best
        if i == len(torus):
            if left == 1 and (best is None or max(dims) - min(dims) < max(best) - min(best)):
                best = dims
            return
        for d in range(torus[i], 0, -1):  # ties: the larger inner dimensions first
            if torus[i] % d == 0 and left % d == 0:
                walk(i + 1, left // d, (*dims, d))

    walk(0, n, ())
    return best


def _generic_tiers(acc: Accelerator, per_node: int) -> tuple[NetworkTier, ...]:
    """Tiers from the device's own links when no preset exists: scale-up within the node at the
    sum of its scale-up links, scale-out at its scale-out links, else at its host link (a PCIe
    card reaches other nodes through the host's NIC; the host link bounds it), else nothing."""
    tiers = []
    up = acc.bandwidth_per_direction(LinkRole.SCALE_UP)
    full = acc.scale_up_domain.value if acc.scale_up_domain else per_node
    if up and per_node > 1 and acc.scale_up_topology is Topology.FULL_MESH and full > per_node:
        # a full mesh keeps its per-peer rate: a node of per_node cards has the links to its
        # per_node - 1 peers only (as _shrink counts them)
        up = up * (per_node - 1) / (full - 1)
    if up and per_node > 1:
        names = ", ".join(f"{k.count} x {k.name}" for k in acc.links_by_role(LinkRole.SCALE_UP))
        tiers.append(NetworkTier(
            name=f"scale-up: {names} (from the accelerator entry)", role=LinkRole.SCALE_UP,
            topology=acc.scale_up_topology or Topology.SWITCH, domain_size=per_node,
            bandwidth_per_direction=TierBandwidth.model_validate(
                {"value": f"{up} B/s", "source": ["derived"], "derived": True})))
    role = LinkRole.SCALE_OUT if acc.links_by_role(LinkRole.SCALE_OUT) else LinkRole.HOST
    out = acc.bandwidth_per_direction(role)
    if out:
        names = ", ".join(f"{k.count} x {k.name}" for k in acc.links_by_role(role))
        how = "" if role == LinkRole.SCALE_OUT else " through the host's NIC"
        tiers.append(NetworkTier(
            name=f"scale-out: {names}{how} (from the accelerator entry)",
            role=LinkRole.SCALE_OUT,
            # the outermost tier spans the whole cluster: a domain larger than any cluster
            topology=Topology.FAT_TREE, domain_size=1_000_000,
            bandwidth_per_direction=TierBandwidth.model_validate(
                {"value": f"{out} B/s", "source": ["derived"], "derived": True})))
    return tuple(tiers)


def _node_size(acc: Accelerator) -> int:
    """Devices per node for a part without a preset: with scale-up links, the catalog's
    scale-up domain (a GroqNode's 8, a Galaxy's 32), else a server of 8; a PCIe card without
    them, a server of 8 (its traffic goes through the host either way); a part with neither
    link, 1 (a computer of its own: a Jetson module, a CS-3 system, a CPU socket)."""
    if acc.links_by_role(LinkRole.SCALE_UP):
        dom = acc.scale_up_domain
        return max(int(dom.value), 1) if dom is not None else SERVER_DEVICES
    return SERVER_DEVICES if acc.links_by_role(LinkRole.HOST) else 1


def _no_network(acc: Accelerator, n: int, what: str) -> InputError:
    return InputError(
        f"{n} x {acc.id}: the catalog gives {acc.id} no {what}, so its devices cannot be "
        "joined; add a link (role scale-up or scale-out) to its YAML, or give a system YAML "
        "with network tiers")


def _check_network(cl: Cluster) -> Cluster:
    """A multi-device cluster needs a tier that joins its devices: within a node of several
    devices, a scale-up or outer tier; across nodes, a tier beyond the scale-up domain."""
    if cl.devices == 1:
        return cl
    up = cl.tier(LinkRole.SCALE_UP)
    outer = [t for t in cl.tiers if t is not up and t.domain_size > cl.scale_up_domain]
    if cl.devices > cl.scale_up_domain and not outer:
        raise _no_network(cl.accelerator, cl.devices,
                          "scale-out link (nor a host link to a NIC)" if up else
                          "scale-up, scale-out or host link")
    return cl


def of_devices(acc: Accelerator, n: int, cat: Catalog) -> Cluster:
    """``n`` devices of ``acc``. With presets on this accelerator: the smallest scale-up domain
    that holds ``n`` (a node, or a TPU/Trn2 slice) when one does, the whole preset when ``n``
    is its size; beyond the largest domain, whole domains over the preset's outer tier. Without
    one: nodes of ``_node_size`` devices over the accelerator's own links. ``n`` that is not a
    multiple of the node (``12xH100`` = one node of 8 + one of 4) is modelled as equal nodes of
    gcd(node, remainder) devices (3 x 4): no collective group crosses a node boundary that the
    real layout has, so the estimate never assumes a scale-up link the machine lacks. A
    multi-device cluster of a part whose catalog entry has no link that joins them is an
    InputError naming what is missing."""
    if n <= 0:
        raise InputError(f"{n} x {acc.id}: the device count must be positive")
    _check_size(n, acc.id)
    presets = sorted((p for p in cat.systems.values() if p.accelerator == acc.id),
                     key=lambda p: (_unit(p), p.devices))
    for p in presets:
        if p.devices == n and (p.torus is not None or p.nodes > 1):
            return from_preset(p, cat)
    fit = next((p for p in presets if _unit(p) >= n), None)
    if fit is not None:
        base, unit = fit, _unit(fit)
        if n <= base.devices_per_node:
            per_node, nodes = n, 1
        else:  # a slice spanning hosts: n devices of one ICI domain, hosts as the preset's
            per_node = math.gcd(base.devices_per_node, n)
            nodes = n // per_node
        part = "" if n == unit else f", {n} of its {unit} scale-up devices"
        torus = _sub_torus(base.torus, n) if unit > base.devices_per_node else None
        return Cluster(f"{nodes} x {per_node} x {acc.id}", acc, per_node, nodes, base.tiers,
                       torus, f"tiers of preset {base.id}{part}")
    if presets:
        base = presets[-1]
        unit, tiers, what = _unit(base), base.tiers, f"preset {base.id}"
        host = base.devices_per_node
        tray = host // base.hosts_per_node  # an OS host's devices
    else:
        unit = host = tray = _node_size(acc)
        what = "the accelerator's links (no preset)"
        if n <= unit:
            return _check_network(Cluster(f"1 x {n} x {acc.id}", acc, n, 1,
                                          _generic_tiers(acc, n), None, f"tiers of {what}"))
        tiers = _generic_tiers(acc, unit)
    full, rem = divmod(n, unit)
    if rem == 0:
        per_node = host if unit > host else unit  # whole slices keep their hosts
        return _check_network(Cluster(f"{n // per_node} x {per_node} x {acc.id}", acc,
                                      per_node, n // per_node, tiers, None, f"tiers of {what}"))
    if tray < host and n % tray == 0:
        # a node that is a scale-up domain of several OS hosts (GB200 NVL72: 18 trays of 4):
        # the scheduler places the job in equal blocks of hosts, each inside one domain --
        # SLURM's --segment, which Megatron-Bridge's GB200 launcher sets to the largest divisor
        # <= 18 of the tray count (scripts/performance/utils/executors.py): 256 GPUs run as 4
        # racks of 64, as NVIDIA's GB200 runs fill them
        hosts = n // tray
        g = tray * max(d for d in range(1, unit // tray + 1) if hosts % d == 0)
        name = f"{n} x {acc.id} ({n // g} x {g})"
        note = (f"{n} devices placed as {n // g} blocks of {g}, each inside one scale-up "
                f"domain of {unit} (SLURM --segment: the largest whole number of hosts that "
                f"divides the job and fits a domain), with the tiers of {what}")
        return _check_network(Cluster(name, acc, g, n // g, _shrink(tiers, g), None, note))
    else:
        g = math.gcd(unit, rem)
        per_node = math.gcd(host, g)
        note = (f"{full} x {unit} + 1 x {rem} devices, modelled as {n // g} scale-up domains "
                f"of {g} (gcd) with the tiers of {what}")
    name = f"{n} x {acc.id} ({full} x {unit} + {rem})" if full else f"{n} x {acc.id}"
    return _check_network(Cluster(name, acc, per_node, n // per_node, _shrink(tiers, g), None,
                                  note))


def resolve_accelerator(name: str, cat: Catalog) -> Accelerator:
    """One accelerator by id or forgiving name, the one rule every command uses (estimate
    --hw, compare --hw, plan --hw, a cluster spec): 'H100' means the variant systems are built
    from -- among the variants a model number matches, the single one with a node preset
    wins, and the note says which; a family word with no model number ('tpu', 'gaudi') names
    several chips, not variants of one, and stays the usual error listing the ids."""
    from accelmap.errors import AmbiguousNameError

    try:
        return resolve(name, cat.accelerators, "accelerator", "accelmap hw list")
    except AmbiguousNameError as e:
        if not any(ch.isdigit() for ch in name):
            raise
        with_preset = [c for c in e.candidates if _preset_for(cat.accelerators[c], cat)]
        if len(with_preset) == 1:
            report("accelerator", name, with_preset[0])
            return cat.accelerators[with_preset[0]]
        raise


def parse_cluster(spec: str, cat: Catalog) -> Cluster:
    """Resolve a preset id, a shorthand or a YAML file into a Cluster."""
    path = Path(spec).expanduser()
    if path.suffix in (".yaml", ".yml"):
        if not is_file(path):
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
    acc = resolve_accelerator(name, cat)
    if second is None:
        return of_devices(acc, first, cat)
    nodes, per_node = first, int(second)
    _check_size(nodes * per_node, acc.id)
    base = _preset_for(acc, cat)
    if base and per_node <= base.devices_per_node == _unit(base):
        # whole or partial nodes of the preset: its tiers, the scale-up domain cut to the node
        part = "" if per_node == base.devices_per_node else (
            f", {per_node} of its {base.devices_per_node} devices per node")
        return _check_network(Cluster(
            f"{nodes} x {per_node} x {acc.id}", acc, per_node, nodes,
            base.tiers if nodes == 1 else _shrink(base.tiers, per_node), None,
            f"tiers of preset {base.id}{part}"))
    return _check_network(Cluster(f"{nodes} x {per_node} x {acc.id}", acc, per_node, nodes,
                                  _generic_tiers(acc, per_node), None,
                                  "tiers derived from the accelerator's links (no matching "
                                  "preset)"))
