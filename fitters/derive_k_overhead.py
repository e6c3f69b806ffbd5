"""Derive ``cost/data/gemm_k_overhead.yaml`` (cost/efficiency.py ``k_efficiency``'s k0) from a
stored matmul sweep: least squares of eff = E x K / (K + k0) over the bf16 GEMMs (their
efficiency divided by our tile and wave model's) whose work stays under ``--max-tflop``
(larger ones run long enough to throttle to the power-limited clock), k0 on a 16-element grid.

Reads: a measurement store (``accelmap measure matmul`` writes one), by default the H200's in
../shared/gpu/h200-sxm-2026-11/measurements.sqlite.
Writes: src/accelmap/cost/data/gemm_k_overhead.yaml (with --write; else prints k0, E and the
rms residual).

Run: python fitters/derive_k_overhead.py [STORE.sqlite] [--max-tflop 2] [--write]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import numpy as np
import yaml

from accelmap.catalog import load_catalog
from accelmap.cost.efficiency import geometry, shape_efficiency

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "gpu" / "h200-sxm-2026-11" / "measurements.sqlite"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "gemm_k_overhead.yaml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store", nargs="?", default=str(DEFAULT))
    ap.add_argument("--max-tflop", type=float, default=2.0)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    cat = load_catalog()
    rows = sqlite3.connect(args.store).execute(
        "select accelerator_id, settings from measurements where kind='matmul' and "
        "dtype='bf16'").fetchall()
    pts = []
    for acc_id, settings in rows:
        s = json.loads(settings)
        m, n, k = s["m"], s["n"], s["k"]
        shape = float(shape_efficiency(m, n, k, geometry(cat.accelerators[acc_id])))
        if 2.0 * m * n * k < args.max_tflop * 1e12:  # what the tile and wave model leaves
            pts.append((float(k), float(s["efficiency"]) / shape))
    k, eff = np.array(pts).T
    best = min((float(((eff - (e := float((eff * r).sum() / (r * r).sum())) * r) ** 2).sum()),
                k0, e) for k0 in range(0, 2049, 16) for r in [k / (k + k0)])
    rms = 100 * (best[0] / len(k)) ** 0.5
    print(f"{len(k)} GEMMs: k0 = {best[1]}, E = {best[2]:.3f}, rms {rms:.1f} points of "
          "efficiency")
    if args.write:
        store = Path(args.store)
        OUT.write_text(
            "# Written by fitters/derive_k_overhead.py: a GEMM tile's reduction overhead k0 "
            "(cost/efficiency.py\n# k_efficiency), least squares over a stored matmul sweep.\n"
            + yaml.safe_dump({"value": float(best[1]), "unit": "elements of K",
                              "scale": round(best[2], 3), "rms_points": round(rms, 2),
                              "gemms": len(k), "max_tflop": args.max_tflop,
                              "source": f"{store.parent.name}/{store.name} (bf16 matmul sweep)"},
                             sort_keys=False))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
