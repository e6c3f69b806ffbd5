"""Fit the TensorRT-LLM 1.x framework profile (``tensorrt-llm-1``) on public 2025 runs and check
it on public runs it was not fitted on; write its entry of framework_calibration.yaml.

Rows. Every run of ``data/concurrency_published.yaml`` whose framework is TensorRT-LLM 1.0 or
later (``cost/framework.py`` ``release_stack``): the perf-overview tables at commit 585c756
(``trtllm-bench throughput``, B200/GB200 FP4, H200/H100 FP8) and tech blog 9.

Split, fixed before any error was looked at: those rows sorted by id; every fourth (positions
0, 4, 8, ... of the sorted list) is HELD OUT, the others are fitted. The split is made over all
such rows, predictable or not today (the DP-attention rows skip until that layout is
simulated), so a row that becomes predictable later lands on a side fixed now.

Parameters (the profile's physical figures, as ``fit_framework_profiles.py`` fits them for the
v0.x stack):

- ``kernel_overhead_s``: the gap per kernel of CUDA-graph replay (bounds 0-10 us);
- ``step_overhead_s``: host work per forward pass (the Python executor's scheduling, sampling,
  graph launch; bounds 0-20 ms);
- ``quantized_weight_efficiency.<fmt>`` for the 4-bit float formats a fitted row runs (nvfp4,
  mxfp4): the fraction of the 16-bit weight-streaming bandwidth the stack's FP4 GEMM / MoE
  kernels reach where they are bandwidth-bound (bounds 0.09-1);
- ``request_overhead_s`` is paid in TTFT only and no row measures a TTFT: not calibrated (0 s),
  said so under ``not_calibrated``.

Method: the row's time (1/throughput) is evaluated by the engine at zero and at one step along
each parameter, the fit runs on that affine form (robust least squares, soft-L1 with a 10 %
scale, on the log of predicted / measured time), and the engine is re-run at the fitted point
to report how far the affine form is from it. The simulations are not exactly affine in the
figures (the batch a step holds moves with them), so the fitted point's error is the engine's,
re-measured, not the affine one.

Check, on rows no figure was fitted on: the held-out rows, and the TensorRT-LLM 1.0 rows of
``data/serving_published.csv`` (the 1.0-era perf-overview, S0053-S0112), each predicted by the
engine with the fitted profile; median and p90 absolute error are printed and written to the
yaml (``held_out``, ``check_set``).

Reads: data/concurrency_published.yaml, data/serving_published.csv.
Writes: src/accelmap/cost/data/framework_calibration.yaml (its ``tensorrt-llm-1`` entry; the
other entries are kept as they are).

``--sweeps`` adds to the fitted rows the per-user-rate records (tokens/s per user = 1 / median
TPOT) of InferenceX's TensorRT-LLM >= 1.0 closed-loop sweeps of ``data/inferencex_published.yaml``
that SGLang's fixed split puts in its fit set (``validate/fit_split.py``: one configuration in
four, chosen from the configuration alone), and reports the other records of those sweeps as
held out. Those sweeps run 1 to 256 clients, so their time per output token shows the host
figures the large offline batches hide; the TPOT carries no front-end latency (it is in both
the TTFT and the end-to-end time a request's TPOT subtracts), so the served latency
(``fit_server_latency.py``) stays apart and is refitted after.

``--borrow-overheads`` fits only the 4-bit efficiencies and keeps the v0.x stack's host figures
(``tensorrt-llm`` entry: per kernel, per step, per request), for comparison: the 2025 rows are
mostly large offline batches, where host figures barely move the time, so the two variants
differ mainly on the check set's small-batch rows.

Run: python fitters/fit_trtllm1_profile.py [--dry-run] [--borrow-overheads | --sweeps]
(PYTHONPATH=src)
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

from accelmap.api import load_catalog
from accelmap.cost import framework as fwmod
from accelmap.cost.framework import Framework, release_stack
from accelmap.units import DType
from accelmap.validate import predict as pr
from accelmap.validate import serving as vserving
from accelmap.validate.cases import InferenceCase
from accelmap.validate.read import read_cases
from accelmap.validate.runs import ServingRun

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "concurrency_published.yaml"
SWEEPS = ROOT / "data" / "inferencex_published.yaml"
SWEEP_METRIC = "tokens_per_s_per_user"  # 1 / median TPOT: the host figures' record
CHECK_SET = ROOT / "data" / "serving_published.csv"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "framework_calibration.yaml"
STACK = Framework.TENSORRT_LLM_1
HOLD_OUT_EVERY = 4  # positions 0, 4, 8, ... of the id-sorted rows are held out
LOSS_SCALE = 0.1  # soft-L1 scale on log(time ratio): ~10 %
FP4 = (DType.NVFP4, DType.MXFP4)
RULE = ("robust least squares on log time over three in four TensorRT-LLM >= 1.0 rows of "
        "concurrency_published.yaml by id (fitters/fit_trtllm1_profile.py)")


@dataclass(frozen=True)
class Param:
    key: str
    lo: float
    hi: float
    step: float
    efficiency: bool = False  # internal q = 1/efficiency - 1 (time is affine in q)

    def to_yaml(self, x: float) -> float:
        return 1.0 / (1.0 + x) if self.efficiency else x


BASE = (Param("kernel_overhead_s", 0.0, 10e-6, 1e-6), Param("step_overhead_s", 0.0, 20e-3, 1e-4))
HOST = ("kernel_overhead_s", "step_overhead_s", "request_overhead_s")


def split(runs: list[ServingRun]) -> tuple[list[ServingRun], list[ServingRun]]:
    """(fitted, held out): the id-sorted runs, every HOLD_OUT_EVERY-th one held out."""
    ordered = sorted(runs, key=lambda r: r.id)
    held = [r for i, r in enumerate(ordered) if i % HOLD_OUT_EVERY == 0]
    return [r for i, r in enumerate(ordered) if i % HOLD_OUT_EVERY], held


def stack_runs(path: Path = RUNS) -> list[ServingRun]:
    return [c for c in read_cases(path).cases if isinstance(c, ServingRun) and c.framework
            and release_stack(c.framework, c.version) is STACK]


def sweep_cases() -> tuple[list[Any], list[Any]]:
    """(fitted, held out): the per-user-rate records of InferenceX's TensorRT-LLM >= 1.0 sweeps
    (not Dynamo's), on SGLang's fixed split (``--sweeps``, module doc)."""
    from accelmap.validate.fit_split import fitted_on

    recs = {r["id"]: r for r in yaml.safe_load(SWEEPS.read_text()) or []}
    cases = [c for c in read_cases(SWEEPS).cases if isinstance(c, ServingRun) and c.framework
             and release_stack(c.framework, c.version) is STACK and c.stack != "dynamo"
             and c.metric is not None and c.metric.value == SWEEP_METRIC]
    return ([c for c in cases if fitted_on(recs.get(c.id, {}))],
            [c for c in cases if not fitted_on(recs.get(c.id, {}))])


def params_for(runs: list[ServingRun], borrow: bool = False) -> list[Param]:
    fmts = {d for r in runs for d in (r.precision, r.moe_precision) if d in FP4}
    fp4 = [Param(f"quantized_weight_efficiency.{d.value}", 0.0, 10.0, 1.0, True)
           for d in sorted(fmts, key=lambda d: d.value)]
    return [*(() if borrow else BASE), *fp4]


def table_for(params: list[Param], x: np.ndarray, base: dict[str, Any]) -> dict[str, Any]:
    table = copy.deepcopy(base)
    entry = table.setdefault(STACK.value, {})
    for p, v in zip(params, x, strict=True):
        *parents, leaf = p.key.split(".")
        node = entry
        for k in parents:
            node = node.setdefault(k, {})
        node[leaf] = p.to_yaml(float(v))
    return table


def predict(case: Any, table: dict[str, Any]) -> pr.Prediction:
    vserving._cache.clear()  # the simulations are cached by run, not by profile
    with mock.patch.object(fwmod, "_calibration", lambda: table):
        return pr.predict_case(case, load_catalog(), calibrated=frozenset())


def seconds(value: float | None) -> float:
    """A throughput row as a time (the quantity the figures add to)."""
    assert value is not None and value > 0
    return 1.0 / value


@dataclass
class Row:
    case: Any
    tau0: float
    grad: np.ndarray
    measured: float

    def time(self, x: np.ndarray) -> float:
        return float(self.tau0 + self.grad @ x)


def linearize(runs: list[ServingRun], params: list[Param], base: dict[str, Any]) -> list[Row]:
    rows = []
    zero = np.zeros(len(params))
    for r in runs:
        p0 = predict(r, table_for(params, zero, base))
        if p0.status is not pr.Status.OK or p0.measured is None:
            continue
        tau0, grad = seconds(p0.predicted), np.zeros(len(params))
        for i, p in enumerate(params):
            x = zero.copy()
            x[i] = p.step
            grad[i] = (seconds(predict(r, table_for(params, x, base)).predicted) - tau0) / p.step
        rows.append(Row(r, tau0, grad, seconds(p0.measured)))
        print(f"  linearized {r.id}", flush=True)
    return rows


def fit(rows: list[Row], params: list[Param]) -> np.ndarray:
    lo, hi = np.array([p.lo for p in params]), np.array([p.hi for p in params])
    scale = np.array([p.step for p in params])

    def resid(u: np.ndarray) -> np.ndarray:
        return np.array([np.log(max(r.time(u * scale), 1e-12) / r.measured) for r in rows])

    u0 = np.clip(np.full(len(params), 0.5), lo / scale, hi / scale)
    sol = least_squares(resid, u0, bounds=(lo / scale, hi / scale), loss="soft_l1",
                        f_scale=LOSS_SCALE)
    return np.asarray(sol.x * scale)


def summary(errors: list[float]) -> dict[str, float]:
    a = sorted(abs(e) for e in errors)
    if not a:
        return {"rows": 0}
    p90 = a[min(len(a) - 1, int(np.ceil(0.9 * len(a))) - 1)]
    return {"median_pct": round(statistics.median(a), 2), "p90_pct": round(p90, 2),
            "max_pct": round(a[-1], 2), "rows": len(a)}


def engine_errors(cases: list[Any], table: dict[str, Any], label: str) -> list[float]:
    """Signed % error (+ = optimistic) of each predictable case under ``table``."""
    out = []
    for c in cases:
        p = predict(c, table)
        if p.status is pr.Status.OK and p.signed_pct_error is not None:
            out.append(float(p.signed_pct_error))
            print(f"  {label:9s} {p.row_id:48s} {p.signed_pct_error:+7.1f} %")
    return out


def check_set_cases() -> list[InferenceCase]:
    """The serving check set's TensorRT-LLM 1.0 rows (none fitted on)."""
    from accelmap.validate.transcribe import _SERVING_VERSION

    out = []
    for c in read_cases(CHECK_SET).cases:
        if not isinstance(c, InferenceCase):
            continue
        m = _SERVING_VERSION.search(c.framework.lower())
        if m and release_stack(Framework.TENSORRT_LLM, m.group(2)) is STACK:
            out.append(c)
    return out


def entry_for(params: list[Param], x: np.ndarray, fitted: list[Row], held: list[float],
              check: list[float], at_fit: list[float], borrowed: dict[str, Any] | None = None,
              sweeps: int = 0) -> dict[str, Any]:
    """The yaml entry; ``sweeps``: how many of ``fitted`` are InferenceX sweep records."""
    entry: dict[str, Any] = dict(borrowed or {})
    for p, v in zip(params, x, strict=True):
        *parents, leaf = p.key.split(".")
        node = entry
        for k in parents:
            node = node.setdefault(k, {})
        node[leaf] = float(f"{p.to_yaml(float(v)):.5g}")
    ids = [r.case.id for r in fitted]
    host = "; host figures borrowed from the v0.x fit" if borrowed else ""
    also = (f", with {sweeps} InferenceX {SWEEP_METRIC} records of SGLang's fixed split "
            "(--sweeps)") if sweeps else ""
    entry["source"] = (f"fitted on {len(ids) - sweeps} TensorRT-LLM >= 1.0 rows ({RULE})"
                       f"{also}{host}")
    entry["calibrated_on"] = []
    entry["fitted_on"] = {p.key: list(ids) for p in params}
    entry["in_sample"] = summary(at_fit)
    entry["held_out"] = summary(held)
    entry["check_set"] = summary(check)
    lent = {k: f"borrowed from the tensorrt-llm (v0.x) fit: {v:g}"
            for k, v in (borrowed or {}).items()}
    entry["not_calibrated"] = {
        "request_overhead_s": "no TensorRT-LLM >= 1.0 TTFT row: 0 s", **lent,
        **{f"quantized_weight_efficiency.{d.value}": f"no fitted row runs {d.value}: 1.0"
           for d in FP4 if all(p.key != f"quantized_weight_efficiency.{d.value}"
                               for p in params)}}
    return entry


def main() -> None:
    base = yaml.safe_load(OUT.read_text()) or {}
    borrow = "--borrow-overheads" in sys.argv
    lent = {k: base[Framework.TENSORRT_LLM.value][k] for k in HOST} if borrow else {}
    base[STACK.value] = dict(lent)
    fitted_runs, held_runs = split(stack_runs())
    params = params_for(fitted_runs, borrow)
    print(f"{STACK.value}: {len(fitted_runs)} fitted and {len(held_runs)} held-out runs "
          f"(every {HOLD_OUT_EVERY}th by id held out); parameters {[p.key for p in params]}")
    sweeps, held_sweeps = sweep_cases() if "--sweeps" in sys.argv else ([], [])
    if sweeps:
        print(f"  with {len(sweeps)} fitted and {len(held_sweeps)} held-out InferenceX "
              f"{SWEEP_METRIC} records (SGLang's fixed split)")
    rows = linearize([*fitted_runs, *sweeps], params, base)
    x = fit(rows, params)
    table = table_for(params, x, base)
    for p, v in zip(params, x, strict=True):
        edge = " (at its bound)" if np.isclose(v, p.lo) or np.isclose(v, p.hi) else ""
        print(f"  {p.key:36s} = {p.to_yaml(float(v)):.4g}{edge}")
    at_fit = engine_errors([r.case for r in rows], table, "fitted")
    held = engine_errors(held_runs, table, "held-out")
    check = engine_errors(check_set_cases(), table, "check-set")
    held_ix = engine_errors(held_sweeps, table, "held-ix")
    swept = {c.id for c in sweeps}
    entry = entry_for(params, x, rows, held, check, at_fit, lent,
                      sum(1 for r in rows if r.case.id in swept))
    if held_sweeps:  # the sweep records of the split's held-out side (--sweeps)
        entry["held_out_sweeps"] = summary(held_ix)
    for k in ("in_sample", "held_out", "check_set", "held_out_sweeps"):
        if k not in entry:
            continue
        print(f"  {k:10s} {entry[k]}")
    if "--dry-run" in sys.argv:
        return
    from fit_framework_profiles import HEADER

    base[STACK.value] = entry
    OUT.write_text(HEADER + yaml.safe_dump(base, sort_keys=False, width=100))
    fwmod._calibration.cache_clear()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
