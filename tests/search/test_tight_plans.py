"""Plans within the memory model's error band of capacity: left out by default, counted under
``memory_tight`` and in the notes; ``include_tight`` (``--include-tight``) ranks them, marked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.engine.result import fits
from accelmap.hardware.cluster import parse_cluster
from accelmap.memory.budget import MemoryBudget
from accelmap.search.planner import TIGHT_RULE, plan_training
from accelmap.search.serve import plan_serving


def test_only_over_the_band_is_infeasible() -> None:
    ok, reason = fits(MemoryBudget(items={"x": 84.0}, capacity=80.0))  # 5 % over: tight
    assert ok and reason is None
    ok, reason = fits(MemoryBudget(items={"x": 90.0}, capacity=80.0))
    assert not ok and "error band" in str(reason)


def test_training_planner_leaves_tight_plans_out_unless_asked(catalog: Catalog) -> None:
    spec, cl = catalog.models["llama-2-13b"], parse_cluster("64xH100", catalog)
    default = plan_training(spec, cl, 4096, 512, top=200, explain=False)
    tight = default.rejected_by_rule.get(TIGHT_RULE, 0)
    assert tight > 0
    assert sum(default.rejected_by_rule.values()) + default.feasible == default.evaluated
    assert any(f"{tight} plans within" in n and "--include-tight" in n for n in default.notes)
    assert {p.metrics["memory_fit"] for p in default.plans} == {"fits"}
    more = plan_training(spec, cl, 4096, 512, top=200, explain=False, include_tight=True)
    assert more.feasible == default.feasible + tight
    assert TIGHT_RULE not in more.rejected_by_rule
    assert any("included" in n for n in more.notes)
    assert "tight" in {p.metrics["memory_fit"] for p in more.plans}


def test_serving_planner_leaves_tight_points_out_unless_asked(catalog: Catalog) -> None:
    spec, node = catalog.models["llama-2-70b"], parse_cluster("dgx-h100", catalog)
    default = plan_serving(spec, node, 2048, 256, max_batch=256)
    tight = default.rejected_by_rule.get(TIGHT_RULE, 0)
    assert tight > 0 and any("--include-tight" in n for n in default.notes)
    more = plan_serving(spec, node, 2048, 256, max_batch=256, include_tight=True)
    assert TIGHT_RULE not in more.rejected_by_rule
    assert more.feasible >= default.feasible + tight


def test_cli_flag(cli: Callable[..., Any]) -> None:
    args = ("plan", "llama-2-13b", "--cluster", "64xH100", "--train", "--seq", "4096",
            "--global-batch-tokens", "2M", "--top", "3")
    out = cli(*args)
    assert out.code == 0 and "--include-tight to see them" in out.out
    out = cli(*args, "--include-tight")
    assert out.code == 0 and "included, marked memory_fit 'tight'" in out.out


@pytest.mark.parametrize("flag", [False, True])
def test_plan_json_carries_memory_fit(cli: Callable[..., Any], flag: bool) -> None:
    import json

    args = ["plan", "llama-2-13b", "--cluster", "64xH100", "--train", "--seq", "4096",
            "--global-batch-tokens", "2M", "--top", "3", "--json"]
    out = cli(*(args + (["--include-tight"] if flag else [])))
    plans = json.loads(out.out)["plans"]
    assert plans and all(p["memory_fit"] in ("fits", "tight") for p in plans)
