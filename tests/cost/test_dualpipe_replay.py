"""DualPipe (DeepSeek-V3 sec. 3.2.1) replayed op by op, against cost/schedules.py.

The replay runs each rank's ops in the order deepseek-ai/DualPipe's ``step`` issues them (its
eight phases: warm-up forwards, forward pairs, zero-bubble backwards, the overlapped
forward-backward pairs of the steady state, and the cool-down backwards and deferred weight
gradients), with the dependencies of a two-direction pipeline and no communication time. A
paired forward + backward chunk takes F + B (the pair hides communication, not compute), a
zero-bubble backward B - W with its W run later. The closed forms must match it: the bubble of
Table 2 and p + 1 micro-batches in flight a device (p - s of stage s).
"""

from __future__ import annotations

import pytest

from accelmap.cost.schedules import bubble_over_ideal, in_flight_micro_batches


def rank_ops(p: int, m: int, r: int) -> list[tuple]:
    """Rank r's ops: ("F", phase), ("B", phase, zero_bubble), ("W",), ("FB", f_phase,
    b_phase). Phase 0 is the direction that starts at the rank's own end of the pipeline."""
    half, chunks, h = p // 2, m // 2, min(r, p - 1 - r)
    ops: list[tuple] = [("F", 0)] * (2 * (half - h - 1))
    ops += [("F", 0), ("F", 1)] * (h + 1)
    ops += [("B", 1, True), ("W",), ("F", 1)] * (half - h - 1)
    ops += [("FB", 0, 1), ("FB", 1, 0)] * (chunks - p + h + 1)
    ops += [("B", 1, False), ("FB", 1, 0)] * (half - h - 1)
    zb = False
    for i in range(h + 1):  # the second half of these backwards defer their W
        zb = zb or (i == (h + 1) // 2 and h % 2 == 1)
        ops.append(("B", 1, zb))
        zb = zb or (i == (h + 1) // 2 and h % 2 == 0)
        ops.append(("B", 0, zb))
    ops += [("W",), ("B", 0, True)] * (half - h - 1)
    return ops + [("W",)] * (h + 1)


def replay(p: int, m: int, f: float, b: float, w: float) -> tuple[float, list[int]]:
    """(makespan, peak micro-batches held by each rank)."""
    def direction(r: int, phase: int) -> int:  # 0: rank 0 -> p-1, 1: back
        return phase ^ int(r >= p // 2)

    def upstream(r: int, d: int) -> int | None:  # who sends this rank its forward input
        return None if r == (0 if d == 0 else p - 1) else (r - 1 if d == 0 else r + 1)

    def downstream(r: int, d: int) -> int | None:  # who sends it its gradient
        return None if r == (p - 1 if d == 0 else 0) else (r + 1 if d == 0 else r - 1)

    f_end: dict[tuple[int, int, int], float] = {}
    b_end: dict[tuple[int, int, int], float] = {}
    lists = [rank_ops(p, m, r) for r in range(p)]
    pos, free = [0] * p, [0.0] * p
    nf, nb = [[0, 0] for _ in range(p)], [[0, 0] for _ in range(p)]

    def f_ready(r: int, phase: int) -> float | None:
        d = direction(r, phase)
        up = upstream(r, d)
        return 0.0 if up is None else f_end.get((up, d, nf[r][phase]))

    def b_ready(r: int, phase: int) -> float | None:
        d = direction(r, phase)
        down = downstream(r, d)
        if down is None:  # the direction's last stage: after its own forward
            return f_end.get((r, d, nb[r][phase]))
        return b_end.get((down, d, nb[r][phase]))

    moved = True
    while moved:
        moved = False
        for r in range(p):
            while pos[r] < len(lists[r]):
                op = lists[r][pos[r]]
                if op[0] == "W":
                    start, end = free[r], free[r] + w
                elif op[0] == "F":
                    t = f_ready(r, op[1])
                    if t is None:
                        break
                    start = max(free[r], t)
                    end = start + f
                    f_end[(r, direction(r, op[1]), nf[r][op[1]])] = end
                    nf[r][op[1]] += 1
                elif op[0] == "B":
                    t = b_ready(r, op[1])
                    if t is None:
                        break
                    start = max(free[r], t)
                    end = start + (b - w if op[2] else b)
                    b_end[(r, direction(r, op[1]), nb[r][op[1]])] = end
                    nb[r][op[1]] += 1
                else:
                    tf, tb = f_ready(r, op[1]), b_ready(r, op[2])
                    if tf is None or tb is None:
                        break
                    start = max(free[r], tf, tb)
                    end = start + f + b
                    f_end[(r, direction(r, op[1]), nf[r][op[1]])] = start + f
                    b_end[(r, direction(r, op[2]), nb[r][op[2]])] = end
                    nf[r][op[1]] += 1
                    nb[r][op[2]] += 1
                free[r], pos[r], moved = end, pos[r] + 1, True
    assert pos == [len(x) for x in lists], "the replay deadlocked"
    peaks = []
    for r in range(p):
        held, peak = 0, 0
        for op in lists[r]:
            held += op[0] in ("F", "FB")
            peak = max(peak, held)  # a pair's forward lands before its backward frees
            held -= op[0] == "B" or op[0] == "FB"
        peaks.append(peak)
    return max(free), peaks


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 16), (8, 40), (16, 120)])
@pytest.mark.parametrize(("f", "b", "w"), [(1.0, 2.0, 1.0), (1.0, 2.0, 0.5), (1.0, 1.8, 0.7)])
def test_the_replay_is_table_2(p: int, m: int, f: float, b: float, w: float) -> None:
    makespan, peaks = replay(p, m, f, b, w)
    bubble = bubble_over_ideal("dualpipe", p, m, w_share=w / (f + b), b_share=b / (f + b))
    assert makespan - m * (f + b) == pytest.approx(bubble * m * (f + b))
    assert makespan - m * (f + b) == pytest.approx((p / 2 - 1) * (f + b + b - 3 * w))
    assert peaks == [p + 1] * p
    for r in range(p):  # stage r and stage p - 1 - r, as the engine sums them
        assert (in_flight_micro_batches("dualpipe", p, m, r)
                + in_flight_micro_batches("dualpipe", p, m, p - 1 - r)) == p + 1
