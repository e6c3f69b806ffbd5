"""api.compare_accelerators: every part on one model, the same precision, ranked, each gap
explained (search/compare.py states the rules)."""

from __future__ import annotations

from typing import Any

import pytest

from accelmap import api
from accelmap.api import Catalog
from accelmap.errors import InputError, NotFoundError
from accelmap.search.compare import CompareRow


def _by_id(cmp: Any) -> dict[str, CompareRow]:
    return {r.accelerator: r for r in cmp.rows}


def test_subset_devices_needed_and_mapping(catalog: Catalog) -> None:
    cmp = api.compare_accelerators("llama-3.1-70b", hw="h100-sxm5-80gb,b200,mi300x",
                                   catalog=catalog)
    rows = _by_id(cmp)
    assert set(rows) == {"h100-sxm5-80gb", "b200", "mi300x"}
    h100 = rows["h100-sxm5-80gb"]
    # 70B in bf16 is ~141 GB: more than one 80 GB H100, one 192 GB MI300X
    assert h100.feasible and h100.devices >= 2
    assert rows["mi300x"].devices == 1
    for r in cmp.rows:
        assert r.precision == "bf16"
        assert r.tokens_per_s_per_user == pytest.approx(1 / r.tpot_s)
        assert r.tokens_per_s_per_device == pytest.approx(r.tokens_per_s / r.devices)
        assert r.mapping.startswith("tp=")
        assert r.execution_model
    # ranked by tokens per second per user, best first
    speeds = [r.tokens_per_s_per_user for r in cmp.rows]
    assert speeds == sorted(speeds, reverse=True)


def test_money_and_energy_and_their_gaps(catalog: Catalog) -> None:
    rows = _by_id(api.compare_accelerators("llama-3.1-8b", hw="h100-sxm5-80gb,gaudi3,tpu-v5e",
                                           catalog=catalog))
    h100 = rows["h100-sxm5-80gb"]
    price = catalog.accelerators["h100-sxm5-80gb"].price
    assert price is not None
    assert h100.usd_per_million_tokens == pytest.approx(
        h100.devices * price.usd_per_hour.value / (h100.tokens_per_s * 3600) * 1e6)
    assert h100.energy_j_per_token_tdp == pytest.approx(700 * h100.devices / h100.tokens_per_s)
    gaudi = rows["gaudi3"]  # no price quote in the catalog
    assert gaudi.feasible and gaudi.usd_per_million_tokens is None
    assert any("no price published" in n for n in gaudi.notes)
    tpu = rows["tpu-v5e"]  # no TDP in the catalog
    assert tpu.energy_j_per_token_tdp is None and any("no TDP" in n for n in tpu.notes)


def test_fixed_devices(catalog: Catalog) -> None:
    cmp = api.compare_accelerators("llama-3.1-8b", hw="h100-sxm5-80gb,mi300x", devices=8,
                                   batch=8, objective="tokens_per_s", catalog=catalog)
    assert all(r.devices == 8 and r.devices_rule == "fixed" for r in cmp.rows)
    # throughput puts every device in its own replica for an 8B model
    assert all(r.mapping == "tp=1 pp=1 x8" for r in cmp.rows)


def test_budget_buys_devices_and_skips_unpriced(catalog: Catalog) -> None:
    rows = _by_id(api.compare_accelerators("llama-3.1-8b", hw="h100-sxm5-80gb,gaudi3",
                                           budget_usd_h=30, catalog=catalog))
    price = catalog.accelerators["h100-sxm5-80gb"].price
    assert price is not None
    n = rows["h100-sxm5-80gb"].devices
    assert n * price.usd_per_hour.value <= 30 < (n + 8) * price.usd_per_hour.value
    assert not rows["gaudi3"].feasible
    assert rows["gaudi3"].reason.startswith("not priced")


def test_precision_is_shared_and_fallbacks_are_noted(catalog: Catalog) -> None:
    rows = _by_id(api.compare_accelerators("llama-3.1-8b", hw="h100-sxm5-80gb,wse-3,vck5000",
                                           catalog=catalog))
    assert rows["h100-sxm5-80gb"].precision == "bf16"
    assert rows["wse-3"].precision == "fp16"  # no bf16 path
    assert any("bf16 -> fp16" in n for n in rows["wse-3"].notes)
    assert rows["vck5000"].precision == "int8"  # computes int8 only
    assert any("int8 W8A8" in n for n in rows["vck5000"].notes)
    best = _by_id(api.compare_accelerators("llama-3.1-8b", hw="h100-sxm5-80gb,a100-sxm4-80gb",
                                           best_precision=True, catalog=catalog))
    assert best["h100-sxm5-80gb"].precision == "fp8"
    assert best["a100-sxm4-80gb"].precision == "int8"  # no fp8 path on Ampere


def test_sram_machines_need_many_chips_or_say_why(catalog: Catalog) -> None:
    rows = _by_id(api.compare_accelerators("llama-3.1-70b", hw="wse-2,groq-lpu-v1",
                                           catalog=catalog))
    assert rows["wse-2"].feasible and rows["wse-2"].devices > 1
    groq = rows["groq-lpu-v1"]  # 141 GB of bf16 weights in 230 MB chips, no GPU context
    assert groq.feasible and groq.devices > 576
    assert groq.execution_model.startswith("sram-dataflow")


def test_training_rows(catalog: Catalog) -> None:
    cmp = api.compare_accelerators("llama-3.1-8b", train=True, global_batch_tokens="1M",
                                   hw="h100-sxm5-80gb,vck5000,coral-edge-tpu",
                                   catalog=catalog)
    rows = _by_id(cmp)
    h100 = rows["h100-sxm5-80gb"]
    assert h100.feasible and 0 < h100.mfu < 1 and h100.mapping.startswith("dp=")
    assert not rows["vck5000"].feasible and "to train in" in rows["vck5000"].reason
    assert not rows["coral-edge-tpu"].feasible and rows["coral-edge-tpu"].reason
    assert cmp.rows[0].accelerator == "h100-sxm5-80gb"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"hw": "no-such-chip"}, "unknown accelerator"),
    ({"objective": "fastest"}, "unknown objective"),
    ({"precision": "int3"}, "--precision int3"),
    ({"precision": "fp8", "best_precision": True}, "not both"),
    ({"devices": 8, "budget_usd_h": 10.0}, "not both"),
    ({"budget_usd_h": -1.0}, "positive"),
    ({"device_class": "quantum"}, "unknown device class"),
])
def test_bad_input_is_one_clear_error(catalog: Catalog, kwargs: dict[str, Any],
                                      match: str) -> None:
    with pytest.raises((InputError, NotFoundError), match=match):
        api.compare_accelerators("llama-3.1-8b", catalog=catalog, **kwargs)


def test_training_rejects_the_per_user_objective(catalog: Catalog) -> None:
    with pytest.raises(InputError, match="for serving"):
        api.compare_accelerators("llama-3.1-8b", train=True,
                                 objective="tokens_per_s_per_user", catalog=catalog)


def test_training_rows_of_different_device_counts_rank_per_device(catalog: Catalog) -> None:
    """With the fewest devices per part, one B200 sat beside 32 Wormholes ranked by total
    tok/s; the default is per device then, and the total only when the count is fixed."""
    cmp = api.compare_accelerators("gpt3-1.3b", hw="h100-sxm5-80gb,wormhole-n150,tpu-v5e",
                                   train=True, catalog=catalog)
    feasible = [r for r in cmp.rows if r.feasible]
    assert len({r.devices for r in feasible}) > 1
    per = [r.tokens_per_s_per_device for r in feasible]
    assert per == sorted(per, reverse=True)
    fixed = api.compare_accelerators("gpt3-1.3b", hw="h100-sxm5-80gb,tpu-v5e", train=True,
                                     devices=8, catalog=catalog)
    totals = [r.tokens_per_s for r in fixed.rows if r.feasible]
    assert totals == sorted(totals, reverse=True)
