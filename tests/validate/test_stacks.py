"""Stack defaults follow the stated release: by version, else by the run's year; each range has
its source, and the transcription's rows keep the defaults they were read with."""

from __future__ import annotations

import pytest

from accelmap.mapping.plan import ZeroStage
from accelmap.validate.stacks import (
    DEFAULTS,
    ERAS,
    Stack,
    StageMicrobatches,
    defaults_for,
    release_date,
    training_stack,
)
from accelmap.workload import Recompute

M, N = Stack.MEGATRON_LM, Stack.NEMO


@pytest.mark.parametrize(("stack", "version", "year", "release"), [
    (M, "", 2020, "Megatron-LM 2020 (v1.x)"),
    (M, "1.1", None, "Megatron-LM 2020 (v1.x)"),
    (M, "", 2021, "Megatron-LM 2021 (v2)"),
    (M, "2.5", None, "Megatron-LM 2021 (v2)"),
    (M, "3.0", None, "Megatron-LM 2022 (v3)"),
    (M, "", 2022, "Megatron-LM 2022 (v3)"),
    (M, "0.9", None, "Megatron-Core 2023 on (core_r0.x)"),
    (M, "core_r0.5.0", 2021, "Megatron-Core 2023 on (core_r0.x)"),  # the version wins
    (M, "24.01", None, "Megatron-Core 2023 on (core_r0.x)"),  # a container release
    (M, "", 2023, "Megatron-Core 2023 on (core_r0.x)"),
    (M, "", None, "Megatron-Core 2023 on (core_r0.x)"),  # neither: the latest, noted
    (N, "23.05", None, "NeMo before 23.08"),
    (N, "23.08", None, "NeMo 23.08 on (Megatron-Core)"),
    (N, "24.07", None, "NeMo 23.08 on (Megatron-Core)"),
    (N, "2.1", None, "NeMo 23.08 on (Megatron-Core)"),
    (N, "", 2024, "NeMo 23.08 on (Megatron-Core)"),
])
def test_release_picks_the_defaults(stack: Stack, version: str, year: int | None,
                                    release: str) -> None:
    d, note = defaults_for(stack, version, year)
    assert d.release == release and d.stack is stack
    assert note is not None and release in note
    if not version:
        assert "not stated" in note


def test_megatron_core_defaults_are_not_2021s() -> None:
    old, _ = defaults_for(M, "", 2021)
    core, _ = defaults_for(M, "0.9")
    assert (old.flash_attention, old.recompute, old.tp_comm_overlap) == (False, Recompute.FULL,
                                                                         False)
    assert (core.flash_attention, core.recompute, core.tp_comm_overlap) == (
        True, Recompute.SELECTIVE, True)
    assert not old.overlap_grad_reduce and core.overlap_grad_reduce
    assert old.zero is ZeroStage.NONE and core.zero is ZeroStage.OPTIMIZER
    assert old.precision is not None and core.precision is None


def test_every_range_has_a_source_and_the_transcription_keeps_its_defaults() -> None:
    for stack, eras in ERAS.items():
        assert eras[0].since is None
        assert all(e.defaults.stack is stack and e.defaults.source and e.defaults.release
                   for e in eras)
        assert [e.since for e in eras[1:]] == sorted(e.since for e in eras[1:] if e.since)
        assert DEFAULTS[stack] in [e.defaults for e in eras]
    # the shared rows name Megatron-LM 2020/2021 and NeMo 24.07: the defaults they had
    assert defaults_for(M, "", 2021)[0] is DEFAULTS[M]
    assert defaults_for(N, "24.07")[0] is DEFAULTS[N]
    assert defaults_for(Stack.DEEPSPEED, "0.14")[1] is None  # one range: nothing to choose


def test_torchtitan_releases_split_the_pipeline_batch_as_they_did() -> None:
    """torchtitan's unstated micro-batch count under pipelining: pp degree until PR #781
    (2025-01-07), pp x stages per rank until PR #1073 (2025-04-07), micro-batch size 1 since."""
    old, note = defaults_for(Stack.TORCHTITAN, "", 2024)
    assert old.stage_microbatches is StageMicrobatches.PP_DEGREE
    assert note == ("torchtitan version not stated: the run's year 2024 picks torchtitan 2024 "
                    "defaults")
    assert defaults_for(Stack.TORCHTITAN, "25.02")[0].stage_microbatches \
        is StageMicrobatches.TOTAL_STAGES
    new = defaults_for(Stack.TORCHTITAN, "0.1")[0]
    assert new.stage_microbatches is None and new.micro_batch == 1
    assert all(d.interleaved_vpp == 2 for d in (old, new))
    assert release_date(Stack.TORCHTITAN, "0.2.1") == (2025, 10)
    assert isinstance(release_date(Stack.TORCHTITAN, "1.7"), str)
    # the pre-release 0.0.2 (torchao's 2025 benchmarks name it) dates nothing: the year picks
    assert release_date(Stack.TORCHTITAN, "0.0.2") is None
    d, said = defaults_for(Stack.TORCHTITAN, "0.0.2", 2024)
    assert d.stage_microbatches is StageMicrobatches.PP_DEGREE
    assert said == ("torchtitan 0.0.2 dates no release: the run's year 2024 picks torchtitan 2024 "
                    "defaults")


def test_versions_in_each_stacks_numbering() -> None:
    assert release_date(M, "0.12") == (2023, 1)
    assert release_date(N, "24.07") == (2024, 7)
    assert isinstance(release_date(N, "1.22"), str)  # a toolkit version, not a release
    assert isinstance(release_date(M, "latest"), str)
    assert training_stack("Megatron-Core 0.9") is M
    assert training_stack("NeMo 24.07 (Megatron-Core)") is N
