"""Measured vs predicted for every stored `validate --local` row on a real GPU
(data/gpu/<run>/: the run's JSON and the measurement store it was calibrated with),
predicted today with the GPU's calibration profile and without it (catalog figures and the
public per-generation defaults of cost/host.py).

Issue 23's bar: within 15 % with the profile, 30 % without. The last column says whether the
estimate calls the pass host-bound, and why (dispatched ops x seconds per dispatch).

Run: PYTHONPATH=src python benchmarks/gpu_ground_truth.py [data/gpu]
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelmap.validate.gpu_truth import runs, truth_rows

WITH, WITHOUT = 0.15, 0.30


def _fmt(v: float, unit: str) -> str:
    return f"{v * 1e3:9.2f} ms" if unit == "s" else f"{v / 1e9:9.3f} GB"


def main(root: str = "data/gpu") -> int:
    misses = 0
    for folder in runs(Path(root)):
        print(f"== {folder.name}")
        print(f"{'row':24} {'measured':>12} {'w/ profile':>12} {'err':>7} "
              f"{'w/o profile':>12} {'err':>7}  why")
        for r in truth_rows(folder):
            e1, e2 = r.error(r.with_profile), r.error(r.without_profile)
            ok = abs(e1) <= WITH and abs(e2) <= WITHOUT
            misses += not ok
            print(f"{r.row_id:24} {_fmt(r.measured, r.unit)} {_fmt(r.with_profile, r.unit)} "
                  f"{e1:+7.1%} {_fmt(r.without_profile, r.unit)} {e2:+7.1%}  "
                  f"{'' if ok else 'OUT '}{r.note}")
    print(f"{misses} row(s) outside 15 % (profile) / 30 % (no profile); error = "
          "(measured - predicted) / measured, positive = predicted faster or smaller")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
