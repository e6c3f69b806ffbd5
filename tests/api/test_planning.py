"""api.planning: plan requests from text, the clusters to plan on, one plan, a hardware
comparison and the deadline search."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.engine import class_framework
from accelmap.errors import InputError, NotFoundError
from accelmap.units import DType


def test_plan_request_reads_text(catalog: Catalog) -> None:
    r = api.plan_request(seq=8192, global_batch_tokens="2M", tokens="2T", deadline="30d",
                         objective="Cost")
    assert r.global_batch == 256 and r.tokens == 2e12 and r.deadline_s == 30 * 86400
    h100 = api.load_system(cluster="8xh100-sxm5-80gb").cluster
    assert r.objective is api.Objective.COST and r.framework_for(h100) == "megatron"
    s = api.plan_request(train=False, ttft="500ms", tpot="50ms", rate=2)
    assert s.ttft_s == 0.5 and s.tpot_s == 0.05 and s.framework_for(h100) == "vllm"
    assert s.scenario is api.Scenario.SERVER and s.objective is api.Objective.GOODPUT
    assert s.load is not None and s.load.slo.ttft_s == 0.5 and s.load.rate == 2
    assert api.plan_request(train=False).scenario is api.Scenario.OFFLINE  # no rate: offline
    b = api.plan_request(train=False, scenario="batch", ttft="500ms")
    assert b.load is None and b.scenario is api.Scenario.BATCH and b.ttft_s == 0.5
    with pytest.raises(InputError, match="--scenario server needs --rate"):
        api.plan_request(train=False, scenario="server")
    with pytest.raises(InputError, match="a TTFT SLO needs arrivals"):
        api.plan_request(train=False, ttft="2s")  # offline: TTFT is queueing
    with pytest.raises(InputError, match="goodput ranks simulated"):
        api.plan_request(train=False, scenario="batch", objective="goodput")
    with pytest.raises(InputError, match="are for serving plans"):
        api.plan_request(rate=4)
    with pytest.raises(InputError, match="less than one sequence of --seq 4096"):
        api.plan_request(seq=4096, global_batch_tokens="1K")  # never silently one sequence
    assert api.plan_request(seq=4096, global_batch_tokens="4K").global_batch == 1
    with pytest.raises(InputError, match="unknown objective 'fast'"):
        api.plan_request(objective="fast")
    with pytest.raises(InputError, match="--deadline needs --train and --tokens"):
        api.plan_request(deadline="30d")
    with pytest.raises(InputError, match="--deadline needs"):
        api.plan_request(train=False, tokens="1T", deadline="30d")
    with pytest.raises(InputError, match="as a duration"):
        api.plan_request(train=False, tpot="fast")
    with pytest.raises(InputError, match="positive token count"):
        api.plan_request(tokens="lots")


def test_plan_request_with_profile_keeps_the_rest() -> None:
    p = CalibrationProfile(name="lab", accelerator_id="h100-sxm5-80gb",
                           matmul_efficiency={DType.BF16: 0.7}, bandwidth=3e12, source="test")
    r = api.plan_request(tokens="1T")
    assert r.with_profile(p).profile is p and r.with_profile(p) == r and r.profile is None


def test_plan_clusters(catalog: Catalog) -> None:
    [cl] = api.plan_clusters(catalog, cluster="64xH100")
    assert cl.devices == 64
    [one] = api.plan_clusters(catalog, hw="h100-sxm5-80gb", train=False)
    assert one.devices == 8  # serving default
    assert api.plan_clusters(catalog, hw="h100-sxm5-80gb", devices=16)[0].devices == 16
    many = api.plan_clusters(catalog, hw="any", devices=16)
    assert len(many) > 2 and all(c.devices >= 16 for c in many)
    # 16 GB200 are a partial NVL72 rack (16 of its 72 NVLink devices)
    h100, gb200 = api.plan_clusters(catalog, hw="h100-sxm5-80gb, gb200", devices=16)
    assert h100.accelerator.id == "h100-sxm5-80gb" and gb200.devices == 16
    assert gb200.scale_up_domain == 16 and "gb200-nvl72" in gb200.origin
    # in a list, an accelerator whose devices cannot be joined is dropped; alone it fails
    [one] = api.plan_clusters(catalog, hw="h100-sxm5-80gb, m3-ultra", devices=2)
    assert one.accelerator.id == "h100-sxm5-80gb"
    with pytest.raises(InputError, match="no scale-up, scale-out or host link"):
        api.plan_clusters(catalog, hw="m3-ultra", devices=2)
    with pytest.raises(InputError, match="no cluster could be built for --hw m3-ultra,m3-ultra"):
        api.plan_clusters(catalog, hw="m3-ultra,m3-ultra", devices=2)
    with pytest.raises(NotFoundError, match="unknown accelerator 'no-such-chip'"):
        api.plan_clusters(catalog, hw="h100-sxm5-80gb,no-such-chip")
    with pytest.raises(InputError, match="either --cluster or --hw"):
        api.plan_clusters(catalog, cluster="8xH100", hw="H100")
    with pytest.raises(InputError, match="give --cluster SPEC"):
        api.plan_clusters(catalog)


def test_check_profile(catalog: Catalog) -> None:
    clusters = api.plan_clusters(catalog, cluster="8xH100")
    api.planning.check_profile(None, clusters)
    ok = CalibrationProfile(name="lab", accelerator_id=clusters[0].accelerator.id,
                            matmul_efficiency={}, bandwidth=None, source="test")
    api.planning.check_profile(ok, clusters)
    other = CalibrationProfile(name="cpu", accelerator_id="local-cpu", matmul_efficiency={},
                               bandwidth=None, source="test")
    with pytest.raises(InputError, match="measured on local-cpu, not h100-sxm5-80gb: plan on"):
        api.planning.check_profile(other, clusters)


def test_run_plan_and_job(catalog: Catalog) -> None:
    spec = api.load_model("llama-3.1-8b", catalog)
    [cl] = api.plan_clusters(catalog, cluster="8xH100")
    req = api.plan_request(seq=4096, global_batch_tokens="1M", tokens="1T", top=3)
    calls: list[tuple[int, int]] = []
    res = api.run_plan(spec, cl, req, progress=lambda d, t: calls.append((d, t)))
    assert 0 < len(res.plans) <= 3 and res.feasible >= len(res.plans)
    assert res.plans[0].metrics["time_to_train_s"] > 0
    job = api.planning.plan_job(spec, cl, req)
    assert job.global_batch == 256 and job.seq_len == 4096 and job.devices == 8
    assert job.framework.value == "megatron" and job.kind.value == "train"
    pj = api.exports.plan_export_job(job, res.plans[0])
    assert pj.mapping_dict()["tp"] == res.plans[0].mapping_dict()["tp"]
    serve = api.plan_request(train=False, prompt=512, output=64, top=2)
    sres = api.run_plan(spec, cl, serve)
    assert sres.plans and api.planning.plan_job(spec, cl, serve).seq_len == 576


def test_compare_hardware_rows_and_pareto(catalog: Catalog) -> None:
    spec = api.load_model("llama-3.1-8b", catalog)
    clusters = api.plan_clusters(catalog, hw="h100-sxm5-80gb,a100-sxm4-80gb", devices=8)
    cmp = api.compare_clusters(spec, clusters, api.plan_request(tokens="1T", top=1))
    rows = cmp.rows
    assert {r.accelerator for r in rows} == {c.accelerator.id for c in clusters}
    speeds = [r.figure("tokens_per_s_per_device") or 0 for r in rows]
    assert speeds == sorted(speeds, reverse=True)
    d = cmp.to_dict()
    assert set(d) == {"objective", "ranked_by", "hardware", "pareto"}
    assert d["pareto"]["throughput_vs_cost"] and d["objective"] == "throughput"


def test_deadline_search(catalog: Catalog) -> None:
    spec = api.load_model("llama-3.1-8b", catalog)
    [base] = api.plan_clusters(catalog, hw="h100-sxm5-80gb")
    req = api.plan_request(tokens="100B", deadline="30d", top=1)
    s = api.deadline_search(spec, base, req)
    assert s.found is not None and s.found is s.tried[-1]
    assert s.found["time_to_train_s"] <= 30 * 86400
    assert all(t["time_to_train_s"] > 30 * 86400 for t in s.tried[:-1])
    assert [t["devices"] for t in s.tried] == [8 * 2**i for i in range(len(s.tried))]
    assert s.to_dict()["deadline_s"] == 30 * 86400
    with pytest.raises(InputError, match="--deadline needs"):
        api.deadline_search(spec, base, api.plan_request(tokens="1T"))


def test_plan_runs_the_class_stack_like_estimate(catalog: Catalog) -> None:
    """Issue 25: `plan` on a TPU slice wrote framework megatron while `estimate` ran xla. The
    device class's stack when none is named, the same rule in both."""
    tpu = api.load_system(cluster="8xtpu-v5p").cluster
    r = api.plan_request(seq=2048, global_batch_tokens="256K", top=1)
    assert r.framework_for(tpu) == "xla" == class_framework(tpu, training=True).value
    job = api.planning.plan_job(catalog.models["llama-3.1-8b"], tpu, r)
    assert job.framework.value == "xla"
    assert api.plan_request(framework="megatron").framework_for(tpu) == "megatron"
