"""Energy: the modelled J/token between its two bounds, the power check against the TDP, a
figure for every part, a training run's kWh and CO2."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost import power


def test_a100_calibration_and_node_scale(catalog: Catalog) -> None:
    assert power.calibration_check(catalog.accelerators["a100-sxm4-80gb"]) == pytest.approx(
        400, rel=0.02)
    assert power.node_scale(7) == 1.0 and power.node_scale(45) == pytest.approx(2.86, 0.02)
    assert power.node_scale(5) == 0.7 and power.node_scale(3) < power.node_scale(5)


def test_every_part_has_a_power_figure(catalog: Catalog) -> None:
    peers = list(catalog.accelerators.values())
    for acc in peers:
        d = power.device_energy(acc, peers=peers)
        assert d.tdp_w > 0 and d.overhead > 0, acc.id
        assert d.tdp_derived == (acc.tdp is None)
    v5e = power.device_energy(catalog.accelerators["tpu-v5e"], peers=peers)
    assert "tpu-v4" in v5e.overhead_source  # a TPU borrows the TPU v4's anchoring


def _serve(catalog: Catalog, hw: str, batch: int = 16) -> tuple[Any, Any]:
    spec = api.load_model("llama-3.1-8b", catalog)
    system = api.load_system(hw=hw, catalog=catalog)
    return api.estimate(spec, system, api.inference(batch, 512, 128)), system


@pytest.mark.parametrize("hw", ["h100-sxm5-80gb", "a100-sxm4-80gb", "trainium2", "mi300x"])
def test_modelled_energy_between_its_bounds(catalog: Catalog, hw: str) -> None:
    est, system = _serve(catalog, hw)
    r = api.energy_report(est, system).to_dict()
    assert (r["energy_j_per_token_ops"] < r["energy_j_per_token"]
            <= r["energy_j_per_token_tdp"] * 1.0001)
    assert 0 < r["power_w_per_device"] <= r["tdp_w"]


def test_power_check_flags_a_part_over_its_tdp(catalog: Catalog) -> None:
    """A dense training step on a part whose TDP is cut to 200 W: the model asks for more
    than the TDP (memory traffic on top of the GEMM that pins the TDP), so the report says
    power-limited and takes the energy at the TDP."""
    cat = api.whatif.apply_whatif(catalog, api.what_if(["h100-sxm5-80gb:tdp=200W"]))
    spec = api.load_model("llama-3.2-1b", cat)
    system = api.load_system(hw="h100-sxm5-80gb", catalog=cat)
    est = api.estimate(spec, system, api.training(8, 2048))
    r = api.energy_report(est, system).to_dict()
    assert r["tdp_w"] == 200 and r["power_limited"] == (r["power_w_model"] > 200.2)
    assert r["power_w_per_device"] <= 200
    assert r["power_limited"] and any("power-limited" in n for n in r["notes"])


def test_training_run_kwh_and_co2(catalog: Catalog) -> None:
    spec = api.load_model("llama-3.1-8b", catalog)
    system = api.load_system(cluster="8xH100", catalog=catalog)
    wl = api.training(64, 4096, tokens="1B")
    est = api.estimate(spec, system, wl, api.mapping(system, wl, zero=1, micro_batch=1))
    r = api.energy_report(est, system, pue=1.2, grid_kg_per_kwh=0.5).to_dict()
    assert r["run_kwh"] == pytest.approx(r["energy_j_per_token"] * 1e9 / 3.6e6 * 1.2, rel=1e-6)
    assert r["run_t_co2e"] == pytest.approx(r["run_kwh"] * 0.5 / 1000)
    from accelmap.errors import InputError

    with pytest.raises(InputError):
        api.energy_report(est, system, pue=0.5)


def test_cli_energy(cli: Callable[..., Any]) -> None:
    r = cli("estimate", "llama-3.1-8b", "--hw", "tpu-v6e", "--serve", "--batch", "8",
            "--grid", "0.05", "--json")
    assert r.code == 0, r.err
    e = json.loads(r.out)["energy"]
    assert e["tdp_derived"] and e["energy_j_per_token"] > 0 and e["grid_kg_per_kwh"] == 0.05
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve")
    assert r.code == 0 and "Energy (modelled" in r.out
