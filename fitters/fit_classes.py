"""Fit the per-class parameters the published vendor figures can fix, and write
src/accelmap/cost/data/class_calibration.yaml:

- ``dataflow``: the per-layer floor of each SRAM dataflow machine (cost/execution.py
  ``layer_floor``);
- ``stacks``: the host time per step of each GPU-like ASIC vendor stack (optimum-habana, neuron,
  tt-metal; cost/framework.py), fitted on the stack's first published per-token latency at
  batch 1 (``latency_per_token_s``), or, failing that, its first per-user decode rate at the
  row's batch (``tokens_per_s_per_user``): step = published TPOT - predicted TPOT with no host
  time (0 when the model is already slower).

Rule (documented, one parameter per machine, never per row): for each SRAM machine of the
catalog, take the **first** row of data/vendor_figures.csv (file order) that gives
its per-user decode rate (``tokens_per_s_per_user``) for a catalog model, not measured with
speculative decoding; predict it exactly as benchmarks/vendor_error.py does (``accelmap
compare``'s path: the stated or fewest devices, batch 1, the stated precision) with no floor,
and set floor = (1 / published - predicted TPOT) / layers (0 when the model is already slower).
Every other row of that machine is scored by vendor_error.py, never fitted.

Reads: data/vendor_figures.csv (through benchmarks/vendor_error.py).
Writes: src/accelmap/cost/data/class_calibration.yaml (with --write; else prints the fit).

Run: python fitters/fit_classes.py [--write]
"""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from unittest import mock

import yaml

from accelmap.api import load_catalog
from accelmap.api.hardware import DeviceClass
from accelmap.cost import execution, framework

ROOT = Path(__file__).resolve().parents[1]
STACKS = ("optimum-habana", "neuron", "tt-metal")
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "class_calibration.yaml"
HEADER = ("# Per-class parameters fitted on published vendor figures: fitters/fit_classes.py\n"
          "# (rules in its docstring; rows of data/vendor_figures.csv). dataflow: per-\n"
          "# layer floor of each SRAM machine, s per layer per pass; stacks: host time per step\n"
          "# of each ASIC vendor stack, s. fitted_on names the row; benchmarks/vendor_error.py\n"
          "# scores every other row.\n")


def _vendor() -> object:
    spec = importlib.util.spec_from_file_location("vendor_error", ROOT / "benchmarks" /
                                                  "vendor_error.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fit_stacks(cat: object, ve: object, rows: list[dict[str, str]]) -> dict[str, object]:
    from accelmap.cost.execution import execution_model

    out: dict[str, object] = {}
    with mock.patch.object(framework, "_class_calibration", lambda: {}):
        for metric in ("latency_per_token_s", "tokens_per_s_per_user"):
            for row in rows:
                acc = cat.accelerators.get(row["accelerator"])  # type: ignore[attr-defined]
                if acc is None or row["metric"] != metric:
                    continue
                if metric == "latency_per_token_s" and _int(row["batch"]) not in (1, None):
                    continue  # a per-token latency is read at batch 1
                stack = execution_model(acc).serving.value
                if stack in out or stack not in STACKS:
                    continue
                value, how = ve.predict(row, cat)  # type: ignore[attr-defined]
                if value is None:
                    continue
                pub_tpot = float(row["value"]) if metric == "latency_per_token_s" else \
                    1.0 / float(row["value"])
                tpot = value if metric == "latency_per_token_s" else 1.0 / value
                step = max(pub_tpot - tpot, 0.0)
                out[stack] = {"step_overhead_s": float(f"{step:.5g}"), "fitted_on": row["row_id"],
                              "source": f"fitted on {row['row_id']} ({row['accelerator']}, "
                                        f"{row['model']}: {row['value']} {row['unit']}; rule: "
                                        "fitters/fit_classes.py)"}
                print(f"{stack}: host time per step {step * 1e3:.3g} ms from {row['row_id']} "
                      f"({how})")
    for s in STACKS:
        if s not in out:
            print(f"{s}: no published batch-1 latency: uncalibrated (0 s)")
    return out


def _int(text: str) -> int | None:
    import re

    m = re.match(r"\s*(\d+)", text or "")
    return int(m.group(1)) if m else None


def main() -> None:
    cat = load_catalog()
    ve = _vendor()
    table: dict[str, dict[str, object]] = {}
    rows = list(csv.DictReader(ve.DATA.open()))  # type: ignore[attr-defined]
    stacks = fit_stacks(cat, ve, rows)
    with mock.patch.object(execution, "_dataflow_table", lambda: {}):
        for acc in cat.accelerators.values():
            if acc.device_class is not DeviceClass.SRAM_MACHINE:
                continue
            for row in rows:
                if row["accelerator"] != acc.id or row["metric"] != "tokens_per_s_per_user":
                    continue
                value, how = ve.predict(row, cat)  # type: ignore[attr-defined]
                if value is None:
                    print(f"{acc.id}: {row['row_id']} not predicted ({how})")
                    continue
                layers = cat.models[row["model"]].n_layers
                floor = max((1.0 / float(row["value"]) - 1.0 / value) / layers, 0.0)
                table[acc.id] = {
                    "layer_floor_s": float(f"{floor:.5g}"), "vendor": acc.vendor,
                    "fitted_on": row["row_id"],
                    "source": (f"fitted on {row['row_id']} ({row['model']}, "
                               f"{float(row['value']):g} tokens/s per user; rule: first "
                               "published per-user figure of the machine, "
                               "fitters/fit_classes.py)")}
                print(f"{acc.id}: floor {floor * 1e6:.3g} us per layer from {row['row_id']} "
                      f"({row['model']}: published {row['value']} tok/s, roofline "
                      f"{value:.4g}; {how})")
                break
            else:
                print(f"{acc.id}: no published per-user figure: uncalibrated")
    if "--write" in sys.argv:
        OUT.write_text(HEADER + yaml.safe_dump({"dataflow": table, "stacks": stacks},
                                               sort_keys=True, width=100))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
