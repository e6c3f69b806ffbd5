"""Score NVIDIA's H100 Megatron-Core performance table (Megatron-LM README, images/model_table.png:
nine GPT models, 1.7B-462B, 48 to 6,144 H100) against accelmap's prediction. Nothing is fitted on
these rows: they check the shared parameters of fitters/fit_training.py on runs it never saw.

Run: python benchmarks/megatron_table_error.py
"""

from __future__ import annotations

import statistics
from pathlib import Path

from accelmap.api import load_catalog
from accelmap.api.validation import Status
from accelmap.validate.predict import predict_cases
from accelmap.validate.read import read_cases

TABLE = Path(__file__).resolve().parents[1] / "data" / "megatron_core_h100_table.yaml"


def main() -> None:
    preds = predict_cases(read_cases(TABLE).cases, load_catalog(), frozenset())
    errs = []
    for p in preds:
        if p.status is not Status.OK:
            print(f"{p.row_id:10s} skipped: {p.skipped_reason}")
            continue
        errs.append(abs(float(p.signed_pct_error or 0.0)))
        print(f"{p.row_id:10s} measured {p.measured:6.1f}  predicted {float(p.predicted or 0):6.1f}"
              f"  {float(p.signed_pct_error or 0):+6.1f} %  fits={p.fits}")
    if errs:
        print(f"{len(errs)}/{len(preds)} predicted, median |error| {statistics.median(errs):.1f} %,"
              f" max {max(errs):.1f} %")


if __name__ == "__main__":
    main()
