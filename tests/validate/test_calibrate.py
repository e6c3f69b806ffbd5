"""The calibration rule of benchmarks/calibrate_single_device.py: which rows, and that a fit
reproduces its row (without writing the bundled yaml)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from accelmap.cost.framework import Framework
from accelmap.validate.cases import InferenceCase, read_cases

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "measurements"


@pytest.fixture(scope="module")
def cal(load_benchmark: Callable[[str], ModuleType]) -> ModuleType:
    return load_benchmark("calibrate_single_device")


def test_rule_picks_first_row_of_each_kind(cal: ModuleType) -> None:
    cases = read_cases(FIXTURES / "inference.csv").cases
    rows = cal.calibration_rows(cases, {})
    # kernel overhead is identifiable only where kernels are short: the first batch-1 row
    assert rows[(Framework.TENSORRT_LLM, "kernel_overhead_s")].row_id == "I0038"
    assert rows[(Framework.TORCH_COMPILE, "kernel_overhead_s")].row_id == "I0198"
    assert not any(fw is Framework.VLLM for fw, _ in rows)


def test_fit_reproduces_its_row(cal: ModuleType) -> None:
    case = {c.row_id: c for c in read_cases(FIXTURES / "inference.csv").cases}["I0198"]
    assert isinstance(case, InferenceCase)
    param = cal.PARAMS[0]
    value, verdict = cal.fit(case, Framework.TORCH_COMPILE, param, {})
    assert verdict == "fitted" and 0 < value < param.hi
    p = cal.predict_with(case, {"torch-compile": {"kernel_overhead_s": value}})
    assert p.predicted == pytest.approx(p.measured, rel=1e-6)
