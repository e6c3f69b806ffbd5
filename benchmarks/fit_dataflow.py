"""Fit the per-layer floor of each SRAM dataflow machine (cost/execution.py ``layer_floor``) and
write src/accelmap/cost/data/dataflow_calibration.yaml.

Rule (documented, one parameter per machine, never per row): for each SRAM machine of the
catalog, take the **first** row of benchmarks/data/vendor_figures.csv (file order) that gives
its per-user decode rate (``tokens_per_s_per_user``) for a catalog model, not measured with
speculative decoding; predict it exactly as benchmarks/vendor_error.py does (``accelmap
compare``'s path: the stated or fewest devices, batch 1, the stated precision) with no floor,
and set floor = (1 / published - predicted TPOT) / layers (0 when the model is already slower).
Every other row of that machine is scored by vendor_error.py, never fitted.

Run: python benchmarks/fit_dataflow.py [--write]
"""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from unittest import mock

import yaml

from accelmap.catalog import load_catalog
from accelmap.cost import execution
from accelmap.hardware.schema import DeviceClass

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "dataflow_calibration.yaml"
HEADER = ("# Per-layer floor of each SRAM dataflow machine, seconds per layer per forward pass:\n"
          "# benchmarks/fit_dataflow.py (rule in its docstring: the machine's first published\n"
          "# per-user figure in benchmarks/data/vendor_figures.csv). fitted_on names the row;\n"
          "# benchmarks/vendor_error.py scores the other rows.\n")


def _vendor() -> object:
    spec = importlib.util.spec_from_file_location("vendor_error", ROOT / "benchmarks" /
                                                  "vendor_error.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    cat = load_catalog()
    ve = _vendor()
    table: dict[str, dict[str, object]] = {}
    rows = list(csv.DictReader(ve.DATA.open()))  # type: ignore[attr-defined]
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
                    "layer_floor_s": float(f"{floor:.5g}"),
                    "fitted_on": row["row_id"],
                    "source": (f"fitted on {row['row_id']} ({row['model']}, "
                               f"{float(row['value']):g} tokens/s per user; rule: first "
                               "published per-user figure of the machine, "
                               "benchmarks/fit_dataflow.py)")}
                print(f"{acc.id}: floor {floor * 1e6:.3g} us per layer from {row['row_id']} "
                      f"({row['model']}: published {row['value']} tok/s, roofline "
                      f"{value:.4g}; {how})")
                break
            else:
                print(f"{acc.id}: no published per-user figure: uncalibrated")
    if "--write" in sys.argv:
        OUT.write_text(HEADER + yaml.safe_dump(table, sort_keys=True, width=100))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
