"""Prediction error on the published closed-loop concurrency points.

``data/concurrency_published.yaml`` holds points of concurrency sweeps (``vllm bench
serve --max-concurrency N`` and the like) in the run format (``scenario: concurrency``). Report
only, but for three in four (by id) of the TensorRT-LLM >= 1.0 runs, which the tensorrt-llm-1
profile's figures were fitted on (``fitters/fit_trtllm1_profile.py``): the "fit" group splits the
scored rows into those and the rest. Each row runs through the request-level simulator with N
closed-loop clients (``validate/serving.py``); rows lacking a fact, or in a 4-bit format the run
format cannot express yet, are listed as skipped with their reason.

    PYTHONPATH=src python3 benchmarks/concurrency_error.py [--rows]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from accelmap.api import validate_cases
from accelmap.api.validation import Status

ROOT = Path(__file__).resolve().parents[1]
CHECK_SET = ROOT / "data" / "concurrency_published.yaml"


def fitted_rows() -> set[str]:
    """Ids the bundled tensorrt-llm-1 profile was fitted on (framework_calibration.yaml)."""
    from accelmap.cost.framework import Framework, _calibration

    entry = _calibration().get(Framework.TENSORRT_LLM_1.value) or {}
    return {i for ids in (entry.get("fitted_on") or {}).values() for i in ids}


def main(argv: Sequence[str] | None = None) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from serving_error import table  # the same per-group table as the serving check set

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=CHECK_SET)
    ap.add_argument("--rows", action="store_true", help="print every scored row too")
    args = ap.parse_args(argv)
    preds = validate_cases([args.cases]).predictions
    table(f"{args.cases.name} (abs % error; signed + = optimistic)", preds, {
        "metric": lambda p: p.metric or None,
        "source": lambda p: (p.source or "").split(",")[0] or None,
        "fit": lambda p: ("fitted (tensorrt-llm-1)" if p.row_id in fitted_rows()
                          else "not fitted on"),
    })
    if args.rows:
        for p in preds:
            if p.status is Status.OK:
                print(f"  {p.row_id:<32} {p.metric:<24} measured {p.measured:>9.1f} "
                      f"predicted {p.predicted:>9.1f} {p.signed_pct_error:+7.1f} %")


if __name__ == "__main__":
    main()
