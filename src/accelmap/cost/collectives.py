"""Alpha-beta cost of collectives on one network tier, and on two tiers (hierarchical).

time = fixed + steps x alpha + bytes-moved-per-rank / B, with B the *achievable* per-device,
per-direction bandwidth of the tier (line rate x measured efficiency, :func:`link_for_tier`).
``size_bytes`` is the per-rank buffer as nccl-tests counts it (doc/PERFORMANCE.md, N16): the
all-reduce buffer; the all-gather OUTPUT; the reduce-scatter INPUT; the all-to-all send buffer.

Formulas (n ranks, S bytes; Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective
Communication Operations in MPICH", sec. 4; nccl-tests PERFORMANCE.md, N16):

- ring all-reduce: 2(n-1)/n S/B + 2(n-1) alpha (reduce-scatter then all-gather around the ring);
- ring all-gather / reduce-scatter: (n-1)/n S/B + (n-1) alpha;
- all-to-all (direct, pairwise exchange in n-1 rounds): (n-1)/n S/B + (n-1) alpha;
- send/recv: S/B + alpha; broadcast (pipelined, van de Geijn): S/B + ceil(log2 n) alpha;
- tree all-reduce (double binary tree, Sanders, Speck & Traeff 2009; NCCL 2.4): NCCL's tuning
  model converts bus to algorithm bandwidth with ratio 0.5 for trees, i.e. 2 S/B, and charges
  2 x depth steps of latency (NVIDIA/nccl src/graph/tuning.cc, ``ratio = .5`` and
  ``2 * (... + log2i(nNodes) * interLat)``; N6);
- in-network all-reduce (NVLink SHARP / NVLS, IB SHARP): every rank sends its S once into the
  switch and gets the reduced S back, and the all-gather half costs S/n more:
  (n+1)/n S/B_in (S. Jeaugey, NCCL, nccl-tests issue #212 and PR #239: "algobw = busbw *
  n/(n+1)"), plus a constant latency (NCCL tuning.cc NVLS hwLat ~23-25 us; N12).

With ``algorithm=None`` the time is the fastest of the algorithms NCCL would consider for that
collective (ring; tree on scale-out tiers, where NCCL builds trees; in-network where the switch
reduces), as NCCL's tuner picks the minimum predicted time per size (tuning.cc
``ncclTopoGetAlgoTime``). Everything is numpy-broadcastable in ``size_bytes`` and ``n``;
``n <= 1`` costs nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from accelmap.errors import InputError
from accelmap.hardware.schema import LinkRole, NetworkTier, Topology
from accelmap.units import Num

# --- constants (one place, cited) --------------------------------------------------------------
# Per-step latency (alpha) when a tier gives none: NCCL tuning.cc hwLat, ring, LL protocol (older
# version, commit 01afd20; shared network.csv rows "NCCL hwLat ... per step", source N6). These are
# the values the catalog presets carry where they give a latency.
NVLINK_STEP_LATENCY_S = 0.47e-6
PCIE_STEP_LATENCY_S = 1.0e-6
NET_STEP_LATENCY_S = 2.7e-6
# TPU ICI: ~1 us per hop, the scaling book's worked-example assumption (S44).
ICI_HOP_LATENCY_S = 1.0e-6
# Fixed cost per NCCL collective: baseLat, ring, LL protocol, newer tuning.cc (N12: 6.6 us).
NCCL_BASE_LATENCY_S = 6.6e-6
# NVLS (NVLink SHARP) per-collective latency: NCCL NVLS Simple hardware latency, 25 us (N12).
NVLS_LATENCY_S = 25e-6
# Protocols. NCCL's tuner times every protocol and takes the fastest (tuning.cc
# ncclTopoTuneModel / ncclTopoGetAlgoTime). LL sends 8-byte words with an inline flag, so it
# has the lowest per-step latency but a quarter (multi-node, all-reduce) to a third of the bus
# bandwidth (``busBw * 1.0/4.0 : 1.0/3.0``); Simple moves data at full bandwidth in 512 KiB-ish
# chunks with a higher latency per step: ring hwLat Simple 5.7 us on NVLink and PCI, 6.6 us on
# the network, baseLat ring Simple 8.4 us (tuning.cc, the same table as the LL figures above).
# The alpha-beta model used to pair LL's latency with Simple's bandwidth, which no protocol has.
LL_BANDWIDTH_FRACTION = 1.0 / 3.0
LL_BANDWIDTH_FRACTION_MULTINODE = 1.0 / 4.0
SIMPLE_STEP_LATENCY_S = {"nvlink": 5.7e-6, "pcie": 5.7e-6, "net": 6.6e-6}
SIMPLE_BASE_LATENCY_S = 8.4e-6

_DATA = "cost/data/collective_efficiency.yaml"
# Small-message latency fitted on the shared rows (fitters/fit_collective_latency.py): NCCL's
# LL per-step latency on NVSwitch tiers, and the custom one-shot all-reduce of serving stacks.
_LATENCY_DATA = "cost/data/collective_latency.yaml"


class Collective(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"
    BROADCAST = "broadcast"


class Algorithm(StrEnum):
    RING = "ring"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"
    IN_NETWORK = "in_network"  # NVLS / SHARP
    DIRECT = "direct"
    ONE_SHOT = "one_shot"  # custom all-reduce of serving stacks (vLLM, TensorRT-LLM, SGLang)


@dataclass(frozen=True)
class OneShot:
    """A custom one-shot all-reduce kernel (vLLM ``csrc/custom_all_reduce.cuh``; TensorRT-LLM
    ``customAllReduceKernels.cu``): every rank reads its peers' buffers over NVLink and reduces
    them in one kernel, so it pays no ring steps. time = base + per_rank x (n-1) + (n-1)/n x S /
    bandwidth, fitted to a measured table (``collective_latency.yaml``, source named there)."""

    base_s: float
    per_rank_s: float
    bandwidth: float
    source: str = ""

    def time(self, s: Num, n: Num) -> Num:
        return self.base_s + self.per_rank_s * (n - 1) + (n - 1) / n * s / self.bandwidth


@dataclass(frozen=True)
class Link:
    """What one rank sees of a tier: achievable bandwidth per direction and latencies.

    ``bandwidth`` is what ring-class algorithms achieve (it equals nccl-tests' busbw for large
    messages); ``in_network_bandwidth`` the per-direction rate an in-switch reduction sustains
    (None: same as ``bandwidth``). ``base_latency_s`` is paid once per collective; ``latency_s``
    once per algorithm step (ring step, tree level, torus hop). ``tree`` says whether NCCL
    builds a tree on this tier: it does across nodes only; inside a node its "tree" is a chain
    with the ring's 2(n-1) steps and twice the ring's bytes, never faster than the ring
    (tuning.cc tree latency ``2 * ((nRanks/nNodes-1) * intraLat + log2i(nNodes) * interLat)``).
    """

    bandwidth: Num
    latency_s: float = 0.0
    in_network_reduction: bool = False
    name: str = ""
    source: str = ""
    in_network_bandwidth: Num | None = None
    in_network_latency_s: float | None = None
    base_latency_s: float = 0.0
    tree: bool = True
    # the Simple protocol's per-step and fixed latency (None: one protocol, the figures above)
    simple_latency_s: float | None = None
    simple_base_latency_s: float | None = None
    # NCCL's own per-step constant where a measured latency replaced it: NCCL's tuner still
    # chooses the algorithm with its constants (tuning.cc), the time is the measured one
    tuner_latency_s: float | None = None
    # a custom one-shot all-reduce the software runs on this link (None: NCCL only)
    one_shot: OneShot | None = None

    @property
    def switch_bandwidth(self) -> Num:
        return self.bandwidth if self.in_network_bandwidth is None else self.in_network_bandwidth

    @property
    def switch_latency_s(self) -> float:
        if self.in_network_latency_s is not None:
            return self.in_network_latency_s
        return self.base_latency_s + 2 * self.latency_s  # one hop up, one hop down


# --- nccl-tests bandwidth definitions ------------------------------------------------------------
def bus_factor(kind: Collective | str, n: Num) -> Num:
    """busbw / algbw as nccl-tests defines it (PERFORMANCE.md, N16): 2(n-1)/n for all-reduce;
    (n-1)/n for all-gather, reduce-scatter and all-to-all; 1 for broadcast and send/recv."""
    kind = Collective(kind)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    if kind is Collective.ALL_REDUCE:
        return 2 * (n - 1) / n
    if kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        return (n - 1) / n
    return np.ones_like(n)


def algorithm_bandwidth(size_bytes: Num, time_s: Num) -> Num:
    """algbw = S / t (nccl-tests PERFORMANCE.md, N16)."""
    return _out(np.asarray(size_bytes, dtype=float) / np.asarray(time_s, dtype=float))


def bus_bandwidth(kind: Collective | str, size_bytes: Num, n: Num, time_s: Num) -> Num:
    """busbw = algbw x :func:`bus_factor` (nccl-tests PERFORMANCE.md, N16), comparable with the
    per-direction link rate whatever n is (for point-to-point algorithms)."""
    return _out(algorithm_bandwidth(size_bytes, time_s) * bus_factor(kind, n))


# --- single tier ---------------------------------------------------------------------------------
def _out(x: Num) -> Num:
    return float(x) if np.ndim(x) == 0 else x


def _log2ceil(n: Num) -> Num:
    return np.ceil(np.log2(np.maximum(n, 1.0)))


def _ring(kind: Collective, s: Num, n: Num, link: Link,
          ll_fraction: float = LL_BANDWIDTH_FRACTION) -> Num:
    """Point-to-point algorithms (ring; direct for all-to-all): bandwidth and step terms, on
    the faster of NCCL's LL and Simple protocols where the link knows both (the fixed cost
    beyond LL's ``base_latency_s`` included, which the caller adds)."""
    b, a = link.bandwidth, link.latency_s
    f = (n - 1) / n
    if kind is Collective.ALL_REDUCE:
        volume, steps = 2 * f * s, 2 * (n - 1)
    elif kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        volume, steps = f * s, n - 1
    elif kind is Collective.SEND_RECV:
        volume, steps = s, 1.0 + 0.0 * n
    else:
        volume, steps = s, _log2ceil(n)  # broadcast, pipelined
    if link.simple_latency_s is None:
        return volume / b + steps * a
    return _protocols(volume, steps, b, link, ll_fraction)


def _protocols(volume: Num, steps: Num, b: Num, link: Link, ll_fraction: float) -> Num:
    """The faster of LL (its latency, a fraction of the bandwidth) and Simple (full bandwidth,
    its own per-step and fixed latency) for ``volume`` bytes in ``steps`` steps."""
    assert link.simple_latency_s is not None
    ll = volume / (b * ll_fraction) + steps * link.latency_s
    extra_base = (link.simple_base_latency_s or link.base_latency_s) - link.base_latency_s
    simple = volume / b + steps * link.simple_latency_s + extra_base
    return np.minimum(ll, simple)


def _algorithm_time(kind: Collective, s: Num, n: Num, link: Link, algo: Algorithm) -> Num:
    """One algorithm on one tier, fixed latency included."""
    if algo in (Algorithm.RING, Algorithm.DIRECT):
        return _ring(kind, s, n, link) + link.base_latency_s
    if kind is not Collective.ALL_REDUCE:
        raise InputError(f"algorithm {algo.value!r} is modelled for all_reduce only; use ring "
                         f"or direct for {kind.value}")
    if algo is Algorithm.TREE:
        return 2 * s / link.bandwidth + 2 * _log2ceil(n) * link.latency_s + link.base_latency_s
    if algo is Algorithm.IN_NETWORK:
        if not link.in_network_reduction:
            raise InputError(f"link {link.name!r} has no in-network reduction (NVLS/SHARP); "
                             "use ring or tree")
        return (n + 1) / n * s / link.switch_bandwidth + link.switch_latency_s
    if algo is Algorithm.ONE_SHOT:
        if link.one_shot is None:
            raise InputError(f"link {link.name!r} runs no custom one-shot all-reduce")
        return link.one_shot.time(s, n)
    raise InputError("hierarchical needs two tiers: call hierarchical_time")


def candidates(kind: Collective, link: Link) -> tuple[Algorithm, ...]:
    """Algorithms NCCL's tuner chooses among for this collective on this link."""
    if kind is Collective.ALL_TO_ALL:
        return (Algorithm.DIRECT,)
    if kind is Collective.ALL_REDUCE:
        tree = (Algorithm.TREE,) if link.tree else ()
        extra = (Algorithm.IN_NETWORK,) if link.in_network_reduction else ()
        custom = (Algorithm.ONE_SHOT,) if link.one_shot is not None else ()
        return (Algorithm.RING, *tree, *extra, *custom)
    return (Algorithm.RING,)


def _best(kind: Collective, s: Num, n: Num, link: Link) -> Num:
    algos = [a for a in candidates(kind, link) if a is not Algorithm.ONE_SHOT]
    times = [_algorithm_time(kind, s, n, link, a) for a in algos]
    if link.tuner_latency_s is None or len(algos) == 1:
        nccl = functools.reduce(np.minimum, times)
    else:
        # NCCL picks by its own model (its per-step constant) and then takes the measured
        # time: at 8 ranks its ring LL (6.6 + 14 x 0.47 us) beats NVLS (25 us) for small
        # buffers, which is why measured small all-reduces run the ring (C0045: "NVLS at
        # >=2MiB")
        tuner = replace(link, latency_s=link.tuner_latency_s, tuner_latency_s=None)
        chosen = np.broadcast_arrays(*[_algorithm_time(kind, s, n, tuner, a) for a in algos])
        pick = np.argmin(np.stack(chosen), axis=0)
        nccl = np.choose(pick, np.broadcast_arrays(*times))
    if kind is Collective.ALL_REDUCE and link.one_shot is not None:
        # the serving stack runs its custom kernel where it is faster than NCCL
        return np.minimum(nccl, link.one_shot.time(s, n))
    return nccl


def collective_time(kind: Collective | str, size_bytes: Num, n: Num, link: Link,
                    algorithm: Algorithm | str | None = None) -> Num:
    """Seconds for one collective of ``size_bytes`` per rank over ``n`` ranks on one tier."""
    kind = Collective(kind)
    s = np.asarray(size_bytes, dtype=float)
    n = np.asarray(n, dtype=float)
    nn = np.maximum(n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (_best(kind, s, nn, link) if algorithm is None
             else _algorithm_time(kind, s, nn, link, Algorithm(algorithm)))
        return _out(np.where(n > 1, t, 0.0))


# --- two tiers -----------------------------------------------------------------------------------
def hierarchical_time(kind: Collective | str, size_bytes: Num, n_inner: Num, inner: Link,
                      n_outer: Num, outer: Link) -> Num:
    """A group of n_inner x n_outer ranks: n_inner per scale-up domain, n_outer domains.

    Two schedules, and the faster is taken (NCCL's tuner picks the faster algorithm):

    - two-level (Jia et al. 2018, arXiv:1807.11205 sec. 4.2 "hierarchical all-reduce"; Horovod
      hierarchical allreduce): all-reduce = reduce-scatter inside (or an in-switch reduction),
      all-reduce across the domains on S/n_inner per rank (each rank on its own NIC), all-gather
      inside; all-gather = across on S/n_inner, then inside; reduce-scatter mirrors it;
    - NCCL's flat ring over all ranks (rail rings: the domain's n_inner rings leave through its
      n_inner NICs), bandwidth min(B_inner, n_inner x B_outer); (nsteps - inter steps) inner and
      inter steps outer latencies (tuning.cc ring latency; N6). This is the bound nccl-tests
      shows multi-node: "8 NICs -> ~370-385 GB/s node busbw" (N2).

    All-to-all sends (n_inner-1)/n of the buffer inside and (n-n_inner)/n across, concurrently.
    Send/recv between neighbours crosses the outer tier once. Equal to :func:`collective_time`
    when n_outer == 1 (inner tier) or n_inner == 1 (outer tier).
    """
    kind = Collective(kind)
    s = np.asarray(size_bytes, dtype=float)
    ni = np.maximum(np.asarray(n_inner, dtype=float), 1.0)
    no = np.maximum(np.asarray(n_outer, dtype=float), 1.0)
    n = ni * no
    flat_in = np.asarray(collective_time(kind, s, ni, inner))
    flat_out = np.asarray(collective_time(kind, s, no, outer))
    with np.errstate(divide="ignore", invalid="ignore"):
        both = _two_tier(kind, s, ni, inner, no, outer, n)
        t = np.where(no <= 1, flat_in, np.where(ni <= 1, flat_out, both))
        return _out(np.where(n > 1, t, 0.0))


def _two_tier(kind: Collective, s: Num, ni: Num, inner: Link, no: Num, outer: Link,
              n: Num) -> Num:
    base = max(inner.base_latency_s, outer.base_latency_s)
    ar, ag, rs = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
    if kind in (ar, ag, rs):
        inner_rs = _ring(rs, s, ni, inner)
        inner_ag = _ring(ag, s, ni, inner)
        if kind is ar:
            inside = inner_rs + inner_ag + inner.base_latency_s
            if inner.in_network_reduction:  # NVLS reduce-scatter + all-gather ~ NVLS all-reduce
                inside = np.minimum(inside, _algorithm_time(ar, s, ni, inner,
                                                            Algorithm.IN_NETWORK))
            two_level = inside + _best(ar, s / ni, no, outer)
        elif kind is ag:
            two_level = inner_ag + inner.base_latency_s + _best(ag, s / ni, no, outer)
        else:
            two_level = inner_rs + inner.base_latency_s + _best(rs, s / ni, no, outer)
        steps = 2.0 if kind is ar else 1.0
        rail_bw = np.minimum(inner.bandwidth, ni * outer.bandwidth)
        volume = steps * (n - 1) / n * s
        rail = (volume / rail_bw + base
                + steps * (n - no) * inner.latency_s + steps * (no - 1) * outer.latency_s)
        if inner.simple_latency_s is not None and outer.simple_latency_s is not None:
            # LL at a quarter of the bandwidth across nodes, or Simple with its step latencies
            ll = (volume / (rail_bw * LL_BANDWIDTH_FRACTION_MULTINODE) + base
                  + steps * (n - no) * inner.latency_s + steps * (no - 1) * outer.latency_s)
            simple = (volume / rail_bw + base - max(inner.base_latency_s, outer.base_latency_s)
                      + (outer.simple_base_latency_s or outer.base_latency_s)
                      + steps * (n - no) * inner.simple_latency_s
                      + steps * (no - 1) * outer.simple_latency_s)
            rail = np.minimum(ll, simple)
        return np.minimum(two_level, rail)
    if kind is Collective.ALL_TO_ALL:
        inside = (ni - 1) / n * s / inner.bandwidth
        across = (n - ni) / n * s / outer.bandwidth
        return (np.maximum(inside, across) + base
                + (ni - 1) * inner.latency_s + (n - ni) * outer.latency_s)
    if kind is Collective.SEND_RECV:
        return _ring(kind, s, 2.0, outer) + outer.base_latency_s
    bottleneck = np.minimum(inner.bandwidth, outer.bandwidth)  # broadcast, pipelined
    return (s / bottleneck + base + _log2ceil(ni) * inner.latency_s
            + _log2ceil(no) * outer.latency_s)


# --- achievable links from the measured efficiencies --------------------------------------------
@functools.lru_cache(maxsize=1)
def measured_efficiency() -> dict[str, Any]:
    """The bundled table derived from shared collectives.csv / network.csv (see the script
    fitters/derive_collective_efficiency.py)."""
    path = Path(str(resources.files("accelmap").joinpath(_DATA)))
    return dict(yaml.safe_load(path.read_text()) or {})


@functools.lru_cache(maxsize=1)
def measured_latency() -> dict[str, Any]:
    """The small-message latencies fitted by fitters/fit_collective_latency.py."""
    path = Path(str(resources.files("accelmap").joinpath(_LATENCY_DATA)))
    return dict(yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def custom_all_reduce() -> OneShot | None:
    """The fitted custom one-shot all-reduce (None when the data file has none)."""
    entry = measured_latency().get("custom_all_reduce")
    if not entry:
        return None
    return OneShot(float(entry["base_s"]), float(entry["per_rank_s"]),
                   float(entry["bandwidth"]), str(entry.get("source", "")))


_TORUS = (Topology.TORUS_2D, Topology.TORUS_3D, Topology.MESH_2D, Topology.MESH_3D,
          Topology.RING)


def _topology_class(tier: NetworkTier) -> str:
    """Which measured default applies: switch, full-mesh, fat-tree (scale-out) or any-scale-up."""
    if tier.role is LinkRole.SCALE_OUT or tier.topology in (Topology.FAT_TREE,
                                                            Topology.RAIL_OPTIMIZED):
        return "fat-tree"
    if tier.topology in (Topology.SWITCH, Topology.FULL_MESH):
        return tier.topology.value
    return "any-scale-up"  # torus/mesh/ring/host: no measurement in the shared data


def _efficiency(tier: NetworkTier, accelerator_id: str | None, algo: str) -> tuple[float, str]:
    data = measured_efficiency()
    own = data.get("efficiency", {}).get(accelerator_id or "", {}).get(tier.role.value, {})
    if algo in own:
        e = own[algo]
        return float(e["efficiency"]), f"measured {algo} {e['efficiency']:.3f} ({e['source']})"
    klass = _topology_class(tier)
    table = data.get("defaults", {})
    if algo not in table.get(klass, {}):
        klass = "any-scale-up"
    entry = table[klass][algo]
    n = len(entry["of"])
    return float(entry["efficiency"]), (f"default {algo} {entry['efficiency']:.3f} (median of {n} "
                                        f"measured {klass} systems)")


def _step_latency(tier: NetworkTier, measured: bool = True) -> tuple[float, str]:
    fitted = measured_latency().get("nvswitch_nccl") if measured else None
    if (fitted and tier.role is LinkRole.SCALE_UP and tier.topology is Topology.SWITCH):
        step = float(fitted["step_latency_s"])
        n_rows = len(fitted.get("fitted_on") or ())
        return step, (f"{step * 1e6:.3g} us/step NCCL LL on NVSwitch, fitted on {n_rows} small "
                      "all-reduce rows of collectives.csv (fit_collective_latency.py)")
    if tier.latency is not None:
        return tier.latency.value, f"{tier.latency.value * 1e6:g} us/step from the tier"
    if tier.topology in _TORUS:
        return ICI_HOP_LATENCY_S, "1 us/hop default (scaling book S44)"
    if tier.role is LinkRole.SCALE_OUT:
        return NET_STEP_LATENCY_S, "2.7 us/step default (NCCL hwLat NET LL, N6)"
    if tier.role is LinkRole.HOST:
        return PCIE_STEP_LATENCY_S, "1.0 us/step default (NCCL hwLat PCI LL, N6)"
    return NVLINK_STEP_LATENCY_S, "0.47 us/step default (NCCL hwLat NVLink LL, N6)"


@lru_cache(maxsize=512)  # pure in its (frozen) arguments; the planner asks ~20,000 times
def link_for_tier(tier: NetworkTier, accelerator_id: str | None = None,
                  fitted_latency: bool = True) -> Link:
    """The achievable :class:`Link` of a tier: line rate x measured efficiency for this
    accelerator and role where collectives.csv/network.csv measured it, else the median of the
    measured systems of the same topology class; latencies from the small-message fit on
    NVSwitch tiers (``fitted_latency``), else from the tier or NCCL's constants.
    ``Link.source`` says which."""
    line = tier.bandwidth_per_direction.value
    eff, eff_src = _efficiency(tier, accelerator_id, "ring")
    alpha, alpha_src = _step_latency(tier, fitted_latency)
    nccl_alpha = _step_latency(tier, False)[0]
    torus = tier.topology in _TORUS
    base = 0.0 if torus else NCCL_BASE_LATENCY_S
    base_src = ("no fixed cost (none published for ICI)" if torus
                else "base 6.6 us (NCCL baseLat ring LL, N12)")
    parts = [f"{tier.name}: {line / 1e9:g} GB/s/dir x {eff_src}", alpha_src, base_src]
    link = Link(bandwidth=line * eff, latency_s=alpha, name=tier.name, base_latency_s=base,
                tree=tier.role is LinkRole.SCALE_OUT,
                tuner_latency_s=nccl_alpha if nccl_alpha != alpha else None)
    if not torus:  # NCCL's protocols (ICI collectives have no LL/Simple split)
        kind = ("net" if tier.role is LinkRole.SCALE_OUT
                else "pcie" if tier.role is LinkRole.HOST else "nvlink")
        link = replace(link, simple_latency_s=SIMPLE_STEP_LATENCY_S[kind],
                       simple_base_latency_s=SIMPLE_BASE_LATENCY_S)
        parts.append(f"LL or Simple protocol, whichever is faster (Simple "
                     f"{SIMPLE_STEP_LATENCY_S[kind] * 1e6:g} us/step, NCCL tuning.cc)")
    if tier.in_network_reduction:
        e_in, src_in = _efficiency(tier, accelerator_id, "in_network")
        parts.append(f"in-network {src_in}, {NVLS_LATENCY_S * 1e6:g} us (NCCL NVLS, N12), "
                     "where NCCL's tuner picks it")
        link = replace(link, in_network_reduction=True, in_network_bandwidth=line * e_in,
                       in_network_latency_s=NVLS_LATENCY_S)
    return replace(link, source="; ".join(parts))
