"""Score the flagship published training configurations (data/flagship_training.yaml: Llama 3
405B on 8,192 and 16,384 H100, as Table 4 of the Llama 3 paper gives them) and print, beside
each, the what-if of the one thing the publication leaves open: the interleaving depth (vpp).
Nothing is fitted on these rows.

Run: python benchmarks/flagship_training.py
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from accelmap.api import load_catalog
from accelmap.api.validation import Status
from accelmap.validate.predict import Prediction, predict_cases
from accelmap.validate.read import read_cases

TABLE = Path(__file__).resolve().parents[1] / "data" / "flagship_training.yaml"
WHAT_IF_VPP = (2, 4)


def _cell(p: Prediction) -> str:
    if p.status is not Status.OK:
        return f"skipped: {p.skipped_reason}"
    fits = "" if p.fits is not False else ", NOT fit"
    return f"{float(p.predicted or 0):6.1f} ({float(p.signed_pct_error or 0):+6.1f} %{fits})"


def main() -> None:
    catalog = load_catalog()
    runs = read_cases(TABLE).cases
    preds = predict_cases(runs, catalog, frozenset())
    what_if = {v: predict_cases([dataclasses.replace(r, vpp=v) for r in runs], catalog,
                                frozenset()) for v in WHAT_IF_VPP}
    print(f"{'run':28s} {'published':>9s}  {'as published (vpp 1)':24s}"
          + "".join(f"  {'what if vpp ' + str(v):24s}" for v in WHAT_IF_VPP))
    errs = []
    for i, p in enumerate(preds):
        if p.status is Status.OK:
            errs.append(abs(float(p.signed_pct_error or 0.0)))
        print(f"{p.row_id:28s} {float(p.measured or 0):9.1f}  {_cell(p):24s}"
              + "".join(f"  {_cell(what_if[v][i]):24s}" for v in WHAT_IF_VPP))
    if errs:
        print(f"{len(errs)}/{len(preds)} predicted as published, median |error| "
              f"{statistics.median(errs):.1f} %, max {max(errs):.1f} %, "
              f"{sum(1 for p in preds if p.fits is False)} predicted not to fit")


if __name__ == "__main__":
    main()
