"""The layout of a simulated run when none is given (serving/layout.py): the batch rule's
layout can leave the stack's KV pool empty; the scenario's holds its clients and runs."""

from __future__ import annotations

from accelmap import api
from accelmap.api import Catalog
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.serving.layout import holds


def test_deepseek_r1_fp4_on_8_b200_runs_under_the_default_layout(catalog: Catalog) -> None:
    spec = api.load_model("deepseek-r1", catalog)
    system = api.load_system(cluster="8xb200", catalog=catalog)
    wl = api.inference(1, 1024, 1024, "fp4")
    load = api.serving_load("concurrency", concurrency=16, requests=64)
    batch, _ = api.default_serving_layout(spec, system, wl)
    assert not api.serve(spec, system, wl, batch, load=load).feasible  # the bug it fixes
    m, note = api.scenario_layout(spec, system, wl, load)
    assert note is not None and "KV pool" in note
    run = api.serve(spec, system, wl, m, load=load)
    assert run.feasible, run.reason
    assert int(m.tp) > int(batch.tp)


def test_a_layout_that_holds_is_kept(catalog: Catalog) -> None:
    spec = api.load_model("llama-3.1-8b", catalog)
    system = api.load_system(cluster="8xH100", catalog=catalog)
    wl = api.inference(1, 512, 128)
    load = api.serving_load("concurrency", concurrency=64, requests=128)
    batch, _ = api.default_serving_layout(spec, system, wl)
    m, _ = api.scenario_layout(spec, system, wl, load)
    assert m == batch
    assert holds(spec, system, wl, m, framework_profile(Framework.VLLM), load)
