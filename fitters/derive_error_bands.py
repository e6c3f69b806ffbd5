"""Error bands from validation residuals: predict every shared published run that no parameter
was fitted on, group the runs (phase, stack, scale), and write the 80th percentile of the
absolute error per group to src/accelmap/engine/data/error_bands.yaml (engine/error_band.py).

Phases: ``train`` (training rows), ``serve-latency`` (TTFT and decode-time rows),
``serve-throughput`` (fixed-batch serving throughput rows), ``serve-offline`` /
``serve-server`` (request-level scenario rows of the check set
data/serving_published.csv: no parameter is fitted on them, so their residuals are
out-of-sample); and the non-GPU classes' vendor figures (data/vendor_figures.csv,
the rows benchmarks/vendor_error.py predicts, minus those a class parameter was fitted on).
Also the offline runs of data/concurrency_published.yaml that no parameter was fitted on (every
run there but the ones fitters/fit_trtllm1_profile.py fitted the tensorrt-llm-1 profile on);
and SGLang's held-out InferenceX concurrency sweeps (fitters/fit_sglang_profile.py: the three
configurations in four its profile was not fitted on), stack ``sglang`` on CUDA GPUs and
``sglang rocm`` on AMD ones, and ATOM's the same way (fitters/fit_atom_profile.py, SGLang's
split; stack ``atom``), in their own groups only (phase, stack, scale) and (phase, stack):
throughput rows as ``serve-offline`` and ``serve-throughput`` (a closed loop at concurrency N
is a batch of N in steady state; SGLang has no published fixed-batch row), per-user rate and
TTFT rows as ``serve-latency``.
Stack: the framework profile the row was predicted with, by the name the engine looks its band
up by (``tensorrt-llm`` for a v0.x run, ``tensorrt-llm-1`` for TensorRT-LLM >= 1.0:
cost/framework.py ``release_stack``; ``sglang rocm`` on AMD: ``FrameworkProfile.band_stack``),
not the row's "framework version" text. Scale: engine.error_band.scale of the row's device count.

Reads: data/reference/measurements/training.csv and inference.csv,
  data/serving_published.csv, data/concurrency_published.yaml, data/vendor_figures.csv (through
  benchmarks/vendor_error.py), the tensorrt-llm-1 fitted rows in framework_calibration.yaml.
Writes: src/accelmap/engine/data/error_bands.yaml (with --write; else prints the table).

Run: python fitters/derive_error_bands.py [--write]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from accelmap.api import load_catalog
from accelmap.engine.error_band import QUANTILE, key, scale
from accelmap.validate import predict as pr
from accelmap.validate.cases import InferenceCase, TrainingCase
from accelmap.validate.outcome import MetricKind
from accelmap.validate.read import read_cases
from accelmap.validate.runs import ServingRun

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "reference" / "measurements"
OUT = ROOT / "src" / "accelmap" / "engine" / "data" / "error_bands.yaml"
PHASE = {MetricKind.TRAINING: "train", MetricKind.TTFT: "serve-latency",
         MetricKind.DECODE: "serve-latency", MetricKind.THROUGHPUT: "serve-throughput",
         MetricKind.OFFLINE: "serve-offline", MetricKind.SERVER: "serve-server",
         MetricKind.LATENCY: "serve-latency"}
CHECK_SET = ROOT / "data" / "serving_published.csv"
RUNS = ROOT / "data" / "concurrency_published.yaml"


def profile_stack(framework: str) -> str:
    """The profile name a prediction's "framework version" text ran with ("tensorrt-llm 1.0"
    -> "tensorrt-llm-1", "tensorrt-llm 0.17" -> "tensorrt-llm"); other text unchanged."""
    from accelmap.cost.framework import Framework, release_stack

    name, _, version = framework.partition(" ")
    try:
        return release_stack(Framework(name), version).value
    except ValueError:
        return framework


def fitted_runs() -> set[str]:
    """Ids of the runs a bundled parameter was fitted on (the tensorrt-llm-1 profile's)."""
    from accelmap.cost.framework import Framework, _calibration

    fitted = (_calibration().get(Framework.TENSORRT_LLM_1.value) or {}).get("fitted_on") or {}
    return {i for ids in fitted.values() for i in ids}


def vendor_residuals() -> list[tuple[str, str, int, float]]:
    """(stack, phase, devices, abs % error) of the vendor figures of the non-GPU classes that
    benchmarks/vendor_error.py predicts and no parameter was fitted on: the bands of the XLA,
    dataflow and vendor graph-compiler stacks (engine.error_band never borrows GPU rows for
    them)."""
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location("vendor_error", ROOT / "benchmarks" /
                                                  "vendor_error.py")
    assert spec and spec.loader
    ve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ve)
    cat, fitted, out = load_catalog(), ve.fitted_rows(), []
    import csv

    for row in csv.DictReader(ve.DATA.open()):
        if row["row_id"] in fitted:
            continue
        value, how = ve.predict(row, cat)
        m = re.search(r"\((\S+) profile\)", how)
        if value is None or not m:
            continue
        pub = float(row["value"])
        lower = row["metric"] in ("latency_per_token_s", "ttft_s")
        err = abs((pub / value - 1) if lower else (value / pub - 1)) * 100
        phase = "serve-throughput" if row["metric"] == "tokens_per_s_total" else "serve-latency"
        devices = int(re.match(r"(\d+)", how).group(1)) if re.match(r"(\d+)", how) else 1
        out.append((m.group(1), phase, devices, err))
    return out


def sglang_residuals() -> list[tuple[str, str, int, float]]:
    """(stack, phase, devices, abs % error) of SGLang's held-out InferenceX records (module
    doc), predicted with the calibration as written."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fit_sglang_profile", ROOT / "fitters" /
                                                  "fit_sglang_profile.py")
    assert spec and spec.loader
    fs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fs)
    out = []
    # ATOM (fitters/fit_atom_profile.py) takes the same split; it runs on AMD GPUs only, so its
    # figures, and its band, are the entry's own (no platform block)
    for name in ("sglang", "atom"):
        for metric, plat, devices, err in fs.held_out_residuals(stack=name):
            stack = name if plat == "cuda" or name == "atom" else f"{name} {plat}"
            phases = (("serve-latency",) if metric in ("ttft_p50_ms", "tokens_per_s_per_user")
                      else ("serve-offline", "serve-throughput"))
            out += [(stack, phase, devices, err) for phase in phases]
    return out


def residuals() -> dict[str, list[float]]:
    catalog = load_catalog()
    calibrated = pr.calibration_rows()
    groups: dict[str, list[float]] = defaultdict(list)
    for stack, phase, devices, err in vendor_residuals() + sglang_residuals():
        sc = f"{scale(devices)} devices"
        for k in (key(phase, stack, sc), key(phase, stack)):
            groups[k].append(err)
    skip = fitted_runs()
    for path in (DATA / "training.csv", DATA / "inference.csv", CHECK_SET, RUNS):
        for case in read_cases(path).cases:
            if isinstance(case, ServingRun):
                if case.id in skip or case.device_count is None:
                    continue
                devices = int(case.device_count)
            elif isinstance(case, TrainingCase | InferenceCase):
                devices = int(case.parallel.devices or 1)
            else:
                continue
            p = pr.predict_case(case, catalog, calibrated)
            if p.status is not pr.Status.OK or p.abs_pct_error is None or p.kind not in PHASE:
                continue
            phase = PHASE[p.kind]
            stack = profile_stack(p.framework or "unknown")
            sc = f"{scale(devices)} devices"
            for k in (key(phase, stack, sc), key(phase, stack), key(phase, sc), key(phase),
                      "all"):
                groups[k].append(float(p.abs_pct_error))
    return groups


def main() -> None:
    groups = residuals()
    table = {k: {"pct": round(float(np.quantile(v, QUANTILE)), 1), "runs": len(v)}
             for k, v in sorted(groups.items())}
    for k, g in table.items():
        print(f"{k:55s} p80 {g['pct']:6.1f} %  ({g['runs']} runs)")
    if "--write" in sys.argv:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text("# Written by fitters/derive_error_bands.py from held-out validation "
                       "residuals\n# (rows no parameter was fitted on). p80 of |error| per "
                       "group of similar runs.\n"
                       + yaml.safe_dump({"quantile": QUANTILE, "groups": table},
                                        sort_keys=False, width=100))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
