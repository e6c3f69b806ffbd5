"""Prediction error on the serving check set and on the shared inference file.

The check set, ``data/serving_published.csv`` (TensorRT-LLM perf-overview offline
runs, MLPerf Inference llama2-70b Offline/Server), is for reporting only: nothing is fitted on
it. Its rows go through the request-level simulator (``validate/serving.py``); the shared
``inference.csv`` rows are fixed-batch predictions and are printed for comparison.

    PYTHONPATH=src python3 benchmarks/serving_error.py
    PYTHONPATH=src python3 benchmarks/serving_error.py \\
        --cases data/serving_published.csv \\
        --shared ../shared/reference/measurements/inference.csv --rows
    accelmap validate --cases data/serving_published.csv      # the per-row table

Prints, per group (kind, source, framework and version): n, median and p90 absolute % error,
median signed % error (+ = accelmap optimistic), and the skipped rows by reason. Rerun it after
a framework-profile change; it takes about ten seconds.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from accelmap.api import validate_cases
from accelmap.api.validation import Prediction, Status
from accelmap.validate.report import compress_ids, stats, summarize

ROOT = Path(__file__).resolve().parents[1]
CHECK_SET = ROOT / "data" / "serving_published.csv"
SHARED = ROOT / "data" / "reference" / "measurements" / "inference.csv"


def _pct(v: float | None, signed: bool = False) -> str:
    return "-" if v is None else (f"{v:+7.1f}" if signed else f"{v:7.1f}")


def table(title: str, preds: Sequence[Prediction],
          groups: dict[str, Callable[[Prediction], str | None]], skipped: bool = True) -> None:
    print(f"\n{title}")
    print(f"  {'group':<46}{'n':>5}{'median':>9}{'p90':>9}{'signed':>9}")
    for label, key in groups.items():
        names = sorted({k for p in preds if p.status is Status.OK and (k := key(p))})
        for name in names:
            s = stats(p for p in preds if key(p) == name)
            print(f"  {label + ': ' + name:<46}{s.n:>5}{_pct(s.median_abs_pct_error):>9}"
                  f"{_pct(s.p90_abs_pct_error):>9}{_pct(s.median_signed_pct_error, True):>9}")
    s = stats(preds)
    print(f"  {'all scored rows':<46}{s.n:>5}{_pct(s.median_abs_pct_error):>9}"
          f"{_pct(s.p90_abs_pct_error):>9}{_pct(s.median_signed_pct_error, True):>9}")
    for reason, ids in summarize(list(preds)).skipped.items() if skipped else ():
        print(f"  skipped {len(ids)}: {reason}: {compress_ids(ids)}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=CHECK_SET)
    ap.add_argument("--shared", type=Path, default=SHARED)
    ap.add_argument("--rows", action="store_true", help="print every scored row too")
    args = ap.parse_args(argv)
    check = validate_cases([args.cases]).predictions
    table(f"check set {args.cases.name} (abs % error; signed + = optimistic)", check, {
        "kind": lambda p: p.kind.value if p.kind else None,
        "source": lambda p: p.source,
        "framework": lambda p: p.framework,
    })
    if args.rows:
        for p in check:
            if p.status is Status.OK:
                print(f"  {p.row_id} {p.model_id:<16} {p.accelerator_id:<16} "
                      f"{p.measured:>10.1f} {p.predicted:>10.1f} {p.signed_pct_error:+6.1f}")
    if args.shared.is_file():
        shared = validate_cases([args.shared]).predictions
        table(f"shared {args.shared.name} (fixed-batch rows)", shared,
              {"kind": lambda p: p.kind.value if p.kind else None})
    else:
        print(f"\nshared file {args.shared} not found; pass --shared PATH")


if __name__ == "__main__":
    main()
