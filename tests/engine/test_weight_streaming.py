"""Issue 27: a Cerebras wafer trained with a GPU mapping (ZeRO-3, micro-batch 1) at 1-2 % MFU.
A wafer trains by weight streaming (cost/execution.py): weights and optimizer in the external
tier, streamed in per micro-batch over the system I/O, data parallelism without collectives."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.execution import external_link_bandwidth, streams_training_weights
from accelmap.engine import System, default_mapping, estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.models.params import count_params
from accelmap.search.compare import CompareJob, train_row
from accelmap.search.space import TrainingSpace
from accelmap.units import DType
from accelmap.workload import Recompute, Training

WL = Training(batch=256, seq_len=4096, dtype=DType.FP16, recompute=Recompute.FULL)


def _streamed(n: int, mb: int) -> Mapping:
    return Mapping.for_world(n, zero=ZeroStage(0), micro_batch=mb, recompute=Recompute.FULL,
                             offload_params=Offload.CPU, offload_optimizer=Offload.CPU)


def test_only_wafers_stream(catalog: Catalog) -> None:
    acc = catalog.accelerators
    assert streams_training_weights(acc["wse-3"]) and streams_training_weights(acc["wse-2"])
    for other in ("h100-sxm5-80gb", "groq-lpu-v1", "sn40l", "tpu-v5p"):
        assert not streams_training_weights(acc[other]) and \
            external_link_bandwidth(acc[other]) is None
    bw, source = external_link_bandwidth(acc["wse-3"]) or (0.0, "")
    assert bw == pytest.approx(12 * 100e9 / 8) and "system I/O" in source  # 12 x 100 GbE


@pytest.mark.parametrize("mb", [1, 2, 4])
def test_streaming_bounds_the_step(catalog: Catalog, mb: int) -> None:
    """The weights stream in twice per micro-batch over the system I/O: the step can never be
    shorter than that, and the wafers run no data-parallel collective."""
    spec = catalog.models["llama-3.1-8b"]
    cl = parse_cluster("4xwse-3", catalog)
    e = estimate(spec, System.of(cl), WL, _streamed(4, mb))
    comm = e.communication_s or {}
    assert comm["dp"] == 0.0 and comm["offload"] > 0
    micro = WL.batch // 4 // mb
    bw, _ = external_link_bandwidth(cl.accelerator) or (1.0, "")
    params = count_params(spec).total
    assert comm["offload"] == pytest.approx(micro * 2 * params * 2 / bw, rel=0.05)
    assert e.step_time_s is not None and e.step_time_s >= comm["offload"]
    assert any("weight streaming" in a for a in e.assumptions)


def test_default_mapping_and_search_space_stream(catalog: Catalog) -> None:
    cl = parse_cluster("4xwse-3", catalog)
    m = default_mapping(System.of(cl), WL)
    assert m.offloads_params and m.offloads_optimizer and int(m.zero) == 0 and m.dp == 4
    space = TrainingSpace.default(catalog.models["llama-3.1-8b"], cl, 4096)
    assert space.offload == (True,) and space.tp == space.pp == (1,) and space.zero == (0,)
    gpu = TrainingSpace.default(catalog.models["llama-3.1-8b"],
                                parse_cluster("8xh100-sxm5-80gb", catalog), 4096)
    assert gpu.offload == (False,) and len(gpu.tp) > 1


def test_compare_gives_a_wafer_a_streaming_mapping(catalog: Catalog) -> None:
    spec = catalog.models["llama-3.1-8b"]
    job = CompareJob(train=True, global_batch=256, seq=4096)
    row = train_row(spec, catalog.accelerators["wse-3"], job, catalog)
    assert row.feasible and "weight-streaming" in row.mapping
    assert "zero=3" not in row.mapping
    # micro-batch 1 (what the GPU rule used) streams the weights per sequence: the search
    # picks a larger one, which is faster
    mb1 = estimate(spec, System.of(parse_cluster(f"{row.devices}xwse-3", catalog)), WL,
                   _streamed(row.devices, 1))
    assert row.step_time_s < (mb1.step_time_s or 0)
