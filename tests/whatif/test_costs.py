"""Money: the price in use with its source, $/M tokens at a load, owning vs renting, break-evens
in estimate, compare and plan."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost import ownership as own
from accelmap.errors import InputError


def test_owned_cost_and_breakeven() -> None:
    c = own.owned_cost("h100-sxm5-80gb", 700, own.Ownership())
    # DGX H100 $270k / 8 over 5 years + 1275 W x PUE 1.56 x $0.08/kWh
    assert c.capex_per_hour == pytest.approx(33750 / (5 * 8766))
    assert c.energy_per_busy_hour == pytest.approx(1.275 * 1.56 * 0.08)
    assert c.usd_per_hour == pytest.approx(c.capex_per_hour + c.energy_per_busy_hour)
    u = c.breakeven_utilization(2.69)
    assert u is not None and 0.2 < u < 0.4
    # at the break-even utilization owning costs exactly the rent
    at_u = own.owned_cost("h100-sxm5-80gb", 700, own.Ownership(utilization=u))
    assert at_u.usd_per_hour == pytest.approx(2.69, rel=1e-6)
    assert c.breakeven_utilization(0.1) is None  # the energy alone costs more
    with pytest.raises(ValueError, match="purchase"):
        own.owned_cost("tpu-v5e", None, own.Ownership())


def test_parse_ownership() -> None:
    o = own.parse_ownership("purchase=30k,kwh=0.1,pue=1.2,util=70%,years=4")
    assert (o.purchase_usd, o.usd_per_kwh, o.pue, o.utilization, o.years) == (
        30000, 0.1, 1.2, 0.7, 4)
    with pytest.raises(ValueError, match="use"):
        own.parse_ownership("bogus=1")


def _serve(catalog: Catalog, hw: str = "h100-sxm5-80gb") -> tuple[Any, Any]:
    spec = api.load_model("llama-3.1-8b", catalog)
    system = api.load_system(hw=hw, catalog=catalog)
    return api.estimate(spec, system, api.inference(16, 512, 128)), system


def test_cost_report_serving(catalog: Catalog) -> None:
    est, system = _serve(catalog)
    r = api.cost_report(est, system, catalog=catalog, load_tokens_per_s=100).to_dict()
    tps = est.tokens_per_s
    assert r["usd_per_million_tokens"] == pytest.approx(2.69 / (tps * 3600) * 1e6)
    assert r["usd_per_million_tokens_at_load"] == pytest.approx(2.69 / (100 * 3600) * 1e6)
    assert r["price"]["date"] == "2026-03" and r["price"]["sources"]
    assert r["ownership"]["cheaper"] == "own"
    over = api.cost_report(est, system, load_tokens_per_s=tps * 2.5).to_dict()
    assert over["systems_for_load"] == 3
    with pytest.raises(InputError):
        api.cost_report(est, system, load_tokens_per_s=-1)


def test_unpriced_part_says_not_published(catalog: Catalog) -> None:
    est, system = _serve(catalog, "tpu-v5e")
    r = api.cost_report(est, system, catalog=catalog).to_dict()
    assert r["price"] is None and any("not published" in n for n in r["notes"])


def test_cli_price_and_own(cli: Callable[..., Any]) -> None:
    r = cli("estimate", "gpt3-1.3b", "--hw", "tpu-v5e", "--serve", "--price", "1.2",
            "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["cost"]["price"]["usd_per_hour"] == 1.2
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--own",
            "utilization=0.5", "--json")
    cost = json.loads(r.out)["cost"]
    assert cost["rent"]["usd_per_hour"] == 2.69
    assert cost["price"]["usd_per_hour"] == pytest.approx(
        cost["ownership"]["usd_per_useful_hour"])
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100", "--serve", "--own", "kwh=-")
    assert r.code == 2 and "--own" in r.err


def test_compare_and_plan_breakeven(cli: Callable[..., Any]) -> None:
    r = cli("compare", "llama-3.1-8b", "--serve", "--hw", "h100-sxm5-80gb,mi300x,tpu-v5e",
            "--json")
    rows = {x["accelerator"]: x for x in json.loads(r.out)["rows"]}
    ref = rows[rows["h100-sxm5-80gb"]["breakeven_vs"]]
    assert ref["breakeven_usd_per_h"] == pytest.approx(ref["price_usd_per_h"])
    assert rows["tpu-v5e"]["breakeven_usd_per_h"] > 0  # unpriced: what it would need to cost
    r = cli("plan", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--seq", "2048",
            "--tokens", "1B", "--top", "1", "--json")
    money = json.loads(r.out)["money"]
    assert money["usd_per_hour_cluster"] == pytest.approx(8 * 2.69)
    assert money["ownership"]["breakeven_utilization"] < 1
