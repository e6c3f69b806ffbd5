"""Pipeline bubbles and in-flight activations against the papers and Megatron's warm-up counts.

The closed forms of cost/schedules.py are also checked against two small simulators here: one
replays Megatron-LM's op order per stage (GPipe-like fill, 1F1B and interleaved 1F1B,
megatron/core/pipeline_parallel/schedules.py), the other runs ZB-H1 as Qi et al. 2024 sec. 2.1
describe it (B before F before W on each stage, at most 1F1B's p - s micro-batches between
their F and B). An op starts when its stage is free and its input has arrived; a send to the
next stage keeps the sender busy for ``c`` (Megatron's blocking batched isend/irecv).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.cost.schedules import (
    Schedule,
    bubble_over_ideal,
    bubble_over_total,
    bubble_time,
    fill_drain_scale,
    in_flight_first_second_last,
    in_flight_micro_batches,
)
from accelmap.errors import InputError


def test_gpipe_and_1f1b_bubble() -> None:
    """Narayanan et al. 2021 sec. 2.2: (p-1)/m of ideal; (p-1)/(m+p-1) of the total step."""
    for s in (Schedule.GPIPE, Schedule.ONE_F_ONE_B):
        assert bubble_over_ideal(s, 8, 32) == pytest.approx(7 / 32)
        assert bubble_over_total(s, 8, 32) == pytest.approx(7 / 39)
        assert bubble_over_ideal(s, 8, 32) == pytest.approx(7 / 32)


def test_interleaving_divides_the_bubble_by_v() -> None:
    plain = bubble_over_ideal("1f1b", 8, 32)
    for v in (2, 3, 4):
        assert bubble_over_ideal("interleaved-1f1b", 8, 32, v) == pytest.approx(plain / v)


def test_zb_h1_is_a_third_of_1f1b() -> None:
    """Qi et al. 2024 sec. 2.1 (t_F = t_B = t_W)."""
    assert bubble_over_ideal("zb-h1", 4, 8) == pytest.approx(3 / 8 / 3)


def test_zb_h1_with_the_weight_gradient_share() -> None:
    """(p-1)(t_F + t_B - t_W) over m (t_F + t_B + t_W), with W a share w of the three."""
    tf, tb, tw = 1.0, 1.5, 0.5
    w = tw / (tf + tb + tw)
    assert bubble_over_ideal("zb-h1", 8, 16, 1, w) == pytest.approx(
        7 * (tf + tb - tw) / (16 * (tf + tb + tw)))
    assert bubble_over_ideal("zb-h1", 8, 16, 1, 0.0) == bubble_over_ideal("1f1b", 8, 16)


def test_small_m() -> None:
    """m < p: GPipe and 1F1B keep (p-1)/m (the first micro-batch still crosses every stage);
    ZB-H1 has only m - 1 W passes to delay: (p-1)(t_F + t_B) - (m-1) t_W."""
    assert bubble_over_ideal("1f1b", 8, 2) == pytest.approx(7 / 2)
    assert bubble_over_ideal("gpipe", 8, 1) == pytest.approx(7.0)
    assert bubble_over_ideal("zb-h1", 8, 1) == pytest.approx(7 * 2 / 3)  # nothing delayed
    assert bubble_over_ideal("zb-h1", 8, 3) == pytest.approx((7 * 2 - 2) / 3 / 3)
    assert bubble_over_ideal("zb-h1", 8, 8) == pytest.approx(7 / 8 / 3)  # the paper's again


def test_no_pipeline_no_bubble_one_in_flight() -> None:
    for s in Schedule:
        assert bubble_over_ideal(s, 1, 16, 2) == 0.0
        assert in_flight_micro_batches(s, 1, 16, 0, 2) == 1.0


def test_in_flight_1f1b_and_gpipe() -> None:
    assert in_flight_micro_batches("1f1b", 8, 32, 0) == 8  # first stage holds p
    assert in_flight_micro_batches("1f1b", 8, 32, 7) == 1  # last stage holds one
    assert in_flight_micro_batches("1f1b", 8, 4, 0) == 4  # fewer micro-batches than stages
    assert in_flight_micro_batches("gpipe", 8, 32, 3) == 32
    assert in_flight_micro_batches("zb-h1", 8, 32, 0) == 8  # ZB-H1 keeps 1F1B's memory


def test_in_flight_interleaved_matches_megatron_warmup() -> None:
    """Megatron: warm-up 2(p-s-1) + (v-1)p chunk-forwards, +1, each chunk 1/v of the stage."""
    p, m, v = 4, 16, 2
    assert in_flight_micro_batches("interleaved-1f1b", p, m, 0, v) == pytest.approx(
        p + (p - 1) / v)
    assert in_flight_micro_batches("interleaved-1f1b", p, m, 3, v) == pytest.approx(
        ((v - 1) * p + 1) / v)
    assert in_flight_micro_batches("interleaved-1f1b", p, m, 0, 1) == p  # v = 1 is 1F1B
    assert in_flight_micro_batches("interleaved-1f1b", 8, 2, 0, 2) == pytest.approx(2.0)


def test_array_friendly() -> None:
    p = np.array([1, 2, 4, 8])
    b = bubble_over_ideal("1f1b", p, 8)
    assert b == pytest.approx((p - 1) / 8)
    held = in_flight_micro_batches("1f1b", p, 8, np.zeros(4))
    assert held == pytest.approx([1, 2, 4, 8])


def test_bad_input_says_why() -> None:
    with pytest.raises(InputError, match=">= 1"):
        bubble_over_ideal("1f1b", 0, 8)
    with pytest.raises(ValueError):
        bubble_over_ideal("pipedream", 2, 8)
    with pytest.raises(ValueError, match="pipedream"):
        bubble_over_ideal(np.array(["1f1b", "pipedream"]), 2, 8)


def test_a_table_of_schedules() -> None:
    """One call for a candidate table whose schedules differ (the planner's)."""
    names = np.array(["gpipe", "1f1b", "interleaved-1f1b", "zb-h1"])
    got = bubble_over_ideal(names, 4, 8, np.array([1, 1, 2, 1]))
    assert got == pytest.approx([3 / 8, 3 / 8, 3 / 16, 3 / 8 / 3])
    held = in_flight_micro_batches(names, 4, 8, 0, np.array([1, 1, 2, 1]))
    assert held == pytest.approx([8, 4, 4 + 3 / 2, 4])


# -- simulators ----------------------------------------------------------------------------


def _megatron_order(p: int, m: int, v: int, s: int, gpipe: bool = False
                    ) -> list[tuple[str, int, int]]:
    """(pass, micro-batch, chunk) in the order stage s runs them: Megatron-LM's
    forward_backward_pipelining_without_interleaving (warm-up p - s - 1) and
    _with_interleaving (warm-up 2(p - s - 1) + (v - 1) p over micro-batch groups of p,
    get_schedule_table); GPipe runs every forward first."""
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


def _replay(p: int, m: int, v: int, f: list[float], b: list[float], c: float = 0.0,
            gpipe: bool = False) -> float:
    """Step time of Megatron's order with per-stage chunk times f[s], b[s] and sends of c."""
    orders = [_megatron_order(p, m, v, s, gpipe) for s in range(p)]
    done: dict[tuple[str, int, int, int], float] = {}
    free, pos = [0.0] * p, [0] * p
    while any(pos[s] < len(orders[s]) for s in range(p)):
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i, k = orders[s][pos[s]]
                if kind == "F":
                    dep = (None if s == 0 and k == 0 else
                           ("F", s - 1, i, k) if s > 0 else ("F", p - 1, i, k - 1))
                    last = s == p - 1 and k == v - 1
                else:
                    dep = (("F", s, i, k) if s == p - 1 and k == v - 1 else
                           ("B", s + 1, i, k) if s < p - 1 else ("B", 0, i, k + 1))
                    last = s == 0 and k == 0
                if dep is not None and dep not in done:
                    break
                start = max(free[s], done[dep] if dep else 0.0)
                free[s] = start + (f[s] if kind == "F" else b[s]) + (0.0 if last else c)
                done[(kind, s, i, k)] = free[s]
                pos[s] += 1
    return max(free)


def _zb_h1(p: int, m: int, tf: float, tb: float, tw: float) -> float:
    """ZB-H1 (Qi et al. 2024 sec. 2.1): each stage runs the earliest-ready pass, B before F
    before W, with at most p - s micro-batches between their F and B (1F1B's memory)."""
    free = [0.0] * p
    f_in = [[0.0] * m] + [[np.inf] * m for _ in range(p - 1)]
    b_in = [[np.inf] * m for _ in range(p)]
    nf, nb, nw = [0] * p, [0] * p, [0] * p
    while sum(nw) < p * m:
        ready: list[tuple[float, int, int]] = []
        for s in range(p):
            if nb[s] < nf[s] and b_in[s][nb[s]] < np.inf:
                ready.append((max(free[s], b_in[s][nb[s]]), 0, s))
            if nf[s] < m and f_in[s][nf[s]] < np.inf and nf[s] - nb[s] < p - s:
                ready.append((max(free[s], f_in[s][nf[s]]), 1, s))
            if nw[s] < nb[s]:
                ready.append((free[s], 2, s))
        start, kind, s = min(ready)
        if kind == 0:
            free[s] = start + tb
            if s > 0:
                b_in[s - 1][nb[s]] = free[s]
            nb[s] += 1
        elif kind == 1:
            free[s] = start + tf
            if s < p - 1:
                f_in[s + 1][nf[s]] = free[s]
            else:
                b_in[s][nf[s]] = free[s]
            nf[s] += 1
        else:
            free[s] = start + tw
            nw[s] += 1
    return max(free)


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("m", [1, 3, 8, 16])
def test_simulated_1f1b_and_gpipe_match_narayanan(p: int, m: int) -> None:
    """Equal stages: (m + p - 1)(t_f + t_b), i.e. the (p-1)/m bubble, for m < p too."""
    tf, tb = 1.0, 2.0
    for gpipe, name in ((False, "1f1b"), (True, "gpipe")):
        step = _replay(p, m, 1, [tf] * p, [tb] * p, gpipe=gpipe)
        assert step / (m * (tf + tb)) - 1 == pytest.approx(bubble_over_ideal(name, p, m))


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 4, 2), (4, 8, 2), (4, 12, 3),
                                           (8, 16, 4), (8, 8, 2)])
def test_simulated_interleaving_matches_narayanan(p: int, m: int, v: int) -> None:
    """Equal chunks of 1/v of a stage: (p-1)/(v m), with m a multiple of p (sec. 2.2.2)."""
    tf, tb = 1.0, 2.0
    step = _replay(p, m, v, [tf / v] * p, [tb / v] * p)
    assert step / (m * (tf + tb)) - 1 == pytest.approx(
        bubble_over_ideal("interleaved-1f1b", p, m, v))


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 8, 16])
def test_simulated_zb_h1_matches_qi(p: int, m: int) -> None:
    """t_F = t_B = t_W: (p-1)/(3m) of ideal once m >= p (Qi et al. sec. 2.1), and
    ((p-1) 2 - (m-1))/(3m) below."""
    step = _zb_h1(p, m, 1.0, 1.0, 1.0)
    assert step / (3.0 * m) - 1 == pytest.approx(bubble_over_ideal("zb-h1", p, m))


@pytest.mark.parametrize(("layers", "embed", "head"), [
    ([16] * 8, 0.05, 1.5),  # even split, the head and loss as 1.5 layers
    ([15] + [16] * 6 + [15], 0.05, 1.5),  # 126 layers with the embedding/loss in the split
    ([3] + [4] * 2 + [3], 0.1, 2.0),
    ([4] * 4, 0.05, 2.0),
])
@pytest.mark.parametrize("m", [1, 4, 8, 32])
@pytest.mark.parametrize("send", [0.0, 0.1])
def test_uneven_stages_and_sends_match_the_replay(layers: list[int], embed: float, head: float,
                                                  m: int, send: float) -> None:
    """1F1B with stages that are not alike and sends that keep the sender busy: m x the
    slowest stage (with its own sends: one on an end stage, two in the middle) + bubble_time,
    to 1 % of Megatron's replayed order."""
    p = len(layers)
    tau = [n + (embed if s == 0 else 0) + (head if s == p - 1 else 0)
           for s, n in enumerate(layers)]
    step = _replay(p, m, 1, [t / 3 for t in tau], [2 * t / 3 for t in tau], send)
    busy = [t + send * ((s > 0) + (s < p - 1)) for s, t in enumerate(tau)]
    slowest = int(np.argmax(busy))
    model = m * busy[slowest] + bubble_time(
        "1f1b", p, m, slowest=tau[slowest], stages_total=sum(tau), send=send)
    assert model == pytest.approx(step, rel=0.01)
    # the old (p-1) x slowest overstates the fill when the other stages are lighter
    if send == 0:
        assert (m + p - 1) * max(tau) >= model - 1e-9


@pytest.mark.parametrize(("layers", "v", "m"), [([8] * 4, 2, 4), ([8] * 4, 4, 8),
                                                ([16] * 8, 2, 16), ([4] * 4, 2, 32)])
@pytest.mark.parametrize("send", [0.0, 0.1])
def test_interleaved_sends_match_the_replay(layers: list[int], v: int, m: int,
                                            send: float) -> None:
    """Interleaved 1F1B with the head on the last chunk and a send after every chunk: the
    steady state sends 2v times per micro-batch, warm-up and cool-down 2(p-1) more (p-1
    chunk slots, each with its two sends; Narayanan et al. sec. 2.2.2); 2 %."""
    p = len(layers)
    head = 1.0
    tau = [n + (head if s == p - 1 else 0) for s, n in enumerate(layers)]
    step = _replay(p, m, v, [t / 3 / v for t in tau], [2 * t / 3 / v for t in tau], send)
    model = m * (max(tau) + 2 * v * send) + bubble_time(
        "interleaved-1f1b", p, m, v, slowest=max(tau), stages_total=sum(tau), send=send)
    assert model == pytest.approx(step, rel=0.02)


def test_bubble_time_reduces_to_the_fraction() -> None:
    """p equal stages, no sends: bubble_over_ideal x m x tau, for every schedule."""
    p, m, tau = np.array([1, 2, 4, 8]), 8, 3.0
    for s in Schedule:
        v = 2 if s is Schedule.INTERLEAVED else 1
        got = bubble_time(s, p, m, v, slowest=tau, stages_total=p * tau, w_share=0.2)
        assert got == pytest.approx(bubble_over_ideal(s, p, m, v, 0.2) * m * tau)
    assert fill_drain_scale("interleaved-1f1b", 4, 8, 4) == pytest.approx(0.25)


@settings(max_examples=200, deadline=None)
@given(p=st.integers(1, 128), m=st.integers(1, 4096), v=st.integers(1, 8),
       s=st.sampled_from(list(Schedule)))
def test_bubble_properties(p: int, m: int, v: int, s: Schedule) -> None:
    ideal = bubble_over_ideal(s, p, m, v)
    total = bubble_over_total(s, p, m, v)
    assert 0.0 <= total < 1.0 and ideal >= total
    assert ideal <= bubble_over_ideal(Schedule.GPIPE, p, m) + 1e-12
    assert bubble_over_ideal(s, p, m + 1, v) <= ideal + 1e-12


@settings(max_examples=200, deadline=None)
@given(p=st.integers(1, 64), m=st.integers(1, 512), v=st.integers(1, 6),
       s=st.sampled_from(list(Schedule)))
def test_first_second_last_in_one_pass(p: int, m: int, v: int, s: Schedule) -> None:
    got = in_flight_first_second_last(s, p, m, v)
    want = [in_flight_micro_batches(s, p, m, stage, v) for stage in (0, min(1, p - 1), p - 1)]
    assert got == pytest.approx(want)


@settings(max_examples=200, deadline=None)
@given(p=st.integers(1, 64), m=st.integers(1, 512), v=st.integers(1, 6),
       s=st.sampled_from(list(Schedule)), data=st.data())
def test_in_flight_properties(p: int, m: int, v: int, s: Schedule, data: st.DataObject) -> None:
    stage = data.draw(st.integers(0, p - 1))
    held = in_flight_micro_batches(s, p, m, stage, v)
    assert 0.0 < held <= m + 1e-12
    assert held <= in_flight_micro_batches(s, p, m, 0, v) + 1e-12  # the first stage holds most


def test_dualpipe_bubble_is_deepseek_v3_table_2() -> None:
    """DeepSeek-V3 Table 2: (PP/2 - 1)(F&B + B - 3W) with B the full backward and F&B = F + B
    once the pair's communication is hidden; against 1F1B's (PP - 1)(F + B)."""
    F, B, W = 1.0, 2.0, 0.8
    for p, m in ((8, 16), (16, 120)):
        got = bubble_over_ideal("dualpipe", p, m, w_share=W / (F + B), b_share=B / (F + B))
        assert got * m * (F + B) == pytest.approx((p / 2 - 1) * (F + B + B - 3 * W))
        assert got < bubble_over_ideal("zb-h1", p, m, w_share=W / (F + B))
    # two ranks: each micro-batch direction starts where the other ends, no bubble
    assert bubble_over_ideal("dualpipe", 2, 4) == 0.0
    # the paper's F = B_input = W: (p/2 - 1)(3F + 2F - 3F) = 2 (p/2 - 1) F against 1F1B's
    # 3 (p-1) F
    assert fill_drain_scale("dualpipe", 8, 16, w_share=1 / 3, b_share=2 / 3) == pytest.approx(
        3 * 2 / (7 * 3))


def test_dualpipe_holds_p_plus_one_micro_batches_a_device() -> None:
    """Device r holds stages r and p-1-r, p - s micro-batches each (DualPipe ``step``'s warm-up
    counts): p + 1 in all (Table 2: "Activation PP+1")."""
    for p in (2, 4, 8, 16):
        for r in range(p):
            held = (in_flight_micro_batches("dualpipe", p, 4 * p, r)
                    + in_flight_micro_batches("dualpipe", p, 4 * p, p - 1 - r))
            assert held == p + 1
