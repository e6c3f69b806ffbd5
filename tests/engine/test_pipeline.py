"""Pipelines as run: every stage's layers, the slowest stage, warm-up and cool-down per
schedule with their sends, and the memory of the stage that holds the most."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.framework import profile
from accelmap.cost.schedules import Schedule, bubble_over_ideal
from accelmap.engine import System, estimate
from accelmap.engine.train import (
    FIRST,
    LAST,
    MIDDLE,
    OverlapPolicy,
    compose,
    layer_profile,
    stage_times,
    wgrad_share,
)
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping, ZeroStage
from accelmap.workload import Recompute, Training

CAT = load_catalog()
C64 = parse_cluster("64xH100", CAT)
C1024 = parse_cluster("1024xH100", CAT)
L405 = CAT.models["llama-3.1-405b"]  # 126 layers
L70 = CAT.models["llama-3.1-70b"]  # 80 layers
FW = profile("megatron")


def prof_of(spec, cluster, wl: Training, tp: int = 8):  # type: ignore[no-untyped-def]
    return layer_profile(spec, System.of(cluster).device, FW, wl,
                         Mapping(tp=tp, recompute=wl.recompute))


def run(spec, cluster, wl: Training, m: Mapping):  # type: ignore[no-untyped-def]
    return compose(prof_of(spec, cluster, wl, m.tp), System.of(cluster), wl, FW,
                   OverlapPolicy(), m)


WL405 = Training(batch=512, seq_len=8192, recompute=Recompute.FULL)


def test_every_stage_and_the_slowest() -> None:
    """126 layers over 8 stages as 15 + 6 x 16 + 15: a middle stage is the slowest unless the
    head on the last outweighs its one layer fewer."""
    prof = prof_of(L405, C1024, WL405)
    m = Mapping(dp=16, tp=8, pp=8, first_stage_layers=15, last_stage_layers=15)
    st = stage_times(prof, m)
    assert (st.first_layers, st.middle_layers, st.last_layers) == (15, 16, 15)
    head = prof.head_fwd_s + prof.head_bwd_s
    layer = prof.layer_fwd_s + prof.layer_bwd_s
    assert int(st.critical) == (LAST if head > layer else MIDDLE)
    assert float(st.total) == pytest.approx(126 * layer + head + prof.embed_fwd_s
                                            + prof.embed_bwd_s)
    # an uneven split with a heavier first stage makes the first the slowest
    heavy = stage_times(prof, Mapping(dp=16, tp=8, pp=8, first_stage_layers=21))  # 21 + 15 x 7
    assert int(heavy.critical) == FIRST and float(heavy.critical_layers) == 21


def test_the_even_default_is_unchanged_where_megatron_accepts_it() -> None:
    """80 layers over 4 stages: 20 each, as ceil(L / pp) gave before."""
    wl = Training(batch=64, seq_len=8192, recompute=Recompute.FULL)
    st = stage_times(prof_of(L70, C64, wl), Mapping(dp=2, tp=8, pp=4))
    assert (st.first_layers, st.middle_layers, st.last_layers) == (20, 20, 20)


def test_bubble_is_the_other_stages_plus_the_fill_and_drain_sends() -> None:
    """For 1F1B: the bubble is the other stages' busy time per micro-batch plus 2 (p-1)
    stage-to-stage sends; for p equal stages it is at least Narayanan's (p-1)/m of ideal."""
    wl = Training(batch=64, seq_len=8192, recompute=Recompute.FULL)
    m = Mapping(dp=2, tp=8, pp=4)
    r = run(L70, C64, wl, m)
    compute = float(r.detail.compute_forward_s + r.detail.compute_backward_s)
    micro = float(r.detail.micro_batches)
    send = float(r.detail.comm["pp"]) / micro / 2  # one send of T x d activations
    assert send > 0
    paper = bubble_over_ideal("1f1b", 4, micro) * compute
    assert float(r.detail.bubble_s) > paper + 2 * 3 * send * 0.999
    # without the stage spread (all stages like the slowest) and exposed TP it would be equal
    exposed = float(sum(v for k, v in r.detail.exposed.items() if k in ("tp", "cp", "ep")))
    assert float(r.detail.bubble_s) <= 3 / micro * (compute + exposed) + 6 * send + 1e-9


def test_small_global_batches_pay_the_fill_and_drain() -> None:
    """Few micro-batches per pipeline: the bubble share grows like (p-1)/(m+p-1) and beyond
    (the sends), and tokens/s falls."""
    m = Mapping(dp=2, tp=8, pp=4, recompute=Recompute.FULL)
    shares, rates = [], []
    for batch in (2, 8, 32, 256):
        e = estimate(L70, C64, Training(batch=batch, seq_len=8192, recompute=Recompute.FULL),
                     m)
        shares.append(e.metrics["bubble_fraction"])
        rates.append(e.metrics["tokens_per_s"])
    assert shares == sorted(shares, reverse=True) and rates == sorted(rates)
    # batch 2 over dp 2: one micro-batch; the slowest (last, with the head) stage idles while
    # the three others run it: (p-1)/(m+p-1) = 3/4 of the pipeline's time, a little less of
    # the step, which also holds the DP tail, the optimizer and the compute slowed by overlap
    assert shares[0] > 0.55


@pytest.mark.parametrize("schedule", list(Schedule))
def test_each_schedule_gives_its_own_step(schedule: Schedule) -> None:
    wl = Training(batch=64, seq_len=8192, recompute=Recompute.FULL)
    vpp = 2 if schedule is Schedule.INTERLEAVED else 1
    r = run(L70, C64, wl, Mapping(dp=2, tp=8, pp=4, virtual_stages=vpp, schedule=schedule))
    base = run(L70, C64, wl, Mapping(dp=2, tp=8, pp=4))
    if schedule in (Schedule.GPIPE, Schedule.ONE_F_ONE_B):
        assert float(r.step_time_s) == pytest.approx(float(base.step_time_s))
    else:
        assert float(r.step_time_s) < float(base.step_time_s)
    if schedule is Schedule.GPIPE:  # same time, every micro-batch in flight
        assert float(r.memory_total) > float(base.memory_total)


def test_zb_h1_uses_the_weight_gradient_share_of_the_operator_graph() -> None:
    wl = Training(batch=64, seq_len=8192)
    prof = prof_of(L70, C64, wl)
    w = wgrad_share(prof)
    assert 0.1 < w < 0.5  # wgrad GEMMs: about a third of a layer without recompute
    one = run(L70, C64, wl, Mapping(dp=2, tp=8, pp=4))
    zb = run(L70, C64, wl, Mapping(dp=2, tp=8, pp=4, schedule=Schedule.ZERO_BUBBLE))
    sends = 2 * 3 * float(one.detail.comm["pp"]) / float(one.detail.micro_batches) / 2
    ratio = (float(zb.detail.bubble_s) - sends) / (float(one.detail.bubble_s) - sends)
    assert ratio == pytest.approx(1 - 2 * w)  # (t_F + t_B - t_W) / (t_F + t_B + t_W)


def test_memory_is_the_stage_that_holds_the_most() -> None:
    """Llama 3's split (126 layers over 16, embedding and loss counted): the first stage holds
    16 micro-batches of 7 layers, the second 15 of 8 -- the second holds more."""
    m = Mapping(dp=8, tp=8, pp=16, embedding_in_split=True, loss_in_split=True)
    prof = prof_of(L405, C1024, WL405)
    r = run(L405, C1024, WL405, m)
    assert int(r.detail.peak_memory_stage) == MIDDLE
    acts = float(r.detail.memory_items["activations/layers"]) - prof.working_bytes
    assert acts == pytest.approx(prof.layer_act_bytes * 8 * 15)
    even = run(L405.model_copy(update={"n_layers": 128}), C1024, WL405,
               Mapping(dp=8, tp=8, pp=16))
    assert int(even.detail.peak_memory_stage) == FIRST  # 16 x 8 on the first stage


def test_a_table_of_mixed_splits_and_schedules_equals_each_mapping() -> None:
    """The planner's vectorized call and estimate agree with splits and schedules in the
    table."""
    wl = WL405
    table = Mapping(dp=1.0, tp=8,
                    pp=np.array([8.0, 16.0, 8.0, 4.0, 16.0]),
                    first_stage_layers=np.array([15.0, 0.0, 14.0, 0.0, 7.0]),
                    last_stage_layers=np.array([15.0, 0.0, 0.0, 30.0, 7.0]),
                    embedding_in_split=np.array([False, True, False, False, False]),
                    loss_in_split=np.array([False, True, False, False, False]),
                    virtual_stages=np.array([1.0, 2.0, 2.0, 1.0, 1.0]),
                    schedule=np.array(["zb-h1", "interleaved-1f1b", "interleaved-1f1b",
                                       "gpipe", "dualpipe"]),
                    zero=np.array([1, 1, 2, 1, 1]), recompute=Recompute.FULL)
    table = table.with_(dp=np.array([16.0, 8.0, 16.0, 32.0, 8.0]))
    r = run(L405, C1024, wl, table)
    for j in range(5):
        e = estimate(L405, C1024, wl, table.take(j))
        assert "violated_rule" not in e.metrics, e.reason
        assert e.metrics["step_time_s"] == pytest.approx(float(r.step_time_s[j]))
        assert float(e.memory.total) == pytest.approx(float(r.memory_total[j]))


def test_one_stage_is_unchanged() -> None:
    """pp = 1: no bubble, no sends, the one stage's memory."""
    wl = Training(batch=64, seq_len=4096)
    e = estimate(CAT.models["llama-2-7b"], C64, wl, Mapping(dp=64, zero=ZeroStage.OPTIMIZER))
    assert e.metrics["bubble_fraction"] == 0.0


def test_dualpipe_holds_two_stages_and_p_plus_one_micro_batches() -> None:
    """DeepSeek-V3 Table 2: DualPipe keeps 2x the parameters and p + 1 micro-batches of
    activations a device (an end device: p of the first stage and one of the last); with p
    equal stages both come out of the end device as of a middle one."""
    wl = Training(batch=64, seq_len=4096, recompute=Recompute.SELECTIVE)
    one = run(L70, C64, wl, Mapping(dp=2, tp=8, pp=4))
    dual = run(L70, C64, wl, Mapping(dp=2, tp=8, pp=4, schedule=Schedule.DUALPIPE))
    a, b = one.detail.memory_items, dual.detail.memory_items
    assert float(b["activations/layers"]) == pytest.approx(
        float(a["activations/layers"]) * 5 / 4)
    # both ends' weights: 40 layers, the embedding and the head against 20 and the embedding
    assert 1.9 < float(b["weights"]) / float(a["weights"]) < 2.1
    assert float(dual.detail.bubble_s) < float(one.detail.bubble_s)


def test_dualpipe_pairs_the_ends_into_one_device() -> None:
    """An end device runs half its micro-batches through the first stage and half through
    the last: fewer layers on both ends make the middle stages the critical ones."""
    m = Mapping(dp=8, tp=8, pp=16, first_stage_layers=7, last_stage_layers=7,
                schedule=Schedule.DUALPIPE)
    st = stage_times(prof_of(L405, C1024, WL405), m)
    assert int(st.critical) == MIDDLE and float(st.critical_layers) == 8.0
    one = stage_times(prof_of(L405, C1024, WL405), m.with_(schedule=Schedule.ONE_F_ONE_B))
    assert float(st.total) == pytest.approx(float(one.total))  # the same work in all
    lopsided = m.with_(first_stage_layers=26, last_stage_layers=2)  # (26 + 2) / 2 = 14 > 7
    st = stage_times(prof_of(L405, C1024, WL405), lopsided)
    assert int(st.critical) == FIRST and float(st.critical_layers) == 14.0


def test_dualpipe_hides_the_expert_all_to_all_under_the_paired_chunk() -> None:
    """DeepSeek-V3 sec. 3.2.1: the forward chunk of one micro-batch and the backward chunk of
    another hide each other's all-to-all; what outlasts the pair's compute stays exposed."""
    spec = CAT.models["mixtral-8x7b"]
    cluster = parse_cluster("128xH100", CAT)
    wl = Training(batch=256, seq_len=4096, recompute=Recompute.SELECTIVE)
    base = Mapping(dp=32, tp=1, pp=4, ep=8)
    one = run(spec, cluster, wl, base)
    dual = run(spec, cluster, wl, base.with_(schedule=Schedule.DUALPIPE))
    assert float(dual.detail.comm["ep"]) == pytest.approx(float(one.detail.comm["ep"]))
    assert float(one.detail.exposed["ep"]) > 0
    assert float(dual.detail.exposed["ep"]) < float(one.detail.exposed["ep"])
    assert float(dual.step_time_s) < float(one.step_time_s)


def test_dualpipe_all_to_all_costs_its_own_sms_not_nccl_contention() -> None:
    """DeepSeek-V3 sec. 3.2.2: DualPipe's all-to-all runs on 20 of the H800's 132 SMs, so a
    second of it hidden costs 20 / 112 s of compute (cost/overlap.py, 5.), whatever the fitted
    NCCL contention is."""
    from accelmap.cost import overlap as ov

    spec = CAT.models["mixtral-8x7b"]
    cluster = parse_cluster("128xH100", CAT)
    wl = Training(batch=256, seq_len=4096, recompute=Recompute.SELECTIVE)
    dual = run(spec, cluster, wl, Mapping(dp=32, tp=1, pp=4, ep=8, schedule=Schedule.DUALPIPE))
    d = dual.detail
    hidden_ep = float(d.comm["ep"]) - float(d.exposed["ep"])
    assert hidden_ep > 0
    assert pytest.approx(20 / 112) == ov.DUALPIPE_CONTENTION
    # the other hidden traffic (pp sends, dp) keeps the fitted contention; only the ep part
    # is charged at the SM share: with NCCL's figure instead, the step would pay the difference
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ov, "DUALPIPE_CONTENTION", ov.contention())
        nccl = run(spec, cluster, wl, Mapping(dp=32, tp=1, pp=4, ep=8,
                                              schedule=Schedule.DUALPIPE)).detail
    assert float(nccl.contention_s) - float(d.contention_s) == pytest.approx(
        (ov.contention() - 20 / 112) * hidden_ep, rel=1e-6)


def test_stage_sends_split_over_tp_and_repeat_per_chunk() -> None:
    """Megatron's stage-to-stage sends: each tp rank sends its 1/t (the sequence shard under
    sequence parallelism, Narayanan et al. 2021 sec. 4.1's scatter/gather without), once per
    model chunk (interleaving sends v times as much); a stack without the split (PyTorch's
    pipelining) sends the whole activation from every tp rank."""
    wl = Training(batch=64, seq_len=8192, recompute=Recompute.SELECTIVE)
    m = Mapping(dp=2, tp=8, pp=4)
    mega = run(L70, C64, wl, m)
    fsdp_fw = profile("fsdp")
    torch = compose(layer_profile(L70, System.of(C64).device, fsdp_fw, wl, m), System.of(C64),
                    wl, fsdp_fw, OverlapPolicy(), m)
    per_mb = float(mega.detail.comm["pp"]) / float(mega.detail.micro_batches)
    whole = float(torch.detail.comm["pp"]) / float(torch.detail.micro_batches)
    assert whole > 4 * per_mb  # 1/8 of the bytes, a latency term apart
    # without sequence parallelism Megatron still sends 1/t and all-gathers it on NVLink
    no_sp = run(L70, C64, wl, m.with_(sequence_parallel=False))
    gathered = float(no_sp.detail.comm["pp"]) / float(no_sp.detail.micro_batches)
    assert per_mb < gathered < whole
    two = run(L70, C64, wl, m.with_(virtual_stages=2, schedule=Schedule.INTERLEAVED))
    assert float(two.detail.comm["pp"]) == pytest.approx(2 * float(mega.detail.comm["pp"]))


def test_interleaved_sends_hide_behind_the_next_chunk_where_the_stack_overlaps_them() -> None:
    """Megatron-Core's --overlap-p2p-communication (on by default, for interleaved schedules
    only): the sends run beside the compute; a release without it waits for them."""
    wl = Training(batch=64, seq_len=8192, recompute=Recompute.SELECTIVE)
    m = Mapping(dp=2, tp=8, pp=4, virtual_stages=2, schedule=Schedule.INTERLEAVED)
    hidden = run(L70, C64, wl, m)
    prof = prof_of(L70, C64, wl)
    waited = compose(prof, System.of(C64), wl, FW, OverlapPolicy(pp_p2p=False), m)
    assert float(hidden.detail.exposed["pp"]) == 0.0
    assert float(waited.detail.exposed["pp"]) == pytest.approx(float(waited.detail.comm["pp"]))
    assert float(waited.step_time_s) > float(hidden.step_time_s)
    plain = run(L70, C64, wl, Mapping(dp=2, tp=8, pp=4))  # no interleaving: nothing to overlap
    assert float(plain.detail.exposed["pp"]) == pytest.approx(float(plain.detail.comm["pp"]))


@pytest.mark.parametrize(("policy", "sp", "ratio"), [
    (Recompute.FULL, True, 6 / 4),  # the forward's AG + RS pairs again: 4 -> 6 per layer
    (Recompute.FULL, False, 6 / 4),  # its two all-reduces again
    (Recompute.PER_OP, True, 5 / 4),  # torchtitan keeps the reduce-scatters: two AGs = one
    (Recompute.PER_OP, False, 6 / 4),  # all-reduces are not in its save list: both again
    (Recompute.SELECTIVE, True, 1.0),  # the attention core holds no collective
])
def test_a_recompute_reruns_the_tp_collectives_it_recomputes(policy: Recompute, sp: bool,
                                                             ratio: float) -> None:
    """engine/train.py recomputed_tp_collectives: 4 all-reduces of T x d per layer (2 forward,
    2 backward), plus what the recomputed forward runs again, by hand."""
    m = Mapping(dp=2, tp=8, pp=4, sequence_parallel=sp)
    none = run(L70, C64, Training(batch=64, seq_len=4096, recompute=Recompute.NONE),
               m.with_(recompute=Recompute.NONE))
    again = run(L70, C64, Training(batch=64, seq_len=4096, recompute=policy),
                m.with_(recompute=policy))
    assert float(again.detail.comm["tp"]) == pytest.approx(
        ratio * float(none.detail.comm["tp"]))
