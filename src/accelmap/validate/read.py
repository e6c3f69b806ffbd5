"""Read one measurement CSV or run file (``read_cases``): its layout comes from the header. A run
file (YAML, or a CSV in the canonical run format) goes to ``canonical.read_runs``, any other CSV
to ``cases.read_table``. It sits above both, so that cases never imports canonical (which reads
cases' types).
"""

from __future__ import annotations

from pathlib import Path

from accelmap.errors import InputError
from accelmap.files import exists
from accelmap.validate.canonical import YAML_SUFFIXES, read_runs
from accelmap.validate.cases import CaseFile, CaseFormat, read_table

__all__ = ["read_cases"]


def read_cases(path: str | Path) -> CaseFile:
    """Read one measurement CSV or run file; its layout comes from the header (YAML: always
    the canonical run format)."""
    path = Path(path)
    if not exists(path):
        raise InputError(f"{path}: no such file (pass a measurements CSV, e.g. "
                         "../shared/reference/measurements/inference.csv, or a run file)")
    if path.suffix.lower() in YAML_SUFFIXES:
        return CaseFile(path, CaseFormat.RUNS, read_runs(path))
    table = read_table(path)
    return table if table is not None else CaseFile(path, CaseFormat.RUNS, read_runs(path))
