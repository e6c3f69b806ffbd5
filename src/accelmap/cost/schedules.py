"""Pipeline schedules: the bubble and the activations each stage holds.

p pipeline stages, m micro-batches per step, v virtual stages (model chunks) per device; t_f and
t_b the forward and backward time of one micro-batch on one stage. The ideal step is m (t_f + t_b);
the bubble adds

- GPipe (Huang et al. 2019) and 1F1B / PipeDream-Flush (Narayanan et al. 2021, "Efficient
  Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", sec. 2.2.1):
  (p-1)(t_f + t_b), i.e. (p-1)/m of the ideal time ("bubble time fraction"), and
  (p-1)/(m+p-1) of the total step. It holds for m < p too: the first micro-batch still crosses
  all p stages forward and back;
- interleaved 1F1B (same paper, sec. 2.2.2): the bubble shrinks by v, (p-1)/(v m) of ideal.
  Megatron-LM runs it on groups of ``microbatch_group_size_per_vp_stage`` (default p)
  micro-batches, which must lie in [p, m] with m a multiple of the group
  (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_
  interleaving): m is a multiple of p (mapping.constraints, ``batch_divisible``);
- ZB-H1 (Qi, Wan, Huang & Lin 2024, "Zero Bubble Pipeline Parallelism", ICLR, arXiv:2401.10241,
  sec. 2.1): splitting the backward into input-gradient (B) and weight-gradient (W) passes and
  delaying W into the cool-down leaves (p-1)(t_F + t_B - t_W) against 1F1B's
  (p-1)(t_F + t_B + t_W), at 1F1B's peak activation memory; one third of 1F1B's bubble when
  the three passes take equal time (the paper's assumption, and the default ``w_share`` 1/3).
  With m < p there are only m - 1 W passes after the first to delay, so the bubble is
  (p-1)(t_F + t_B) - min(m-1, p-1) t_W (the same critical path; at m = 1 nothing is delayed;
  checked against a simulation of the schedule in tests/cost/test_schedules.py);
- DualPipe (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", arXiv:2412.19437, sec. 3.2.1 and
  Table 2; the deepseek-ai/DualPipe README): micro-batches enter from both ends of the pipeline,
  each device holding stage r of one copy of the model and stage p-1-r of the other, and each
  forward chunk runs paired with another micro-batch's backward chunk so that each hides the
  other's communication. The bubble is (p/2 - 1)(F&B + B - 3W) with B the full backward and F&B
  the pair's time, which is F + B once the communication is hidden (the engine charges what
  is not): (p/2 - 1)(t_F + 2 t_B - 3 t_W), a share (p/2 - 1)(1 + b - 3w)/(p - 1) of 1F1B's with
  b = t_B/(t_F + t_B). The schedule needs p even and m even, m >= 2p (DualPipe ``step``
  asserts both). Checked against a replay of ``step``'s op order (tests/cost/
  test_dualpipe_replay.py).

Stages that are not alike (uneven splits, the embedding on the first stage, the head and loss on
the last; ``bubble_time``): identical micro-batches through p stages in order take the sum of
the stage times for the first to cross and the slowest stage's time for each of the m - 1
others (the makespan of a flow shop of identical jobs), so the slowest stage idles
sum_s tau_s - tau_max, scaled per schedule as above: (p-1) tau for p equal stages, Narayanan's
bubble. Warm-up and cool-down carry the pipeline's point-to-point sends on
their critical path: the first micro-batch's activations cross p - 1 stage boundaries forward
and its gradients p - 1 back, 2 (p-1) sends that the steady state (one send each way per
micro-batch) does not count. Both checked against a simulation of Megatron-LM's op order.

In-flight micro-batches (activations a stage keeps alive, in units of one micro-batch through
that stage's whole share of layers), with 0-indexed ``stage``:

- GPipe: all m forwards run before the first backward: m;
- 1F1B: Megatron-LM runs p - stage - 1 warm-up forwards, then one more before each backward
  (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_without_
  interleaving: ``num_warmup_microbatches = pipeline_parallel_size - pipeline_parallel_rank - 1``):
  min(p - stage, m); the first stage holds p;
- interleaved: warm-up is 2(p - stage - 1) + (v-1) p chunk-forwards, plus one
  (forward_backward_pipelining_with_interleaving: ``(pipeline_parallel_size -
  pipeline_parallel_rank - 1) * 2 + (num_model_chunks - 1) * microbatch_group_size_per_vp_stage``,
  group size default p), clipped to the m v chunk-micro-batches, each 1/v of the stage's layers:
  min(2(p-stage-1) + (v-1)p + 1, m v) / v; the first stage holds p + (p-1)/v;
- ZB-H1: as 1F1B (Qi et al. sec. 2.1: "peak memory no greater than 1F1B");
- DualPipe: p + 1 stage-micro-batches on every device (Table 2), of its two stages: DualPipe
  ``step`` runs 2(p/2 - h - 1) warm-up forwards of the device's first-direction chunk, then h + 1
  pairs of both, then one more first-direction forward before its first backward, with h =
  min(r, p-1-r): p - h micro-batches of the first-direction stage and h + 1 of the other. Stage
  s, on whichever device and copy, so holds p - s, as under 1F1B (the functions below count a
  stage); device r adds its two stages r and p-1-r: p - r + r + 1 = p + 1 (the engine's sum).

p == 1 means no pipeline: no bubble and one micro-batch in flight (gradient accumulation runs
them one after another). Every function is numpy-broadcastable in p, m, stage and v, and takes
the schedule as one name or an array of names (one per candidate mapping).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import numpy as np

from accelmap.errors import InputError
from accelmap.units import Num

# A GEMM's backward is its dgrad and wgrad GEMMs, twice its forward FLOPs (Kaplan et al. 2020
# sec. 2.1; Narayanan et al. 2021 sec. 5.1, as ops/training.py): the backward two thirds of
# forward + backward when the operator graph gives no share of its own (the engine passes it)
BACKWARD_SHARE = 2.0 / 3.0

# Qi et al. 2024 sec. 2.1 assume t_F = t_B = t_W: the weight-gradient pass is a third of a
# micro-batch's forward + backward time. The engine passes the share its operator graph gives.
ZB_EQUAL_W_SHARE = 1.0 / 3.0


class Schedule(StrEnum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved-1f1b"
    ZERO_BUBBLE = "zb-h1"
    DUALPIPE = "dualpipe"


_NAMES = tuple(s.value for s in Schedule)


def _out(x: Num) -> Num:
    return float(x) if np.ndim(x) == 0 else x


def _check(p: Num, m: Num, v: Num) -> tuple[Num, Num, Num]:
    p, m, v = (np.asarray(x, dtype=float) for x in (p, m, v))
    if any(x.size and x.min() < 1 for x in (p, m, v)):
        raise InputError("pipeline stages, micro-batches and virtual stages must all be >= 1")
    return p, m, v


def schedule_names(schedule: Schedule | str | Num) -> Num:
    """One schedule name, or an array of names (a candidate table), checked against Schedule."""
    if np.ndim(schedule) == 0:
        return np.asarray(Schedule(str(schedule)).value)
    names = np.asarray(schedule).astype(str)
    bad = np.ones(names.shape, dtype=bool)
    for name in _NAMES:
        bad &= names != name
    if bad.any():
        raise ValueError(f"unknown pipeline schedule {names[bad].ravel()[0]!r}; one of "
                         f"{', '.join(_NAMES)}")
    return names


def fill_drain_scale(schedule: Schedule | str | Num, pp: Num, micro_batches: Num,
                     virtual_stages: Num = 1, w_share: Num = ZB_EQUAL_W_SHARE,
                     b_share: Num = BACKWARD_SHARE) -> Num:
    """What a schedule leaves of the plain warm-up + cool-down, (p-1) stage-micro-batches of
    idle time on the slowest stage: 1 for GPipe and 1F1B, 1/v interleaved (Narayanan et al.
    sec. 2.2.2), 1 - w - w min(m-1, p-1)/(p-1) for ZB-H1 with W a share w of a stage's
    forward + backward (Qi et al. sec. 2.1: (t_F + t_B - t_W)/(t_F + t_B + t_W) once m >= p),
    (p/2 - 1)(1 + b - 3w)/(p - 1) for DualPipe with the (full) backward a share b (DeepSeek-V3
    Table 2)."""
    p, m, v = _check(pp, micro_batches, virtual_stages)
    return _out(_scale(schedule_names(schedule), p, m, v, w_share, b_share))


def _per_schedule(names: Num, formulas: dict[str, Callable[[], Num]]) -> Num:
    """Each schedule's formula where that schedule is named: the one formula for a single
    name, ``np.select`` over the names present in a table (formulas of absent schedules are
    not evaluated)."""
    if np.ndim(names) == 0:
        return formulas[str(names)]()
    masks = {k: names == k for k in formulas}
    present = [k for k in formulas if masks[k].any()]
    values = [formulas[k]() for k in present]

    def select(parts: list[Num]) -> Num:
        out = parts[-1]  # the last present schedule fills what the others leave
        for k, part in zip(present[-2::-1], parts[-2::-1], strict=True):
            out = np.where(masks[k], part, out)
        shape = np.broadcast_shapes(np.shape(out), names.shape)
        return out if np.shape(out) == shape else np.broadcast_to(out, shape).copy()

    if isinstance(values[0], tuple):  # several results per formula, selected one by one
        return tuple(select([v[i] for v in values]) for i in range(len(values[0])))
    return select(values)


def _scale(names: Num, p: Num, m: Num, v: Num, w_share: Num,
           b_share: Num = BACKWARD_SHARE) -> Num:
    w = np.clip(np.asarray(w_share, dtype=float), 0.0, 0.5)  # t_W <= t_F + t_B
    b = np.clip(np.asarray(b_share, dtype=float), w, 1.0)  # the full backward holds W

    def dual() -> Num:  # (p/2 - 1)(t_F + 2 t_B - 3 t_W) over 1F1B's (p - 1)(t_F + t_B)
        return (np.maximum(p / 2 - 1, 0.0) * np.maximum(1 + b - 3 * w, 0.0)
                / np.maximum(p - 1, 1))

    return _per_schedule(names, {
        Schedule.GPIPE.value: lambda: 1.0 + 0.0 * p,
        Schedule.ONE_F_ONE_B.value: lambda: 1.0 + 0.0 * p,
        Schedule.INTERLEAVED.value: lambda: 1.0 / v,
        Schedule.ZERO_BUBBLE.value:
            lambda: 1.0 - w - w * np.minimum(m - 1, p - 1) / np.maximum(p - 1, 1),
        Schedule.DUALPIPE.value: dual})


def bubble_over_ideal(schedule: Schedule | str | Num, pp: Num, micro_batches: Num,
                      virtual_stages: Num = 1, w_share: Num = ZB_EQUAL_W_SHARE,
                      b_share: Num = BACKWARD_SHARE) -> Num:
    """Pipeline bubble as a fraction of the ideal (bubble-free) compute time of one step, for p
    equal stages and no send time: (p-1)/m (GPipe, 1F1B), (p-1)/(v m) (interleaved),
    ((p-1)(1-w) - w min(m-1, p-1))/m (ZB-H1), (p/2-1)(1+b-3w)/m (DualPipe)."""
    p, m, _ = _check(pp, micro_batches, virtual_stages)
    scale = fill_drain_scale(schedule, pp, micro_batches, virtual_stages, w_share, b_share)
    return _out((p - 1) / m * np.asarray(scale))  # Narayanan et al. 2021 sec. 2.2.1


def bubble_over_total(schedule: Schedule | str | Num, pp: Num, micro_batches: Num,
                      virtual_stages: Num = 1, w_share: Num = ZB_EQUAL_W_SHARE,
                      b_share: Num = BACKWARD_SHARE) -> Num:
    """Bubble as a fraction of the whole step (ideal + bubble): b / (1 + b); (p-1)/(m+p-1) for
    GPipe and 1F1B."""
    b = np.asarray(bubble_over_ideal(schedule, pp, micro_batches, virtual_stages, w_share,
                                     b_share))
    return _out(b / (1.0 + b))


def bubble_time(schedule: Schedule | str | Num, pp: Num, micro_batches: Num,
                virtual_stages: Num = 1, *, slowest: Num, stages_total: Num, send: Num = 0.0,
                w_share: Num = ZB_EQUAL_W_SHARE, b_share: Num = BACKWARD_SHARE) -> Num:
    """Seconds per step the slowest stage waits in warm-up and cool-down: the other stages'
    time per micro-batch, sum_s tau_s - tau_max (``stages_total - slowest``), scaled by the
    schedule (``fill_drain_scale``), plus the 2 (p-1) point-to-point sends (``send`` each) on
    the critical path of the first micro-batch's forward and the last one's backward. For p
    equal stages and no sends it is ``bubble_over_ideal`` x m x tau."""
    p, m, v = _check(pp, micro_batches, virtual_stages)
    scale = _scale(schedule_names(schedule), p, m, v, w_share, b_share)
    others = np.maximum(np.asarray(stages_total) - np.asarray(slowest), 0.0)
    return _out(np.where(p <= 1, 0.0, scale * others + 2.0 * (p - 1) * np.asarray(send)))


def in_flight_first_second_last(schedule: Schedule | str | Num, pp: Num, micro_batches: Num,
                                virtual_stages: Num = 1) -> tuple[Num, Num, Num]:
    """``in_flight_micro_batches`` of stages 0, 1 and p - 1 in one pass (the stages whose
    memory can peak: the first holds the most of its layers, the second the most among the
    middle ones, the last the head and logits). Stage 1 is the last when p = 2. Under DualPipe
    a device holds two stages, r and p - 1 - r, each as many as here."""
    names = schedule_names(schedule)
    p, m, v = _check(pp, micro_batches, virtual_stages)
    one = p <= 1

    def plain() -> tuple[Num, Num, Num]:  # 1F1B; ZB-H1 and DualPipe (a stage) as 1F1B
        return np.minimum(p, m), np.minimum(p - 1, m), 1.0 + 0.0 * p

    def interleaved() -> tuple[Num, Num, Num]:
        base, mv = (v - 1) * p + 1, m * v
        chunked = (np.minimum(base + 2 * (p - 1), mv) / v,
                   np.minimum(base + 2 * np.maximum(p - 2, 0), mv) / v, np.minimum(base, mv) / v)
        return tuple(np.where(v > 1, c, f) for c, f in zip(chunked, plain(), strict=True))

    formulas: dict[str, Callable[[], Num]] = {
        Schedule.GPIPE.value: lambda: (m, m, m), Schedule.ONE_F_ONE_B.value: plain,
        Schedule.INTERLEAVED.value: interleaved, Schedule.ZERO_BUBBLE.value: plain,
        Schedule.DUALPIPE.value: plain}
    held = _per_schedule(names, formulas)
    return (_out(np.where(one, 1.0, held[0])), _out(np.where(one, 1.0, held[1])),
            _out(np.where(one, 1.0, held[2])))


def in_flight_micro_batches(schedule: Schedule | str | Num, pp: Num, micro_batches: Num,
                            stage: Num = 0, virtual_stages: Num = 1) -> Num:
    """Micro-batches whose activations ``stage`` (0 = first) holds at its peak, in units of one
    micro-batch through the stage's whole layer share."""
    names = schedule_names(schedule)
    p, m, v = _check(pp, micro_batches, virtual_stages)
    s = np.clip(np.asarray(stage, dtype=float), 0.0, p - 1)

    def one_f_one_b() -> Num:  # 1F1B; ZB-H1 keeps 1F1B's memory, DualPipe its count a stage
        return np.minimum(p - s, m)

    def interleaved() -> Num:  # v == 1 is plain 1F1B in Megatron
        chunks = np.minimum(2 * (p - s - 1) + (v - 1) * p + 1, m * v)
        return np.where(v > 1, chunks / v, one_f_one_b())

    held = _per_schedule(names, {
        Schedule.GPIPE.value: lambda: m + 0.0 * s, Schedule.ONE_F_ONE_B.value: one_f_one_b,
        Schedule.INTERLEAVED.value: interleaved, Schedule.ZERO_BUBBLE.value: one_f_one_b,
        Schedule.DUALPIPE.value: one_f_one_b})
    return _out(np.where(p <= 1, 1.0, held))
