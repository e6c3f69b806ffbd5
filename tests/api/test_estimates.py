"""api.estimates: systems, workloads, mappings, the estimate and the roofline."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import AmbiguousNameError, InputError


def test_load_system_one_device_or_cluster(catalog: Catalog) -> None:
    one = api.load_system(hw="h100 sxm", catalog=catalog)
    assert one.devices == 1
    cl = api.load_system(cluster="64xH100", catalog=catalog)
    assert cl.devices == 64
    assert api.load_system(cluster="dgx-h100", catalog=catalog).devices == 8
    for kwargs in ({}, {"hw": "h100-sxm5-80gb", "cluster": "dgx-h100"}):
        with pytest.raises(InputError, match="give one accelerator"):
            api.load_system(catalog=catalog, **kwargs)
    with pytest.raises(AmbiguousNameError):
        api.load_system(hw="a100", catalog=catalog)  # h100: the variant systems are built of


def test_training_and_inference_values() -> None:
    wl = api.training(8, 2048, "bfloat16", "AdamW", "full", tokens="300B")
    assert wl.batch == 8 and wl.seq_len == 2048 and wl.dtype is api.DType.BF16
    assert wl.recompute.value == "full" and wl.tokens_to_train == pytest.approx(3e11)
    with pytest.raises(InputError, match="unknown recompute policy"):
        api.training(8, 2048, recompute="most")
    inf = api.inference(16, 2048, 256, weights="fp8")
    assert inf.act_dtype is api.DType.FP8 and inf.kv_dtype is api.DType.FP8  # FP8 GEMMs
    inf = api.inference(16, 2048, 256, weights="int4", kv="fp8", group=32)
    assert inf.act_dtype is api.DType.BF16 and inf.kv_dtype is api.DType.FP8
    assert inf.quant_group == 32


def test_mapping_zero_defaults_by_system(catalog: Catalog) -> None:
    wl = api.training(256, 4096)
    cluster = api.load_system(cluster="64xH100", catalog=catalog)
    one = api.load_system(hw="h100-sxm5-80gb", catalog=catalog)
    m = api.mapping(cluster, wl, tp=8, pp=2)
    assert int(m.zero) == 1 and m.dp == 4 and m.micro_batch == 1
    assert int(api.mapping(cluster, wl, tp=8, zero=0).zero) == 0
    m1 = api.mapping(one, wl)
    assert int(m1.zero) == 0 and m1.micro_batch == 256  # the whole batch on one device
    with pytest.raises(InputError, match="ZeRO stage is 0, 1, 2 or 3"):
        api.mapping(cluster, wl, zero=4)
    with pytest.raises(InputError, match="unknown schedule"):
        api.mapping(cluster, wl, schedule="zigzag")


def test_serving_mapping() -> None:
    m = api.serving_mapping(tp=4, replicas=2)
    assert m.tp == 4 and m.world == 8


def test_estimate_training_and_serving(catalog: Catalog) -> None:
    spec = api.load_model("gpt3-1.3b", catalog)
    system = api.load_system(hw="a100-sxm4-80gb", catalog=catalog)
    wl = api.training(8, 2048, tokens="300B")
    est = api.estimate(spec, system, wl, api.mapping(system, wl))
    assert isinstance(est, api.estimates.TrainStep) and est.feasible and 0 < est.mfu < 1
    serve = api.estimate(api.load_model("llama-3.1-8b", catalog),
                         api.load_system(hw="h100-sxm5-80gb", catalog=catalog),
                         api.inference(16, 2048, 256), api.serving_mapping())
    assert isinstance(serve, api.estimates.ServeStep) and serve.ttft_s > 0 and serve.tpot_s > 0


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_roofline_serving_phases(catalog: Catalog, phase: str) -> None:
    spec = api.load_model("llama-2-7b", catalog)
    system = api.load_system(hw="a100-sxm4-80gb", catalog=catalog)
    wl = api.inference(1, 512, 128)
    roof = api.roofline(spec, system, wl, phase)
    assert roof.phase is api.Phase(phase) and roof.ops
    assert {r["stage"] for r in roof.ops}  # operators carry their stage
    assert roof.total_s == pytest.approx(sum(r["total_s"] for r in roof.ops))
    assert roof.ridge_flop_per_byte == pytest.approx(system.device.ridge_point)
    est = api.estimate(spec, system, wl)
    assert [r["name"] for r in roof.ops] == [t.op.name for t in est.ops[phase]]
    data = roof.to_dict()
    assert list(data) == ["model", "accelerator", "phase", "ridge_flop_per_byte", "total_s",
                          "ops", "calibration", "assumptions"]
    assert data["phase"] == phase and data["calibration"]


def test_roofline_training_has_three_passes(catalog: Catalog) -> None:
    spec = api.load_model("gpt3-125m", catalog)
    system = api.load_system(hw="h100-sxm5-80gb", catalog=catalog)
    wl = api.training(4, 1024)
    roof = api.roofline(spec, system, wl)
    assert roof.phase is api.Phase.TRAIN
    est = api.estimate(spec, system, wl)
    assert len(roof.ops) == sum(len(est.ops.get(g, ())) for g in
                                ("forward", "backward", "optimizer"))
    assert api.roofline(spec, system, api.inference(1, 512, 16)).phase is api.Phase.PREFILL


def test_roofline_phase_must_match_the_workload(catalog: Catalog) -> None:
    spec = api.load_model("gpt3-125m", catalog)
    system = api.load_system(hw="h100-sxm5-80gb", catalog=catalog)
    with pytest.raises(InputError, match="phase decode does not match a training workload"):
        api.roofline(spec, system, api.training(4, 1024), "decode")
    with pytest.raises(InputError, match="phase train does not match a serving workload"):
        api.roofline(spec, system, api.inference(1, 512, 16), "train")
    with pytest.raises(InputError, match="unknown phase"):
        api.roofline(spec, system, api.inference(1, 512, 16), "serve")
