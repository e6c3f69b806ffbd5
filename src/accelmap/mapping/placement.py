"""Which mesh axis lands on which network tier, and at what bandwidth.

Axes are laid out innermost-first in Megatron-Core's default rank order, ``order="tp-cp-ep-dp-pp"``
of ``parallel_state.initialize_model_parallel``: tensor-parallel ranks are consecutive devices
("tensor model parallelism within a server", Narayanan et al. 2021 sec. 3.2), then context,
expert and data parallel, with pipeline stages outermost. torchtitan's device mesh
``(pp, dp_replicate, dp_shard, cp, tp)`` nests the same way. An axis of size k whose inner axes
multiply to ``stride`` puts its members ``stride`` devices apart, spanning ``stride x k`` devices.
With D the scale-up domain (8 on a DGX, 72 on GB200 NVL72, the whole slice on a TPU):

- inside: stride x k <= D: every member in one domain, the scale-up tier;
- across: stride >= D: every member in a different domain, the scale-out tier;
- hierarchical: otherwise, n_inner = D / stride members per domain and n_outer = k / n_inner
  domains (collectives.hierarchical_time).

One formula covers all three, so numpy arrays of sizes work: n_inner = clip(floor(D / stride),
1, k), n_outer = k / n_inner. (When D / stride is not a whole number the groups straddle domains
unevenly; n_inner is then the whole-member floor, a slight pessimism.)

Scale-out bandwidth: the tier's figure is per device per direction (one NIC per GPU in a
rail-optimized fat-tree: GPU i uses NIC i), so an axis crossing domains gets the full NIC; in the
two-level schedule each of the n_inner members carries 1/n_inner of the data on its own NIC.
Rule for several crossing axes: when two or more axes cross domains (n_outer > 1), their traffic
leaves through the same NIC, so with ``share_scale_out=True`` (default) each gets an equal share
(1 / number of crossing axes). This is the worst case, where their collectives run at the same
time; pass ``share_scale_out=False`` when the schedule keeps them apart (e.g. pipeline send/recv
and the data-parallel gradient all-reduce at the end of the step).

Full-mesh scale-up (MI300X Infinity Fabric: 7 point-to-point links): a group of n < 8 GPUs can use
only n-1 links, so its bandwidth is tier x (n-1)/(D-1) (shared network.csv, AMD row: "any pair
only 64 GB/s/dir"; collectives.csv C0105: 2 GPUs reach 47.7 GB/s busbw against C0106's 313 at 8).

TPU tori (cluster.torus): axes fill torus dimensions innermost-first; an axis that covers whole
dimensions runs a bidirectional ring on each, so its bandwidth is per-link one-way x 2 x the
number of dimensions it spans (scaling book, S44: all-gather time ~ V / (W_ici x n_axes) with
W_ici the bidirectional link rate), the per-link figure being the tier's per-device bandwidth /
its number of links (6 in 3D, 4 in 2D). An axis that does not fill whole dimensions is modelled
at the bandwidth of the dimensions it touches (a note says so; optimistic: a partial dimension
has no wraparound).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accelmap.cost.collectives import (
    Collective,
    Link,
    collective_time,
    hierarchical_time,
    link_for_tier,
)
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import LinkRole, NetworkTier, Topology
from accelmap.mapping.plan import Axis
from accelmap.units import Num

DEFAULT_ORDER = (Axis.TP, Axis.CP, Axis.EP, Axis.DP, Axis.PP)
NO_NETWORK = Link(bandwidth=0.0, name="no network (one device)", tree=False)
_TORUS = (Topology.TORUS_2D, Topology.TORUS_3D, Topology.MESH_2D, Topology.MESH_3D)


def _out(x: Num) -> Num:
    return float(x) if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class AxisLink:
    """One mesh axis on the network: ``n_inner`` members per scale-up domain on ``inner``,
    across ``n_outer`` domains on ``outer`` (None when the cluster has no further tier)."""

    axis: str
    size: Num
    stride: Num
    n_inner: Num
    inner: Link
    n_outer: Num
    outer: Link | None
    torus_dims: Num = 0.0  # torus dimensions the inner part spans (0: not a torus)
    note: str = ""

    @property
    def placement(self) -> Num:
        """'scale-up', 'scale-out' or 'hierarchical' (an array of these for array sizes)."""
        p = np.where(np.asarray(self.n_outer) <= 1, "scale-up",
                     np.where(np.asarray(self.n_inner) <= 1, "scale-out", "hierarchical"))
        return str(p) if p.ndim == 0 else p

    def describe(self) -> str:
        """One line for reports: where the axis lands and at what achievable bandwidth."""

        def fmt(x: Num, scale: float = 1.0) -> str:
            v = np.asarray(x, dtype=float) / scale
            return f"{float(v):g}" if v.ndim == 0 else np.array2string(v, precision=3)

        text = f"{self.axis}={fmt(self.size)}: {self.placement}"
        inside = f"{fmt(self.n_inner)} on {self.inner.name} ({fmt(self.inner.bandwidth, 1e9)} GB/s)"
        if self.outer is not None and np.any(np.asarray(self.n_outer) > 1):
            across = (f"{fmt(self.n_outer)} on {self.outer.name} "
                      f"({fmt(self.outer.bandwidth, 1e9)} GB/s)")
            only_across = np.all(np.asarray(self.n_inner) <= 1)
            text += f", {across}" if only_across else f", {inside} x {across}"
        else:
            text += f", {inside}"
        return text + (f" [{self.note}]" if self.note else "")

    def time(self, kind: Collective | str, size_bytes: Num) -> Num:
        """Seconds for one collective over this axis's group (``size_bytes`` per rank, as
        nccl-tests counts it); infinite where the group leaves a cluster with no outer tier."""
        if self.outer is None:
            t = collective_time(kind, size_bytes, self.n_inner, self.inner)
            return _out(np.where(np.asarray(self.n_outer) > 1, np.inf, t))
        return hierarchical_time(kind, size_bytes, self.n_inner, self.inner, self.n_outer,
                                 self.outer)


def _outer_tier(cluster: Cluster, up: NetworkTier | None) -> NetworkTier | None:
    """The tier beyond the scale-up domain: the smallest one that holds the whole cluster (a
    second scale-up level such as the Trn2 UltraServer's), else the largest."""
    rest = [t for t in cluster.tiers if t is not up and t.domain_size > cluster.scale_up_domain]
    if not rest:
        return None
    holding = [t for t in rest if t.domain_size >= cluster.devices]
    return min(holding, key=lambda t: t.domain_size) if holding else max(
        rest, key=lambda t: t.domain_size)


def _torus_dims(torus: tuple[int, ...], stride: Num, span: Num) -> tuple[Num, Num]:
    """(dimensions covered, whole?) for devices [stride, span) of a torus filled innermost-first.
    Whole: stride and span both fall on dimension boundaries; else the dimensions touched."""
    cum = np.cumprod((1, *torus)).astype(float)
    stride, span = np.asarray(stride, dtype=float), np.asarray(span, dtype=float)
    whole_dims = np.zeros(np.broadcast(stride, span).shape)
    whole = np.zeros(whole_dims.shape, dtype=bool)
    # device counts are whole numbers held as floats: a relative 1e-9 is equality (np.isclose
    # gave the same answer at 10x the cost: 10 % of `plan --hw any`, cProfile)
    at = [np.abs(stride - c) <= 1e-9 * c for c in cum]
    ends = [np.abs(span - c) <= 1e-9 * c for c in cum]
    for i in range(len(torus)):
        for j in range(i + 1, len(torus) + 1):
            hit = at[i] & ends[j]
            whole_dims = np.where(hit, j - i, whole_dims)
            whole = whole | hit
    touched = sum(((cum[i] < span) & (cum[i + 1] > stride)).astype(float)
                  for i in range(len(torus)))
    return np.where(whole, whole_dims, np.maximum(touched, 1.0)), whole


def place_axes(cluster: Cluster, sizes: dict[str, Num],
               order: tuple[str, ...] = DEFAULT_ORDER,
               share_scale_out: bool = True) -> dict[str, AxisLink]:
    """Map each axis of ``order`` (innermost first; missing sizes are 1) onto the cluster's
    tiers. Sizes may be numpy arrays (one entry per candidate mapping)."""
    unknown = sorted(set(sizes) - set(order))
    if unknown:
        raise InputError(f"unknown mesh axes {unknown}: use names from {list(order)}")
    k = {a: np.asarray(sizes.get(a, 1), dtype=float) for a in order}
    for a, v in k.items():
        if np.any(v < 1):
            raise InputError(f"axis {a!r} must have size >= 1, got {sizes[a]}")
    acc = cluster.accelerator.id
    dom = float(cluster.scale_up_domain)
    up_tier = cluster.tier(LinkRole.SCALE_UP)
    out_tier = _outer_tier(cluster, up_tier)
    up = link_for_tier(up_tier, acc) if up_tier else None
    out = link_for_tier(out_tier, acc) if out_tier else None
    # A system without network tiers (one device): every axis of size 1 costs nothing, and a
    # larger group has nowhere to go (infinite time, reported by the link's note).
    inner_default = up or out or NO_NETWORK

    strides, stride = {}, np.asarray(1.0)
    for a in order:
        strides[a] = stride
        stride = stride * k[a]
    n_inner = {a: np.clip(np.floor(dom / strides[a]), 1.0, k[a]) for a in order}
    n_outer = {a: k[a] / n_inner[a] for a in order}
    crossing = sum((n_outer[a] > 1).astype(float) for a in order)
    share = 1.0 / np.maximum(crossing, 1.0) if share_scale_out else 1.0

    result = {}
    for a in order:
        notes: list[str] = []
        inner, dims = inner_default, np.asarray(0.0)
        if up is not None and up_tier is not None:
            inner, dims, notes = _inner_link(cluster, up_tier, up, strides[a], n_inner[a])
        outer = None
        if out is not None:
            outer = replace(out, bandwidth=_out(out.bandwidth * share))
            if share_scale_out and np.any((crossing > 1) & (n_outer[a] > 1)):
                notes.append("scale-out NIC shared equally by the axes that cross domains")
        elif np.any(n_outer[a] > 1):
            notes.append("the group leaves the scale-up domain and the cluster has no further "
                         "tier: infinite time")
        result[a] = AxisLink(a, _out(k[a]), _out(strides[a]), _out(n_inner[a]), inner,
                             _out(n_outer[a]), outer, _out(dims), "; ".join(notes))
    return result


def _inner_link(cluster: Cluster, tier: NetworkTier, up: Link, stride: Num,
                n_inner: Num) -> tuple[Link, Num, list[str]]:
    """The scale-up link as this axis's inner group sees it (torus dims, full-mesh links)."""
    notes: list[str] = []
    if tier.topology is Topology.FULL_MESH and tier.domain_size > 1:
        links = np.maximum(n_inner - 1.0, 1.0) / (tier.domain_size - 1)
        return replace(up, bandwidth=_out(up.bandwidth * np.minimum(links, 1.0))), 0.0, notes
    if cluster.torus is None or tier.topology not in _TORUS:
        return up, 0.0, notes
    torus = cluster.torus
    dims, whole = _torus_dims(torus, stride, stride * n_inner)
    per_link = up.bandwidth / (2 * len(torus))  # one-way, per link: 6 links in 3D, 4 in 2D
    if not np.all(whole | (n_inner <= 1)):
        notes.append(f"does not fill whole torus dimensions of {'x'.join(map(str, torus))}: "
                     "modelled at the bandwidth of the dimensions it touches (no wraparound "
                     "ignored, optimistic)")
    link = replace(up, bandwidth=_out(per_link * 2 * dims),
                   source=f"{up.source}; torus axis: per-link one-way x 2 (bidirectional ring) "
                          f"x dims spanned (scaling book S44)")
    return link, dims, notes


def pair_link(cluster: Cluster, same_domain: bool) -> Link:
    """The link one device uses to send to one peer: the scale-up tier when both sit in one
    scale-up domain (on a full mesh, the single point-to-point link of the pair: tier x
    1/(D-1), as ``_inner_link`` counts links), else the tier beyond it (one NIC per device in a
    rail-optimized fat-tree; the whole NIC, nothing else crossing at that moment);
    ``NO_NETWORK`` (infinite time) where the cluster has no such tier."""
    acc = cluster.accelerator.id
    up_tier = cluster.tier(LinkRole.SCALE_UP)
    if same_domain and up_tier is not None:
        up = link_for_tier(up_tier, acc)
        if up_tier.topology is Topology.FULL_MESH and up_tier.domain_size > 1:
            up = replace(up, bandwidth=up.bandwidth / (up_tier.domain_size - 1))
        return up
    out_tier = _outer_tier(cluster, up_tier)
    return NO_NETWORK if out_tier is None else link_for_tier(out_tier, acc)
