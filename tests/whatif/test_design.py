"""design: shapes under a parameter budget on the hardware, Pareto front of quality vs speed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.search.design import ASPECT_RATIO, Space, candidates


def test_candidates_hit_the_budget_and_the_aspect_ratios(catalog: Catalog) -> None:
    t = api.load_model("llama-3.2-1b", catalog)
    shapes = candidates(t, 1.2e9, 0.1, Space(d_models=(1536, 2048), q_per_kv=(4,),
                                             ffn_mults=(4.0,)))
    assert shapes
    from accelmap.models.params import count_params

    for s in shapes:
        assert abs(count_params(s).total / 1.2e9 - 1) <= 0.1
        assert ASPECT_RATIO[0] <= s.d_model / s.n_layers <= ASPECT_RATIO[1]
        assert s.vocab_size == t.vocab_size and s.n_heads % s.kv_heads == 0


def test_design_front_and_latency_target(catalog: Catalog) -> None:
    t = api.load_model("llama-3.2-1b", catalog)
    h = api.load_system(hw="h100-sxm5-80gb", catalog=catalog)
    d = api.design(t, h, api.inference(1, 256, 32), "1.2B", tpot="3ms", tolerance=0.05)
    front = d.front
    assert front and all(r["meets_target"] for r in front)
    assert all(r["tpot_s"] <= 0.003 for r in front) and d.speed == "1/tpot"
    # nothing on the front is beaten on both quality and speed
    for r in front:
        assert not any(o["quality"] > r["quality"] and o["speed"] > r["speed"] for o in front)
    with pytest.raises(InputError, match="serving"):
        api.design(t, h, api.training(4, 512), "1B", tpot="3ms")


def test_cli_design(cli: Callable[..., Any]) -> None:
    r = cli("design", "llama-3.2-1b", "--params", "1.2B", "--hw", "h100-sxm5-80gb", "--train",
            "--batch", "4", "--seq", "512", "--tolerance", "0.05", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["rows"] and d["rows"][0]["pareto"]
    r = cli("design", "llama-3.2-1b", "--params", "1.2B", "--hw", "h100-sxm5-80gb",
            "--experts", "x")
    assert r.code == 2 and "E:k" in r.err
