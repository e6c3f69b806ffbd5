"""Score the flagship published training configurations (data/flagship_training.yaml: Llama 3
405B on 8,192 and 16,384 H100, MT-NLG 530B on 2,240-3,360 A100, BLOOM 176B on 384 A100, PaLM 540B
on 6,144 TPU v4, DeepSeek-V3 on 2,048 H800, Nemotron-4 340B on 1,536-6,144 H100 and Korthikanti
et al.'s 22B-1T Megatron runs on up to 2,240 A100, each as its paper or run log gives it) and
print, beside the interleaved rows, what-ifs of the interleaving depth (vpp), read from the
papers' prose rather than stated as a number. A run predicted not to fit shows the memory items
behind the verdict. Nothing is fitted on these rows.

Run: python benchmarks/flagship_training.py
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from accelmap.api import Catalog, load_catalog
from accelmap.api.validation import Status
from accelmap.validate.multi import plan_run
from accelmap.validate.predict import Prediction, predict_cases
from accelmap.validate.read import read_cases
from accelmap.validate.runs import TrainingRun

TABLE = Path(__file__).resolve().parents[1] / "data" / "flagship_training.yaml"
WHAT_IF_VPP = (1, 2, 4)


def _cell(p: Prediction) -> str:
    if p.status is not Status.OK:
        return f"skipped: {p.skipped_reason}"
    fits = "" if p.fits is not False else ", NOT fit"
    return f"{float(p.predicted or 0):6.1f} ({float(p.signed_pct_error or 0):+6.1f} %{fits})"


def memory_lines(run: TrainingRun, catalog: Catalog) -> list[str]:
    """The memory items of a run's peak stage, largest first, in GB."""
    _base, plan, _reasons, _notes = plan_run(run, catalog)
    if plan is None:
        return []
    est = plan.estimate()
    items = sorted(est.memory.items.items(), key=lambda kv: -float(kv[1]))
    total = sum(float(v) for _, v in items)
    head = (f"  {run.id}: {total / 1e9:.1f} GB of {est.memory.capacity / 1e9:.1f} GB "
            f"({est.reason or 'fits'})")
    return [head] + [f"    {k:28s} {float(v) / 1e9:7.1f} GB" for k, v in items
                     if float(v) >= 0.05e9]


def main() -> None:
    catalog = load_catalog()
    runs = read_cases(TABLE).cases
    preds = predict_cases(runs, catalog, frozenset())
    # the what-ifs change the interleaving depth of the rows that read it from prose (they
    # state vpp > 1); the others are predicted as published only
    read = [r for r in runs if (getattr(r, "vpp", None) or 1) > 1]
    what_if = {v: dict(zip([r.id for r in read],
                           predict_cases([dataclasses.replace(r, vpp=v) for r in read],
                                         catalog, frozenset()), strict=True))
               for v in WHAT_IF_VPP}
    print(f"{'run':28s} {'published':>9s}  {'as published':24s}"
          + "".join(f"  {'what if vpp ' + str(v):24s}" for v in WHAT_IF_VPP))
    errs = []
    for p in preds:
        if p.status is Status.OK:
            errs.append(abs(float(p.signed_pct_error or 0.0)))
        cells = [_cell(what_if[v][p.row_id]) if p.row_id in what_if[v] else "-"
                 for v in WHAT_IF_VPP]
        print(f"{p.row_id:28s} {float(p.measured or 0):9.1f}  {_cell(p):24s}"
              + "".join(f"  {c:24s}" for c in cells))
    if errs:
        within = sum(1 for e in errs if e <= 15.0)
        print(f"{len(errs)}/{len(preds)} predicted as published, median |error| "
              f"{statistics.median(errs):.1f} %, max {max(errs):.1f} %, {within} within 15 %, "
              f"{sum(1 for p in preds if p.fits is False)} predicted not to fit")
    for run, p in zip(runs, preds, strict=True):
        if p.fits is False:
            print("\n".join(memory_lines(run, catalog)))


if __name__ == "__main__":
    main()
