"""The one Mapping: validated degrees, everything derived once, scalars and candidate tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.workload import Recompute


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"tp": 0}, "tp=0"), ({"dp": 2.5}, "dp=2.5"), ({"micro_batch": -1}, "micro_batch"),
    ({"zero": 4}, "ZeRO stage"), ({"shard_group": 0}, "shard_group"),
])
def test_bad_degrees_are_one_clear_error(kwargs: dict, word: str) -> None:
    with pytest.raises(InputError, match=word):
        Mapping(**kwargs)


def test_for_world_fills_dp_and_says_what_does_not_divide() -> None:
    m = Mapping.for_world(64, tp=8, pp=2)
    assert (m.dp, m.world) == (4, 64)
    with pytest.raises(InputError, match="does not divide"):
        Mapping.for_world(64, tp=3)
    with pytest.raises(InputError, match="leave --dp out"):
        Mapping.for_world(64, dp=2, tp=8)


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]),
       st.sampled_from([None, 1, 2]))
def test_derived_groups(tp: int, pp: int, cp: int, group: int | None) -> None:
    m = Mapping.for_world(64, tp=tp, pp=pp, cp=cp, zero=ZeroStage.PARAMETERS,
                          shard_group=group)
    assert m.world == 64 and m.dp * tp * pp * cp == 64
    assert m.grad_group == m.dp * cp
    assert m.zero_shards == (group or m.dp) * cp
    assert m.expert_tp == tp


def test_serving_mapping_is_replicas_of_tp_x_pp() -> None:
    m = Mapping.serving(tp=4, pp=2, ep=2, replicas=None, world=16)
    assert (m.replicas, m.devices_per_replica, m.world, m.expert_tp) == (2, 8, 16, 2)
    assert Mapping.from_dict(m.to_serving_dict()) == m


def test_candidate_table_derives_the_same_as_each_mapping() -> None:
    """A Mapping of arrays (the planner's table) derives, per entry, what each mapping does."""
    pp = np.array([1.0, 2.0, 4.0])
    table = Mapping.for_world(32, tp=2, pp=pp, zero=np.array([0, 1, 3]),
                              offload_optimizer=np.array([False, True, False]),
                              offload_params=np.array([False, True, False]))
    assert not table.is_scalar
    for i in range(3):
        one = table.take(i)
        assert one.is_scalar and isinstance(one.zero, ZeroStage)
        assert one.world == 32 == table.world[i]
        assert one.zero_shards == table.zero_shards[i]
        assert one.offloads_optimizer == bool(table.offloads_optimizer[i])
    assert table.take(1).offload_optimizer is Offload.CPU
    assert table.take(np.array([True, False, True])).pp.tolist() == [1.0, 4.0]


def test_json_round_trip() -> None:
    m = Mapping(dp=4, tp=8, pp=2, cp=2, zero=ZeroStage.OPTIMIZER, micro_batch=2,
                virtual_stages=2, recompute=Recompute.SELECTIVE,
                offload_optimizer=Offload.CPU, offload_params=Offload.CPU)
    back = Mapping.from_dict(m.to_dict())
    assert back.to_dict() == m.to_dict()
    with pytest.raises(InputError, match="cannot read the mapping"):
        Mapping.from_dict({"tp": "eight"})


@pytest.mark.parametrize(("cluster", "model", "seq"), [
    ("64xh100-sxm5-80gb", "llama-3.1-8b", 4096),  # HSDP, tp overlap, zero bubble in play
    ("4x8xa100-sxm4-80gb", "llama-2-70b", 8192),  # uneven splits, cp
    ("4xwse-3", "llama-3.1-8b", 4096),  # weight streaming: offload only
])
def test_to_dicts_is_take_then_to_dict(catalog: Catalog, cluster: str, model: str,
                                       seq: int) -> None:
    """The planner's column-wise rows equal the one-validated-mapping-per-row way, for every
    candidate of every group of a real search space."""
    from accelmap.hardware.cluster import parse_cluster
    from accelmap.search.planner import _grid
    from accelmap.search.space import TrainingSpace

    cl = parse_cluster(cluster, catalog)
    spec = catalog.models[model]
    space = TrainingSpace.default(spec, cl, seq, offload=True)
    seen = 0
    for tp in space.tp:
        for cp in space.cp:
            cand = _grid(space, cl, tp, cp, 1, 2, space.recompute[-1], spec.n_layers)
            valid = [j for j in range(np.size(cand.pp)) if _valid(cand, j)]
            assert cand.to_dicts(valid) == [cand.take(j).to_dict() for j in valid]
            seen += len(valid)
    assert seen > 0


def _valid(cand: Mapping, j: int) -> bool:
    try:
        cand.take(j)
    except InputError:
        return False
    return True
