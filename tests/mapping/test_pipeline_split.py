"""Pipeline splits and schedules as Megatron-LM accepts them (NVIDIA/Megatron-LM, read at commit
d98e8a64): megatron/training/arguments.py validate_args, megatron/core/transformer/
transformer_config.py TransformerConfig.__post_init__ ("Uneven PP"), megatron/core/transformer/
transformer_block.py get_num_layers_to_build, megatron/core/pipeline_parallel/schedules.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.catalog import load_catalog
from accelmap.cost.schedules import Schedule
from accelmap.errors import InputError
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.constraints import TrainingJob, check_training, training_masks
from accelmap.mapping.plan import Mapping, balanced_split, default_schedule

CAT = load_catalog()
L405 = CAT.models["llama-3.1-405b"]  # 126 layers
C1024 = parse_cluster("1024xH100", CAT)
SPLIT_RULES = {"pipeline_split", "split_conflict", "virtual_stages", "layers_over_stages",
               "schedule"}


def rules(m: Mapping, layers: int = 126, batch: int = 1024) -> set[str]:
    spec = L405 if layers == 126 else L405.model_copy(update={"n_layers": layers})
    got = {v.rule for v in check_training(TrainingJob(spec, C1024, batch, 8192), m)}
    return got & SPLIT_RULES


def mapping(pp: int, **kw: object) -> Mapping:
    return Mapping.for_world(1024, tp=8, pp=pp, **kw)


def test_the_default_split_is_even_and_megatron_refuses_the_rest() -> None:
    """Megatron asserts pp | L when no split is given (arguments.py: 'Number of layers should
    be divisible by the pipeline-model-parallel size'); accelmap used to take ceil(L / pp)
    per stage and the rest on the last (126 over 8: 16 x 7 + 14), a run Megatron refuses."""
    assert rules(mapping(2)) == set()
    assert mapping(2).stage_layers(126) == (63, 63, 63)
    assert rules(mapping(8)) == {"pipeline_split"}
    assert rules(mapping(16)) == {"pipeline_split"}
    assert rules(mapping(8), layers=128) == set()


@pytest.mark.parametrize(("pp", "kw", "split"), [
    # Llama 3 405B (Dubey et al. 2024 sec. 3.3.2): one layer fewer on the first and last stage
    (16, {"embedding_in_split": True, "loss_in_split": True}, (7, 8, 7)),
    (8, {"embedding_in_split": True, "loss_in_split": True}, (15, 16, 15)),
    (8, {"first_stage_layers": 15, "last_stage_layers": 15}, (15, 16, 15)),
    (8, {"first_stage_layers": 14}, (14, 16, 16)),  # the last stage is a middle one
    (8, {"last_stage_layers": 7}, (17, 17, 7)),
    (2, {"first_stage_layers": 60, "last_stage_layers": 66}, (60, 0, 66)),  # no middle
    (1, {}, (126, 126, 126)),
])
def test_splits_megatron_accepts(pp: int, kw: dict, split: tuple[int, int, int]) -> None:
    m = mapping(pp, **kw)
    assert rules(m) == set()
    first, middle, last = m.stage_layers(126)
    assert first == split[0] and last == split[2]
    if pp > 2:
        assert middle == split[1]
        assert first + (pp - 2) * middle + last == 126


@pytest.mark.parametrize(("pp", "kw", "rule", "words"), [
    (8, {"first_stage_layers": 14, "last_stage_layers": 14}, "pipeline_split",
     "leave 98 for 6 middle"),  # 98 layers do not split over 6 middle stages
    (2, {"first_stage_layers": 60, "last_stage_layers": 60}, "pipeline_split",
     "none left exactly when no middle"),
    (8, {"first_stage_layers": 100, "last_stage_layers": 100}, "pipeline_split", "-74"),
    (8, {"embedding_in_split": True}, "pipeline_split", "127 layers (with the embedding"),
    (16, {"first_stage_layers": 7, "loss_in_split": True}, "split_conflict", "cannot be given"),
    (8, {}, "pipeline_split", "--decoder-first/last-pipeline-num-layers"),
])
def test_splits_megatron_refuses(pp: int, kw: dict, rule: str, words: str) -> None:
    m = mapping(pp, **kw)
    assert rule in rules(m)
    sentence = next(v.sentence for v in check_training(TrainingJob(L405, C1024, 1024, 8192), m)
                    if v.rule == rule)
    assert words in sentence


def test_pp1_accepts_only_the_whole_model_on_its_one_stage() -> None:
    assert rules(Mapping.for_world(1024, tp=8, first_stage_layers=126)) == set()
    assert rules(Mapping.for_world(1024, tp=8, first_stage_layers=100)) == {"pipeline_split"}
    assert rules(Mapping.for_world(1024, tp=8, first_stage_layers=63,
                                   last_stage_layers=63)) == {"pipeline_split"}


def test_virtual_stages_need_whole_layers_on_every_chunk() -> None:
    """TransformerConfig: each middle stage's layers divide by vpp; ends that do not are
    Megatron-Core's --pipeline-model-parallel-layout (any layers per virtual stage)."""
    ok = mapping(8, first_stage_layers=14, virtual_stages=2,
                 schedule=Schedule.INTERLEAVED)  # 14, 16 x 7
    assert rules(ok) == set()
    odd_ends = mapping(8, first_stage_layers=15, last_stage_layers=15, virtual_stages=2,
                       schedule=Schedule.INTERLEAVED)  # 15, 16 x 6, 15: a layout
    assert rules(odd_ends) == set()
    odd_middle = mapping(8, first_stage_layers=18, last_stage_layers=18, virtual_stages=2,
                         schedule=Schedule.INTERLEAVED)  # 90 / 6 = 15 per middle stage
    assert rules(odd_middle) == {"virtual_stages"}
    llama3 = mapping(16, embedding_in_split=True, loss_in_split=True, virtual_stages=4,
                     schedule=Schedule.INTERLEAVED)  # 128 / 16 = 8 per stage, 2 per chunk
    assert rules(llama3) == set()
    assert rules(mapping(4, virtual_stages=4, schedule=Schedule.INTERLEAVED),
                 layers=128) == set()
    assert rules(mapping(4, virtual_stages=3, schedule=Schedule.INTERLEAVED),
                 layers=128) == {"virtual_stages"}


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb-h1"])
def test_interleaving_needs_the_interleaved_schedule(schedule: str) -> None:
    m = mapping(4, virtual_stages=2, schedule=schedule)
    got = check_training(TrainingJob(L405, C1024, 1024, 8192), m)
    sentence = next(v.sentence for v in got if v.rule == "schedule")
    assert "interleaving needs the interleaved-1f1b schedule" in sentence
    assert rules(m, layers=128) == {"schedule"}


def test_interleaved_schedule_needs_virtual_stages() -> None:
    m = mapping(4, schedule="interleaved-1f1b")
    got = check_training(TrainingJob(L405, C1024, 1024, 8192), m)
    assert "needs vpp >= 2" in next(v.sentence for v in got if v.rule == "schedule")
    assert rules(mapping(4, virtual_stages=2, schedule="interleaved-1f1b"), layers=128) == set()


def test_fields_are_validated_like_the_degrees() -> None:
    with pytest.raises(InputError, match="first_stage_layers=0"):
        Mapping(pp=2, first_stage_layers=0)
    with pytest.raises(InputError, match="whole number"):
        Mapping(pp=2, last_stage_layers=2.5)
    with pytest.raises(InputError, match="schedule='pipedream'"):
        Mapping(schedule="pipedream")  # type: ignore[arg-type]
    assert Mapping(schedule="zb-h1").schedule is Schedule.ZERO_BUBBLE  # type: ignore[arg-type]


def test_round_trip_and_tables() -> None:
    m = Mapping(dp=8, tp=8, pp=16, first_stage_layers=7, last_stage_layers=7,
                schedule=Schedule.ZERO_BUBBLE)
    # written out, an open recompute is the policy it settles to (none)
    assert Mapping.from_dict(m.to_dict()) == m.with_recompute(None)
    assert "first_stage_layers=7" in m.describe() and "schedule=zb-h1" in m.describe()
    assert "schedule" not in mapping(4).to_dict()  # Megatron's default is not repeated
    e = Mapping(pp=8, embedding_in_split=True, loss_in_split=True)
    assert Mapping.from_dict(e.to_dict()) == e.with_recompute(None)
    table = Mapping(dp=8.0, tp=8, pp=np.array([8.0, 16.0]), first_stage_layers=np.array(
        [0.0, 7.0]), last_stage_layers=np.array([0.0, 7.0]),
        schedule=np.array(["1f1b", "zb-h1"]))
    one, two = table.take(0), table.take(1)
    assert one.first_stage_layers is None and one.schedule is Schedule.ONE_F_ONE_B
    assert two.first_stage_layers == 7 and two.schedule is Schedule.ZERO_BUBBLE
    masks = training_masks(TrainingJob(L405, C1024, 1024, 8192), table)
    assert masks["pipeline_split"].tolist() == [True, False]
    f, mid, last = table.stage_layers(126)
    assert f.tolist() == [15.75, 7.0] and mid.tolist() == [15.75, 8.0]
    assert last.tolist() == [15.75, 7.0]  # refused (fractional), and Llama 3's split


@pytest.mark.parametrize(("layers", "pp", "vpp", "split"), [
    (126, 16, 1, (7, 7)), (126, 8, 1, (15, 15)), (126, 8, 2, (16, 14)), (61, 8, 1, (7, 6)),
    (61, 16, 1, (3, 2)), (128, 8, 1, (0, 0)), (80, 8, 4, (4, 4)), (61, 32, 1, (0, 0)),
])
def test_balanced_split(layers: int, pp: int, vpp: int, split: tuple[int, int]) -> None:
    """The planner's split where Megatron refuses the even one; (0, 0) = even or none."""
    assert tuple(float(x) for x in balanced_split(layers, pp, vpp)) == split


@given(st.integers(2, 160), st.sampled_from([2, 4, 8, 16, 32, 64]), st.sampled_from([1, 2, 4]))
def test_balanced_split_is_accepted_or_left_unset(layers: int, pp: int, vpp: int) -> None:
    first, last = (float(x) for x in balanced_split(layers, pp, vpp))
    if first:
        m = Mapping(dp=1024 // (8 * pp), tp=8, pp=pp, first_stage_layers=int(first),
                    last_stage_layers=int(last), virtual_stages=vpp,
                    schedule=default_schedule(vpp))
        got = rules(m, layers=layers, batch=pp * 1024)
        assert got <= {"layers_over_stages"}, got
        f, mid, la = m.stage_layers(layers)
        # balanced: the ends within one chunk of the middle stages (of each other at pp = 2)
        assert max(f, la) <= (mid if pp > 2 else min(f, la)) + vpp


@pytest.mark.parametrize("vpp", [2, 4, 8])
def test_llama3_405b_uneven_and_interleaved_as_published(vpp: int) -> None:
    """Llama 3 405B (Dubey et al. 2024 sec. 3.3.2): 126 layers, pp = 16, one layer fewer on the
    first and the last stage, interleaved. Both spellings are accepted for every vpp that
    splits the middle stages' 8 layers, and give 7, 8 x 14, 7."""
    for kw in ({"first_stage_layers": 7, "last_stage_layers": 7},
               {"embedding_in_split": True, "loss_in_split": True}):
        m = mapping(16, virtual_stages=vpp, schedule=Schedule.INTERLEAVED, **kw)
        assert rules(m) == set(), kw
        assert tuple(float(x) for x in m.stage_layers(126)) == (7.0, 8.0, 7.0)


def test_virtual_stage_refusal_names_the_rule_that_fails() -> None:
    """The sentence names the stage whose layers do not split, not 'pp > 1' when pp is 16."""
    job = TrainingJob(L405, C1024, 1024, 8192)
    m = mapping(16, first_stage_layers=7, last_stage_layers=7, virtual_stages=3,
                schedule=Schedule.INTERLEAVED)
    (v,) = [v for v in check_training(job, m) if v.rule == "virtual_stages"]
    assert "each middle stage of pp=16 holds 8 layers" in v.sentence
    assert "vpp of 2, 4, 8 would" in v.sentence and "pp > 1" not in v.sentence
    single = Mapping.for_world(1024, tp=8, pp=1, virtual_stages=2,
                               schedule=Schedule.INTERLEAVED)
    (v,) = [v for v in check_training(job, single) if v.rule == "virtual_stages"]
    assert "set --pp" in v.sentence


def test_dualpipe_needs_an_even_pipeline_and_two_micro_batches_a_stage() -> None:
    """deepseek-ai/DualPipe ``step``: num_ranks % 2 == 0, num_chunks even and >= 2 num_ranks."""
    assert rules(mapping(8, schedule=Schedule.DUALPIPE), layers=128) == set()  # 64 >= 16
    job = TrainingJob(L405, C1024, 1024, 8192)
    for m in (Mapping(dp=16, tp=8, pp=7, schedule=Schedule.DUALPIPE),  # odd
              mapping(8, schedule=Schedule.DUALPIPE, micro_batch=8, first_stage_layers=14,
                      last_stage_layers=14)):  # 1024 / (16 x 8) = 8 < 16 micro-batches
        (v,) = [v for v in check_training(job, m) if v.rule == "schedule"]
        assert "dualpipe feeds half the micro-batches from each end" in v.sentence
        assert "--schedule zb-h1" in v.sentence
