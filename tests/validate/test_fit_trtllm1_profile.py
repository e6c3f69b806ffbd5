"""The TensorRT-LLM 1.x profile: the fixed split of fitters/fit_trtllm1_profile.py, its fit on
an affine form built by hand, and what the bundled entry says; and that a run of release >= 1.0
is predicted with that profile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import yaml

from accelmap.cost.framework import Framework
from accelmap.units import DType
from accelmap.validate import serving as vserving
from accelmap.validate.read import read_cases
from accelmap.validate.runs import ServingRun

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "src" / "accelmap" / "cost" / "data" / "framework_calibration.yaml"


@pytest.fixture(scope="module")
def fitmod(load_fitter: Callable[[str], ModuleType]) -> ModuleType:
    return load_fitter("fit_trtllm1_profile")


def _run(rid: str, **kw: Any) -> ServingRun:
    base = next(c for c in read_cases(ROOT / "tests" / "fixtures" / "runs" /
                                      "serving.yaml").cases if isinstance(c, ServingRun))
    return replace(base, id=rid, **kw)


def test_every_fourth_run_by_id_is_held_out(fitmod: ModuleType) -> None:
    runs = [_run(i) for i in ("e", "a", "g", "c", "b", "f", "d", "h", "i")]
    fitted, held = fitmod.split(runs)
    assert [r.id for r in held] == ["a", "e", "i"]  # positions 0, 4, 8 of a..i
    assert [r.id for r in fitted] == ["b", "c", "d", "f", "g", "h"]


def test_the_4bit_efficiencies_are_fitted_only_for_formats_a_fitted_run_runs(
        fitmod: ModuleType) -> None:
    runs = [_run("a", precision=DType.BF16, moe_precision=DType.MXFP4),
            _run("b", precision=DType.FP8)]
    keys = [p.key for p in fitmod.params_for(runs)]
    assert keys == ["kernel_overhead_s", "step_overhead_s", "quantized_weight_efficiency.mxfp4"]
    assert [p.key for p in fitmod.params_for(runs, borrow=True)] == [
        "quantized_weight_efficiency.mxfp4"]


def test_the_fit_recovers_figures_from_an_affine_form_made_by_hand(fitmod: ModuleType) -> None:
    """Rows whose time is tau0 + n k + m s + w q (n kernels, m steps, w seconds of 4-bit weight
    streaming; k per-kernel gap, s per-step time, q = 1/efficiency - 1), measured at k = 2 us,
    s = 0.5 ms, efficiency 0.5 (q = 1): the fit gives those back."""
    params = [fitmod.BASE[0], fitmod.BASE[1],
              fitmod.Param("quantized_weight_efficiency.nvfp4", 0.0, 10.0, 1.0, True)]
    truth = np.array([2e-6, 5e-4, 1.0])
    rows = []
    for tau0, n, m, w in ((0.010, 1000, 50, 0.002), (0.020, 4000, 20, 0.010),
                          (0.015, 500, 100, 0.0), (0.030, 2000, 300, 0.020)):
        grad = np.array([n, m, w], dtype=float)
        rows.append(fitmod.Row(None, tau0, grad, tau0 + float(grad @ truth)))
    x = fitmod.fit(rows, params)
    assert x == pytest.approx(truth, rel=1e-3)
    assert params[2].to_yaml(float(x[2])) == pytest.approx(0.5, rel=1e-3)


def test_the_bundled_entry_is_bounded_and_fitted_only_on_the_fitted_side(
        fitmod: ModuleType) -> None:
    """Fitted only on the fit side of both splits: the id split of the 2025 runs and, with
    --sweeps, SGLang's configuration split of InferenceX's TensorRT-LLM sweep records."""
    entry = yaml.safe_load(CAL.read_text())[Framework.TENSORRT_LLM_1.value]
    fitted, held = fitmod.split(fitmod.stack_runs())
    sweeps, held_sweeps = fitmod.sweep_cases()
    used = {i for ids in entry["fitted_on"].values() for i in ids}
    assert used and used <= {r.id for r in fitted} | {c.id for c in sweeps}
    assert not used & ({r.id for r in held} | {c.id for c in held_sweeps})
    assert held_sweeps and all(c.metric.value == fitmod.SWEEP_METRIC for c in sweeps)
    for fmt, eff in (entry.get("quantized_weight_efficiency") or {}).items():
        assert DType(fmt) in (DType.NVFP4, DType.MXFP4) and 1 / 11 <= eff <= 1.0
    assert 0.0 <= entry["kernel_overhead_s"] <= 10e-6
    assert 0.0 <= entry["step_overhead_s"] <= 20e-3
    for k in ("held_out", "check_set", "held_out_sweeps"):
        assert entry[k]["rows"] > 0 and entry[k]["median_pct"] <= entry[k]["p90_pct"]


def test_a_release_1x_run_is_predicted_with_the_1x_profile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Framework] = []
    real = vserving.framework_profile

    def spy(name: Framework | str, vendor: str | None = None) -> Any:
        seen.append(Framework(name))
        return real(name, vendor)

    monkeypatch.setattr(vserving, "framework_profile", spy)
    vserving._cache.clear()
    from accelmap.catalog import load_catalog

    for version, want in (("1.1.0rc1", Framework.TENSORRT_LLM_1),
                          ("0.17", Framework.TENSORRT_LLM)):
        run = _run(f"r{version}", framework=Framework.TENSORRT_LLM, version=version,
                   requests=50)
        vserving.predict_serving(run, load_catalog(), frozenset())
        assert seen and seen[-1] is want
    vserving._cache.clear()


def test_error_bands_group_runs_by_the_profile_they_ran_with(
        load_fitter: Callable[[str], ModuleType]) -> None:
    """The engine looks a band up by the profile's name; a row's "framework version" text is
    read the same way (release after the name), other text stays as it is."""
    bands = load_fitter("derive_error_bands")
    assert bands.profile_stack("tensorrt-llm 1.0") == "tensorrt-llm-1"
    assert bands.profile_stack("tensorrt-llm 1.1.0rc1") == "tensorrt-llm-1"
    assert bands.profile_stack("tensorrt-llm 0.17") == "tensorrt-llm"
    assert bands.profile_stack("tensorrt-llm") == "tensorrt-llm"
    assert bands.profile_stack("vllm 0.9.1") == "vllm"
    assert bands.profile_stack("megatron") == "megatron"
    assert bands.profile_stack("Megatron-LM (Jan 2021)") == "Megatron-LM (Jan 2021)"
