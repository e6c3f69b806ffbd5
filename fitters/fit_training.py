"""Fit the few physical parameters of training time once, on all shared training rows together
(every stack and device), report the error on the rows not used, and write
src/accelmap/cost/data/training_fit.yaml.

**Parameters** (one value each, never per stack, device or row):

1. ``sustained_gemm_fraction``: the fraction of the best-shape microbenchmark (MAMF, shared
   matmul.csv) a GEMM sustains inside a whole training step (cost/efficiency.py). Range
   [0.5, 1.0]: 1.0 would mean a step's GEMMs run as fast as the isolated microbenchmark.
2. ``contention``: seconds of compute added per second of communication hidden under it
   (cost/overlap.py: NCCL kernels take SMs and HBM bandwidth). Range [0, 0.6].

Measured, not fitted here: the GEMM tile's reduction overhead k0 (cost/efficiency.py
``gemm_k_overhead``, cost/data/gemm_k_overhead.yaml, from the H200 matmul sweep:
fitters/derive_k_overhead.py).

Everything else that differs between stacks is a named feature with a source (attention kernel
generation, fused elementwise kernels, TP-comm overlap, ZeRO stage, recompute), not a fit.

**Split** (fixed before any error was looked at, independent of the engine): a multi-device
training row is a fitting row when the number in its ``row_id`` is divisible by 4 (one row in
four, sampling every source, table, model size, sequence length and cluster size); every other
row is held out and scored.

**Objective**: the mean soft-L1 loss of the log errors, rho(z) = 2 (sqrt(1 + z) - 1) with
z = (log(predicted / measured) / 0.1)^2 -- quadratic within about 10 %, linear beyond, so the few
rows the model cannot explain weigh like any other large miss, not by their square -- on the
fitting rows, minimized on a grid (0.01 and 0.05 steps) over the two ranges. The serving fitters
use the same loss and scale (fit_sglang_profile.py, ``LOSS_SCALE``). It replaced the median
absolute log error, which is piecewise constant on 71 rows: its grid minimum jumped between
far corners (contention 0.0 and 0.45) whose objectives differed by about 1 %.

Reads: data/reference/measurements/training.csv (or the path given).
Writes: src/accelmap/cost/data/training_fit.yaml (with --write; else prints the fit).

Run: python fitters/fit_training.py [path/to/training.csv] [--write]
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from accelmap.api import load_catalog
from accelmap.cost import efficiency
from accelmap.validate import predict as pr
from accelmap.validate.cases import Case, TrainingCase
from accelmap.validate.read import read_cases

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT / "data" / "reference" / "measurements" / "training.csv"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "training_fit.yaml"
SPLIT = "row_id number divisible by 4 (one multi-device training row in four)"
RANGES = {"sustained_gemm_fraction": (0.5, 1.0, 0.01), "contention": (0.0, 0.6, 0.05)}


def is_fitting_row(row_id: str) -> bool:
    digits = row_id[len(row_id.rstrip("0123456789")):]
    return bool(digits) and int(digits) % 4 == 0


def multi_device(cases: tuple[Case, ...]) -> list[TrainingCase]:
    return [c for c in cases if isinstance(c, TrainingCase) and (c.parallel.devices or 1) > 1]


def predictions(cases: list[TrainingCase], values: dict[str, float]) -> list[pr.Prediction]:
    table = {k: {"value": v} for k, v in values.items()}
    catalog = load_catalog()
    with mock.patch.object(efficiency, "training_fit", lambda: table):
        preds = [pr.predict_case(c, catalog, calibrated=frozenset()) for c in cases]
    return [p for p in preds if p.status is pr.Status.OK and p.measured and p.predicted]


LOSS_SCALE = 0.1  # soft-L1 scale, in log error (about 10 %)


def log_error(preds: list[pr.Prediction]) -> float:
    """The objective: mean soft-L1 loss of the log errors (module doc)."""
    z = [(math.log(float(p.predicted) / float(p.measured)) / LOSS_SCALE) ** 2  # type: ignore[arg-type]
         for p in preds]
    return statistics.fmean(2.0 * (math.sqrt(1.0 + x) - 1.0) for x in z)


def stats(preds: list[pr.Prediction], rows: int | None = None) -> dict[str, float]:
    """Error statistics of the predicted rows; with ``rows`` (the rows asked) also the share
    of them that was predicted."""
    errs = sorted(float(p.abs_pct_error or 0.0) for p in preds)
    signed = [float(p.signed_pct_error or 0.0) for p in preds]
    asked = {} if rows is None else {"rows": rows,
                                     "predicted_pct": round(100 * len(errs) / max(rows, 1), 1)}
    return {**asked, "n": len(errs), "median_abs_pct": round(statistics.median(errs), 2),
            "p90_abs_pct": round(errs[int(0.9 * (len(errs) - 1))], 2),
            "median_signed_pct": round(statistics.median(signed), 2),
            "not_fit": sum(1 for p in preds if p.fits is False)}


def grid(name: str, step: float | None = None, around: float | None = None) -> list[float]:
    lo, hi, s = RANGES[name]
    if around is not None and step is not None:
        lo, hi, s = max(lo, around - 5 * step), min(hi, around + 5 * step), step
    n = round((hi - lo) / s)
    return [round(lo + i * s, 4) for i in range(n + 1)]


def fit(cases: list[TrainingCase]) -> tuple[dict[str, float], float]:
    best: tuple[float, dict[str, float]] = (math.inf, {})
    coarse = {"sustained_gemm_fraction": grid("sustained_gemm_fraction")[::5],
              "contention": grid("contention")[::2]}
    for a, b in itertools.product(coarse["sustained_gemm_fraction"], coarse["contention"]):
        values = {"sustained_gemm_fraction": a, "contention": b}
        err = log_error(predictions(cases, values))
        best = min(best, (err, values), key=lambda t: t[0])
    center = best[1]
    for a, b in itertools.product(
            grid("sustained_gemm_fraction", 0.01, center["sustained_gemm_fraction"]),
            grid("contention", 0.05, center["contention"])):
        values = {"sustained_gemm_fraction": a, "contention": b}
        err = log_error(predictions(cases, values))
        best = min(best, (err, values), key=lambda t: t[0])
    return best[1], best[0]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    path = Path(args[0]) if args else DEFAULT_CSV
    cases = multi_device(read_cases(path).cases)
    fitting = [c for c in cases if is_fitting_row(c.row_id)]
    held = [c for c in cases if not is_fitting_row(c.row_id)]
    values, err = fit(fitting)
    fitted = predictions(fitting, values)
    rows = sorted(p.row_id for p in fitted)
    held_stats = stats(predictions(held, values), len(held))
    print(f"fitted on {len(rows)} rows ({SPLIT}): " + ", ".join(
        f"{k} = {v:g}" for k, v in values.items()) + f" (mean soft-L1 loss {err:.4f})")
    print(f"fitting rows: {stats(fitted, len(fitting))}")
    print(f"held out: {held_stats}")
    out: dict[str, Any] = {
        k: {"value": v, "range": list(RANGES[k][:2])} for k, v in values.items()}
    out["fitted_on"] = rows
    out["split"] = SPLIT
    out["objective"] = (f"mean soft-L1 loss of log(predicted / measured), scale {LOSS_SCALE:g}, "
                        f"= {err:.4f} on the fitting rows")
    out["held_out"] = held_stats
    if "--write" in sys.argv:
        header = ("# Written by fitters/fit_training.py: the few physical parameters fitted "
                  "once on all shared\n# training rows together (every stack and device), "
                  "never per stack, device or row.\n")
        OUT.write_text(header + yaml.safe_dump(out, sort_keys=False, width=100))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
