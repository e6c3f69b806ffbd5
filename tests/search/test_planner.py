"""Training planner: batch evaluation equals the single-plan estimate; ranking; rule counts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.framework import profile
from accelmap.engine import System, estimate
from accelmap.engine.train import OverlapPolicy, compose, layer_profile
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping, ZeroStage
from accelmap.search.planner import plan_training
from accelmap.search.result import Objective, PlanKind, pareto_front
from accelmap.workload import Recompute, Training

CAT = load_catalog()
C64 = parse_cluster("64xH100", CAT)
L13 = CAT.models["llama-2-13b"]


def test_batch_evaluation_equals_single_estimate_on_random_mappings() -> None:
    """The planner's vectorized composition and `estimate` are one implementation."""
    rng = np.random.default_rng(7)
    wl = Training(batch=512, seq_len=4096)
    system, fw = System.of(C64), profile("megatron")
    for _ in range(4):
        tp, mb = int(rng.choice([1, 2, 4, 8])), int(rng.choice([1, 2]))
        rec = Recompute(rng.choice(["none", "selective", "full"]))
        pp = rng.choice([1.0, 2.0, 4.0], 6)
        zero = rng.choice([0, 1, 2, 3], 6)
        dp = C64.devices / (tp * pp)
        prof = layer_profile(L13, system.device, fw, wl,
                             Mapping(tp=tp, micro_batch=mb, recompute=rec))
        table = Mapping(dp=dp, tp=tp, pp=pp, micro_batch=mb, virtual_stages=np.ones(6),
                        zero=zero, recompute=rec)
        r = compose(prof, system, wl, fw, OverlapPolicy(), table)
        for j in range(6):
            m = Mapping(dp=int(dp[j]), tp=tp, pp=int(pp[j]), micro_batch=mb, recompute=rec,
                        zero=ZeroStage(int(zero[j])))
            e = estimate(L13, C64, Training(batch=512, seq_len=4096, recompute=rec), m)
            if "violated_rule" in e.metrics:
                continue
            assert e.metrics["step_time_s"] == pytest.approx(float(r.step_time_s[j]))
            assert float(e.memory.total) == pytest.approx(float(r.memory_total[j]))


def test_plans_match_estimate_and_beat_a_hand_mapping() -> None:
    res = plan_training(L13, C64, 4096, 512, top=5)
    assert res.plans and res.feasible <= res.evaluated
    assert sum(res.rejected_by_rule.values()) + res.feasible == res.evaluated
    best = res.plans[0]
    assert best.kind is PlanKind.TRAIN and best.serving is None
    assert list(best.to_dict()["mapping"]) == ["dp", "tp", "pp", "cp", "ep", "zero",
                                               "micro_batch", "vpp", "recompute", "offload"]
    assert Mapping.from_dict(best.to_dict()["mapping"]) == best.mapping  # typed == its JSON
    assert best.mapping.world == C64.devices
    est = estimate(L13, C64, Training(batch=512, seq_len=4096), best.mapping)
    assert est.metrics["tokens_per_s"] == pytest.approx(best.metrics["tokens_per_s"])
    hand = estimate(L13, C64, Training(batch=512, seq_len=4096,
                                                recompute=Recompute.FULL),
                             Mapping(dp=8, tp=8, zero=ZeroStage.OPTIMIZER,
                                     recompute=Recompute.FULL))
    assert hand.feasible and best.metrics["tokens_per_s"] >= hand.metrics["tokens_per_s"]
    tps = [p.metrics["tokens_per_s"] for p in res.plans]
    assert tps == sorted(tps, reverse=True)
    assert res.explanation and res.explanation[0].startswith("best:")


def test_energy_objective_ranks_by_joules() -> None:
    res = plan_training(L13, C64, 4096, 512, top=5, objective=Objective.ENERGY, explain=False)
    e = [p.metrics["energy_j_per_token_tdp"] for p in res.plans]
    assert e == sorted(e)


def test_energy_objective_without_tdp_ranks_by_throughput_and_says_so() -> None:
    # Trainium2 has no published TDP: every energy figure is unknown, so no 0/0 scores
    res = plan_training(L13, parse_cluster("trn2-48xlarge", CAT), 4096, 64, top=5,
                        objective=Objective.ENERGY, explain=False)
    tps = [p.metrics["tokens_per_s"] for p in res.plans]
    # best first; plans within 0.1 % are ties, ranked by the simpler mapping (planner._ranked)
    assert tps and all(b <= a * 1.001 for a, b in itertools.pairwise(tps))
    assert any("no catalog TDP" in n for n in res.notes)


def test_forced_cross_node_tp_is_explained_not_crashed() -> None:
    from dataclasses import replace

    from accelmap.search.space import TrainingSpace

    l7 = CAT.models["llama-2-7b"]  # 32 heads: TP 16 divides them, crossing two 8-GPU nodes
    space = replace(TrainingSpace.default(l7, C64, 4096, force_tp=True), tp=(16,))
    res = plan_training(l7, C64, 4096, 512, top=3, space=space)
    assert res.plans and res.plans[0].mapping.tp == 16
    assert res.explanation[0].startswith("best:") and "tp=16" in res.explanation[0]


def test_impossible_job_is_a_result() -> None:
    res = plan_training(CAT.models["llama-3.1-405b"], parse_cluster("dgx-h100", CAT), 8192, 64,
                        top=3, explain=False)
    assert res.plans == [] and res.rejected_by_rule.get("memory", 0) > 0


def test_interrupt_returns_best_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelmap.search import planner

    calls = {"n": 0}
    real = planner.layer_profile

    def flaky(*a: object, **k: object) -> object:
        calls["n"] += 1
        if calls["n"] > 6:
            raise KeyboardInterrupt
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(planner, "layer_profile", flaky)
    res = planner.plan_training(L13, C64, 4096, 512, top=3)
    assert res.interrupted and res.plans


def test_pareto_front_is_non_dominated() -> None:
    pts = [{"a": 1, "b": 1}, {"a": 2, "b": 2}, {"a": 1.5, "b": 3}, {"a": 3, "b": 2.5}]
    front = pareto_front(pts, maximize="a", minimize="b")
    assert front == [{"a": 1, "b": 1}, {"a": 2, "b": 2}, {"a": 3, "b": 2.5}]


def test_plans_carry_their_error_band() -> None:
    """Every plan states the expected error of similar published runs (engine.error_band)."""
    res = plan_training(L13, C64, 4096, 512, top=2, explain=False)
    band = res.plans[0].metrics["error_band"]
    assert band["pct"] > 0 and band["runs"] >= 8 and band["group"].startswith("train")
    assert res.plans[0].to_dict()["error_band"]["text"].startswith("±")
