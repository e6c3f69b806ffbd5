"""Shape generation for the matmul sweep: tile multiples, whole waves, memory and time caps,
variants and refinement, for several device descriptions."""

from __future__ import annotations

import math
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.hardware.local import CpuFacts, describe
from accelmap.hardware.schema import Accelerator
from accelmap.measure.shapes import (
    MEMORY_FRACTION,
    Gemm,
    Structure,
    candidates,
    ladder,
    refine,
    structure,
    tiles_of,
    variants,
    waves,
)

BF16 = 2.0
MAX_FLOPS = 2e14  # a time cap that keeps the lists short


def cpu(cores: int, tile: list[int] | None = None) -> Accelerator:
    """A CPU with ``cores`` cores and an AMX-style matrix tile."""
    data: dict[str, Any] = {
        "id": f"test-cpu-{cores}", "name": "Test CPU", "vendor": "Intel", "class": "cpu",
        "release_year": 2023,
        "matrix": {"bf16": {"value": "100 TFLOP/s", "source": "T"}},
        "compute_units": {"count": {"value": cores, "unit": "core", "source": "T"},
                          "matrix_tile": tile},
        "memory": [{"name": "DDR5", "kind": "DDR5", "role": "device",
                    "capacity": {"value": "512 GiB", "source": "T"}}],
    }
    return Accelerator.model_validate(data)


@pytest.fixture(scope="module")
def devices(catalog: Catalog) -> dict[str, Accelerator]:
    return {"h100": catalog.accelerators["h100-sxm5-80gb"],
            "mi300x": catalog.accelerators["mi300x"],
            "tpu": catalog.accelerators["tpu-v5p"],
            "cpu-amx": cpu(56, [16, 32])}


def test_waves_sequence() -> None:
    it = waves()
    assert [next(it) for _ in range(9)] == [1, 2, 3, 4, 6, 8, 12, 16, 24]


@pytest.mark.parametrize(("name", "units", "native"), [
    ("h100", 132, (16, 16, 16)),  # catalog has no matrix tile: CTA tile 256x128 (MMA multiple)
    ("mi300x", 304, (16, 16, 16)),
    ("tpu", 2, (128, 128, 128)),  # 128x128 MXU: m, n and k multiples of 128
    ("cpu-amx", 56, (16, 32, 32)),  # AMX 16x32 tile: k in steps of 32
])
def test_ladder_tile_multiples_and_whole_waves(devices: dict[str, Accelerator], name: str,
                                               units: int, native: tuple[int, int, int]) -> None:
    s = structure(devices[name])
    assert s.units == units
    shapes = ladder(s, BF16, MAX_FLOPS)
    assert len(shapes) >= 5
    assert tiles_of(shapes[0], s) == units  # the first rung is exactly one wave
    for g in shapes:
        assert g.m % s.tile[0] == 0 and g.n % s.tile[1] == 0 and g.k % s.k_step == 0
        assert g.m % native[0] == 0 and g.n % native[1] == 0 and g.k % native[2] == 0
        assert tiles_of(g, s) % units == 0  # whole waves
        assert g.flops <= MAX_FLOPS
    flops = [g.flops for g in shapes]
    assert flops == sorted(flops)
    aspect = [g.m / g.n for g in shapes]
    assert all(0.25 <= a <= 4 for a in aspect)  # near-square rungs


def test_structure_uses_catalog_geometry(devices: dict[str, Accelerator]) -> None:
    assert structure(devices["h100"]).tile == (256, 128)
    assert structure(devices["tpu"]).tile == (128, 128)
    assert structure(devices["tpu"]).k_step == 128
    amx = structure(devices["cpu-amx"])
    assert amx.tile == (256, 128) and amx.k_step == 32
    # the runtime's view overrides the catalog (a 2-core VM slice of a 56-core part)
    assert structure(devices["cpu-amx"], units=2, memory_bytes=1e9).units == 2


def test_local_cpu_amx_tile() -> None:
    facts = CpuFacts(model="Test Xeon", vendor="GenuineIntel", cores=4, clock_hz=2e9,
                     clock_from="test", flags=frozenset({"amx_bf16", "amx_tile", "avx512f"}),
                     memory_bytes=16 * 2**30, machine="x86_64")
    s = structure(describe(facts))
    assert s.units == 4 and s.k_step == 32
    assert all(g.k % 32 == 0 and g.m % 16 == 0 for g in ladder(s, BF16, 1e12))


def test_memory_cap() -> None:
    s = Structure(tile=(256, 128), k_step=128, units=132, memory_bytes=4 * 2**30)
    shapes = ladder(s, BF16)  # no time cap: memory alone stops the ladder
    assert shapes
    assert all(g.operand_bytes(BF16) <= MEMORY_FRACTION * s.memory_bytes for g in shapes)
    assert max(g.operand_bytes(BF16) for g in shapes) > 0.25 * MEMORY_FRACTION * s.memory_bytes
    everything = candidates(s, BF16)
    assert all(g.operand_bytes(BF16) <= MEMORY_FRACTION * s.memory_bytes for g in everything)
    assert not ladder(Structure((256, 128), 128, 132, memory_bytes=1e6), BF16)


def test_time_cap_limits_flops(devices: dict[str, Accelerator]) -> None:
    s = structure(devices["mi300x"])
    assert all(g.flops <= 1e12 for g in candidates(s, BF16, 1e12))
    assert len(ladder(s, BF16, 1e12)) < len(ladder(s, BF16, 1e15))


def test_variants_keep_whole_waves(devices: dict[str, Accelerator]) -> None:
    s = structure(devices["h100"])
    seed = ladder(s, BF16, MAX_FLOPS)[4]
    vs = variants(seed, s, BF16, MAX_FLOPS)
    assert vs and seed not in vs
    for v in vs:
        assert tiles_of(v, s) % s.units == 0 and v.k % s.k_step == 0
    ratios = {round(v.m / v.n, 2) for v in vs}
    assert len(ratios) >= 3  # other aspect ratios, not only other depths


def test_refine_neighbours(devices: dict[str, Accelerator]) -> None:
    s = structure(devices["h100"])
    best = Gemm(4096, 4096, 4096)
    near = refine(best, s)
    assert best not in near and len(near) == 14  # 3 dims x 4 steps + 2 diagonals
    for g in near:
        dm, dn, dk = (g.m - best.m) / 256, (g.n - best.n) / 128, (g.k - best.k) / 128
        assert all(float(d).is_integer() and abs(d) <= 2 for d in (dm, dn, dk))
        moved = sum(d != 0 for d in (dm, dn, dk))
        assert moved == 1 or (moved == 3 and abs(dm) == abs(dn) == abs(dk) == 1)
    small = refine(Gemm(256, 128, 128), s)  # nothing at or below zero
    assert all(min(g.m, g.n, g.k) > 0 for g in small)
    capped = refine(best, s, BF16, max_flops=best.flops)
    assert capped and all(g.flops <= best.flops for g in capped)


def test_gemm_arithmetic() -> None:
    g = Gemm(1024, 2048, 512)
    assert g.flops == 2 * 1024 * 2048 * 512
    assert g.operand_bytes(2) == 2 * (1024 * 512 + 512 * 2048 + 1024 * 2048)
    assert g.label == "1024x2048x512"
    assert math.isclose(tiles_of(Gemm(257, 128, 1), Structure((256, 128), 1, 1, 1e9)), 2)
