"""A run's stated inter-node network (hardware/scale_out.py): reading the statement, and the
cluster whose scale-out tier carries it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.catalog import load_catalog
from accelmap.hardware.scale_out import ScaleOut, Scope, parse_scale_out
from accelmap.hardware.schema import LinkRole
from accelmap.validate.layout import build_cluster

CAT = load_catalog()


@pytest.mark.parametrize(("text", "gbps", "scope"), [
    ("1600 Gbps node-node RoCE (section title)", 1600, Scope.NODE),
    ("NVLink intra-host; 400 Gb/s RDMA per GPU", 400, Scope.DEVICE),
    ("Selene DGX A100: NVLink/NVSwitch intra-node; 8x Mellanox HDR 200Gb/s IB HCAs per node",
     1600, Scope.NODE),
    ("4 x Omni-Path 100 Gb/s", 400, Scope.NODE),
    ("2x 100 Gb/s EFA per GPU", 200, Scope.DEVICE),
    ("3.2 Tbps EFA per node", 3200, Scope.NODE),
    ("25GbE", 25, Scope.NODE),
])
def test_statements(text: str, gbps: float, scope: Scope) -> None:
    so = parse_scale_out(text)
    assert isinstance(so, ScaleOut)
    assert so.bits_per_s == pytest.approx(gbps * 1e9) and so.scope is scope


def test_unstated_and_unreadable() -> None:
    assert parse_scale_out("") is None and parse_scale_out("? (not stated)") is None
    for bad in ("InfiniBand", "0 Gb/s per GPU"):
        why = parse_scale_out(bad)
        assert isinstance(why, str) and "per GPU" in why  # names the format


def test_ambiguous_scope_reads_one_link_per_node() -> None:
    so = parse_scale_out("100 Gbps Ethernet")
    assert isinstance(so, ScaleOut) and so.scope is Scope.NODE and so.assumed


def test_cluster_takes_the_stated_rate() -> None:
    """BLOOM's Jean Zay nodes: 4 x 100 Gb/s Omni-Path for 8 A100 = 50 Gb/s a device, against
    the DGX A100 preset's 200; the scale-up tier is the preset's."""
    acc = CAT.accelerators["a100-sxm4-80gb"]
    base = build_cluster(acc, 384, 48, CAT).value
    jz = build_cluster(acc, 384, 48, CAT, "4 x 100 Gb/s Omni-Path").value
    out = jz.tier(LinkRole.SCALE_OUT)
    assert out.bandwidth_per_direction.value == pytest.approx(50e9 / 8)
    assert base.tier(LinkRole.SCALE_OUT).bandwidth_per_direction.value == pytest.approx(25e9)
    assert jz.tier(LinkRole.SCALE_UP) == base.tier(LinkRole.SCALE_UP)
    # one node has no scale-out traffic: nothing to replace
    assert build_cluster(acc, 8, 1, CAT, "25GbE").value == build_cluster(acc, 8, 1, CAT).value


@given(st.floats(1, 1e4), st.integers(1, 16), st.sampled_from(["per GPU", "per node"]))
def test_per_device_rate_is_scope_consistent(gbps: float, per_node: int, scope: str) -> None:
    so = parse_scale_out(f"{gbps:.3f} Gb/s {scope}")
    assert isinstance(so, ScaleOut)
    each = so.per_device_bytes(per_node)
    want = float(f"{gbps:.3f}") * 1e9 / 8 / (per_node if scope == "per node" else 1)
    assert each == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("bad", ["1e9 Gb/s per GPU", "-5 Gb/s per GPU", "inf Gb/s",
                                 "0 x 100 Gb/s", "1000 x 400 Gb/s", "200000 Tb/s per node"])
def test_impossible_rates_are_refused(bad: str) -> None:
    """Scientific notation, signs and rates beyond any fabric are refused, never misread."""
    assert isinstance(parse_scale_out(bad), str)
