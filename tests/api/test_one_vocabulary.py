"""One vocabulary for money and energy (issue 25): $/M tokens and J/token are defined once
(cost/per_token.py), carry the same key in an estimate, a plan row, a compared accelerator and
a hardware row, and agree where the same job runs on the same devices. Saved results with the
old keys still report."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap import api
from accelmap.api import Catalog
from accelmap.cost.per_token import per_token, tdp_j_per_token, usd_per_million_tokens
from accelmap.engine.plan import ScenarioPlanFigures, ServePlanFigures, TrainPlanFigures
from accelmap.search.compare import CompareObjective, CompareRow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KEYS = ("usd_per_million_tokens", "energy_j_per_token_tdp")


def test_the_definitions_by_hand() -> None:
    # 8 devices at $2/h make 1,000 tokens/s: 3.6 M tokens for $16 an hour, $4.44 per million;
    # at 700 W each they draw 5,600 J per second, 5.6 J per token
    assert usd_per_million_tokens(2.0, 8, 1000.0) == pytest.approx(16 / 3.6)
    assert tdp_j_per_token(700.0, 8, 1000.0) == pytest.approx(5.6)


@given(st.floats(0.01, 100.0), st.integers(1, 100_000), st.floats(1e-3, 1e9))
def test_twice_the_devices_at_the_same_speed_cost_twice(price: float, devices: int,
                                                        tps: float) -> None:
    assert usd_per_million_tokens(price, 2 * devices, tps) == pytest.approx(
        2 * usd_per_million_tokens(price, devices, tps))
    assert tdp_j_per_token(700.0, devices, 2 * tps) == pytest.approx(
        tdp_j_per_token(700.0, devices, tps) / 2)


def test_every_row_type_uses_the_same_keys() -> None:
    for row in (TrainPlanFigures, ServePlanFigures, ScenarioPlanFigures, CompareRow):
        names = {f.name for f in fields(row)}
        assert set(KEYS) <= names, row
        assert not names & {"cost_usd_per_million_tokens", "usd_per_mtok", "j_per_token",
                            "energy_j_per_token"}, row
    assert {o.value for o in CompareObjective} >= set(KEYS)


def test_old_objective_names_still_read() -> None:
    assert CompareObjective("usd_per_mtok") is CompareObjective.USD_PER_MILLION_TOKENS
    assert CompareObjective("j_per_token") is CompareObjective.ENERGY_J_PER_TOKEN_TDP


def test_plan_compare_and_estimate_agree_on_one_job(catalog: Catalog) -> None:
    """The same serving job on 8 H100 at tp=8: the estimate's bound, the plan's row and the
    compared accelerator's row are the one definition of the same numbers."""
    acc = catalog.accelerators["h100-sxm5-80gb"]
    spec = api.load_model("llama-3.1-8b", catalog)
    [cl] = api.plan_clusters(catalog, cluster="8xH100")
    res = api.run_plan(spec, cl, api.plan_request(train=False, prompt=512, output=64, top=3,
                                                  scenario="batch"))
    for p in res.plans:
        f = p.figures
        assert (f.usd_per_million_tokens, f.energy_j_per_token_tdp) == pytest.approx(
            per_token(acc, cl.devices, f.tokens_per_s))
        assert p.to_dict()["usd_per_million_tokens"] == f.usd_per_million_tokens
    best = res.plans[0]
    system = api.load_system(cluster="8xH100", catalog=catalog)
    serve = best.serving
    assert serve is not None
    wl = api.inference(serve.batch, 512, 64, serve.weight_dtype.value)
    est = api.estimate(spec, system, wl, best.mapping)
    assert est.energy_j_per_token_tdp == pytest.approx(
        best.figures.energy_j_per_token_tdp, rel=1e-9)
    cmp = api.compare_accelerators(spec, hw="h100-sxm5-80gb", devices=8, catalog=catalog,
                                   batch=8, prompt=512, output=64)
    row = cmp.rows[0]
    assert (row.usd_per_million_tokens, row.energy_j_per_token_tdp) == pytest.approx(
        per_token(acc, 8, row.tokens_per_s))
    assert set(KEYS) <= set(cmp.to_dict()["rows"][0])


def test_a_plan_saved_with_the_old_keys_still_reports(catalog: Catalog) -> None:
    old = json.loads((FIXTURES / "results" / "plan.json").read_text())
    assert "cost_usd_per_million_tokens" in old["plans"][0]  # saved before issue 25
    now = api.reports.current_keys(old)
    assert now["plans"][0]["usd_per_million_tokens"] == old["plans"][0][
        "cost_usd_per_million_tokens"]
    assert now["plans"][0]["energy_j_per_token_tdp"] == old["plans"][0]["energy_j_per_token"]
    rep, html = api.saved_report_html(old, catalog)
    assert "$ per million tokens" in html or "$/M tokens" in html
    assert rep.result["plans"][0]["usd_per_million_tokens"] is not None
