"""Issue 25: the Mapping is the one owner of parallel state. A hand-built Mapping dropped the
workload's recompute (79.8 GiB instead of 36.6 GiB for llama-3.1-8b, dp=4 tp=2); training
ignored the expert tensor-parallel degree (etp)."""

from __future__ import annotations

import json

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cli.app import main
from accelmap.engine import estimate
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping, Schedule, ZeroStage
from accelmap.workload import Recompute


def _cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    try:
        main([*args, "--json"])
    except SystemExit as e:
        assert e.code in (0, None), capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_hand_built_mapping_equals_the_cli(catalog: Catalog,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The workload's recompute reaches a hand-built mapping, and a Mapping built by hand with
    the CLI's defaults gives the CLI's figures exactly."""
    cli = _cli_json(capsys, "estimate", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
                    "--train", "--batch", "32", "--seq", "4096", "--dp", "4", "--tp", "2",
                    "--recompute", "full")
    system = api.load_system(cluster="8xh100-sxm5-80gb")
    wl = api.training(32, 4096, recompute="full")
    hand = estimate(catalog.models["llama-3.1-8b"], system, wl,
                    Mapping(dp=4, tp=2, zero=ZeroStage.OPTIMIZER))
    assert hand.mapping.recompute is Recompute.FULL
    assert hand.step_time_s == pytest.approx(cli["step_time_s"], rel=1e-12)
    assert float(hand.memory.total) == pytest.approx(cli["memory"]["total_bytes"], rel=1e-12)
    # what dropping it gave: no recompute holds far more activation memory
    none = estimate(catalog.models["llama-3.1-8b"], system, api.training(32, 4096),
                    Mapping(dp=4, tp=2, zero=ZeroStage.OPTIMIZER))
    assert float(none.memory.total) > 1.2 * float(hand.memory.total)


def test_recompute_given_twice_and_different_is_refused(catalog: Catalog) -> None:
    system = api.load_system(cluster="8xh100-sxm5-80gb")
    with pytest.raises(InputError, match="given twice"):
        estimate(catalog.models["llama-3.1-8b"], system, api.training(32, 4096,
                                                                       recompute="full"),
                 Mapping(dp=8, recompute=Recompute.SELECTIVE))
    same = estimate(catalog.models["llama-3.1-8b"], system,
                    api.training(32, 4096, recompute="full"),
                    Mapping(dp=8, recompute=Recompute.FULL))
    assert same.feasible is not None and same.mapping.recompute is Recompute.FULL


def test_schedule_default_is_the_vpp_rule() -> None:
    assert Mapping(pp=2, virtual_stages=2).schedule is Schedule.INTERLEAVED
    assert Mapping(pp=2).schedule is Schedule.ONE_F_ONE_B
    assert Mapping(pp=2, virtual_stages=2, schedule="1f1b").schedule is Schedule.ONE_F_ONE_B


def test_training_defaults_live_in_the_mapping() -> None:
    one = Mapping.training(1, 16)
    assert (one.dp, int(one.zero), one.micro_batch) == (1, 0, 16)
    many = Mapping.training(8, 64, tp=2)
    assert (many.dp, int(many.zero), many.micro_batch) == (4, 1, 1)
    wafer = Mapping.training(4, 64, streams_weights=True)
    assert wafer.offloads_params and int(wafer.zero) == 0


def test_expert_tensor_parallelism_is_honoured(catalog: Catalog) -> None:
    """etp=tp is Megatron-Core's default (same answer as leaving it out); etp=1 keeps whole
    experts on each rank: more weight memory, the same expert FLOPs per rank (each rank routes
    its own share of the tokens: Megatron-Core MoE parallel folding)."""
    spec = catalog.models["mixtral-8x7b"]
    system = api.load_system(cluster="2x8xh100-sxm5-80gb")
    wl = api.training(64, 4096, recompute="full")

    def run(etp: int | None) -> object:
        return estimate(spec, system, wl, Mapping(dp=4, tp=4, ep=4, etp=etp, zero=1))
    default, same, whole = run(None), run(4), run(1)
    assert default.step_time_s == same.step_time_s
    assert float(default.memory.total) == float(same.memory.total)
    assert float(whole.memory.total) > float(default.memory.total) * 1.5
    flops = {e: sum(float(t.op.flops) * t.op.count for t in r.ops["forward"]
                    if "experts/" in t.op.name and t.op.gemm is not None)
             for e, r in (("tp", default), ("one", whole))}
    assert flops["one"] == pytest.approx(flops["tp"], rel=1e-9)
    bad = estimate(spec, system, wl, Mapping(dp=4, tp=4, ep=4, etp=3, zero=1))
    assert not bad.feasible and bad.violated_rule in ("ffn_divisible", "experts_divisible")
