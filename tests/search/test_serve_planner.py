"""Serving planner: ranks serve_step results, respects targets, prunes exactly."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.engine import estimate
from accelmap.hardware.cluster import Cluster, parse_cluster
from accelmap.mapping.plan import Mapping
from accelmap.search import serve as serve_planner
from accelmap.search.result import Objective, PlanKind, PlanResult
from accelmap.search.serve import plan_serving
from accelmap.units import DType
from accelmap.workload import Inference

PROMPT, OUTPUT = 1024, 128


@pytest.fixture(scope="module")
def node(catalog: Catalog) -> Cluster:
    return parse_cluster("dgx-h100", catalog)


@pytest.fixture(scope="module")
def small(catalog: Catalog, node: Cluster) -> PlanResult:
    """llama-2-7b on 8 x H100, the full default space up to batch 256."""
    return plan_serving(catalog.models["llama-2-7b"], node, PROMPT, OUTPUT, max_batch=256)


def test_plan_fields(small: PlanResult) -> None:
    assert small.plans and small.feasible > 0 and small.evaluated >= small.feasible
    p = small.plans[0]
    assert list(p.to_dict()["mapping"]) == ["tp", "pp", "ep", "replicas", "batch",
                                            "weight_dtype", "kv_dtype"]
    assert p.kind is PlanKind.SERVE and p.serving is not None
    assert p.mapping == Mapping.serving(p.mapping.tp, p.mapping.pp, p.mapping.ep,
                                        p.mapping.replicas)
    assert (p.serving.batch, p.serving.weight_dtype.value, p.serving.kv_dtype.value) == (
        p.metrics["batch"], p.metrics["weight_dtype"], p.metrics["kv_dtype"])
    assert p.mapping.replicas == p.metrics["replicas"]
    for key in ("tokens_per_s", "tokens_per_s_per_device", "ttft_s", "tpot_s", "batch",
                "memory_per_device_bytes", "usd_per_million_tokens", "energy_j_per_token_tdp",
                "weight_dtype", "kv_dtype"):
        assert key in p.metrics, key
    assert p.mapping.tp * p.mapping.pp * p.mapping.replicas == p.mapping.world == 8
    assert p.metrics["tokens_per_s_per_device"] == pytest.approx(p.metrics["tokens_per_s"] / 8)
    tps = [q.metrics["tokens_per_s"] for q in small.plans]
    assert tps == sorted(tps, reverse=True)
    assert small.explanation and "best by throughput" in small.explanation[0]
    assert any("batch" in line for line in small.explanation[1:])
    assert not small.interrupted


def test_best_beats_a_hand_picked_mapping(catalog: Catalog, node: Cluster,
                                          small: PlanResult) -> None:
    spec = catalog.models["llama-2-7b"]
    for tp, batch, w in ((1, 64, DType.BF16), (2, 128, DType.BF16), (4, 32, DType.FP8)):
        act = DType.FP8 if w is DType.FP8 else DType.BF16
        wl = Inference(batch=batch, prompt_len=PROMPT, output_len=OUTPUT, weight_dtype=w,
                       act_dtype=act)
        e = estimate(spec, node, wl, Mapping.serving(tp=tp, replicas=8 // tp))
        assert e.feasible
        assert small.plans[0].metrics["tokens_per_s"] >= e.metrics["tokens_per_s"]


def test_latency_targets_respected_and_counted(catalog: Catalog, node: Cluster) -> None:
    r = plan_serving(catalog.models["llama-2-7b"], node, PROMPT, OUTPUT, ttft_s=0.5,
                     tpot_s=0.012, max_batch=256)
    assert r.plans
    for p in r.plans:
        assert p.metrics["ttft_s"] <= 0.5 and p.metrics["tpot_s"] <= 0.012
    for point in r.pareto["latency_vs_throughput"]:
        assert point["tpot_s"] <= 0.012
    assert r.rejected_by_rule.get("ttft_target", 0) + r.rejected_by_rule.get("tpot_target", 0)


def test_tightening_tpot_never_raises_best_throughput(catalog: Catalog, node: Cluster) -> None:
    spec = catalog.models["llama-2-7b"]
    best = []
    for tpot in (None, 0.03, 0.015, 0.008, 0.004, 0.001):
        r = plan_serving(spec, node, PROMPT, OUTPUT, tpot_s=tpot, max_batch=256,
                         weight_dtypes=["bf16", "fp8"], kv_dtypes=["bf16"])
        best.append(r.plans[0].metrics["tokens_per_s"] if r.plans else 0.0)
    assert best == sorted(best, reverse=True)
    assert best[0] > best[-2] and best[-1] == 0.0  # 1 ms per token is out of reach


def test_70b_needs_tensor_parallelism_in_bf16(catalog: Catalog, node: Cluster) -> None:
    r = plan_serving(catalog.models["llama-2-70b"], node, PROMPT, OUTPUT, max_batch=64,
                     weight_dtypes=["bf16"], kv_dtypes=["bf16"])
    assert r.plans and all(p.mapping.tp >= 2 for p in r.plans)
    assert r.rejected_by_rule["memory"] >= 7  # every tp=1 batch (1..64), pruned after batch 1
    assert all(p["mapping"]["tp"] >= 2 for p in r.pareto["latency_vs_throughput"])
    if r.plans[0].mapping.tp == 2:  # the explanation says why halving tp loses
        assert any(line.startswith("tp=1: infeasible") and "memory" in line
                   for line in r.explanation)


def test_expert_parallel_is_all_of_a_replica_or_none(catalog: Catalog, node: Cluster) -> None:
    # vLLM's --enable-expert-parallel puts experts on every tp rank: ep is 1 or tp, never between
    r = plan_serving(catalog.models["mixtral-8x7b"], node, PROMPT, OUTPUT, max_batch=64, top=50,
                     weight_dtypes=["bf16"], kv_dtypes=["bf16"])
    assert r.plans and all(p.mapping.ep in (1, p.mapping.tp) for p in r.plans)
    assert any(p.mapping.ep == p.mapping.tp > 1 for p in r.plans)


def test_pareto_fronts_are_non_dominated(small: PlanResult) -> None:
    for name, (hi, lo) in {"latency_vs_throughput": ("tokens_per_s", "tpot_s"),
                           "throughput_vs_cost": ("tokens_per_s",
                                                  "usd_per_million_tokens")}.items():
        front = small.pareto[name]
        assert front and all("mapping" in p for p in front)
        for a in front:
            for b in front:
                if a is not b:
                    assert not (b[hi] >= a[hi] and b[lo] <= a[lo]
                                and (b[hi] > a[hi] or b[lo] < a[lo])), (a, b)
        assert max(p[hi] for p in front) == pytest.approx(small.plans[0].metrics[hi])


def test_cost_objective_ranks_by_dollars_per_token(catalog: Catalog, node: Cluster) -> None:
    r = plan_serving(catalog.models["llama-2-7b"], node, PROMPT, OUTPUT, max_batch=64,
                     objective="cost")
    price = node.accelerator.price.usd_per_hour.value  # type: ignore[union-attr]
    costs = [p.metrics["usd_per_million_tokens"] for p in r.plans]
    assert costs == sorted(costs)
    p = r.plans[0]
    assert p.metrics["usd_per_million_tokens"] == pytest.approx(
        price * 8 / 3600 / p.metrics["tokens_per_s"] * 1e6)
    assert "throughput_vs_cost" in r.pareto and not [n for n in r.notes if "price" in n]
    assert any("--allow-quantization" in n for n in r.notes)  # the formats searched, said
    assert {p.serving.weight_dtype.value for p in r.plans if p.serving} == {"bf16"}


def test_no_price_falls_back_to_throughput(catalog: Catalog, node: Cluster) -> None:
    free = dataclasses.replace(node, accelerator=node.accelerator.model_copy(
        update={"price": None}))
    r = plan_serving(catalog.models["llama-2-7b"], free, PROMPT, OUTPUT, max_batch=16,
                     weight_dtypes=["bf16"], kv_dtypes=["bf16"], objective=Objective.COST)
    assert any("price" in n for n in r.notes)
    tps = [p.metrics["tokens_per_s"] for p in r.plans]
    assert tps == sorted(tps, reverse=True) and "throughput_vs_cost" not in r.pareto
    assert r.plans[0].metrics["usd_per_million_tokens"] is None


def test_latency_objective_ranks_by_tpot(catalog: Catalog, node: Cluster) -> None:
    r = plan_serving(catalog.models["llama-2-7b"], node, PROMPT, OUTPUT, max_batch=16,
                     weight_dtypes=["bf16", "fp8"], objective="latency")
    tpots = [p.metrics["tpot_s"] for p in r.plans]
    assert tpots == sorted(tpots) and r.plans[0].serving.batch == 1


def test_keyboard_interrupt_returns_plans_so_far(catalog: Catalog, node: Cluster,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = serve_planner.serve_step
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 12:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(serve_planner, "serve_step", flaky)
    r = plan_serving(catalog.models["llama-2-7b"], node, PROMPT, OUTPUT, max_batch=64)
    assert r.interrupted and r.evaluated == 12 and r.plans
    assert any("interrupted" in n for n in r.notes)


def test_nothing_fits_is_a_result(catalog: Catalog) -> None:
    one = parse_cluster("1x1xh100-sxm5-80gb", catalog)
    r = plan_serving(catalog.models["llama-3.1-405b"], one, PROMPT, OUTPUT)
    assert r.plans == [] and r.feasible == 0 and r.rejected_by_rule["memory"] > 0
    assert r.pareto["latency_vs_throughput"] == []
    assert "no feasible" in r.explanation[0]


def test_progress_reaches_total(catalog: Catalog, node: Cluster) -> None:
    seen: list[tuple[int, int]] = []
    plan_serving(catalog.models["llama-2-7b"], node, PROMPT, OUTPUT, max_batch=32,
                 weight_dtypes=["bf16"], kv_dtypes=["bf16"],
                 progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1][0] == seen[-1][1]
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_moe_expert_parallel_within_tp(catalog: Catalog, node: Cluster) -> None:
    r = plan_serving(catalog.models["mixtral-8x7b"], node, PROMPT, OUTPUT, max_batch=16,
                     weight_dtypes=["fp8"], kv_dtypes=["fp8"], top=50)
    eps = {p.mapping.ep for p in r.plans}
    assert eps > {1} and all(p.mapping.ep <= p.mapping.tp for p in r.plans)


def test_pipeline_only_when_tp_is_capped(catalog: Catalog) -> None:
    two = parse_cluster("2xdgx-h100", catalog)
    r = plan_serving(catalog.models["llama-2-70b"], two, PROMPT, OUTPUT, max_batch=8,
                     weight_dtypes=["bf16"], kv_dtypes=["bf16"], top=50)
    pp = [p for p in r.plans if p.mapping.pp > 1]
    assert pp and all(p.mapping.tp == 8 for p in pp)
    assert all(p.mapping.tp * p.mapping.pp * p.mapping.replicas == 16 for p in r.plans)


def test_unknown_dtype_is_an_input_error(catalog: Catalog, node: Cluster) -> None:
    from accelmap.errors import InputError

    with pytest.raises(InputError, match="unknown dtype"):
        plan_serving(catalog.models["llama-2-7b"], node, PROMPT, OUTPUT, weight_dtypes=["fp7"])


def test_quantized_formats_only_when_allowed(node: Cluster) -> None:
    """Issue 27: a serving plan picked fp8/int4 weights nobody asked for. The 16-bit format
    only by default (and said); --allow-quantization (quantize) or an explicit list adds more."""
    from accelmap.search.serve import _dtypes

    ws, kvs, notes = _dtypes(node, None, None)
    assert ws == kvs == [DType.BF16] and "--allow-quantization" in notes[0]
    ws, kvs, notes = _dtypes(node, None, None, quantize=True)
    assert {DType.FP8, DType.INT8, DType.INT4} <= set(ws) and DType.FP8 in kvs
    assert "int4" in notes[0]
    ws, _, notes = _dtypes(node, ["int8"], ["bf16"])
    assert ws == [DType.INT8] and not notes  # asked for by name
