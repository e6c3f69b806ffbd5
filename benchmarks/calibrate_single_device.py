"""Calibrate the framework profiles' general parameters and write framework_calibration.yaml.

Rule (documented, general, never per row): every parameter of a CUDA-graph framework profile
(TensorRT-LLM, torch.compile/gpt-fast, vLLM) is fitted on **the first row of its kind for that
framework in inference.csv, in file order, that the single-device engine can predict**, so that
accelmap's prediction of that row equals the measurement:

- ``kernel_overhead_s`` (per kernel launch/gap): the framework's first batch-1 row. Per-kernel
  cost is identifiable only where kernels are short; at large batch it would soak up whatever
  else the model misses (fitting it on the batch-1024 row I0001 gave an unphysical 42 us);
- ``quantized_weight_efficiency.int8`` / ``.int4`` (fraction of 16-bit weight-streaming bandwidth
  that weight-only dequantizing kernels reach): its first int8 / int4 weight-only row.

In the shared file that gives I0038 (TensorRT-LLM kernel overhead), I0198 (gpt-fast kernel
overhead), I0199 / I0200 (gpt-fast int8 / int4). A per-request TTFT overhead is not fitted: with
one batch-1 TTFT row per framework it cannot be told apart from the kernel overhead. vLLM has
no single-device row, so it keeps the defaults, and the file says so. Those rows are listed under
``calibrated_on``; ``accelmap validate`` marks them ``calibration`` and never scores them.

Each fit is a bisection (the prediction is monotonic in each parameter). A parameter that no
value inside its physical range can fit keeps the bound (e.g. 0 s when the model is already
slower than the measurement) and says so. The fits are repeated until they stop moving, because
the parameters interact slightly (a TTFT row also pays per-kernel overhead).

Run: python benchmarks/calibrate_single_device.py [path/to/inference.csv]
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from accelmap.catalog import load_catalog
from accelmap.cost import framework as fwmod
from accelmap.cost.framework import Framework
from accelmap.units import DType
from accelmap.validate import predict as pr
from accelmap.validate.cases import Case, InferenceCase, read_cases
from accelmap.validate.resolve import inference_framework, inference_precision

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT.parent / "shared" / "reference" / "measurements" / "inference.csv"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "framework_calibration.yaml"
GRAPH_STACKS = (Framework.TENSORRT_LLM, Framework.TORCH_COMPILE, Framework.VLLM)
RULE = "rule: first row of its kind for the framework in inference.csv"
HEADER = ("# General parameters of the framework profiles. CUDA-graph profiles (tensorrt-llm,\n"
          "# torch-compile, vllm): benchmarks/calibrate_single_device.py (" + RULE + ").\n"
          "# Training physics: cost/data/training_fit.yaml, benchmarks/fit_training.py (rule in its"
          "\n# docstring). Rows under calibrated_on are marked 'calibration' by `accelmap "
          "validate` and\n# never scored; fitted_on says which rows fixed which parameter; "
          "not_calibrated says why a\n# parameter was left at the loader's default.\n")
Table = dict[str, dict[str, Any]]


def _weight_dtype(case: InferenceCase) -> DType | None:
    p = inference_precision(case.precision_weights, case.precision_kv, 1)
    return None if isinstance(p, str) else p.weight


@dataclass(frozen=True)
class Param:
    key: str  # dotted path inside the framework's entry
    kind: str  # the rows it is fitted on, in words
    selects: Callable[[InferenceCase], bool]
    lo: float  # physical range
    hi: float
    default: float  # value when the framework has no such row
    faster_when_larger: bool  # True: prediction gets faster as the value grows


PARAMS = (
    Param("kernel_overhead_s", "first batch-1 row", lambda c: c.batch == 1, 0.0, 1e-2, 0.0,
          False),
    Param("quantized_weight_efficiency.int8", "first int8 weight-only row",
          lambda c: _weight_dtype(c) is DType.INT8, 0.01, 1.0, 1.0, True),
    Param("quantized_weight_efficiency.int4", "first int4 weight-only row",
          lambda c: _weight_dtype(c) is DType.INT4, 0.01, 1.0, 1.0, True),
)


def _set(entry: dict[str, Any], key: str, value: float) -> None:
    *parents, leaf = key.split(".")
    for p in parents:
        entry = entry.setdefault(p, {})
    entry[leaf] = value


def _get(entry: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        entry = entry[part]
    return entry


def _drop(entry: dict[str, Any], key: str) -> None:
    *parents, leaf = key.split(".")
    node = entry
    for p in parents:
        node = node.get(p, {})
    node.pop(leaf, None)
    if parents and not entry.get(parents[0]):
        entry.pop(parents[0], None)


def predict_with(case: InferenceCase, table: Table) -> pr.Prediction:
    with mock.patch.object(fwmod, "_calibration", lambda: table):
        return pr.predict_case(case, load_catalog(), calibrated=frozenset())


def fit(case: InferenceCase, fw: Framework, param: Param, table: Table) -> tuple[float, str]:
    """Bisection for the value that makes the prediction of ``case`` equal its measurement."""

    def optimism(value: float) -> float:
        trial = copy.deepcopy(table)
        _set(trial.setdefault(fw.value, {}), param.key, value)
        err = predict_with(case, trial).signed_pct_error
        assert err is not None
        # signed error (+ = predicted faster), oriented to rise with the value
        return err if param.faster_when_larger else -err

    lo, hi = param.lo, param.hi
    # optimism() rises with the value; at a bound that already overshoots, no value fits
    worse, better = ("faster", "slower") if param.faster_when_larger else ("slower", "faster")
    if optimism(lo) >= 0:
        return lo, f"prediction already {worse} than measured at {lo:g}: bound kept"
    if optimism(hi) <= 0:
        return hi, f"prediction still {better} than measured at {hi:g}: bound kept"
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if optimism(mid) < 0 else (lo, mid)
        if hi - lo <= 1e-12 * max(hi, 1e-9):
            break
    return (lo + hi) / 2, "fitted"


def calibration_rows(cases: tuple[Case, ...], table: Table
                     ) -> dict[tuple[Framework, str], InferenceCase]:
    rows: dict[tuple[Framework, str], InferenceCase] = {}
    for case in cases:
        if not isinstance(case, InferenceCase) or case.parallel.devices != 1:
            continue  # the rule is about single-device rows (multi-device ones are now predicted)
        fw = inference_framework(case.framework)
        if fw not in GRAPH_STACKS:
            continue
        for param in PARAMS:
            if (fw, param.key) in rows or not param.selects(case):
                continue
            if predict_with(case, table).status is not pr.Status.SKIPPED:
                rows[(fw, param.key)] = case
    return rows


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_CSV
    cases = read_cases(path).cases
    managed = {p.key.split(".")[0] for p in PARAMS} | {"source", "calibrated_on", "fitted_on",
                                                       "not_calibrated"}
    old = yaml.safe_load(OUT.read_text()) or {} if OUT.exists() else {}
    # Keep keys this script does not manage; start every managed parameter from its default.
    table: Table = {fw.value: {k: v for k, v in (old.get(fw.value) or {}).items()
                               if k not in managed} for fw in GRAPH_STACKS}
    for fw in GRAPH_STACKS:
        for param in PARAMS:
            _set(table[fw.value], param.key, param.default)
    rows = calibration_rows(cases, table)
    verdicts: dict[tuple[Framework, str], str] = {}
    for _ in range(6):  # until the coupled fits stop moving
        before = copy.deepcopy(table)
        for (fw, key), case in rows.items():
            param = next(p for p in PARAMS if p.key == key)
            value, verdict = fit(case, fw, param, table)
            _set(table[fw.value], key, float(f"{value:.5g}"))
            verdicts[(fw, key)] = verdict
        if table == before:
            break
    for fw in GRAPH_STACKS:
        entry = table[fw.value]
        fitted: dict[str, str] = {}
        unfitted: dict[str, str] = {}
        for p in PARAMS:
            case = rows.get((fw, p.key))
            if case is None:
                unfitted[p.key] = f"no {p.kind} of {fw.value} in {path.name}: default kept"
                _drop(entry, p.key)
                continue
            verdict = verdicts[(fw, p.key)]
            check = predict_with(case, table)
            print(f"{fw.value:14s} {p.key:34s} = {_get(entry, p.key):<11.5g} on {case.row_id} "
                  f"({verdict}; measured {check.measured:g}, predicted {check.predicted:.5g})")
            if verdict == "fitted":
                fitted[p.key] = case.row_id
            else:  # the bound was kept: nothing was fitted to the row, so it stays scored
                unfitted[p.key] = f"{case.row_id}: {verdict}"
                _drop(entry, p.key)
        for key, why in unfitted.items():
            print(f"{fw.value:14s} {key:34s} not calibrated ({why})")
        kernel_row = fitted.get("kernel_overhead_s")
        entry["source"] = (f"calibrated on {kernel_row} ({RULE})" if kernel_row else
                           f"not calibrated: {path.name} has no single-device {fw.value} row "
                           "the engine can predict; 0 s per kernel")
        entry["calibrated_on"] = sorted(set(fitted.values()))
        entry["fitted_on"] = fitted
        entry["not_calibrated"] = unfitted
    # entries this script does not manage (training physics: fit_training.py) stay
    merged = {**old, **table}  # old key order, this script's values
    OUT.write_text(HEADER + yaml.safe_dump(merged, sort_keys=False, width=100))
    fwmod._calibration.cache_clear()
    pr.calibration_rows.cache_clear()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
