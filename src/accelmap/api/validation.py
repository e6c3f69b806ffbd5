"""Validation: predicted vs measured on published cases (measurement CSVs), and the error
summary (overall, per source, per metric kind, per phase; signed + = optimistic); and a real run
on this machine next to the prediction (``validate_local``, needs PyTorch)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelmap.catalog import Catalog, load_catalog
from accelmap.validate.cases import Case, CaseFile
from accelmap.validate.outcome import Prediction, Status
from accelmap.validate.predict import predict_cases as _predict_cases
from accelmap.validate.read import read_cases as _read_cases
from accelmap.validate.report import GroupStats, Summary
from accelmap.validate.report import compress_ids as _compress_ids
from accelmap.validate.report import summarize as _summarize

if TYPE_CHECKING:
    from accelmap.measure.local_run import LocalRun, LocalSettings

__all__ = ["CaseFile", "GroupStats", "LocalValidation", "Prediction", "Status", "Summary",
           "Validation", "compress_ids", "predict_cases", "read_cases", "summarize",
           "validate_cases", "validate_local"]


def read_cases(path: str | Path) -> CaseFile:
    """One measurements CSV (inference, training or matmul layout, recognised from its header);
    a missing file or a malformed row is an InputError naming the file and line."""
    return _read_cases(path)


def predict_cases(cases: CaseFile | Sequence[Case], catalog: Catalog | None = None
                  ) -> list[Prediction]:
    """One Prediction per case: measured, predicted and status (ok, calibration, or skipped with
    the reason)."""
    rows = cases.cases if isinstance(cases, CaseFile) else tuple(cases)
    return _predict_cases(rows, catalog if catalog is not None else load_catalog())


def summarize(predictions: list[Prediction]) -> Summary:
    """Error statistics of the scored rows, calibration rows apart, skipped rows by reason."""
    return _summarize(predictions)


def compress_ids(ids: Iterable[str]) -> str:
    """'I0009 I0010 I0011 I0013' -> 'I0009-I0011, I0013' (runs of consecutive row ids)."""
    return _compress_ids(ids)


@dataclass(frozen=True)
class Validation:
    """Predictions per file (in the order given) and the summary over all of them."""

    files: tuple[tuple[Path, tuple[Prediction, ...]], ...]
    summary: Summary

    @property
    def predictions(self) -> list[Prediction]:
        return [p for _, ps in self.files for p in ps]

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [p.to_dict() for p in self.predictions], "summary": self.summary.to_dict()}


def validate_cases(paths: Sequence[str | Path], catalog: Catalog | None = None,
                   progress: Callable[[int, int], None] | None = None,
                   runner: Any = None) -> Validation:
    """Read every file first (a bad file fails before any work), predict each, summarize;
    ``progress(done, total)`` counts the rows predicted. ``runner`` (``api.runner``, --ray):
    the rows of every file in chunks on Ray, the catalog shipped once; the same predictions."""
    files = [read_cases(p) for p in paths]
    cat = catalog if catalog is not None else load_catalog()
    if runner is not None and runner.distributed:
        flat = runner.map(_predict_one, [c for f in files for c in f.cases], cat, "rows")
        at, parts = 0, []
        for f in files:
            parts.append((f.path, tuple(flat[at:at + len(f.cases)])))
            at += len(f.cases)
        per_file = tuple(parts)
    elif progress is None:
        per_file = tuple((f.path, tuple(predict_cases(f, cat))) for f in files)
    else:
        total, done, out = sum(len(f.cases) for f in files), 0, []
        for f in files:
            preds: list[Prediction] = []
            for case in f.cases:
                preds += _predict_cases([case], cat)
                done += 1
                progress(done, total)
            out.append((f.path, tuple(preds)))
        per_file = tuple(out)
    return Validation(per_file, summarize([p for _, ps in per_file for p in ps]))


def _predict_one(cat: Catalog, case: Any) -> Prediction:
    return _predict_cases([case], cat)[0]


@dataclass(frozen=True)
class LocalValidation:
    """A run on this machine next to the prediction: one Prediction per time and memory row,
    the run itself (the model as built, settings, environment) and where it was stored."""

    rows: tuple[Prediction, ...]
    run: LocalRun
    settings: LocalSettings
    run_id: str
    db: str
    profile: str | None = None  # the calibration profile predicted with

    def to_dict(self) -> dict[str, Any]:
        from accelmap.validate.local import summary

        rows = list(self.rows)
        run = self.run
        return {"rows": [r.to_dict() for r in rows], "summary": summary(rows),
                "run": {"run_id": self.run_id, "db": self.db, "device": run.device,
                        "model": run.spec.id, "params": run.params, "scale": run.scale_note,
                        "settings": vars(self.settings), "memory_method": run.memory_method,
                        "profile": self.profile,
                        "load": run.load.to_dict() if run.load else None}}


def validate_local(model: str, device: str | None = None, *, steps: int = 5, warmup: int = 2,
                   batch: int = 4, seq: int = 256, decode_tokens: int = 32, scale: str = "auto",
                   dtype: str | None = None, profile: str | None = None, hw: str | None = None,
                   db: str | Path | None = None, catalog: Catalog | None = None,
                   impl: str = "accelmap", compiled_decode: bool = False
                   ) -> LocalValidation:
    """Build ``model`` in PyTorch (random weights; presets above 50 M parameters scaled down
    unless ``scale`` is 'full'), time training steps, prefill and decode on ``device``
    (default: cuda if available, else cpu) in ``dtype`` (default bf16 on GPUs, fp32 on CPUs),
    measure peak memory, predict the same on the matching accelerator (``hw``, else from the
    device; 'local' = the device of the newest local profile) with calibration ``profile`` from
    the store at ``db`` (default: the newest profile of that accelerator, said in the rows'
    notes), and store the timings. Everything that can fail on input fails before the run."""
    from accelmap.api.measurement import is_local_name, measured_device
    from accelmap.api.models import load_model
    from accelmap.measure.backends import default_device
    from accelmap.measure.local_run import LocalSettings, measurements, run_local
    from accelmap.measure.store import Store
    from accelmap.validate.local import device_for, local_accelerator, predict_local, profile_for

    cat = catalog if catalog is not None else load_catalog()
    spec = load_model(model, cat)
    dev = device or default_device("validate --local")
    settings = LocalSettings(device=dev, dtype=dtype or ("bf16" if dev.startswith("cuda")
                                                         else "fp32"),
                             batch=batch, seq=seq, steps=steps, warmup=warmup,
                             decode_tokens=decode_tokens, impl=impl,
                             compiled_decode=compiled_decode)
    store = Store(db)
    prof = profile_for(profile, store)
    chosen = ""
    if is_local_name(hw):  # --hw local: the measured device and its newest profile
        md = measured_device(hw, profile, db, cat)
        cat, prof, chosen = md.catalog, md.profile, md.how
    acc, fraction, how = local_accelerator(dev, hw, cat)
    if prof is None:  # the newest profile of this device, said so
        saved = store.latest_profile(acc.id)
        if saved is not None:
            prof = saved.profile
            chosen = (f"the newest profile of {acc.id}, {saved.name!r} (made "
                      f"{saved.created_at}); --profile NAME picks another")
    if chosen:
        how = f"{how}; calibration profile: {chosen}"
    device_for(acc, fraction, prof)  # fail before the run, not after it
    run = run_local(spec, settings, scale)
    cmp = predict_local(run, acc, fraction, prof, how)
    run_id = store.add(measurements(run, acc.id, cmp.predicted))
    return LocalValidation(tuple(cmp.rows), run, settings, run_id, str(store.path),
                           prof.name if prof is not None else None)
