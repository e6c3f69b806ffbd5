"""api.hardware: find, list, show and compare accelerators and system presets."""

from __future__ import annotations

from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import AmbiguousNameError, InputError, NotFoundError


# -- find -----------------------------------------------------------------------------------------
def test_find_accelerator_forgiving(catalog: Catalog) -> None:
    assert api.find_accelerator("h100 sxm", catalog).id == "h100-sxm5-80gb"
    assert api.find_accelerator("MI300X").id == "mi300x"  # the bundled catalog by default


def test_find_ambiguous_lists_candidates(catalog: Catalog) -> None:
    with pytest.raises(AmbiguousNameError) as e:
        api.find_accelerator("h100", catalog)
    assert e.value.candidates == ["h100-nvl", "h100-pcie-80gb", "h100-sxm5-80gb",
                                  "h100-sxm5-96gb-hbm2e"]


def test_find_chooser_picks_among_entries(catalog: Catalog) -> None:
    seen: list[tuple[str, str, list[str]]] = []

    def choose(query: str, what: str, entries: list[Any]) -> Any:
        seen.append((query, what, [e.id for e in entries]))
        return entries[2]

    assert api.find_accelerator("h100", catalog, choose).id == "h100-sxm5-80gb"
    assert seen == [("h100", "accelerator", ["h100-nvl", "h100-pcie-80gb", "h100-sxm5-80gb",
                                             "h100-sxm5-96gb-hbm2e"])]
    assert api.find_accelerator("mi300x", catalog, choose).id == "mi300x"
    assert len(seen) == 1  # a unique name never asks


def test_find_chooser_declining_keeps_the_error(catalog: Catalog) -> None:
    with pytest.raises(AmbiguousNameError, match="matches 4 accelerators"):
        api.find_accelerator("h100", catalog, lambda q, w, entries: None)


def test_find_typo_suggests(catalog: Catalog) -> None:
    with pytest.raises(NotFoundError, match="did you mean mi300x"):
        api.find_accelerator("mi300z", catalog)


def test_find_system(catalog: Catalog) -> None:
    assert api.find_system("dgx-h100", catalog).devices == 8
    with pytest.raises(AmbiguousNameError, match="2 systems: tpu-v5p-1024, tpu-v5p-12288"):
        api.find_system("tpu v5p", catalog)


def test_find_hardware_accelerator_first_then_system(catalog: Catalog) -> None:
    assert isinstance(api.find_hardware("mi300x", catalog), api.Accelerator)
    assert isinstance(api.find_hardware("dgx-h100", catalog), api.hardware.SystemPreset)
    assert isinstance(api.find_hardware("tpu-v5p-1024", catalog), api.hardware.SystemPreset)
    # a name an accelerator answers to wins over a preset of the same name
    assert api.find_hardware("gb200-nvl72", catalog).id == "gb200"
    with pytest.raises(NotFoundError, match="unknown accelerator 'zzzqqq'"):
        api.find_hardware("zzzqqq", catalog)
    with pytest.raises(AmbiguousNameError, match="systems"):
        api.find_hardware("tpu v5p 1", catalog)


# -- list -----------------------------------------------------------------------------------------
def test_list_filters(catalog: Catalog) -> None:
    gpus = api.list_accelerators("GPU", catalog=catalog)
    assert gpus and all(a.device_class.value == "gpu" for a in gpus)
    assert {a.vendor for a in api.list_accelerators(vendor="goo", catalog=catalog)} == {"Google"}
    big = api.list_accelerators(min_memory="141GB", catalog=catalog)
    assert big and all(a.memory_bytes >= 141e9 for a in big)
    assert [a.id for a in api.list_accelerators(min_memory=141e9, catalog=catalog)] == [
        a.id for a in big]
    assert len(api.list_accelerators(catalog=catalog)) == len(catalog.accelerators)


def test_list_sort_puts_missing_figures_last(catalog: Catalog) -> None:
    for desc in (False, True):
        accs = api.list_accelerators(sort="price", desc=desc, catalog=catalog)
        prices = [a.price.usd_per_hour.value if a.price else None for a in accs]
        known = [p for p in prices if p is not None]
        assert prices[:len(known)] == known and known == sorted(known, reverse=desc)
        tail = [a.id for a in accs[len(known):]]
        assert tail == sorted(tail) and tail  # some devices carry no price
    bf16 = [a.peak(api.DType.BF16) for a in api.list_accelerators(sort="BF16", desc=True,
                                                                    catalog=catalog)]
    known16 = [p for p in bf16 if p]
    assert known16 == sorted(known16, reverse=True)


def test_list_default_sort_is_by_class_then_vendor(catalog: Catalog) -> None:
    order = list(api.hardware.DeviceClass)
    accs = api.list_accelerators(catalog=catalog)
    keys = [(order.index(a.device_class), a.vendor.lower(), a.id) for a in accs]
    assert keys == sorted(keys)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"device_class": "nope"}, "unknown class 'nope'; use one of gpu, tpu, asic"),
    ({"sort": "nope"}, "cannot sort by 'nope'; use one of id, name, class"),
    ({"min_memory": "80"}, "'80' has no unit"),
])
def test_list_bad_input(catalog: Catalog, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        api.list_accelerators(catalog=catalog, **kwargs)


def test_sort_keys_are_fields_or_dtypes() -> None:
    dtypes = {d.value for d in api.DType}
    fields = {"id", "name", "class", "vendor", "year", "memory", "bandwidth", "tdp", "price"}
    assert set(api.hardware.SORT_KEYS) == fields | dtypes


def test_accelerator_row(catalog: Catalog) -> None:
    row = api.hardware.accelerator_row(catalog.accelerators["h100-sxm5-80gb"])
    assert list(row) == ["id", "name", "class", "vendor", "release_year", "memory_bytes",
                         "memory_kind", "memory_bandwidth_bytes_per_s", "peak_flops", "tdp_w",
                         "price_usd_per_hour", "not_published"]
    assert row["not_published"] == {}  # H100 SXM has both a cited TDP and a price
    assert row["peak_flops"]["bf16"] == pytest.approx(989.4e12)
    assert row["memory_bandwidth_bytes_per_s"] == pytest.approx(3.35e12)


def test_list_systems_and_rows(catalog: Catalog) -> None:
    systems = api.list_systems(catalog)
    assert [s.id for s in systems] == sorted(catalog.systems)
    row = api.hardware.system_row(catalog.systems["dgx-h100"])
    assert row["devices"] == 8 and row["nodes"] == 1 and row["torus"] is None
    assert row["tiers"][0]["role"] == "scale-up"
    assert api.hardware.system_row(catalog.systems["tpu-v5p-1024"])["torus"]


# -- show -----------------------------------------------------------------------------------------
def test_derived_figures(catalog: Catalog) -> None:
    h100 = api.hardware.derived_figures(catalog.accelerators["h100-sxm5-80gb"])
    assert h100.ridge_flop_per_byte[api.DType.BF16] == pytest.approx(989.4e12 / 3.35e12)
    assert h100.bytes_per_flop == pytest.approx(3.35e12 / 989.4e12)
    assert h100.peak_16bit == pytest.approx(989.4e12)
    assert h100.peak_8bit == pytest.approx(1978.9e12) and not h100.peak_8bit_is_integer
    mi250 = api.hardware.derived_figures(catalog.accelerators["mi250x"])  # int8, no fp8
    assert mi250.peak_8bit_is_integer and mi250.peak_8bit == mi250.peak_16bit
    coral = api.hardware.derived_figures(catalog.accelerators["coral-edge-tpu"])  # int8 only
    assert coral.peak_16bit is None and coral.headline is api.DType.INT8


def test_sources(catalog: Catalog) -> None:
    acc = catalog.accelerators["h100-sxm5-80gb"]
    src = api.hardware.sources(acc, catalog)
    assert list(src) == sorted(acc.cited_ids())
    assert src["S11"] is not None and src["S11"]["title"]


def test_accelerator_details(catalog: Catalog) -> None:
    data = api.hardware.accelerator_details(catalog.accelerators["h100-sxm5-80gb"], catalog)
    assert data["matrix"]["bf16"]["value"] == pytest.approx(989.4e12)
    assert set(data["derived"]) == {"ridge_flop_per_byte", "bytes_per_flop",
                                    "memory_bytes_per_usd_hour", "flops_per_watt"}
    assert data["scope"]["peaks"] == "per device, dense"
    assert data["origin"].endswith("nvidia-h100-sxm5-80gb.yaml")
    assert data["sources"]["S11"]["title"]


def test_system_details(catalog: Catalog) -> None:
    data = api.hardware.system_details(catalog.systems["dgx-h100"], catalog)
    assert data["devices"] == 8 and data["accelerator"] == "h100-sxm5-80gb"
    assert data["sources"] and all(v for v in data["sources"].values())


# -- compare --------------------------------------------------------------------------------------
def test_compare_defaults_to_the_flagships(catalog: Catalog) -> None:
    comparison = api.compare_specs(catalog=catalog)
    assert [a.id for a in comparison.devices] == [
        n for n in api.hardware.DEFAULT_COMPARE if n in catalog.accelerators]
    assert comparison.to_dict() == {"devices": list(comparison.rows)}


def test_compare_names_and_entries(catalog: Catalog) -> None:
    mi = catalog.accelerators["mi300x"]
    comparison = api.compare_specs(["h100 sxm", mi, "coral-edge-tpu"], catalog)
    assert [a.id for a in comparison.devices] == ["h100-sxm5-80gb", "mi300x", "coral-edge-tpu"]
    # every dtype any of them has, in DType order
    assert list(comparison.dtypes) == [d for d in api.DType
                                       if any(a.peak(d) for a in comparison.devices)]
    assert api.DType.INT8 in comparison.dtypes
    with pytest.raises(AmbiguousNameError):
        api.compare_specs(["h100"], catalog)


def test_compare_row(catalog: Catalog) -> None:
    row = api.hardware.spec_row(catalog.accelerators["h100-sxm5-80gb"])
    assert row["headline_dtype"] == "bf16"
    assert row["scale_up_domain"] == 8
    assert row["scale_up_bandwidth_per_direction"] == pytest.approx(450e9)
    assert row["flops_per_watt"] == pytest.approx(989.4e12 / 700)
    assert list(row)[:12] == list(
        api.hardware.accelerator_row(catalog.accelerators["h100-sxm5-80gb"]))
