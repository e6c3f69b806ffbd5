"""Validation: predicted vs measured on published cases (measurement CSVs), and the error
summary (overall, per source, per metric kind, per phase; signed + = optimistic)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelmap.catalog import Catalog, load_catalog
from accelmap.validate.cases import Case, CaseFile
from accelmap.validate.cases import read_cases as _read_cases
from accelmap.validate.outcome import Prediction
from accelmap.validate.predict import predict_cases as _predict_cases
from accelmap.validate.report import Summary
from accelmap.validate.report import compress_ids as _compress_ids
from accelmap.validate.report import summarize as _summarize

__all__ = ["Validation", "compress_ids", "predict_cases", "read_cases", "summarize",
           "validate_cases"]


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


def validate_cases(paths: Sequence[str | Path], catalog: Catalog | None = None) -> Validation:
    """Read every file first (a bad file fails before any work), predict each, summarize."""
    files = [read_cases(p) for p in paths]
    cat = catalog if catalog is not None else load_catalog()
    per_file = tuple((f.path, tuple(predict_cases(f, cat))) for f in files)
    return Validation(per_file, summarize([p for _, ps in per_file for p in ps]))
