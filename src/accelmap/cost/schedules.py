"""Pipeline schedules: the bubble and the activations each stage holds.

p pipeline stages, m micro-batches per step, v virtual stages (model chunks) per device; t_f and
t_b the forward and backward time of one micro-batch on one stage. The ideal step is m (t_f + t_b);
the bubble adds

- GPipe (Huang et al. 2019) and 1F1B / PipeDream-Flush (Narayanan et al. 2021, "Efficient
  Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", sec. 2.2.1):
  (p-1)(t_f + t_b), i.e. (p-1)/m of the ideal time ("bubble time fraction"), and
  (p-1)/(m+p-1) of the total step;
- interleaved 1F1B (same paper, sec. 2.2.2): the bubble shrinks by v, (p-1)/(v m) of ideal;
- ZB-H1 (Qi, Wan, Huang & Lin 2024, "Zero Bubble Pipeline Parallelism", ICLR, arXiv:2401.10241,
  sec. 2.1): splitting the backward into input-gradient (B) and weight-gradient (W) passes and
  delaying W into the cool-down leaves (p-1)(t_F + t_B - t_W), one third of 1F1B's
  (p-1)(t_F + t_B + t_W) when the three passes take equal time (their stated assumption), at the
  same peak activation memory as 1F1B.

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
- ZB-H1: as 1F1B (Qi et al. sec. 2.1: "peak memory no greater than 1F1B").

p == 1 means no pipeline: no bubble and one micro-batch in flight (gradient accumulation runs
them one after another). Every function is numpy-broadcastable in p, m, stage and v.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import numpy as np

from accelmap.errors import InputError

Num = Any

# Qi et al. 2024 sec. 2.1, with t_F = t_B = t_W: ZB-H1 bubble / 1F1B bubble = 1/3.
ZB_H1_BUBBLE_RATIO = 1.0 / 3.0


class Schedule(StrEnum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved-1f1b"
    ZERO_BUBBLE = "zb-h1"


def _out(x: Num) -> Num:
    return float(x) if np.ndim(x) == 0 else x


def _check(p: Num, m: Num, v: Num) -> tuple[Num, Num, Num]:
    p, m, v = (np.asarray(x, dtype=float) for x in (p, m, v))
    if np.any(p < 1) or np.any(m < 1) or np.any(v < 1):
        raise InputError("pipeline stages, micro-batches and virtual stages must all be >= 1")
    return p, m, v


def bubble_over_ideal(schedule: Schedule | str, pp: Num, micro_batches: Num,
                      virtual_stages: Num = 1) -> Num:
    """Pipeline bubble as a fraction of the ideal (bubble-free) compute time of one step."""
    schedule = Schedule(schedule)
    p, m, v = _check(pp, micro_batches, virtual_stages)
    base = (p - 1) / m  # Narayanan et al. 2021 sec. 2.2.1
    if schedule is Schedule.INTERLEAVED:
        return _out(base / v)  # sec. 2.2.2
    if schedule is Schedule.ZERO_BUBBLE:
        return _out(base * ZB_H1_BUBBLE_RATIO)
    return _out(base + 0.0 * v)


def bubble_over_total(schedule: Schedule | str, pp: Num, micro_batches: Num,
                      virtual_stages: Num = 1) -> Num:
    """Bubble as a fraction of the whole step (ideal + bubble): b / (1 + b); (p-1)/(m+p-1) for
    GPipe and 1F1B."""
    b = np.asarray(bubble_over_ideal(schedule, pp, micro_batches, virtual_stages))
    return _out(b / (1.0 + b))


def in_flight_micro_batches(schedule: Schedule | str, pp: Num, micro_batches: Num, stage: Num = 0,
                            virtual_stages: Num = 1) -> Num:
    """Micro-batches whose activations ``stage`` (0 = first) holds at its peak, in units of one
    micro-batch through the stage's whole layer share."""
    schedule = Schedule(schedule)
    p, m, v = _check(pp, micro_batches, virtual_stages)
    s = np.clip(np.asarray(stage, dtype=float), 0.0, p - 1)
    one_f_one_b = np.minimum(p - s, m)
    if schedule is Schedule.GPIPE:
        held = m + 0.0 * s
    elif schedule is Schedule.INTERLEAVED:
        chunks = np.minimum(2 * (p - s - 1) + (v - 1) * p + 1, m * v)
        held = np.where(v > 1, chunks / v, one_f_one_b)  # v == 1 is plain 1F1B in Megatron
    else:  # 1F1B; ZB-H1 keeps 1F1B's memory
        held = one_f_one_b
    return _out(np.where(p <= 1, 1.0, held))
