"""Alpha-beta collectives: hand calculations, nccl-tests bandwidth definitions, measured links."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.catalog import Catalog
from accelmap.cost.collectives import (
    Algorithm,
    Collective,
    Link,
    algorithm_bandwidth,
    bus_bandwidth,
    collective_time,
    hierarchical_time,
    link_for_tier,
    measured_efficiency,
    measured_latency,
)
from accelmap.errors import InputError
from accelmap.hardware.cluster import parse_cluster
from accelmap.hardware.schema import LinkRole

GB = 1e9
NVLINK = Link(bandwidth=450 * GB, latency_s=1e-6, name="nvlink")
NVLS = Link(bandwidth=370 * GB, latency_s=1e-6, in_network_reduction=True,
            in_network_bandwidth=310 * GB, in_network_latency_s=25e-6, name="nvls")
IB = Link(bandwidth=47 * GB, latency_s=3e-6, name="ib")
RING_KINDS = (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER,
              Collective.ALL_TO_ALL)


def test_ring_all_reduce_by_hand() -> None:
    """1 GB over 8 GPUs at 450 GB/s: 2*7/8 * 1e9/450e9 + 14 alpha."""
    t = collective_time(Collective.ALL_REDUCE, 1e9, 8, NVLINK, Algorithm.RING)
    assert t == pytest.approx(2 * 7 / 8 * 1e9 / 450e9 + 14 * 1e-6)


@pytest.mark.parametrize("kind, expected", [
    (Collective.ALL_GATHER, 7 / 8 * 1e9 / 450e9 + 7e-6),
    (Collective.REDUCE_SCATTER, 7 / 8 * 1e9 / 450e9 + 7e-6),
    (Collective.ALL_TO_ALL, 7 / 8 * 1e9 / 450e9 + 7e-6),
    (Collective.SEND_RECV, 1e9 / 450e9 + 1e-6),
    (Collective.BROADCAST, 1e9 / 450e9 + 3e-6),
])
def test_other_collectives_by_hand(kind: Collective, expected: float) -> None:
    assert collective_time(kind, 1e9, 8, NVLINK) == pytest.approx(expected)


def test_tree_and_in_network_by_hand() -> None:
    # NCCL tuning.cc: tree algBw = busBw / 2 -> 2 S/B; depth log2(8) = 3 up and down
    tree = collective_time("all_reduce", 1e9, 8, NVLINK, "tree")
    assert tree == pytest.approx(2 * 1e9 / 450e9 + 6e-6)
    # NVLS: (n+1)/n S / B_switch + its fixed latency (nccl-tests #212)
    innet = collective_time("all_reduce", 1e9, 8, NVLS, Algorithm.IN_NETWORK)
    assert innet == pytest.approx(9 / 8 * 1e9 / 310e9 + 25e-6)


def test_base_latency_paid_once() -> None:
    link = Link(bandwidth=100 * GB, latency_s=1e-6, base_latency_s=5e-6)
    t = collective_time("all_gather", 1e6, 4, link, "ring")
    assert t == pytest.approx(3 / 4 * 1e6 / 100e9 + 3e-6 + 5e-6)


def test_default_takes_fastest_candidate() -> None:
    big, small = 1e9, 1e3
    # large: in-network wins; small: its 25 us latency loses to ring/tree
    assert collective_time("all_reduce", big, 8, NVLS) == pytest.approx(
        collective_time("all_reduce", big, 8, NVLS, "in_network"))
    assert collective_time("all_reduce", small, 8, NVLS) < collective_time(
        "all_reduce", small, 8, NVLS, "in_network")
    assert collective_time("all_reduce", small, 8, NVLINK) == pytest.approx(
        collective_time("all_reduce", small, 8, NVLINK, "tree"))


def test_in_network_faster_than_ring_for_large_all_reduce() -> None:
    """Measured on 8 x H200: ring/NVLS busbw 367/480 = 0.77 (C0022, C0021)."""
    ring = collective_time("all_reduce", 4e9, 8, NVLS, "ring")
    assert collective_time("all_reduce", 4e9, 8, NVLS, "in_network") < 0.8 * ring


def test_unsupported_algorithms_say_why() -> None:
    with pytest.raises(InputError, match="in-network"):
        collective_time("all_reduce", 1e6, 8, NVLINK, "in_network")
    with pytest.raises(InputError, match="all_reduce only"):
        collective_time("all_gather", 1e6, 8, NVLINK, "tree")
    with pytest.raises(InputError, match="hierarchical_time"):
        collective_time("all_reduce", 1e6, 8, NVLINK, "hierarchical")


def test_bus_bandwidth_definitions() -> None:
    """nccl-tests PERFORMANCE.md: busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather,
    reduce-scatter, all-to-all), 1 (broadcast)."""
    assert algorithm_bandwidth(1e9, 0.01) == pytest.approx(100e9)
    assert bus_bandwidth("all_reduce", 1e9, 8, 0.01) == pytest.approx(100e9 * 14 / 8)
    assert bus_bandwidth("all_gather", 1e9, 8, 0.01) == pytest.approx(100e9 * 7 / 8)
    assert bus_bandwidth("broadcast", 1e9, 8, 0.01) == pytest.approx(100e9)


@pytest.mark.parametrize("kind", [*RING_KINDS, Collective.BROADCAST, Collective.SEND_RECV])
@pytest.mark.parametrize("n", [2, 3, 8, 64])
def test_bus_bandwidth_round_trip(kind: Collective, n: int) -> None:
    """With alpha = 0, busbw of the modelled ring time is the link bandwidth, whatever n."""
    link = Link(bandwidth=123 * GB)
    algo = "direct" if kind is Collective.ALL_TO_ALL else "ring"
    t = collective_time(kind, 3e9, n, link, algo)
    assert bus_bandwidth(kind, 3e9, n, t) == pytest.approx(123 * GB)


def test_array_friendly_and_n_one_is_free() -> None:
    sizes = np.array([1e6, 1e9, 1e9])
    ns = np.array([8, 8, 1])
    t = collective_time("all_reduce", sizes, ns, NVLS)
    assert t.shape == (3,)
    assert t[2] == 0.0
    assert t[1] == pytest.approx(collective_time("all_reduce", 1e9, 8, NVLS))
    assert collective_time("send_recv", 1e9, 1, NVLINK) == 0.0


def test_hierarchical_equals_flat_at_the_edges() -> None:
    for kind in (*RING_KINDS, Collective.BROADCAST, Collective.SEND_RECV):
        inner_only = hierarchical_time(kind, 1e9, 8, NVLS, 1, IB)
        assert inner_only == pytest.approx(collective_time(kind, 1e9, 8, NVLS))
        outer_only = hierarchical_time(kind, 1e9, 1, NVLS, 4, IB)
        assert outer_only == pytest.approx(collective_time(kind, 1e9, 4, IB))


def test_hierarchical_two_level_by_hand() -> None:
    """Inner RS + outer AR on S/8 + inner AG, against the rail ring: the faster wins."""
    inner = Link(bandwidth=400 * GB)
    outer = Link(bandwidth=10 * GB)
    s = 1e9
    two_level = 2 * 7 / 8 * s / 400e9 + 2 * 1 / 2 * (s / 8) / 10e9
    rail = 2 * 15 / 16 * s / min(400e9, 8 * 10e9)
    t = hierarchical_time("all_reduce", s, 8, inner, 2, outer)
    assert t == pytest.approx(min(two_level, rail))
    assert t == pytest.approx(two_level)  # slow NICs: reduce inside first
    fast_nics = Link(bandwidth=50 * GB)
    t2 = hierarchical_time("all_reduce", s, 8, inner, 2, fast_nics)
    assert t2 == pytest.approx(2 * 15 / 16 * s / 400e9)  # rail rings, NVLink-bound


def test_hierarchical_cheaper_than_flat_over_the_slow_tier() -> None:
    flat_slow = collective_time("all_reduce", 1e9, 16, IB)
    assert hierarchical_time("all_reduce", 1e9, 8, NVLS, 2, IB) < flat_slow


def test_multinode_busbw_reproduces_its_calibration_row(catalog: Catalog) -> None:
    """4 x 8 B200 over 8 x 50 GB/s per node gives back C0104's 381.8 GB/s busbw. A plumbing check,
    not validation: the B200 scale-out efficiency (381.8 / 400) was fitted on this very row."""
    cl = parse_cluster("4xdgx-b200", catalog)
    up, out = (link_for_tier(t, "b200") for t in cl.tiers)
    s = 16 * 2**30
    t = hierarchical_time("all_reduce", s, 8, up, 4, out)
    assert bus_bandwidth("all_reduce", s, 32, t) == pytest.approx(381.8e9, rel=0.02)


def test_measured_links_reproduce_their_rows(catalog: Catalog) -> None:
    """H200 ring busbw 367.2 (C0022) and NVLS 480.0 (C0021) on 8 GPUs at 16 GiB."""
    tier = catalog.systems["dgx-h200"].tiers[0]
    link = link_for_tier(tier, "h200-sxm")
    assert "C0022" in link.source and "C0021" in link.source and "measured" in link.source
    s = 16 * 2**30
    ring = collective_time("all_reduce", s, 8, link, "ring")
    assert bus_bandwidth("all_reduce", s, 8, ring) == pytest.approx(367.2e9, rel=0.005)
    nvls = collective_time("all_reduce", s, 8, link)
    assert bus_bandwidth("all_reduce", s, 8, nvls) == pytest.approx(480.0e9, rel=0.005)


def test_nvls_model_holds_across_group_sizes() -> None:
    """(n+1)/n S/B fits the H200 NVLS sweep (C0003-C0009): one efficiency within 2 %."""
    rows = [r for r in measured_efficiency()["measurements"]
            if r["system"].startswith("8x H200") and r["algorithm"] == "in_network"
            and r["collective"] == "all_reduce" and r["tool"] == "nccl-tests"]
    effs = [r["efficiency"] for r in rows]
    assert len(effs) >= 4
    assert max(effs) / min(effs) < 1.02


def test_link_defaults_name_their_source(catalog: Catalog) -> None:
    gb200 = parse_cluster("gb200-nvl72", catalog)
    up = link_for_tier(gb200.tier(LinkRole.SCALE_UP), "gb200")  # type: ignore[arg-type]
    assert "default" in up.source and "median" in up.source
    assert up.in_network_reduction and up.in_network_bandwidth is not None
    # NCCL's tuner keeps the tier's constant; the time uses the small-message fit
    assert up.tuner_latency_s == pytest.approx(0.47e-6)  # from the tier
    assert up.latency_s == pytest.approx(measured_latency()["nvswitch_nccl"]["step_latency_s"])
    assert "fitted on" in up.source
    assert not up.tree  # NCCL's intra-node "tree" is a chain: never a candidate inside
    small = collective_time("all_reduce", 1e3, 8, up)
    assert small == pytest.approx(collective_time("all_reduce", 1e3, 8, up, "ring"))
    # at 72 ranks 142 ring steps cost more than NVLS's fixed 25 us even for tiny messages
    assert collective_time("all_reduce", 1e3, 72, up) == pytest.approx(
        collective_time("all_reduce", 1e3, 72, up, "in_network"))
    tpu = parse_cluster("tpu-v5p-1024", catalog)
    ici = link_for_tier(tpu.tiers[0], "tpu-v5p")
    assert ici.latency_s == pytest.approx(1e-6) and "S44" in ici.source
    assert 0.5 * 540e9 < ici.bandwidth < 540e9
    ib = link_for_tier(catalog.systems["dgx-h100"].tiers[1], "h100-sxm5-80gb")
    assert ib.bandwidth == pytest.approx(47e9) and "N2" in ib.source and ib.tree


def test_efficiency_table_is_plausible() -> None:
    data = measured_efficiency()
    for acc, roles in data["efficiency"].items():
        for role, algos in roles.items():
            for algo, e in algos.items():
                assert 0.5 < e["efficiency"] < 1.0, (acc, role, algo)
    assert data["defaults"]["switch"]["ring"]["efficiency"] == pytest.approx(0.80, abs=0.03)


sizes = st.floats(min_value=0.0, max_value=1e11, allow_nan=False)
ranks = st.integers(min_value=1, max_value=4096)
kinds = st.sampled_from(list(Collective))
links = st.sampled_from([NVLINK, NVLS, IB])


@settings(max_examples=200, deadline=None)
@given(kind=kinds, s=sizes, n=ranks, link=links)
def test_times_non_negative_and_zero_for_one_rank(kind: Collective, s: float, n: int,
                                                   link: Link) -> None:
    t = collective_time(kind, s, n, link)
    assert t >= 0.0
    assert collective_time(kind, s, 1, link) == 0.0


@settings(max_examples=200, deadline=None)
@given(kind=kinds, s=sizes, extra=sizes, n=ranks, link=links)
def test_monotone_in_size(kind: Collective, s: float, extra: float, n: int, link: Link) -> None:
    assert collective_time(kind, s + extra, n, link) >= collective_time(kind, s, n, link)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=2, max_value=100_000))
def test_more_ranks_never_cheaper_per_byte_than_two(n: int) -> None:
    """The ring all-reduce bandwidth term 2(n-1)/n S/B never drops below its n=2 value S/B."""
    link = Link(bandwidth=100 * GB)
    t2 = collective_time("all_reduce", 1e9, 2, link, "ring")
    assert collective_time("all_reduce", 1e9, n, link, "ring") >= t2 * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(kind=kinds, s=st.floats(min_value=1.0, max_value=1e11), ni=st.integers(1, 72),
       no=st.integers(1, 512))
def test_hierarchical_non_negative_and_finite(kind: Collective, s: float, ni: int,
                                              no: int) -> None:
    t = hierarchical_time(kind, s, ni, NVLS, no, IB)
    assert np.isfinite(t) and t >= 0.0
    assert (t == 0.0) == (ni * no == 1)
