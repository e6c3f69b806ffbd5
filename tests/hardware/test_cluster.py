"""Clusters of any device count of any accelerator: partial nodes, TPU slices, the accelerator's
own links where no preset exists, and a one-line error where the catalog has no link to join
the devices."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.hardware.cluster import of_devices, parse_cluster
from accelmap.hardware.schema import DeviceClass, LinkRole, Topology


@pytest.mark.parametrize("n", [1, 2, 4])
def test_partial_node_of_a_preset(catalog: Catalog, n: int) -> None:
    cl = parse_cluster(f"{n}xH100", catalog)
    dgx = catalog.systems["dgx-h100"]
    assert (cl.nodes, cl.devices_per_node, cl.devices) == (1, n, n)
    assert cl.tiers == dgx.tiers and cl.scale_up_domain == n
    assert "dgx-h100" in cl.origin


def test_whole_nodes_unchanged(catalog: Catalog) -> None:
    cl = parse_cluster("64xH100", catalog)
    assert (cl.nodes, cl.devices_per_node, cl.scale_up_domain) == (8, 8, 8)
    assert cl.origin == "tiers of preset dgx-h100"


def test_full_nodes_plus_a_partial_one(catalog: Catalog) -> None:
    """12 = one node of 8 + one of 4, modelled as 3 scale-up domains of gcd(8, 4) = 4."""
    cl = parse_cluster("12xH100", catalog)
    assert cl.devices == 12 and (cl.nodes, cl.devices_per_node) == (3, 4)
    assert cl.scale_up_domain == 4
    assert "1 x 8 + 1 x 4" in cl.origin and "8 + 4" in cl.name
    # a full mesh keeps its per-peer rate: the tier bandwidth drops to the links to 3 peers
    g = parse_cluster("12xgaudi3", catalog)
    full = catalog.systems["gaudi3-8"].tiers[0]
    up = g.tier(LinkRole.SCALE_UP)
    assert up is not None and full.topology is Topology.FULL_MESH and up.domain_size == 4
    assert up.bandwidth_per_direction.value == pytest.approx(
        full.bandwidth_per_direction.value * 3 / 7)


def test_nodes_by_per_node_shorthand(catalog: Catalog) -> None:
    one = parse_cluster("1x2xh100-sxm5-80gb", catalog)
    assert (one.nodes, one.devices_per_node, one.scale_up_domain) == (1, 2, 2)
    two = parse_cluster("2x2xh100-sxm5-80gb", catalog)
    # two nodes of two: NVLink joins only the two GPUs of one node
    assert two.devices == 4 and two.scale_up_domain == 2


def test_tpu_slices_use_the_class_torus(catalog: Catalog) -> None:
    exact = parse_cluster("256xtpu-v5e", catalog)
    assert exact.torus == (16, 16)  # the pod preset itself
    sub = parse_cluster("64xtpu-v5e", catalog)
    assert sub.devices == 64 and sub.torus == (8, 8) and sub.scale_up_domain == 64
    assert "tpu-v5e-256" in sub.origin
    v5p = parse_cluster("64xtpu-v5p", catalog)
    assert v5p.torus == (4, 4, 4) and v5p.devices_per_node == 4
    # beyond the largest slice: whole slices over DCN
    multi = parse_cluster("512xtpu-v5e", catalog)
    assert multi.scale_up_domain == 256 and multi.tier(LinkRole.SCALE_OUT) is not None


# One part per class, with a device count its catalog links can join.
PER_CLASS = {
    DeviceClass.GPU: ("h100-sxm5-80gb", 2),
    DeviceClass.TPU: ("tpu-v5e", 4),
    DeviceClass.ASIC: ("gaudi3", 12),
    DeviceClass.SRAM_MACHINE: ("groq-lpu-v1", 16),
    DeviceClass.FPGA: ("vck5000", 2),
    DeviceClass.EDGE_NPU: ("jetson-agx-orin-64gb", 4),
    DeviceClass.CPU: ("xeon-8480plus", 2),
}


def test_every_class_is_covered() -> None:
    assert set(PER_CLASS) == set(DeviceClass)


@pytest.mark.parametrize("cls", list(DeviceClass), ids=lambda c: c.value)
def test_n_devices_of_each_class(catalog: Catalog, cls: DeviceClass) -> None:
    acc_id, n = PER_CLASS[cls]
    acc = catalog.accelerators[acc_id]
    assert acc.device_class is cls
    cl = parse_cluster(f"{n}x{acc_id}", catalog)
    assert cl.devices == n and cl.accelerator is acc
    # some tier joins every device: the scale-up domain holds them all, or an outer tier does
    outer = [t for t in cl.tiers if t.domain_size > cl.scale_up_domain]
    assert cl.scale_up_domain == n or outer
    assert of_devices(acc, n, catalog) == cl


def test_groq_over_its_chip_to_chip_links(catalog: Catalog) -> None:
    cl = parse_cluster("16xgroq-lpu-v1", catalog)
    up = cl.tier(LinkRole.SCALE_UP)
    assert up is not None and "C2C" in up.name and cl.scale_up_domain == 8  # a GroqNode
    assert up.bandwidth_per_direction.value == pytest.approx(16 * 14e9)


def test_cited_links_join_wse3_jetson_and_xeon(catalog: Catalog) -> None:
    wse = parse_cluster("4xwse-3", catalog)
    out = wse.tier(LinkRole.SCALE_OUT)
    assert out is not None and out.bandwidth_per_direction.value == pytest.approx(12 * 12.5e9)
    jet = parse_cluster("4xjetson-agx-orin-64gb", catalog)
    assert jet.tier(LinkRole.SCALE_OUT) is not None
    xeon = parse_cluster("2xxeon-8480plus", catalog)
    assert xeon.scale_up_domain == 2  # one 2-socket server over UPI


@pytest.mark.parametrize("spec, missing", [
    ("2xm3-ultra", "no scale-up, scale-out or host link"),
    ("4xxeon-8480plus", "no scale-out link"),  # two 2-socket servers: no NIC in the catalog
])
def test_a_part_without_links_is_one_line_error(catalog: Catalog, spec: str,
                                                 missing: str) -> None:
    with pytest.raises(InputError, match=missing) as e:
        parse_cluster(spec, catalog)
    assert "\n" not in str(e.value)


def test_a_single_device_needs_no_network(catalog: Catalog) -> None:
    for acc_id in ("m3-ultra", "wse-3", "jetson-orin-nano-8gb-super"):
        assert parse_cluster(f"1x{acc_id}", catalog).devices == 1
        assert api.load_system(hw=acc_id, devices=1, catalog=catalog).devices == 1


def test_load_system_devices(catalog: Catalog) -> None:
    s = api.load_system(hw="tpu-v5e", devices=4, catalog=catalog)
    assert s.devices == 4 and s.cluster.scale_up_domain == 4
    with pytest.raises(InputError, match="--devices goes with --hw"):
        api.load_system(cluster="2xH100", devices=2, catalog=catalog)
    with pytest.raises(InputError, match="positive"):
        api.load_system(hw="tpu-v5e", devices=0, catalog=catalog)


@pytest.mark.parametrize("cls", list(DeviceClass), ids=lambda c: c.value)
def test_estimate_hw_devices_each_class(cli: Callable[..., Any], cls: DeviceClass) -> None:
    """Feasible or not (memory, the scale-up rule), a result with its reason, never a crash."""
    acc_id, n = PER_CLASS[cls]
    r = cli("estimate", "gpt3-125m", "--hw", acc_id, "--devices", str(n), "--serve",
            "--batch", "1", "--prompt", "128", "--output", "8", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["accelerator"] == acc_id and isinstance(d["feasible"], bool)
    assert d["feasible"] or d["reason"]
    assert "not_published" in d and "cluster_layout" in d


def test_estimate_devices_error_is_one_line(cli: Callable[..., Any]) -> None:
    r = cli("estimate", "gpt3-125m", "--hw", "m3-ultra", "--devices", "2", "--serve")
    assert r.code != 0 and "no scale-up, scale-out or host link" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_full_mesh_part_gives_a_pair_only_its_own_links() -> None:
    """Gaudi 2's 21 scale-up ports join the 8 cards of a node all-to-all (3 per peer): a
    2-card cluster built from its links has 1/7 of the node's scale-up bandwidth, an 8-card one
    all of it (the catalog's scale_up_topology: full-mesh)."""
    from accelmap.catalog import load_catalog
    from accelmap.hardware.schema import LinkRole, Topology

    cat = load_catalog()
    acc = cat.accelerators["gaudi2"]
    assert acc.scale_up_topology is Topology.FULL_MESH
    two = parse_cluster("2xgaudi2", cat).tier(LinkRole.SCALE_UP)
    eight = parse_cluster("8xgaudi2", cat).tier(LinkRole.SCALE_UP)
    assert two is not None and eight is not None
    assert two.bandwidth_per_direction.value == pytest.approx(
        eight.bandwidth_per_direction.value / 7)


def test_one_name_rule_for_every_command(catalog: Catalog) -> None:
    """Issue 25: `compare --hw h100` resolved the name, `estimate --hw h100` called it
    ambiguous (the rule was written twice). One rule: the variant systems are built from."""
    from accelmap import api
    from accelmap.api.comparison import select_parts
    from accelmap.errors import AmbiguousNameError
    from accelmap.hardware.cluster import resolve_accelerator

    chosen = resolve_accelerator("h100", catalog).id
    assert chosen == "h100-sxm5-80gb"
    assert api.load_system(hw="h100", catalog=catalog).accelerator.id == chosen
    assert [p.id for p in select_parts(catalog, "h100", None)] == [chosen]
    assert parse_cluster("8xh100", catalog).accelerator.id == chosen
    with pytest.raises(AmbiguousNameError):  # no single preset among the matches: asked
        resolve_accelerator("a100", catalog)
    with pytest.raises(AmbiguousNameError):
        api.load_system(hw="a100", catalog=catalog)
