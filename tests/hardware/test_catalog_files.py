"""Catalog checks: every bundled hardware file parses, cites its sources, and is physically sane.

Bounds are deliberately wide (they catch unit slips of 1000x and sparse figures passed as dense,
not small errors); the reasons are next to each bound.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from accelmap.catalog import Catalog
from accelmap.cited import PeakRate
from accelmap.hardware.schema import Accelerator, DeviceClass, LinkRole, MemoryRole
from accelmap.units import DType, parse_quantity

MIN_ACCELERATORS = 45
ACCUMULATE_HALVED = {"rtx-3090", "rtx-4090", "rtx-5090"}

# Plausible device-memory bandwidth per memory family, bytes/s (per device). HBM: one HBM2 stack
# is ~0.2-0.4 TB/s, the largest parts (B300, MI355X) quote 8 TB/s. GDDR: RTX 5090 ~1.8 TB/s.
# LPDDR: Jetson ~0.1, M3 Ultra ~0.8 TB/s. DDR: one to twelve DDR4/DDR5 channels. SRAM: on-chip
# fabrics, tens of TB/s (Groq 80 TB/s) up to 21 PB/s (Cerebras WSE-3).
BANDWIDTH_BOUNDS = {
    "HBM": (0.1e12, 10e12),
    "GDDR": (0.1e12, 2.5e12),
    "LPDDR": (10e9, 1.2e12),
    "DDR": (10e9, 1.2e12),
    "SRAM": (1e12, 1e17),
}


def accelerators(catalog: Catalog) -> list[Accelerator]:
    return list(catalog.accelerators.values())


def test_enough_accelerators_in_every_class(catalog: Catalog) -> None:
    accs = accelerators(catalog)
    assert len(accs) >= MIN_ACCELERATORS
    classes = {a.device_class for a in accs}
    assert classes == set(DeviceClass), f"classes without an entry: {set(DeviceClass) - classes}"


def test_every_cited_source_is_defined(catalog: Catalog) -> None:
    for entry in [*catalog.accelerators.values(), *catalog.systems.values()]:
        missing = entry.cited_ids() - set(catalog.sources) - set(entry.sources)
        assert not missing, f"{entry.id} cites undefined sources {missing}"


def test_every_number_reads_back_as_its_value(catalog: Catalog) -> None:
    # the text shown in reports is the YAML's own string: parsing it again gives the SI value
    for a in accelerators(catalog):
        cited = [*a.matrix.values(), *a.vector.values(), *(m.capacity for m in a.memory)]
        for v in cited:
            assert v.source
            assert parse_quantity(v.text, v.dimension) == pytest.approx(v.value), (a.id, v)


def test_text_that_contradicts_the_value_is_refused() -> None:
    with pytest.raises(ValidationError, match="differs from value"):
        PeakRate.model_validate({"value": "1 PFLOP/s", "text": "9 PFLOP/s", "source": "S1"})


def test_16bit_peak_in_sane_range(catalog: Catalog) -> None:
    for a in accelerators(catalog):
        for dt in (DType.BF16, DType.FP16):
            peak = a.peak(dt)
            if peak is not None:
                assert 1e11 <= peak <= 1e17, (a.id, dt, peak)


def test_all_peaks_in_sane_range(catalog: Catalog) -> None:
    for a in accelerators(catalog):
        for dt in a.dtypes:
            assert 1e9 <= a.peak(dt) <= 1e17, (a.id, dt)  # type: ignore[operator]


def test_dense_not_sparse(catalog: Catalog) -> None:
    """Halving precision at most doubles dense throughput; a sparse figure would show 4x.

    The one documented exception: Blackwell Ultra (B300/GB300) runs NVFP4 at 3x its FP8 rate
    (15 vs 5 PFLOP/s dense per GPU, NVIDIA GB300 NVL72 specs, source S25); a sparse FP4 figure
    passed as dense would show 6x, so 3.05x still catches it. GeForce cards list their 16- and
    8-bit tensor rates with FP32 accumulate, which runs at half rate (reference SOURCES.md,
    "Accumulate precision on GeForce cards"), while FP4 has no such split: twice the bound there.
    """
    pairs = [(DType.BF16, DType.FP8, 2.05), (DType.FP16, DType.FP8, 2.05),
             (DType.FP8, DType.FP4, 3.05), (DType.TF32, DType.BF16, 2.05)]
    for a in accelerators(catalog):
        for wide, narrow, bound in pairs:
            if a.id in ACCUMULATE_HALVED and narrow == DType.FP4:
                bound *= 2
            w, n = a.peak(wide), a.peak(narrow)
            if w and n:
                assert n <= bound * w, f"{a.id}: {narrow} {n:.3g} vs {wide} {w:.3g} (sparse?)"


def test_matrix_units_beat_vector_units_for_16bit(catalog: Catalog) -> None:
    for a in accelerators(catalog):
        for dt in (DType.BF16, DType.FP16):
            if dt in a.matrix and dt in a.vector:
                assert a.matrix[dt].value >= a.vector[dt].value, (a.id, dt)


def test_memory_bandwidth_plausible_for_its_type(catalog: Catalog) -> None:
    for a in accelerators(catalog):
        for m in a.memory:
            if m.bandwidth is None or m.role == MemoryRole.ONCHIP:
                continue
            lo, hi = BANDWIDTH_BOUNDS[m.kind.family]
            assert lo <= m.bandwidth.value <= hi, (a.id, m.name, m.bandwidth.text)


def test_device_memory_capacity_plausible(catalog: Catalog) -> None:
    for a in accelerators(catalog):
        cap = a.memory_bytes
        # 8 MB (Coral's SRAM) to 6 TB (a 12-channel CPU socket).
        assert 1e6 <= cap <= 7e12, (a.id, cap)


def test_links_are_per_link_per_direction(catalog: Catalog) -> None:
    for a in accelerators(catalog):
        for link in a.links:
            # No single link today exceeds ~200 GB/s per direction (NVLink 5: 50 GB/s; a PCIe 6
            # x16 port ~128 GB/s). A larger figure is an aggregate or a bidirectional total.
            assert link.bandwidth_per_direction.value <= 200e9, (a.id, link.name)
        up = a.bandwidth_per_direction(LinkRole.SCALE_UP)
        assert up <= 2e12, (a.id, up)  # NVLink 5 = 900 GB/s per direction per GPU


def test_prices_and_power_plausible(catalog: Catalog) -> None:
    for a in accelerators(catalog):
        if a.price:
            assert 0.05 <= a.price.usd_per_hour.value <= 100, a.id
        if a.tdp and a.device_class != DeviceClass.SRAM_MACHINE:
            assert 0.5 <= a.tdp.value <= 2000, a.id


def test_ids_and_aliases_do_not_collide(catalog: Catalog) -> None:
    ids = set(catalog.accelerators)
    for a in accelerators(catalog):
        for alias in a.aliases:
            assert alias not in ids or alias == a.id, f"{a.id}: alias {alias!r} is another id"


@pytest.mark.parametrize(
    "system_id",
    ["dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "mi300x-8", "gaudi3-8",
     "trn2-48xlarge", "tpu-v4-256", "tpu-v5e-256", "tpu-v5p-1024", "tpu-v6e-256"],
)
def test_required_system_presets_exist(catalog: Catalog, system_id: str) -> None:
    assert system_id in catalog.systems


def test_tpu_slices_of_every_generation_with_torus(catalog: Catalog) -> None:
    gens = {catalog.accelerators[s.accelerator].id for s in catalog.systems.values() if s.torus}
    assert {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"} <= gens


def test_system_tiers_within_device_links(catalog: Catalog) -> None:
    for s in catalog.systems.values():
        acc = catalog.accelerators[s.accelerator]
        dev_up = acc.bandwidth_per_direction(LinkRole.SCALE_UP)
        for tier in s.tiers:
            if tier.role == LinkRole.SCALE_UP and dev_up:
                # a tier cannot give a device more than the device's own links carry
                assert tier.bandwidth_per_direction.value <= dev_up * 1.01, (s.id, tier.name)
            if tier.role == LinkRole.SCALE_UP:
                # a preset's scale-up tier cannot reach devices outside the preset
                assert tier.domain_size <= s.devices, (s.id, tier.name)
