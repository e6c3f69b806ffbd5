"""GPU ground truth kept in the repository (``data/gpu/<run>/``): what
``accelmap validate --local --json`` measured on a real GPU, next to the measurement store the
run was calibrated with, re-predicted with today's model, with the GPU's profile and without it.

A folder holds ``validate_local.json`` (the rows and ``run.settings``) and
``measurements.sqlite`` (the calibration profile named in ``run.profile``). The predictions are
recomputed from the settings (``validate/local.py`` ``local_estimates``), never read back from
the file, so a change to the model shows here and in the test that reads these folders.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelmap.errors import InputError

# validate --local row id -> the predicted figure of local_estimates
ROW_FIGURE = {"local/train": "train", "local/train/memory": "train_memory",
              "local/prefill": "prefill", "local/decode": "decode",
              "local/inference/memory": "inference_memory"}


@dataclass(frozen=True)
class TruthRow:
    run: str  # the folder's name
    row_id: str
    unit: str
    measured: float
    with_profile: float
    without_profile: float
    note: str  # host- or device-bound, where the estimate says

    def error(self, predicted: float) -> float:
        """Signed relative error, positive where the prediction is faster/smaller."""
        return (self.measured - predicted) / self.measured


def runs(root: Path) -> list[Path]:
    """The run folders under ``root`` (each with a validate_local.json)."""
    return sorted(p.parent for p in Path(root).glob("*/validate_local.json"))


def truth_rows(folder: Path) -> list[TruthRow]:
    """Every stored row of one run, measured against today's predictions."""
    from accelmap.catalog import load_catalog
    from accelmap.measure.local_run import LocalSettings
    from accelmap.measure.store import Store
    from accelmap.validate.local import local_estimates

    data = json.loads((folder / "validate_local.json").read_text())
    run: dict[str, Any] = data["run"]
    cat = load_catalog()
    first = data["rows"][0]
    spec, acc = cat.models[first["model_id"]], cat.accelerators[first["accelerator_id"]]
    known = {k: v for k, v in run["settings"].items() if k in LocalSettings.__dataclass_fields__}
    settings = LocalSettings(**known)
    device = "cpu" if settings.device == "cpu" else "cuda"
    if not run.get("profile"):
        raise InputError(f"{folder}: the run names no profile to predict with")
    with tempfile.TemporaryDirectory() as tmp:  # the store is opened on a copy: never written
        db = Path(tmp) / "measurements.sqlite"
        shutil.copyfile(folder / "measurements.sqlite", db)
        profile = Store(db).load_profile(run["profile"])
    tr_p, inf_p, with_p, _ = local_estimates(spec, settings, acc, device, profile=profile)
    _, _, without_p, _ = local_estimates(spec, settings, acc, device)
    notes = {"local/train": "; ".join(filter(None, (_bound(tr_p, "forward"),
                                                    _bound(tr_p, "backward")))),
             "local/decode": _bound(inf_p, "decode step"),
             "local/prefill": _bound(inf_p, "prefill")}
    return [TruthRow(folder.name, r["row_id"], r["unit"], float(r["measured"]),
                     with_p[ROW_FIGURE[r["row_id"]]], without_p[ROW_FIGURE[r["row_id"]]],
                     notes.get(r["row_id"], ""))
            for r in data["rows"] if r["row_id"] in ROW_FIGURE and r.get("measured")]


def _bound(est: Any, what: str) -> str:
    return next((a for a in est.assumptions if a.startswith(f"{what} ")
                 and "-bound:" in a), "")
