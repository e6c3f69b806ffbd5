"""Exports: a plan as a framework's launch configuration (Megatron-LM, DeepSpeed, torchtitan,
MaxText, vLLM, SGLang, Slurm ...).

    from accelmap import api
    job = api.load_plan("plan.json")          # written by `accelmap plan --json`
    done = api.export_plan("megatron", job, "launch/")
    print(done.paths, done.result.launch)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelmap.catalog import Catalog, load_catalog
from accelmap.errors import InputError
from accelmap.export.base import Exporter, ExportResult, Job, PlanJob
from accelmap.export.base import load_plan_file as _load_plan_file
from accelmap.export.registry import exporters as _exporters
from accelmap.export.registry import get_exporter
from accelmap.search.result import Plan

__all__ = ["Export", "ExportResult", "Exporter", "Job", "PlanJob", "export_plan", "exporter_row",
           "list_exporters", "load_plan", "plan_export_job"]


def list_exporters() -> list[Exporter]:
    """Every registered exporter, by name."""
    return list(_exporters().values())


def exporter_row(exporter: Exporter) -> dict[str, Any]:
    """One exporter as a JSON row: name, framework, the framework version it targets, its
    documentation and the plan kinds (train, serve) it writes."""
    return {"name": exporter.name, "framework": exporter.framework,
            "version": exporter.version, "url": exporter.url,
            "plans": [k.value for k in exporter.kinds]}


def load_plan(path: str | Path, index: int = 0) -> PlanJob:
    """Plan ``index`` of a file written by ``accelmap plan --json`` (or a bare job object);
    a missing or malformed file is one InputError."""
    return _load_plan_file(Path(path), index)


def plan_export_job(job: Job, plan: Plan) -> PlanJob:
    """A job and one of its plans (``run_plan(...).plans[i]``) as what exporters take."""
    return PlanJob.of(job, plan)


@dataclass(frozen=True)
class Export:
    """What ``export_plan`` wrote: the exporter, its result (files, launch line, fields the
    framework cannot express) and the paths written."""

    exporter: Exporter
    result: ExportResult
    out: Path
    paths: tuple[Path, ...]


def export_plan(fmt: str, job: PlanJob, out: str | Path,
                catalog: Catalog | None = None, force: bool = False) -> Export:
    """Run exporter ``fmt`` on ``job`` (its model looked up in ``catalog``) and write its files
    under ``out`` (created if missing). A format that does not write this kind of plan (train,
    serve) is an InputError."""
    from accelmap.export.write import write_files
    from accelmap.lookup import resolve

    exporter = get_exporter(fmt)
    if job.kind not in exporter.kinds:
        raise InputError(f"{fmt} exports {' and '.join(k.value for k in exporter.kinds)} "
                         f"plans, not {job.kind.value} plans")
    cat = catalog if catalog is not None else load_catalog()
    spec = resolve(job.model, cat.models, "model", "accelmap models list")
    resolve(job.accelerator, cat.accelerators, "accelerator", "accelmap hw list")
    result = exporter.run(job, spec)  # with every plan field it cannot express said
    folder = Path(out)
    # a real folder; each file written atomically, never over a link, a device or a file
    # with other content unless ``force`` (export/write.py)
    paths = write_files(folder, dict(result.files), force=force)
    return Export(exporter, result, folder, tuple(paths))
