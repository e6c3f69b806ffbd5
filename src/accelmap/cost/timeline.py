"""Pipeline timelines: when each stage runs each micro-batch's forward and backward, for a
report's Gantt chart. ``cost/schedules.py`` has the closed forms (the bubble, the in-flight
micro-batches); this module replays the schedules themselves, pass by pass, so a picture shows
where the bubble sits. Both agree: the makespan of equal stages is m (t_f + t_b) plus
``schedules.bubble_time`` (tests/cost/test_timeline.py).

- GPipe, 1F1B and interleaved 1F1B run Megatron-LM's order of passes on each stage
  (megatron/core/pipeline_parallel/schedules.py: forward_backward_pipelining_without_
  interleaving, warm-up p - s - 1 forwards; _with_interleaving, warm-up 2(p - s - 1) + (v - 1) p
  chunk-forwards over micro-batch groups of p); GPipe runs every forward first. A pass starts
  when its stage is free and its input has arrived (the previous stage's forward, the next
  stage's backward; chunk k of the first stage waits for chunk k - 1 of the last).
- ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", sec. 2.1) splits the backward into
  the input gradient B and the weight gradient W: each stage runs its earliest-ready pass, B
  before F before W, with at most p - s micro-batches between their F and B (1F1B's memory),
  so the W passes fill the cool-down.

Times are per micro-batch on one stage (all stages alike, as in the closed forms' p equal
stages); ``send`` is the stage-to-stage transfer after each pass that feeds another stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelmap.cost.schedules import ZB_EQUAL_W_SHARE, Schedule
from accelmap.errors import InputError

# More passes than this make a chart no one can read and a page that loads slowly.
MAX_PASSES = 20_000


@dataclass(frozen=True)
class Pass:
    """One pass on one stage: F (forward), B (backward; the input gradient under ZB-H1) or
    W (ZB-H1's weight gradient), of micro-batch ``micro_batch`` and model chunk ``chunk``."""

    stage: int
    kind: str
    micro_batch: int
    chunk: int
    start: float
    end: float

    def to_dict(self) -> dict[str, float | int | str]:
        return {"stage": self.stage, "kind": self.kind, "micro_batch": self.micro_batch,
                "chunk": self.chunk, "start": self.start, "end": self.end}


def _megatron_order(p: int, m: int, v: int, s: int, gpipe: bool) -> list[tuple[str, int, int]]:
    """(pass, micro-batch, chunk) in the order stage ``s`` runs them."""
    table = [(i, k) for lo in range(0, m, p) for k in range(v)
             for i in range(lo, min(lo + p, m))]
    fwd = [("F", i, k) for i, k in table]
    bwd = [("B", i, v - 1 - k) for i, k in table]
    warm = len(fwd) if gpipe else min(2 * (p - s - 1) + (v - 1) * p if v > 1 else p - s - 1,
                                      len(fwd))
    order = fwd[:warm]
    for j in range(len(fwd) - warm):
        order += [fwd[warm + j], bwd[j]]
    return order + bwd[len(fwd) - warm:]


def _replay(p: int, m: int, v: int, t_f: float, t_b: float, send: float,
            gpipe: bool) -> list[Pass]:
    orders = [_megatron_order(p, m, v, s, gpipe) for s in range(p)]
    f, b = t_f / v, t_b / v  # one chunk holds 1/v of the stage's layers
    done: dict[tuple[str, int, int, int], float] = {}
    free, pos = [0.0] * p, [0] * p
    out: list[Pass] = []
    while any(pos[s] < len(orders[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i, k = orders[s][pos[s]]
                if kind == "F":
                    dep = (None if s == 0 and k == 0 else
                           ("F", s - 1, i, k) if s > 0 else ("F", p - 1, i, k - 1))
                    last = s == p - 1 and k == v - 1  # feeds its own backward
                else:
                    dep = (("F", s, i, k) if s == p - 1 and k == v - 1 else
                           ("B", s + 1, i, k) if s < p - 1 else ("B", 0, i, k + 1))
                    last = s == 0 and k == 0  # the end of the micro-batch's backward
                if dep is not None and dep not in done:
                    break
                start = max(free[s], done[dep] if dep else 0.0)
                end = start + (f if kind == "F" else b)
                out.append(Pass(s, kind, i, k, start, end))
                free[s] = end
                done[(kind, s, i, k)] = end + (0.0 if last or p == 1 else send)
                pos[s] += 1
                moved = True
        if not moved:  # pragma: no cover - the orders are deadlock-free (tests)
            raise RuntimeError("pipeline replay made no progress")
    return out


def _zb_h1(p: int, m: int, t_f: float, t_b: float, t_w: float, send: float) -> list[Pass]:
    free = [0.0] * p
    inf = float("inf")
    f_in = [[0.0] * m] + [[inf] * m for _ in range(p - 1)]
    b_in = [[inf] * m for _ in range(p)]
    nf, nb, nw = [0] * p, [0] * p, [0] * p
    out: list[Pass] = []
    hop = send if p > 1 else 0.0
    while sum(nw) < p * m:
        ready: list[tuple[float, int, int]] = []
        for s in range(p):
            if nb[s] < nf[s] and b_in[s][nb[s]] < inf:
                ready.append((max(free[s], b_in[s][nb[s]]), 0, s))
            if nf[s] < m and f_in[s][nf[s]] < inf and nf[s] - nb[s] < p - s:
                ready.append((max(free[s], f_in[s][nf[s]]), 1, s))
            if nw[s] < nb[s]:
                ready.append((free[s], 2, s))
        start, kind, s = min(ready)
        if kind == 0:
            free[s] = start + t_b
            out.append(Pass(s, "B", nb[s], 0, start, free[s]))
            if s > 0:
                b_in[s - 1][nb[s]] = free[s] + hop
            nb[s] += 1
        elif kind == 1:
            free[s] = start + t_f
            out.append(Pass(s, "F", nf[s], 0, start, free[s]))
            if s < p - 1:
                f_in[s + 1][nf[s]] = free[s] + hop
            else:
                b_in[s][nf[s]] = free[s]
            nf[s] += 1
        else:
            free[s] = start + t_w
            out.append(Pass(s, "W", nw[s], 0, start, free[s]))
            nw[s] += 1
    return out


def pipeline_timeline(schedule: Schedule | str, pp: int, micro_batches: int,
                      virtual_stages: int = 1, *, t_f: float, t_b: float,
                      w_share: float = ZB_EQUAL_W_SHARE, send: float = 0.0) -> list[Pass]:
    """Every pass of one step, by start time. ``t_f``/``t_b``: forward and backward seconds of
    one micro-batch through one stage (all its chunks); ``w_share``: under ZB-H1, the weight
    gradient's share of forward + backward (the rest of t_b is the input gradient)."""
    try:
        sched = Schedule(str(schedule))
    except ValueError:
        raise InputError(f"unknown pipeline schedule {schedule!r}; one of "
                         f"{', '.join(s.value for s in Schedule)}") from None
    p, m, v = int(pp), int(micro_batches), int(virtual_stages)
    if min(p, m, v) < 1:
        raise InputError("pipeline stages, micro-batches and virtual stages must all be >= 1")
    if not (t_f >= 0 and t_b >= 0 and send >= 0):
        raise InputError("pass times must be non-negative")
    if sched is Schedule.DUALPIPE:  # two directions of paired chunks: not replayed here
        raise InputError("a DualPipe timeline is not drawn (its bubble is DeepSeek-V3 "
                         "Table 2's, cost/schedules.py)")
    if sched is not Schedule.INTERLEAVED:
        v = 1
    passes = p * m * v * (3 if sched is Schedule.ZERO_BUBBLE else 2)
    if passes > MAX_PASSES:
        raise InputError(f"a timeline of {passes:,} passes is too large to draw (at most "
                         f"{MAX_PASSES:,})")
    if sched is Schedule.ZERO_BUBBLE:
        w = min(max(w_share, 0.0), 0.5) * (t_f + t_b)
        out = _zb_h1(p, m, t_f, max(t_b - w, 0.0), w, send)
    else:
        out = _replay(p, m, v, t_f, t_b, send, gpipe=sched is Schedule.GPIPE)
    return sorted(out, key=lambda x: (x.start, x.stage))


def makespan(passes: list[Pass]) -> float:
    """When the last pass ends."""
    return max((x.end for x in passes), default=0.0)
