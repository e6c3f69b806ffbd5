"""Pipeline stage-to-stage sends as the stacks run them (workload.PipeSends): Megatron's batched
exchanges against DeepSpeed's blocking sends, checked against a discrete-event run of
DeepSpeed's TrainSchedule, and the Megatron-DeepSpeed releases that pick them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.catalog import load_catalog
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.engine import estimate
from accelmap.engine.train import stage_sends
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping
from accelmap.validate.stacks import Stack, defaults_for
from accelmap.workload import PipeSends, Recompute, Training

CAT = load_catalog()


def _train_schedule(stage: int, stages: int, micro: int) -> Iterator[tuple[str, int]]:
    """The instruction stream of one stage under DeepSpeed's TrainSchedule
    (deepspeed/runtime/pipe/schedule.py): 2 (m + p - 1) steps; on even stages even steps run
    forwards and odd steps backwards, the other way round on odd stages; a forward step first
    sends the previous step's input gradient back and receives its input, a backward step first
    receives its output's gradient and sends the previous step's output on."""
    prev = -1
    for step in range(2 * (micro + stages - 1)):
        forward = step % 2 == stage % 2
        half = step // 2 if step % 2 == 0 else (step - 1) // 2
        if forward:
            mb = half - stage // 2
        elif step % 2 == 0:
            mb = half - stages + (stage + 1) // 2
        else:
            mb = half - stages + 1 + stage // 2
        ok, ok_prev = 0 <= mb < micro, 0 <= prev < micro
        if forward:
            if ok_prev and stage > 0:
                yield "send_grad", prev
            if ok and stage > 0:
                yield "recv_act", mb
        else:
            if ok and stage < stages - 1:
                yield "recv_grad", mb
            if ok_prev and stage < stages - 1:
                yield "send_act", prev
        if ok:
            yield ("fwd" if forward else "bwd"), mb
        prev = mb


_PEER = {"send_act": (1, "recv_act"), "recv_act": (-1, "send_act"),
         "send_grad": (-1, "recv_grad"), "recv_grad": (1, "send_grad")}


def _makespan(stages: int, micro: int, t_f: float, t_b: float, c_act: float,
              c_grad: float) -> float:
    """Each stage's stream runs its instructions in order; a blocking send and its receive
    start together when both stages reach them and take c (a rendezvous)."""
    progs = [list(_train_schedule(s, stages, micro)) for s in range(stages)]
    pc, t = [0] * stages, [0.0] * stages
    while any(pc[s] < len(progs[s]) for s in range(stages)):
        moved = False
        for s in range(stages):
            while pc[s] < len(progs[s]):
                op, mb = progs[s][pc[s]]
                if op in ("fwd", "bwd"):
                    t[s] += t_f if op == "fwd" else t_b
                    pc[s] += 1
                    moved = True
                    continue
                step, want = _PEER[op]
                q = s + step
                if pc[q] >= len(progs[q]) or progs[q][pc[q]] != (want, mb):
                    break
                t[s] = t[q] = max(t[s], t[q]) + (c_act if "act" in op else c_grad)
                pc[s] += 1
                pc[q] += 1
                moved = True
        assert moved, "the schedule deadlocked"
    return max(t)


def test_the_schedule_runs_as_1f1b_without_sends() -> None:
    """With free sends DeepSpeed's TrainSchedule is 1F1B: (m + p - 1) (t_f + t_b)."""
    assert _makespan(8, 32, 1.0, 3.0, 0.0, 0.0) == pytest.approx((32 + 7) * 4.0)


@settings(max_examples=25, deadline=None)
@given(stages=st.integers(2, 12), micro=st.integers(8, 64), t_b=st.sampled_from([2.0, 3.0]),
       c_act=st.floats(0.0, 0.3), c_grad=st.floats(0.0, 0.6))
def test_blocking_charge_matches_the_schedule(stages: int, micro: int, t_b: float,
                                              c_act: float, c_grad: float) -> None:
    """The engine charges stage_sends per micro-batch on the busy stage and one of each
    transfer per hop of warm-up and cool-down (compose's bubble); the schedule's own run of
    (2m + p - 4) of each (m with two stages) differs by at most three of each, whatever p
    and m -- charging each transfer once a micro-batch, as batched sends are, would be off by
    m of each."""
    ct = {"pp": 0.0, "pp_part": c_act, "pp_whole": c_grad}
    per_mb = float(stage_sends(PipeSends.BLOCKING_WHOLE_GRAD, ct, stages))
    charged = micro * per_mb + (stages - 1) * (c_act + c_grad)
    simulated = _makespan(stages, micro, 1.0, t_b, c_act, c_grad) \
        - (micro + stages - 1) * (1.0 + t_b)
    assert abs(charged - simulated) <= 3 * (c_act + c_grad) + 1e-9


def test_blocking_waits_twice_as_long_as_batched() -> None:
    ct = {"pp": 1.0, "pp_part": 1.0, "pp_whole": 8.0}
    assert stage_sends(PipeSends.BATCHED, ct, 4) == 2.0
    assert stage_sends(PipeSends.BLOCKING, ct, 4) == 4.0
    assert stage_sends(PipeSends.BLOCKING_WHOLE_GRAD, ct, 4) == 18.0
    assert stage_sends(PipeSends.BLOCKING, ct, 2) == 2.0  # no stage has two neighbours


def _step(sends: PipeSends, pp: int = 4) -> float:
    cl = parse_cluster("4x8xa100-sxm4-80gb", CAT)
    wl = Training(batch=64, seq_len=2048, recompute=Recompute.FULL, flash_attention=False,
                  pp_sends=sends)
    est = estimate(CAT.models["gpt3-13b"], cl, wl,
                   Mapping(tp=8, pp=pp, dp=4 // pp, micro_batch=1),
                   framework=framework_profile(Framework.MEGATRON))
    return float(est.step_time_s)  # type: ignore[attr-defined]


def test_sends_order_the_step_time_and_vanish_without_a_pipeline() -> None:
    """Across nodes the whole gradient (8x the split bytes over the NIC) costs most; with no
    pipeline there is nothing to send."""
    batched, blocking, whole = (_step(s) for s in PipeSends)
    assert batched < blocking < whole
    assert len({_step(s, pp=1) for s in PipeSends}) == 1


def test_megatron_deepspeed_releases_pick_their_sends() -> None:
    def sends(version: str = "", year: int | None = None) -> PipeSends:
        return defaults_for(Stack.MEGATRON_DEEPSPEED, version, year)[0].pp_sends

    assert sends("0.5.3") is PipeSends.BLOCKING_WHOLE_GRAD  # before PR #1407
    assert sends("0.5.4") is PipeSends.BLOCKING
    assert sends("0.6.2") is PipeSends.BLOCKING
    assert sends(year=2021) is PipeSends.BLOCKING_WHOLE_GRAD
    assert sends(year=2022) is PipeSends.BLOCKING
    assert defaults_for(Stack.MEGATRON_LM, year=2021)[0].pp_sends is PipeSends.BATCHED
