"""Plausibility: a device spec past a physical bound is flagged, naming the bound, its source and
the factor; the bundled catalog has no unexplained finding."""

from __future__ import annotations

from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.hardware import plausibility as p
from accelmap.hardware.schema import Accelerator
from accelmap.units import DType


def part(**over: Any) -> Accelerator:
    """A modest, plausible part (H100-like at 700 W); ``over`` replaces top-level fields."""
    data: dict[str, Any] = {
        "id": "test-part", "name": "Test Part", "vendor": "Example", "class": "gpu",
        "release_year": 2025,
        "matrix": {"bf16": {"value": "1000 TFLOP/s", "source": "x"},
                   "fp8": {"value": "2000 TFLOP/s", "source": "x"}},
        "vector": {"fp32": {"value": "60 TFLOP/s", "source": "x"}},
        "memory": [{"name": "HBM3", "kind": "HBM3", "role": "device",
                    "capacity": {"value": "80 GB", "source": "x"},
                    "bandwidth": {"value": "3.35 TB/s", "source": "x"}}],
        "tdp": {"value": "700 W", "source": "x"},
    }
    data.update(over)
    return Accelerator.model_validate(data)


def hbm(kind: str, capacity: str, bandwidth: str) -> list[dict[str, Any]]:
    return [{"name": kind, "kind": kind, "role": "device",
             "capacity": {"value": capacity, "source": "x"},
             "bandwidth": {"value": bandwidth, "source": "x"}}]


def bounds(found: list[p.Implausible]) -> set[str]:
    return {f.bound for f in found}


def test_a_plausible_part_passes() -> None:
    assert p.check(part()) == []


def test_the_issue_example_triggers_both() -> None:
    """100 TB/s of HBM3 and 20 PFLOP/s at 700 W: the memory bound and the FLOP/s-per-W bound."""
    bad = part(matrix={"fp8": {"value": "20 PFLOP/s", "source": "x"}},
               memory=hbm("HBM3", "80 GB", "100 TB/s"))
    found = p.check(bad)
    assert {"hbm3-bandwidth", "fp8-per-watt"} <= bounds(found)
    mem = next(f for f in found if f.bound == "hbm3-bandwidth")
    assert mem.field == "memory.0.bandwidth"
    assert mem.factor == pytest.approx(100e12 / (8 * 819.2e9))
    assert "JESD238" in mem.source and "8 stacks" in mem.sentence()
    flops = next(f for f in found if f.bound == "fp8-per-watt")
    assert flops.field == "matrix.fp8" and "b100" in flops.source
    assert flops.factor == pytest.approx((20e15 / 700) / (2 * 3500e12 / 700))
    assert all(not f.explained for f in found)
    assert len(p.warnings(bad)) == len(found)


@pytest.mark.parametrize(("kind", "ok", "bad"), [
    ("HBM2", "2.4 TB/s", "2.6 TB/s"),  # 8 x 307 GB/s
    ("HBM2e", "4.3 TB/s", "4.5 TB/s"),  # 8 x 538 GB/s
    ("HBM3", "6.5 TB/s", "6.7 TB/s"),  # 8 x 819 GB/s
    ("HBM3e", "10 TB/s", "10.5 TB/s"),  # 8 x 1.28 TB/s
    ("GDDR6", "1.5 TB/s", "1.6 TB/s"),  # 24 Gb/s x 512 bits
    ("GDDR7", "3 TB/s", "3.2 TB/s"),  # 48 Gb/s x 512 bits
    ("LPDDR5", "819 GB/s", "900 GB/s"),  # 6400 MT/s x 1024 bits
    ("LPDDR5X", "1.3 TB/s", "1.4 TB/s"),  # 10.7 Gb/s x 1024 bits
    ("DDR5", "840 GB/s", "900 GB/s"),  # 8800 MT/s x 12 channels
])
def test_memory_bandwidth_bound_per_kind(kind: str, ok: str, bad: str) -> None:
    assert p.check_memory(part(memory=hbm(kind, "16 GB", ok))) == []
    found = p.check_memory(part(memory=hbm(kind, "16 GB", bad)))
    assert bounds(found) == {f"{kind.lower()}-bandwidth"}


def test_hbm_capacity_bound() -> None:
    """288 GiB of HBM3e (8 x 36 GiB) is the most on one package today; HBM3 stops at 192 GiB."""
    assert p.check_memory(part(memory=hbm("HBM3e", "288 GB", "8 TB/s"))) == []
    assert bounds(p.check_memory(part(memory=hbm("HBM3e", "320 GiB", "8 TB/s")))) == {
        "hbm3e-capacity"}
    assert bounds(p.check_memory(part(memory=hbm("HBM3", "256 GB", "5 TB/s")))) == {
        "hbm3-capacity"}


def test_sram_bound_depends_on_wafer_scale() -> None:
    sram = hbm("SRAM", "40 GB", "20 PB/s")
    found = p.check_memory(part(memory=sram))  # a package is not a wafer
    assert bounds(found) == {"sram-bandwidth", "sram-capacity"}
    assert "reticles" in found[0].source
    assert p.check_memory(part(memory=sram, form_factor="wafer in a CS-3-like box")) == []
    big = hbm("SRAM", "44 GB", "50 PB/s")
    assert bounds(p.check_memory(part(memory=big, form_factor="wafer"))) == {"sram-bandwidth"}


def test_power_budget_counts_memory_and_compute() -> None:
    """Each alone fits in 300 W; 1.4 PF bf16 at the best efficiency plus 8 TB/s of HBM3e do not."""
    acc = part(matrix={"bf16": {"value": "1400 TFLOP/s", "source": "x"}}, vector={},
               memory=hbm("HBM3e", "192 GB", "8 TB/s"), tdp={"value": "300 W", "source": "x"})
    assert p.check_efficiency(acc) == []
    found = p.check_power_budget(acc)
    assert bounds(found) == {"power-budget"} and found[0].field == "tdp"
    assert found[0].factor == pytest.approx((1400e12 / 5e12 + 8e12 * 8 * 2e-12) / 300)


def test_efficiency_bound_per_dtype_and_no_tdp() -> None:
    acc = part(matrix={"fp4": {"value": "15 PFLOP/s", "source": "x"}})
    assert p.check_efficiency(acc) == []  # 21.4 T/s per W fp4 < 2 x B300's 11.9
    assert p.check_efficiency(part(tdp=None, matrix={"bf16": {"value": "9 PFLOP/s",
                                                              "source": "x"}})) == []
    ints = p.check_efficiency(part(matrix={"int8": {"value": "9000 TOPS", "source": "x"}}))
    assert bounds(ints) == {"int8-per-watt"} and "OP/s" in ints[0].value


def test_consistency_ladder_and_matrix_vs_vector() -> None:
    acc = part(matrix={"bf16": {"value": "1000 TFLOP/s", "source": "x"},
                       "fp8": {"value": "500 TFLOP/s", "source": "x"},
                       "int8": {"value": "1000 TOPS", "source": "x"},
                       "int4": {"value": "800 TOPS", "source": "x"},
                       "fp32": {"value": "20 TFLOP/s", "source": "x"}},
               vector={"fp32": {"value": "60 TFLOP/s", "source": "x"}})
    found = p.check_consistency(acc)
    assert bounds(found) == {"fp8-below-bf16", "int4-below-int8", "matrix-below-vector"}
    ladder = next(f for f in found if f.bound == "fp8-below-bf16")
    assert ladder.field == "matrix.fp8" and ladder.factor == pytest.approx(2.0)
    # equal rates are fine (TPU v5p: fp8 = bf16; MI250X: int4 = int8)
    same = part(matrix={"bf16": {"value": "459 TFLOP/s", "source": "x"},
                        "fp8": {"value": "459 TFLOP/s", "source": "x"}})
    assert p.check_consistency(same) == []


def test_sparse_figure_of_a_known_part(catalog: Catalog) -> None:
    """An 'H100' with NVIDIA's with-sparsity bf16 (1979 TFLOP/s) entered as dense."""
    h100 = catalog.accelerators["h100-sxm5-80gb"]
    data = {"id": "my-h100", "name": "My H100", "vendor": "NVIDIA", "class": "gpu",
            "release_year": 2022, "memory": h100.memory,
            "matrix": {"bf16": {"value": "1979 TFLOP/s", "source": "x"}},
            "tdp": {"value": "700 W", "source": "x"}}
    mine = Accelerator.model_validate(data)
    found = p.check_sparse_confusion(mine, list(catalog.accelerators.values()))
    assert [(f.field, f.bound) for f in found] == [("matrix.bf16", "sparse-as-dense")]
    assert "h100-sxm5-80gb" in found[0].limit
    # another vendor, or other memory: no suspicion
    assert p.check_sparse_confusion(mine.model_copy(update={"vendor": "AMD"}),
                                    catalog.accelerators.values()) == []


def test_a_doubt_naming_the_bound_explains_it() -> None:
    bad = part(matrix={"fp8": {"value": "20 PFLOP/s", "source": "x"}},
               doubts=["fp8-per-watt: the 20 PF is a system-level marketing figure"])
    found = p.check(bad)
    assert [f.explained for f in found] == [True]
    assert p.warnings(bad) == []
    assert "explained" in found[0].sentence()


def test_bundled_catalog_has_no_unexplained_finding(catalog: Catalog) -> None:
    """Every bundled part passes, or its doubts explain the bound it breaks."""
    unexplained = [f"{aid}: {f.sentence()}" for aid, found in catalog.plausibility.items()
                   for f in found if not f.explained]
    assert unexplained == []
    assert len(catalog.accelerators) >= 54


def test_efficiency_references_are_the_catalogs_best(catalog: Catalog) -> None:
    """The per-dtype references are real bundled parts with these figures, and no bundled part
    is more efficient (so the bound moves when a better part is added)."""
    for dtype, ref in p.EFFICIENCY_REFERENCE.items():
        acc = catalog.accelerators[ref.part]
        assert acc.tdp is not None and acc.tdp.value == ref.watts
        assert acc.peak(dtype if acc.peak(dtype) else DType.FP4) == pytest.approx(ref.flops)
        # sram-machines are left out: the WSE-3's TDP is the whole CS-3 system and its fp16
        # peak half of a sparse marketing figure (both marked uncertain in wse-3.yaml)
        best = max((a.peak(dtype) or 0) / a.tdp.value for a in catalog.accelerators.values()
                   if a.tdp and a.device_class.value != "sram-machine")
        assert best <= ref.per_watt * (1 + 1e-9), dtype
