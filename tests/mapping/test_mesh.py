"""A mapping named as a MaxText/GSPMD mesh: fsdp under ZeRO-3, data otherwise; DCN takes the
outermost axes across slices; TPU training estimates say it."""

from __future__ import annotations

from accelmap import api
from accelmap.mapping.mesh import describe_mesh, mesh_sizes, split_mesh
from accelmap.mapping.plan import Mapping, ZeroStage


def test_fsdp_or_data_by_zero_stage() -> None:
    assert mesh_sizes(Mapping(dp=8, tp=4, zero=ZeroStage.PARAMETERS))["fsdp"] == 8
    assert mesh_sizes(Mapping(dp=8, tp=4, zero=ZeroStage.OPTIMIZER))["data"] == 8


def test_dcn_takes_the_outermost_axes() -> None:
    ici, dcn, left = split_mesh({"data": 4, "fsdp": 64, "tensor": 4}, slices=8)
    assert dcn["data"] == 4 and dcn["fsdp"] == 2 and dcn["tensor"] == 1 and left == 1
    assert ici["fsdp"] == 32 and ici["tensor"] == 4
    assert "left over" in describe_mesh(Mapping(dp=3, zero=ZeroStage.PARAMETERS), slices=2)


def test_tpu_training_names_its_mesh() -> None:
    spec = api.load_model("llama-3.1-8b")
    system = api.load_system(cluster="512xtpu-v5e")
    wl = api.training(512, 4096, recompute="full")
    est = api.estimate(spec, system, wl, api.mapping(system, wl, zero=3))
    note = next(a for a in est.assumptions if a.startswith("MaxText/GSPMD mesh"))
    assert "dcn fsdp=2" in note and "2 slices of 256 chips" in note
    gpu = api.load_system(cluster="dgx-h100")
    est = api.estimate(spec, gpu, api.training(8, 4096), api.mapping(gpu, api.training(8, 4096)))
    assert not any(a.startswith("MaxText") for a in est.assumptions)
