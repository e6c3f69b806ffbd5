"""SGLang's profile (fitters/fit_sglang_profile.py): the split rule, the additive fit, the
yaml block it writes, the platform (ROCm) block and the front-end latency it adds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.cost import framework as fwmod
from accelmap.cost.framework import Framework, platform_of, profile

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "src" / "accelmap" / "cost" / "data" / "framework_calibration.yaml"


@pytest.fixture(scope="module")
def fs(load_fitter: Callable[[str], ModuleType]) -> ModuleType:
    return load_fitter("fit_sglang_profile")


REC = {"accelerator": "b200", "precision": "fp8", "moe_precision": None, "input_len": 922,
       "output_len": 922, "tp": 8, "ep": None, "dp_attention": False, "disaggregated": None,
       "mtp": None}


def test_split_is_by_configuration_only(fs: ModuleType) -> None:
    # every concurrency and metric of a configuration falls on the same side
    a = {**REC, "concurrency": 4, "metric": "ttft_p50_ms", "value": 100.0, "id": "x"}
    b = {**REC, "concurrency": 64, "metric": "tokens_per_s_per_user", "value": 9.0, "id": "y"}
    assert fs.config_key(a) == fs.config_key(b)
    assert fs.in_fit_set(a) == fs.in_fit_set(b)
    assert fs.config_key({**REC, "tp": 4}) != fs.config_key(REC)


def test_split_holds_out_most_configurations(fs: ModuleType) -> None:
    keys = {fs.config_key(r): fs.in_fit_set(r) for r in fs.sglang_records()}
    share = sum(keys.values()) / len(keys)
    assert len(keys) > 40 and 0.1 < share < 0.4  # one in four, by hash


def test_additive_fit_by_hand(fs: ModuleType) -> None:
    # predicted 1 s and 2 s, measured 1.5 s and 2.5 s: 0.5 s more makes both exact
    assert fs.fit_additive([(1.0, 1.5), (2.0, 2.5)], 0.0, 1.0) == pytest.approx(0.5, abs=1e-6)
    # bounded: it cannot go below 0 when the predictions are already too slow
    assert fs.fit_additive([(2.0, 1.0), (3.0, 2.0)], 0.0, 1.0) == pytest.approx(0.0, abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(x=st.floats(1e-4, 0.5), base=st.lists(st.floats(1e-3, 2.0), min_size=3, max_size=8))
def test_additive_fit_recovers_a_shift(fs: ModuleType, x: float, base: list[float]) -> None:
    assert fs.fit_additive([(b, b + x) for b in base], 0.0, 1.0) == pytest.approx(x, rel=1e-3)


def test_block_replacement_keeps_the_other_stacks(fs: ModuleType) -> None:
    text = ("# head\ntensorrt-llm:\n  step_overhead_s: 1.0\n  fitted_on:\n  - I1\n"
            "sglang:\n  step_overhead_s: 0.5\n  not_calibrated:\n    a: b\nvllm:\n  x: 1\n")
    out = fs.replace_block(text, "sglang:\n  step_overhead_s: 2.0\n")
    assert out == ("# head\ntensorrt-llm:\n  step_overhead_s: 1.0\n  fitted_on:\n  - I1\n"
                   "sglang:\n  step_overhead_s: 2.0\nvllm:\n  x: 1\n")
    assert fs.replace_block("vllm:\n  x: 1\n", "sglang:\n  y: 2\n") == (
        "vllm:\n  x: 1\nsglang:\n  y: 2\n")


TABLE = {"sglang": {"kernel_overhead_s": 0.0, "step_overhead_s": 2e-3,
                    "request_latency_s": 0.15, "source": "cuda fit",
                    "rocm": {"step_overhead_s": 5e-3, "request_latency_s": 0.08,
                             "source": "rocm fit"}},
         "tensorrt-llm": {"step_overhead_s": 7e-4, "request_overhead_s": 2e-3}}


def test_platform_block_by_vendor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fwmod, "_calibration", lambda: TABLE)
    assert platform_of("AMD") == "rocm" and platform_of("NVIDIA") == "cuda"
    assert platform_of("AMD (Xilinx)") == "cuda" and platform_of(None) == "cuda"
    amd, nv, plain = profile("sglang", "AMD"), profile("sglang", "NVIDIA"), profile("sglang")
    assert (amd.step_overhead_s, amd.request_latency_s, amd.overhead_source) == (
        5e-3, 0.08, "rocm fit")
    assert (nv.step_overhead_s, nv.request_latency_s) == (2e-3, 0.15) == (
        plain.step_overhead_s, plain.request_latency_s)
    assert amd.band_stack == "sglang rocm" and nv.band_stack == "sglang"
    # a stack without a ROCm block is the same on every vendor
    assert profile("tensorrt-llm", "AMD") == profile("tensorrt-llm", "NVIDIA")


def test_bundled_sglang_profile_is_fitted_and_physical(fs: ModuleType) -> None:
    entry = yaml.safe_load(CAL.read_text())["sglang"]
    for plat, block in (("cuda", entry), ("rocm", entry["rocm"])):
        assert "fitted on" in block["source"] and "split rule" in block["source"], plat
        lo, hi = fs.BOUNDS["step_overhead_s"]
        assert lo <= block["step_overhead_s"] <= hi
        lo, hi = fs.BOUNDS["request_latency_s"]
        assert lo <= block["request_latency_s"] <= hi
        fitted = set(block["fitted_on"]["step_overhead_s"])
        held = {fs.config_key(r) for r in fs.sglang_records() if not fs.in_fit_set(r)}
        assert fitted and not fitted & held  # nothing held out was fitted on
        assert block["held_out"]["after"]["rows"] >= 50
    amd = profile(Framework.SGLANG, "AMD")
    assert amd.platform == "rocm" and amd.step_overhead_s == entry["rocm"]["step_overhead_s"]
    assert "request_overhead_s" in profile(Framework.SGLANG).not_calibrated


def test_atom_profile_is_fitted_on_one_configuration_and_checked_on_the_rest(
        fs: ModuleType, load_fitter: Callable[[str], ModuleType]) -> None:
    """ATOM (fitters/fit_atom_profile.py) takes SGLang's split unchanged: of its InferenceX
    configurations the fit set holds those the hash picks; the entry it wrote names them, its
    figures sit at the top level (ATOM runs on AMD GPUs only) and are what the profile reads."""
    fa = load_fitter("fit_atom_profile")
    recs = fs.sglang_records(stack="atom")
    assert recs and all(str(r["framework"]).startswith("atom") for r in recs)
    fit_keys = sorted({fs.config_key(r) for r in recs if fs.in_fit_set(r)})
    entry = yaml.safe_load(CAL.read_text())["atom"]
    assert entry["fitted_on"]["step_overhead_s"] == fit_keys and "rocm" not in entry
    assert entry["held_out"]["after"]["rows"] > entry["in_sample"]["rows"]
    assert entry["held_out"]["after"]["median_pct"] < entry["held_out"]["before"]["median_pct"]
    prof = profile(Framework.ATOM, "AMD")
    assert prof.step_overhead_s == pytest.approx(entry["step_overhead_s"])
    assert prof.request_latency_s == pytest.approx(entry["request_latency_s"])
    # its block replaces only ATOM's lines
    text = "sglang:\n  a: 1\natom:\n  b: 2\nvllm:\n  c: 3\n"
    assert fs.replace_block(text, "atom:\n  b: 9\n", "atom") == (
        "sglang:\n  a: 1\natom:\n  b: 9\nvllm:\n  c: 3\n")
    assert fa.STACK == "atom"


def test_kernel_efficiency_is_a_platform_figure_that_scales_device_time(
        monkeypatch: pytest.MonkeyPatch, fs: ModuleType) -> None:
    """SGLang's ROCm block carries the share of the roofline its kernels reach: the AMD profile
    reads it, the NVIDIA one keeps 1.0, and every device op takes 1/efficiency as long."""
    from dataclasses import replace

    from accelmap import api
    from accelmap.cost.roofline import time_op
    from accelmap.ops.step import training_ops
    from accelmap.workload import Training

    rocm = {**TABLE["sglang"]["rocm"], "kernel_efficiency": 0.5}  # type: ignore[dict-item]
    monkeypatch.setattr(fwmod, "_calibration",
                        lambda: {**TABLE, "sglang": {**TABLE["sglang"], "rocm": rocm}})
    amd, nv = profile("sglang", "AMD"), profile("sglang", "NVIDIA")
    assert (amd.kernel_efficiency, nv.kernel_efficiency) == (0.5, 1.0)
    dev = api.load_system(hw="mi300x").device
    op = next(o for o in training_ops(api.load_model("llama-3.2-1b"), Training(batch=1))
              if o.gemm is not None)
    slow, fast = time_op(op, dev, amd), time_op(op, dev, replace(amd, kernel_efficiency=1.0))
    assert float(slow.time_s - slow.overhead_s) == pytest.approx(
        2 * float(fast.time_s - fast.overhead_s))
    bundled = yaml.safe_load(CAL.read_text())["sglang"]
    assert bundled["rocm"]["kernel_efficiency"] in fs.EFFICIENCIES
    assert "kernel_efficiency" not in bundled  # CUDA: the kernels the figures were measured on


def test_architecture_efficiency_overrides_the_platform_figure_on_its_architecture(
        monkeypatch: pytest.MonkeyPatch, fs: ModuleType) -> None:
    """A ROCm block's per-architecture efficiency applies on that architecture's parts (MI300X,
    CDNA3) and the platform's figure on the others (MI355X, CDNA4, when only CDNA3 is named);
    the bundled block names its architectures from the fitter's grid."""
    from dataclasses import replace

    from accelmap import api
    from accelmap.cost.roofline import time_op
    from accelmap.ops.step import training_ops
    from accelmap.workload import Training

    rocm = {**TABLE["sglang"]["rocm"], "kernel_efficiency": 0.5,  # type: ignore[dict-item]
            "architecture_efficiency": {"cdna3": 0.25}}
    monkeypatch.setattr(fwmod, "_calibration",
                        lambda: {**TABLE, "sglang": {**TABLE["sglang"], "rocm": rocm}})
    amd = profile("sglang", "AMD")
    cdna3, cdna4 = api.load_system(hw="mi300x").device, api.load_system(hw="mi355x").device
    assert (amd.efficiency_on(cdna3.acc), amd.efficiency_on(cdna4.acc)) == (0.25, 0.5)
    op = next(o for o in training_ops(api.load_model("llama-3.2-1b"), Training(batch=1))
              if o.gemm is not None)
    at_arch = time_op(op, cdna3, amd)
    at_platform = time_op(op, cdna3, replace(amd, architecture_efficiency=()))
    assert float(at_arch.time_s - at_arch.overhead_s) == pytest.approx(
        2 * float(at_platform.time_s - at_platform.overhead_s))
    bundled = yaml.safe_load(CAL.read_text())["sglang"]["rocm"]["architecture_efficiency"]
    assert bundled and set(bundled.values()) <= set(fs.ARCH_EFFICIENCIES)
    assert profile("sglang", "NVIDIA").architecture_efficiency == ()
