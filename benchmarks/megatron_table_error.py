"""Score NVIDIA's published Megatron training tables against accelmap's prediction: the H100
Megatron-Core performance table (Megatron-LM README, images/model_table.png: nine GPT models,
1.7B-462B, 48 to 6,144 H100; the default) and Megatron-Bridge's performance summary
(data/megatron_bridge_perf.yaml: NeMo 25.11 on DGX-GB300, GB200, B200 and H100, FP8, MXFP8 and
BF16, dense Llama 3 and MoE models). Nothing is fitted on these rows: they check the shared
parameters of fitters/fit_training.py on runs it never saw.

Run: python benchmarks/megatron_table_error.py [TABLE.yaml ...]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from accelmap.api import load_catalog
from accelmap.api.validation import Status
from accelmap.validate.predict import predict_cases
from accelmap.validate.read import read_cases

DATA = Path(__file__).resolve().parents[1] / "data"
TABLE = DATA / "megatron_core_h100_table.yaml"


def score(path: Path) -> None:
    """Each row's prediction beside its published figure, then the file's summary."""
    preds = predict_cases(read_cases(path).cases, load_catalog(), frozenset())
    errs = []
    width = max(len(p.row_id) for p in preds)
    for p in preds:
        if p.status is not Status.OK:
            print(f"{p.row_id:{width}s} skipped: {p.skipped_reason}")
            continue
        errs.append(abs(float(p.signed_pct_error or 0.0)))
        print(f"{p.row_id:{width}s} measured {p.measured:8.1f}  predicted "
              f"{float(p.predicted or 0):8.1f}  {float(p.signed_pct_error or 0):+6.1f} %  "
              f"fits={p.fits}")
    if errs:
        print(f"{path.name}: {len(errs)}/{len(preds)} predicted, median |error| "
              f"{statistics.median(errs):.1f} %, max {max(errs):.1f} %, "
              f"{sum(e <= 15 for e in errs)} within 15 %")


def main(argv: list[str]) -> None:
    for path in [Path(a) for a in argv] or [TABLE]:
        score(path)


if __name__ == "__main__":
    main(sys.argv[1:])
