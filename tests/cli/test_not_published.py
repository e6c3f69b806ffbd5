"""A price or TDP the catalog lacks reads 'not published' (JSON: null and a note beside it),
never a silent blank."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from accelmap import api
from accelmap.catalog import Catalog


def test_unpublished_names_what_is_missing(catalog: Catalog) -> None:
    v5e = api.hardware.unpublished(catalog.accelerators["tpu-v5e"])
    assert set(v5e) == {"tdp_w", "price_usd_per_hour"}
    assert all(v.startswith(api.hardware.NOT_PUBLISHED) and "tpu-v5e" in v for v in v5e.values())
    assert set(api.hardware.unpublished(catalog.accelerators["wse-3"])) == {"price_usd_per_hour"}
    assert api.hardware.unpublished(catalog.accelerators["h100-sxm5-80gb"]) == {}


def test_hw_list(cli: Callable[..., Any]) -> None:
    out = cli("hw", "list", "--class", "tpu").out
    v5e = next(line for line in out.splitlines() if "tpu-v5e " in line)
    assert v5e.count("not published") == 2  # TDP and $/h
    rows = {r["id"]: r for r in json.loads(cli("hw", "list", "--json").out)}
    assert rows["tpu-v5e"]["tdp_w"] is None and rows["tpu-v5e"]["price_usd_per_hour"] is None
    assert "not published" in rows["tpu-v5e"]["not_published"]["tdp_w"]
    assert rows["h100-sxm5-80gb"]["not_published"] == {}


def test_hw_show_and_compare(cli: Callable[..., Any]) -> None:
    out = cli("hw", "show", "tpu-v5e").out
    assert "TDP" in out and "price" in out and out.count("not published") >= 2
    data = json.loads(cli("hw", "show", "tpu-v5e", "--json").out)
    assert data["tdp"] is None and set(data["not_published"]) == {"tdp_w", "price_usd_per_hour"}
    cmp = cli("hw", "compare", "tpu-v5e", "h100-sxm5-80gb").out
    tdp = next(line for line in cmp.splitlines() if line.strip("│ ").startswith("TDP"))
    assert "not published" in tdp and "700 W" in tdp


def test_estimate_energy_and_cost(cli: Callable[..., Any]) -> None:
    r = cli("estimate", "gpt3-125m", "--hw", "tpu-v5e", "--train", "--batch", "8", "--seq",
            "1024", "--tokens", "1B")
    assert r.code == 0, r.err
    assert "energy/token at TDP" in r.out and "cost to train" in r.out
    assert r.out.count("not published") == 2
    d = json.loads(cli("estimate", "gpt3-125m", "--hw", "tpu-v5e", "--train", "--batch", "8",
                       "--seq", "1024", "--tokens", "1B", "--json").out)
    assert d["energy_j_per_token_tdp"] is None and d["cost_to_train_usd"] is None
    assert set(d["not_published"]) == {"tdp_w", "price_usd_per_hour"}
