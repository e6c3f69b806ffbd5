"""Jobs on part of their nodes or racks (validate/layout.build_cluster, cluster.of_devices):
never refused, and no group is given a scale-up link its ranks lack."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.hardware.cluster import parse_cluster
from accelmap.hardware.schema import LinkRole
from accelmap.validate.layout import build_cluster

CAT = load_catalog()


def test_256_gpus_of_nvl72_racks_are_a_cluster_not_a_refusal() -> None:
    r = build_cluster(CAT.accelerators["gb200"], 256, None, CAT)
    assert r.value is not None and r.value.devices == 256
    # 64 trays of 4 as SLURM --segment places them (Megatron-Bridge's GB200 launcher: the
    # largest divisor <= 18 of the tray count): 4 racks of 64, each an NVLink domain of 64
    assert r.value.scale_up_domain == 64 and r.value.nodes == 4
    assert any("do not fill nodes of 72" in n for n in r.notes)


@pytest.mark.parametrize(("n", "domain"), [(2496, 64), (100, 20), (216, 72), (74, 2)])
def test_nvl72_jobs_run_in_blocks_of_whole_trays(n: int, domain: int) -> None:
    """Blocks of whole 4-GPU trays dividing the job, each inside one rack: NVIDIA's 2,496-GPU
    runs fill 39 racks with 64; a job of 74 (not whole trays) keeps the gcd rule."""
    assert parse_cluster(f"{n}xgb200", CAT).scale_up_domain == domain


def test_part_of_each_rack_has_a_domain_of_the_devices_used() -> None:
    """4 racks of 64 used GPUs: a scale-up domain of 64, not 72."""
    r = build_cluster(CAT.accelerators["gb200"], 256, 4, CAT)
    assert r.value is not None and r.value.devices == 256
    assert r.value.scale_up_domain == 64 and r.value.devices_per_node == 64


def test_trays_of_a_rack_are_not_nodes() -> None:
    """72 GB200 on 18 compute trays of 4: one NVLink domain of 72, not 18 domains of 4."""
    r = build_cluster(CAT.accelerators["gb200"], 72, 18, CAT)
    assert r.value is not None and r.value.scale_up_domain == 72


@pytest.mark.parametrize(("spec", "domain"), [("9xmi300x", 1), ("12xH100", 4), ("10xH100", 2)])
def test_partial_nodes_have_positive_links(spec: str, domain: int) -> None:
    """A domain of one device has no scale-up tier (not a 0 B/s one); every tier left has a
    positive bandwidth, and the cluster holds exactly the devices asked for."""
    cl = parse_cluster(spec, CAT)
    assert cl.devices == int(spec.split("x")[0])
    assert cl.scale_up_domain == domain
    assert all(t.bandwidth_per_direction.value > 0 for t in cl.tiers)
    if domain == 1:
        assert cl.tier(LinkRole.SCALE_UP) is None
