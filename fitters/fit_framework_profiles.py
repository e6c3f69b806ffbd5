"""Fit the serving framework profiles on every shared inference row and write
framework_calibration.yaml.

Rule (documented, general, never per row). For each CUDA-graph stack with rows in
inference.csv (TensorRT-LLM; torch.compile as gpt-fast), the stack's figures are fitted
**jointly on every row of that stack that the engine predicts** (single- and multi-device, every
metric), by robust least squares (``scipy.optimize.least_squares``, soft-L1 loss with a 10 %
scale, so that a few rows the physics misses cannot drag the host figures) on the log of the
ratio predicted / measured time:

- ``kernel_overhead_s``: gap per kernel of graph replay (bounds 0-10 us);
- ``step_overhead_s``: host work per forward pass: scheduling, sampling, graph launch
  (bounds 0-20 ms);
- ``request_overhead_s``: host work once per request batch before its first token, paid in TTFT
  only (bounds 0-50 ms); fitted only for a stack with TTFT rows, else 0 and listed under
  ``not_calibrated``;
- ``quantized_weight_efficiency.int8`` / ``.int4``: fraction of the 16-bit weight-streaming
  bandwidth that weight-only dequantizing kernels reach; fitted only for a stack with rows of
  that weight type (bounds 0.09-1).

The time a row measures is affine in ``kernel_overhead_s``, ``step_overhead_s``,
``request_overhead_s`` and ``1/efficiency - 1`` (TTFT, and 1/rate for the rate metrics), so each
row is evaluated by the engine at zero and at one step along each parameter, and the fit and its
leave-one-out runs use that exact affine form; the script checks it against the engine at the
fitted point. Every row is used, none is a single-row fit, so no row is marked ``calibration``:
the leave-one-out error (each row predicted by a fit without it) is printed and written to the
yaml, next to the in-sample error.

vLLM has no shared rows (SGLang's entry is fitted apart by fitters/fit_sglang_profile.py and
left as it is here). Its per-kernel and per-step figures are **borrowed from
the torch.compile fit** (the CUDA-graph decode loop measured by the gpt-fast rows), their
request overhead is 0 and their quantized kernels keep 1.0; the yaml says so under
``not_calibrated``.

Reads: data/reference/measurements/inference.csv (or the path given).
Writes: src/accelmap/cost/data/framework_calibration.yaml.

Run: python fitters/fit_framework_profiles.py [path/to/inference.csv]
"""

from __future__ import annotations

import copy
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import yaml

try:
    from scipy.optimize import least_squares
except ImportError:  # the fitters' extra (pyproject.toml: fit)
    raise SystemExit(f"{Path(__file__).name} needs SciPy: pip install 'accelmap[fit]'") from None

from accelmap.api import DType, load_catalog
from accelmap.cost import framework as fwmod
from accelmap.cost.framework import Framework
from accelmap.validate import predict as pr
from accelmap.validate import speculative
from accelmap.validate.cases import InferenceCase
from accelmap.validate.outcome import MetricKind
from accelmap.validate.read import read_cases
from accelmap.validate.resolve import inference_framework, inference_precision

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT / "data" / "reference" / "measurements" / "inference.csv"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "framework_calibration.yaml"
FITTED_STACKS = (Framework.TENSORRT_LLM, Framework.TORCH_COMPILE)
# SGLang's entry is fitted by fitters/fit_sglang_profile.py (InferenceX sweeps) and kept here
BORROWERS = (Framework.VLLM,)
LENDER = Framework.TORCH_COMPILE
LOSS_SCALE = 0.1  # soft-L1 scale on log(time ratio): ~10 %
RULE = ("rule: robust least squares on log time over every row of the stack in inference.csv "
        "(fitters/fit_framework_profiles.py)")
HEADER = ("# Serving framework profiles: fitters/fit_framework_profiles.py (" + RULE + ").\n"
          "# fitted_on lists the rows each figure was fitted on (all rows of the stack, so none\n"
          "# is marked 'calibration'); leave_one_out is the error of each row predicted by a fit\n"
          "# without it; not_calibrated says which figures no row fixed, and what they are.\n")
Table = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Param:
    key: str  # dotted path inside the stack's entry
    lo: float
    hi: float
    step: float  # unit of the affine sensitivity
    to_yaml: Any = None  # internal value -> yaml value (None: identity)


def _eff(q: float) -> float:
    return 1.0 / (1.0 + q)


PARAMS = {
    "kernel_overhead_s": Param("kernel_overhead_s", 0.0, 10e-6, 1e-6),
    "step_overhead_s": Param("step_overhead_s", 0.0, 20e-3, 1e-4),
    "request_overhead_s": Param("request_overhead_s", 0.0, 50e-3, 1e-3),
    # internal value q = 1/efficiency - 1 (the time is affine in q); efficiency 0.09-1
    "quantized_weight_efficiency.int8": Param("quantized_weight_efficiency.int8", 0.0, 10.0,
                                              1.0, _eff),
    "quantized_weight_efficiency.int4": Param("quantized_weight_efficiency.int4", 0.0, 10.0,
                                              1.0, _eff),
}


def _set(entry: dict[str, Any], key: str, value: float) -> None:
    *parents, leaf = key.split(".")
    for p in parents:
        entry = entry.setdefault(p, {})
    entry[leaf] = value


def predict_with(case: InferenceCase, table: Table) -> pr.Prediction:
    with mock.patch.object(fwmod, "_calibration", lambda: table):
        return pr.predict_case(case, load_catalog(), calibrated=frozenset())


def _yaml_value(key: str, x: float) -> float:
    conv = PARAMS[key].to_yaml
    return float(conv(x)) if conv else float(x)


def table_for(fw: Framework, keys: list[str], x: np.ndarray, base: Table | None = None) -> Table:
    table = copy.deepcopy(base or {})
    entry = table.setdefault(fw.value, {})
    for k, v in zip(keys, x, strict=True):
        _set(entry, k, _yaml_value(k, float(v)))
    return table


def _time(p: pr.Prediction) -> float:
    """The measured-or-predicted quantity as a time: TTFT as is, rates inverted."""
    assert p.predicted is not None
    return p.predicted if p.kind is MetricKind.TTFT else 1.0 / p.predicted


def _measured_time(p: pr.Prediction) -> float:
    assert p.measured is not None
    return p.measured if p.kind is MetricKind.TTFT else 1.0 / p.measured


@dataclass
class Row:
    case: InferenceCase
    tau0: float  # time with every fitted figure at 0
    grad: np.ndarray  # d time / d parameter
    measured: float

    def time(self, x: np.ndarray) -> float:
        return float(self.tau0 + self.grad @ x)


def _weight(case: InferenceCase) -> DType | None:
    p = inference_precision(case.precision_weights, case.precision_kv, 1)
    return None if isinstance(p, str) else p.weight


def stack_rows(cases: list[InferenceCase], fw: Framework) -> list[InferenceCase]:
    out = []
    for c in cases:
        if inference_framework(c.framework) is not fw:
            continue
        if speculative.is_speculative(c):  # depends on an assumed acceptance rate: scored only
            continue
        if predict_with(c, {}).status is not pr.Status.SKIPPED:
            out.append(c)
    return out


def fitted_keys(rows: list[InferenceCase]) -> tuple[list[str], dict[str, str]]:
    """The figures the rows can fix, and why the others are not fitted."""
    keys = ["kernel_overhead_s", "step_overhead_s"]
    unfitted: dict[str, str] = {}
    kinds = {pr.predict_case(c, load_catalog(), frozenset()).kind for c in rows}
    if MetricKind.TTFT in kinds:
        keys.append("request_overhead_s")
    else:
        unfitted["request_overhead_s"] = "no TTFT row of the stack: 0 s"
    for dt in (DType.INT8, DType.INT4):
        key = f"quantized_weight_efficiency.{dt.value}"
        if any(_weight(c) is dt for c in rows):
            keys.append(key)
        else:
            unfitted[key] = f"no {dt.value} weight-only row of the stack: 1.0 (16-bit rate)"
    return keys, unfitted


def linearize(rows: list[InferenceCase], fw: Framework, keys: list[str]) -> list[Row]:
    zero = np.zeros(len(keys))
    out = []
    for c in rows:
        p0 = predict_with(c, table_for(fw, keys, zero))
        tau0 = _time(p0)
        grad = np.zeros(len(keys))
        for i, k in enumerate(keys):
            x = zero.copy()
            x[i] = PARAMS[k].step
            grad[i] = (_time(predict_with(c, table_for(fw, keys, x))) - tau0) / PARAMS[k].step
        out.append(Row(c, tau0, grad, _measured_time(p0)))
    return out


def fit(rows: list[Row], keys: list[str]) -> np.ndarray:
    lo = np.array([PARAMS[k].lo for k in keys])
    hi = np.array([PARAMS[k].hi for k in keys])
    scale = np.array([PARAMS[k].step for k in keys])

    def resid(u: np.ndarray) -> np.ndarray:
        x = u * scale
        return np.array([np.log(max(r.time(x), 1e-12) / r.measured) for r in rows])

    u0 = np.clip(np.ones(len(keys)), lo / scale, hi / scale)
    sol = least_squares(resid, u0, bounds=(lo / scale, hi / scale), loss="soft_l1",
                        f_scale=LOSS_SCALE)
    return np.asarray(sol.x * scale)


def pct(r: Row, x: np.ndarray) -> float:
    """Signed % error as accelmap signs it: + = predicted faster than measured."""
    return (r.measured / r.time(x) - 1.0) * 100.0


def summary(errors: list[float]) -> dict[str, float]:
    a = sorted(abs(e) for e in errors)
    p90 = a[min(len(a) - 1, int(np.ceil(0.9 * len(a))) - 1)]
    return {"median_pct": round(statistics.median(a), 2), "p90_pct": round(p90, 2),
            "max_pct": round(a[-1], 2), "rows": len(a)}


def fit_stack(cases: list[InferenceCase], fw: Framework) -> dict[str, Any]:
    rows_c = stack_rows(cases, fw)
    keys, unfitted = fitted_keys(rows_c)
    rows = linearize(rows_c, fw, keys)
    x = fit(rows, keys)
    in_sample = [pct(r, x) for r in rows]
    loo = []
    for i, r in enumerate(rows):
        xi = fit(rows[:i] + rows[i + 1:], keys)
        loo.append(pct(r, xi))
    # the affine form against the engine at the fitted point
    table = table_for(fw, keys, x)
    worst = max(abs(_time(predict_with(r.case, table)) / r.time(x) - 1) for r in rows)
    ids = [r.case.row_id for r in rows]
    print(f"\n{fw.value}: {len(rows)} rows; affine form within {worst * 100:.3f} % of the engine")
    for k, v in zip(keys, x, strict=True):
        val = _yaml_value(k, v)
        at_bound = " (at its bound)" if np.isclose(v, PARAMS[k].lo) or np.isclose(
            v, PARAMS[k].hi) else ""
        print(f"  {k:34s} = {val:.4g}{at_bound}")
    for k, why in unfitted.items():
        print(f"  {k:34s} not calibrated: {why}")
    for r, e, le in zip(rows, in_sample, loo, strict=True):
        print(f"  {r.case.row_id} in-sample {e:+7.1f} %  leave-one-out {le:+7.1f} %")
    s_in, s_loo = summary(in_sample), summary(loo)
    print(f"  in-sample     median {s_in['median_pct']:.1f} %  p90 {s_in['p90_pct']:.1f} %")
    print(f"  leave-one-out median {s_loo['median_pct']:.1f} %  p90 {s_loo['p90_pct']:.1f} %")
    entry: dict[str, Any] = {}
    for k, v in zip(keys, x, strict=True):
        _set(entry, k, float(f"{_yaml_value(k, v):.5g}"))
    entry["source"] = f"fitted on {len(rows)} {fw.value} rows of inference.csv ({RULE})"
    entry["calibrated_on"] = []
    entry["fitted_on"] = {k: list(ids) for k in keys}
    entry["leave_one_out"] = s_loo
    entry["in_sample"] = s_in
    entry["not_calibrated"] = unfitted
    return entry


def borrowed(lender: dict[str, Any], fw: Framework) -> dict[str, Any]:
    why = (f"uncalibrated: inference.csv has no {fw.value} row; borrowed from the "
           f"{LENDER.value} fit (CUDA-graph decode loop, gpt-fast rows)")
    return {
        "kernel_overhead_s": lender["kernel_overhead_s"],
        "step_overhead_s": lender["step_overhead_s"],
        "source": why,
        "calibrated_on": [],
        "fitted_on": {},
        "not_calibrated": {
            "kernel_overhead_s": why,
            "step_overhead_s": why,
            "request_overhead_s": f"uncalibrated: no {fw.value} TTFT row: 0 s",
            "quantized_weight_efficiency.int8": f"uncalibrated: no {fw.value} row: 1.0",
            "quantized_weight_efficiency.int4": f"uncalibrated: no {fw.value} row: 1.0",
        },
    }


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_CSV
    cases = [c for c in read_cases(path).cases if isinstance(c, InferenceCase)]
    old = yaml.safe_load(OUT.read_text()) or {} if OUT.exists() else {}
    table: Table = {}
    for fw in FITTED_STACKS:
        table[fw.value] = fit_stack(cases, fw)
    for fw in BORROWERS:
        table[fw.value] = borrowed(table[LENDER.value], fw)
        print(f"\n{fw.value}: {table[fw.value]['source']}")
    # every stack where the file had it (the other fitters' blocks stay in place, so a refit's
    # diff shows values, not moved blocks); new stacks at the end
    merged = {**{k: table.get(k, v) for k, v in old.items()},
              **{k: v for k, v in table.items() if k not in old}}
    OUT.write_text(HEADER + yaml.safe_dump(merged, sort_keys=False, width=100))
    fwmod._calibration.cache_clear()
    pr.calibration_rows.cache_clear()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
