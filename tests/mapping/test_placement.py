"""Mesh axes on network tiers: DGX H100 nodes, GB200 NVL72, TPU v5p torus, MI300X full mesh."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.catalog import Catalog
from accelmap.cost.collectives import collective_time, hierarchical_time, link_for_tier
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster, from_preset, parse_cluster
from accelmap.mapping.placement import place_axes


@pytest.fixture(scope="module")
def h100(catalog: Catalog) -> Cluster:
    return parse_cluster("64xH100", catalog)


def test_tp8_on_nvlink_dp8_on_infiniband(h100: Cluster) -> None:
    axes = place_axes(h100, {"tp": 8, "dp": 8})
    tp, dp = axes["tp"], axes["dp"]
    assert (tp.placement, tp.n_inner, tp.n_outer, tp.stride) == ("scale-up", 8, 1, 1)
    assert "NVLink" in tp.inner.name and tp.inner.in_network_reduction
    assert (dp.placement, dp.n_inner, dp.n_outer, dp.stride) == ("scale-out", 1, 8, 8)
    assert dp.outer is not None and "InfiniBand" in dp.outer.name
    # one 400G NIC per GPU, at the measured ~94 % (N2): no sharing with another crossing axis
    assert dp.outer.bandwidth == pytest.approx(0.94 * 50e9)
    assert dp.time("all_reduce", 1e9) == pytest.approx(
        collective_time("all_reduce", 1e9, 8, dp.outer))
    assert axes["pp"].n_inner == 1 and axes["pp"].time("send_recv", 1e6) == 0.0
    assert "scale-out" in dp.describe() and "GB/s" in dp.describe()


def test_default_order_puts_pipeline_outermost(h100: Cluster) -> None:
    # Megatron-Core's order "tp-cp-ep-dp-pp" on 8 nodes of 8: tp=4 x dp=2 fill one node, so the
    # data-parallel pair shares NVLink and the 8 pipeline stages sit on 8 different nodes
    axes = place_axes(h100, {"tp": 4, "dp": 2, "pp": 8})
    assert (axes["dp"].placement, axes["dp"].stride) == ("scale-up", 4)
    assert (axes["pp"].placement, axes["pp"].stride) == ("scale-out", 8)


def test_tp16_is_hierarchical(h100: Cluster) -> None:
    tp = place_axes(h100, {"tp": 16, "dp": 4}, share_scale_out=False)["tp"]
    assert (tp.placement, tp.n_inner, tp.n_outer) == ("hierarchical", 8, 2)
    assert tp.outer is not None
    assert tp.time("all_reduce", 1e9) == pytest.approx(
        hierarchical_time("all_reduce", 1e9, 8, tp.inner, 2, tp.outer))
    tp8 = place_axes(h100, {"tp": 8})["tp"]
    assert tp.time("all_reduce", 1e9) > tp8.time("all_reduce", 1e9)


def test_crossing_axes_share_the_nic(h100: Cluster) -> None:
    axes = place_axes(h100, {"tp": 8, "pp": 2, "dp": 4})
    assert axes["pp"].placement == "scale-out" and axes["dp"].placement == "scale-out"
    assert axes["dp"].outer is not None
    assert axes["dp"].outer.bandwidth == pytest.approx(0.94 * 50e9 / 2)
    assert "shared" in axes["dp"].note
    alone = place_axes(h100, {"tp": 8, "pp": 2, "dp": 4}, share_scale_out=False)["dp"]
    assert alone.outer is not None and alone.outer.bandwidth == pytest.approx(0.94 * 50e9)


def test_gb200_nvl72_tp72_inside(catalog: Catalog) -> None:
    cl = parse_cluster("gb200-nvl72", catalog)
    tp = place_axes(cl, {"tp": 72})["tp"]
    assert (tp.placement, tp.n_inner, tp.n_outer) == ("scale-up", 72, 1)
    two = from_preset(catalog.systems["gb200-nvl72"], catalog, nodes=2)
    dp = place_axes(two, {"tp": 72, "dp": 2})["dp"]
    assert (dp.placement, dp.n_inner, dp.n_outer) == ("scale-out", 1, 2)


def test_tpu_v5p_torus_dimensions(catalog: Catalog) -> None:
    cl = parse_cluster("tpu-v5p-1024", catalog)
    axes = place_axes(cl, {"tp": 8, "dp": 64})
    tp, dp = axes["tp"], axes["dp"]
    assert tp.placement == "scale-up" and tp.torus_dims == 1
    assert dp.placement == "scale-up" and dp.torus_dims == 2  # 8 x 8 x 8 slice: all ICI
    ici = link_for_tier(cl.tiers[0], "tpu-v5p")
    per_link = ici.bandwidth / 6  # 540/6 = 90 GB/s one-way per link (S44) x the efficiency
    assert tp.inner.bandwidth == pytest.approx(2 * per_link)
    assert dp.inner.bandwidth == pytest.approx(4 * per_link)
    assert not tp.note and not dp.note
    odd = place_axes(cl, {"tp": 4, "dp": 128})
    assert "torus" in odd["tp"].note and odd["tp"].torus_dims == 1


def test_mi300x_full_mesh_uses_n_minus_one_links(catalog: Catalog) -> None:
    cl = parse_cluster("16xmi300x", catalog)
    axes = place_axes(cl, {"tp": 2, "dp": 8})
    full = place_axes(cl, {"tp": 8})["tp"].inner.bandwidth
    assert axes["tp"].inner.bandwidth == pytest.approx(full / 7)
    assert axes["dp"].n_inner == 4 and axes["dp"].inner.bandwidth == pytest.approx(full * 3 / 7)


def test_arrays_of_mappings(h100: Cluster) -> None:
    tp = np.array([1, 2, 4, 8, 16])
    dp = 64 // tp
    axes = place_axes(h100, {"tp": tp, "dp": dp})
    assert list(axes["tp"].placement) == ["scale-up"] * 4 + ["hierarchical"]
    assert list(axes["dp"].placement) == ["hierarchical"] * 3 + ["scale-out"] * 2
    times = axes["tp"].time("all_reduce", 1e8)
    assert times.shape == (5,) and times[0] == 0.0
    one = place_axes(h100, {"tp": 16, "dp": 4})["tp"].time("all_reduce", 1e8)
    assert times[4] == pytest.approx(one)


def test_unknown_axis_and_bad_size(h100: Cluster) -> None:
    with pytest.raises(InputError, match="unknown mesh axes"):
        place_axes(h100, {"xp": 2})
    with pytest.raises(InputError, match=">= 1"):
        place_axes(h100, {"tp": 0})


def test_no_outer_tier_is_infinite(catalog: Catalog) -> None:
    cl = parse_cluster("gb200-nvl72", catalog)
    only_up = Cluster(cl.name, cl.accelerator, cl.devices_per_node, 2, cl.tiers[:1])
    dp = place_axes(only_up, {"tp": 72, "dp": 2})["dp"]
    assert dp.outer is None and dp.time("all_reduce", 1e6) == np.inf
    assert "no further tier" in dp.note


@settings(max_examples=100, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8, 16, 32]), pp=st.sampled_from([1, 2, 4, 8]),
       s=st.floats(min_value=1.0, max_value=1e10))
def test_group_sizes_multiply_and_times_are_sane(tp: int, pp: int, s: float) -> None:
    from accelmap.catalog import load_catalog

    cl = parse_cluster("64xH100", load_catalog())
    dp = max(64 // (tp * pp), 1)
    for ax in place_axes(cl, {"tp": tp, "pp": pp, "dp": dp}).values():
        assert ax.n_inner * ax.n_outer == pytest.approx(ax.size)
        assert ax.n_inner <= cl.scale_up_domain
        t = ax.time("all_reduce", s)
        assert t >= 0.0 and np.isfinite(t)
        assert (t == 0.0) == (ax.size == 1)
