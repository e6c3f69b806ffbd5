"""What-ifs: --set NAME=VALUE on any command, did-you-mean, sensitivity and sweeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.hardware import whatif as w


def test_parse_units_factors_and_targets() -> None:
    o = w.parse_override("memory_bandwidth=6.7TB/s")
    assert o.field.name == "memory_bandwidth" and o.value == pytest.approx(6.7e12)
    assert w.parse_override("bf16=2.5PFLOP/s").value == pytest.approx(2.5e15)
    assert w.parse_override("sram=500MB").value == pytest.approx(5e8)
    assert w.parse_override("nvlink=x2").factor == 2.0  # an alias, a factor
    assert w.parse_override("price=$2.5/h").value == 2.5
    t = w.parse_override("h100:tdp=1kW")
    assert t.target == "h100" and t.value == 1000


@pytest.mark.parametrize(("text", "needle"), [
    ("memory_bandwith=6.7TB/s", "did you mean memory_bandwidth"),
    ("bf16=2.5", "bf16=2.5PFLOP/s"),  # no unit: says how it is written
    ("bf16=2.5TB/s", "flops quantity"),  # wrong dimension
    ("compute=2TB/s", "factor"),
    ("memory_bandwidth", "NAME=VALUE"),
])
def test_bad_sets_are_one_line(text: str, needle: str) -> None:
    with pytest.raises(InputError) as e:
        api.what_if([text])
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_apply_cites_the_change_and_keeps_the_bound_check(catalog: Catalog) -> None:
    acc = catalog.accelerators["h100-sxm5-80gb"]
    new = w.apply(acc, [w.parse_override("memory_bandwidth=7TB/s")])
    assert new.memory_bandwidth == pytest.approx(7e12)
    bw = new.device_memory.bandwidth
    assert bw is not None and bw.source == ("what-if",) and "3.35 TB/s" in (bw.note or "")
    assert new.what_if and "3.35 TB/s -> 7 TB/s" in new.what_if[0]
    from accelmap.hardware import plausibility

    assert any(f.bound == "hbm3-bandwidth" for f in plausibility.check(new))
    assert acc.memory_bandwidth == pytest.approx(3.35e12)  # the catalog part is untouched


def test_catalog_wide_and_targeted(catalog: Catalog) -> None:
    cat = api.whatif.apply_whatif(catalog, api.what_if(["h100:scale_up_bandwidth=900GB/s"],
                                                catalog=catalog))
    h100 = cat.accelerators["h100-sxm5-80gb"]
    assert w.figure(h100, "scale_up_bandwidth") == pytest.approx(900e9)
    assert cat.accelerators["a100-sxm4-80gb"] is catalog.accelerators["a100-sxm4-80gb"]
    tier = cat.systems["dgx-h100"].tiers[0]
    assert tier.bandwidth_per_direction.value == pytest.approx(900e9)
    # every part: a factor skips parts that lack the figure
    cat2 = api.whatif.apply_whatif(catalog, api.what_if(["scale_out_bandwidth=x2"]))
    assert len(cat2.accelerators) == len(catalog.accelerators)


def test_model_whatif_through_load_model(catalog: Catalog) -> None:
    cat = api.whatif.apply_whatif(catalog, api.what_if(["vocab_size=50304"]))
    spec = api.load_model("gpt2", cat)
    assert spec.vocab_size == 50304 and spec.published_params is None
    with pytest.raises(InputError, match="divide"):
        api.load_model("llama-3.1-8b",
                       api.whatif.apply_whatif(catalog, api.what_if(["kv_heads=5"])))


def _serve(batch: int, catalog: Catalog) -> tuple[Any, Any, Any, Any]:
    spec = api.load_model("llama-3.1-8b", catalog)
    system = api.load_system(hw="h100-sxm5-80gb", catalog=catalog)
    return spec, system, api.inference(batch, 1024, 128), api.serving_mapping()


def test_sensitivity_names_the_binding_resource(catalog: Catalog) -> None:
    spec, system, wl, m = _serve(1, catalog)
    s = api.sensitivity(spec, system, wl, m)
    assert s is not None
    tpot, ttft = s.elasticity["tpot_s"], s.elasticity["ttft_s"]
    assert s.binding("tpot_s")[0] == "memory_bandwidth" and tpot["memory_bandwidth"] < -0.7
    assert abs(tpot["compute"]) < 0.1  # batch-1 decode: compute does not matter
    assert s.binding("ttft_s")[0] == "compute" and ttft["compute"] < -0.7
    assert 0 <= s.fixed_share("tpot_s") <= 0.35


def test_sweep_rows_and_csv(catalog: Catalog) -> None:
    spec, system, wl, m = _serve(8, catalog)
    sw = api.sweep(spec, system, wl, ["memory_bandwidth=2TB/s..4TB/s:3"], m)
    tpots = [r["tpot_s"] for r in sw.rows]
    assert len(tpots) == 3 and tpots[0] > tpots[1] > tpots[2]
    assert sw.rows[0]["memory_bandwidth_si"] == pytest.approx(2e12)
    assert sw.to_csv().splitlines()[0].startswith("memory_bandwidth,memory_bandwidth_si")
    two = api.sweep(spec, system, wl, ["bf16=x1,x2", "n_layers=16,32"], m)
    assert len(two.rows) == 4 and all(r["feasible"] for r in two.rows)


def test_cli_set_on_estimate_and_hw_show(cli: Callable[..., Any]) -> None:
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--batch", "8",
            "--set", "memory_bandwidth=6.7TB/s", "--json")
    assert r.code == 0, r.err
    import json

    d = json.loads(r.out)
    assert any("what-if" in a and "6.7 TB/s" in a for a in d["assumptions"])
    assert d["sensitivity"]["figures"]["tpot_s"]["binding"] == "memory_bandwidth"
    r = cli("hw", "show", "h100-sxm5-80gb", "--set=bf16=x2", "--json")
    assert r.code == 0 and json.loads(r.out)["matrix"]["bf16"]["source"] == ["what-if"]
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100", "--set", "nvlnk=1TB/s")
    assert r.code == 2 and "did you mean" in r.err and len(r.err.strip().splitlines()) == 1


def test_cli_sweep_and_names(cli: Callable[..., Any], tmp_path: Any) -> None:
    out = tmp_path / "s.csv"
    r = cli("sweep", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--batch", "4",
            "--param", "memory_bandwidth=2TB/s,4TB/s", "--csv", str(out))
    assert r.code == 0, r.err
    assert out.read_text().count("\n") == 3
    r = cli("whatif-names", "--json")
    assert r.code == 0 and '"memory_bandwidth"' in r.out and '"vocab_size"' in r.out


def test_sweep_range_of_factors() -> None:
    """'bf16=x0.5..x2:3' is three factors (0.5, 1.25, 2) of the part's own peak, not a
    traceback (it once parsed the factors as a value of 0 FLOP/s); mixing a factor and a
    quantity in one range is one clear error."""
    from accelmap.search.sweep import parse_param

    p = parse_param("bf16=x0.5..x2:3")
    assert p.labels == ("x0.5", "x1.25", "x2")
    assert [o.factor for o in p.values] == [0.5, 1.25, 2.0]
    with pytest.raises(InputError, match="not one of each"):
        parse_param("bf16=x0.5..2PFLOP/s:3")
