"""The fit of fitters/fit_framework_profiles.py (every row of a stack, robust least squares
on log time) and of fitters/fit_collective_latency.py, and what the bundled profiles say."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import yaml

from accelmap.catalog import Catalog
from accelmap.cost import collectives as co
from accelmap.cost.framework import Framework, profile
from accelmap.engine import estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.hardware.schema import LinkRole
from accelmap.mapping.plan import Mapping
from accelmap.validate.cases import InferenceCase
from accelmap.validate.read import read_cases
from accelmap.workload import Inference

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "measurements"
CAL = ROOT / "src" / "accelmap" / "cost" / "data" / "framework_calibration.yaml"


@pytest.fixture(scope="module")
def fitmod(load_fitter: Callable[[str], ModuleType]) -> ModuleType:
    return load_fitter("fit_framework_profiles")


def _bounded(entry: dict, fit: ModuleType) -> None:
    for key, param in fit.PARAMS.items():
        *parents, leaf = key.split(".")
        node = entry
        for part in parents:
            node = node.get(part, {})
        if leaf in node:
            value = node[leaf]
            lo = param.to_yaml(param.hi) if param.to_yaml else param.lo
            hi = param.to_yaml(param.lo) if param.to_yaml else param.hi
            assert lo - 1e-12 <= value <= hi + 1e-12, (key, value)


def test_fit_on_every_row_is_reproducible_and_bounded(fitmod: ModuleType) -> None:
    cases = [c for c in read_cases(FIXTURES / "inference.csv").cases
             if isinstance(c, InferenceCase)]
    first = fitmod.fit_stack(cases, Framework.TORCH_COMPILE)
    again = fitmod.fit_stack(cases, Framework.TORCH_COMPILE)
    assert first == again  # one rule, no state
    rows = first["fitted_on"]["kernel_overhead_s"]
    assert len(rows) >= 3 and first["calibrated_on"] == []  # every row, none a one-row fit
    assert first["leave_one_out"]["rows"] == len(rows)
    # the fixture has an int8 row and no int4 or TTFT row: those are named, not fitted
    assert "quantized_weight_efficiency" in first
    assert set(first["not_calibrated"]) == {"request_overhead_s",
                                            "quantized_weight_efficiency.int4"}
    _bounded(first, fitmod)


def test_affine_form_matches_the_engine(fitmod: ModuleType) -> None:
    case = {c.row_id: c for c in read_cases(FIXTURES / "inference.csv").cases}["I0206"]
    assert isinstance(case, InferenceCase)
    keys = ["kernel_overhead_s", "step_overhead_s"]
    (row,) = fitmod.linearize([case], Framework.TORCH_COMPILE, keys)
    x = np.array([2e-6, 3e-4])
    engine = fitmod._time(fitmod.predict_with(case, fitmod.table_for(
        Framework.TORCH_COMPILE, keys, x)))
    assert row.time(x) == pytest.approx(engine, rel=1e-6)
    assert (row.grad > 0).all()  # more host time, slower


def test_bundled_profiles_are_physical_and_say_where_they_come_from(
        fitmod: ModuleType) -> None:
    data = yaml.safe_load(CAL.read_text())
    for fw in fitmod.FITTED_STACKS:
        entry = data[fw.value]
        _bounded(entry, fitmod)
        assert entry["calibrated_on"] == [] and "fitted on" in entry["source"]
        assert entry["leave_one_out"]["rows"] >= 10
        p = profile(fw)
        assert p.step_overhead_s > 0 and 0 <= p.kernel_overhead_s <= 10e-6
    for fw in (Framework.VLLM,):  # SGLang: tests/validate/test_fit_sglang_profile.py
        p = profile(fw)
        assert "uncalibrated" in p.overhead_source and "borrowed" in p.overhead_source
        assert {"kernel_overhead_s", "step_overhead_s", "request_overhead_s"} <= set(
            p.not_calibrated)
        assert all("uncalibrated" in why for why in p.not_calibrated.values())
        lender = profile(fitmod.LENDER)
        assert p.step_overhead_s == lender.step_overhead_s > 0
        assert p.custom_all_reduce


def test_70b_tp8_batch1_eager_is_slower_than_graph_stacks(catalog: Catalog) -> None:
    cluster = parse_cluster("dgx-h100", catalog)
    spec = catalog.models["llama-3.1-70b"]
    wl = Inference(batch=1, prompt_len=512, output_len=128)
    tpot = {fw: float(estimate(spec, cluster, wl, Mapping(tp=8), framework=fw)
                      .metrics["tpot_s"]) for fw in Framework
            if fw not in (Framework.MEGATRON, Framework.FSDP, Framework.ATOM)}
    for fw in (Framework.TORCH_COMPILE, Framework.TENSORRT_LLM, Framework.VLLM,
               Framework.SGLANG):
        assert tpot[Framework.EAGER] > tpot[fw], (fw, tpot)
    # vLLM pays host time per step: not the bandwidth limit with nothing on top
    bare = profile(Framework.VLLM).__class__(Framework.VLLM, 0.0, True, "bare",
                                             custom_all_reduce=True)
    assert tpot[Framework.VLLM] > float(estimate(spec, cluster, wl, Mapping(tp=8),
                                                 framework=bare).metrics["tpot_s"])


def test_small_all_reduce_costs_what_was_measured(load_fitter: Callable[[str], ModuleType],
                                                  catalog: Catalog) -> None:
    fit = load_fitter("fit_collective_latency")
    rows = fit.small_rows(fit.DEFAULT_CSV) if fit.DEFAULT_CSV.exists() else []
    fitted = co.measured_latency()["nvswitch_nccl"]
    if rows:  # the shared data is next to the checkout: the rule reproduces the bundled value
        assert [r[0] for r in rows] == fitted["fitted_on"]
        assert fit.fit_step(rows) == pytest.approx(fitted["step_latency_s"], rel=1e-3)
    up = parse_cluster("dgx-h100", catalog).tier(LinkRole.SCALE_UP)
    assert up is not None
    link = co.link_for_tier(up, "h100-sxm5-80gb")
    nccl = co.collective_time("all_reduce", 32768, 8, link)
    assert 35e-6 < nccl < 55e-6  # collectives.csv: 39-53 us at 8 ranks
    # the custom one-shot kernel is faster for small messages and never slower than NCCL
    custom = co.replace(link, one_shot=co.custom_all_reduce())
    assert co.collective_time("all_reduce", 32768, 8, custom) < 15e-6
    big = 256 * 2**20
    assert co.collective_time("all_reduce", big, 8, custom) == pytest.approx(
        co.collective_time("all_reduce", big, 8, link))
