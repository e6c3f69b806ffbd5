"""`accelmap export`: write a plan as a framework's launch configuration."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from accelmap.cli.common import CatalogOpt, JsonOpt, console, emit_json, get_catalog

if TYPE_CHECKING:
    from accelmap.export.base import ExportResult, PlanJob


def write_export(fmt: str, job: PlanJob, out: Path, quiet: bool = False,
                 catalog: list[Path] | None = None) -> ExportResult:
    """Run one exporter on a job and write its files under ``out``."""
    from accelmap.errors import InputError
    from accelmap.export.base import get_exporter
    from accelmap.lookup import resolve

    exporter = get_exporter(fmt)
    if job.kind not in exporter.kinds:
        raise InputError(f"{fmt} exports {' and '.join(k.value for k in exporter.kinds)} "
                         f"plans, not {job.kind.value} plans")
    cat = get_catalog(catalog)
    spec = resolve(job.model, cat.models, "model", "accelmap models list")
    result = exporter.export(job, spec)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in result.files.items():
        (out / name).write_text(text, encoding="utf-8")
    if not quiet:
        con = console()
        con.print(f"{exporter.framework} ({exporter.version}): wrote "
                  + ", ".join(str(out / n) for n in result.files), highlight=False, markup=False)
        # launch lines hold shell syntax such as "${ARGS[@]}": print them verbatim
        con.print(f"launch: {result.launch}", highlight=False, markup=False)
        for field in result.unsupported:
            con.print(f"not expressible in {exporter.framework}: {field}", highlight=False,
                      markup=False)
    return result


def export_cmd(
    fmt: Annotated[str | None, typer.Argument(help="Format (see --list).")] = None,
    from_: Annotated[Path | None, typer.Option("--from", help="JSON written by "
                                               "`accelmap plan --json`.")] = None,
    index: Annotated[int, typer.Option("--index", min=0, help="Which plan of the file.")] = 0,
    out: Annotated[Path, typer.Option("--out", help="Folder to write into.")] = Path("."),
    list_: Annotated[bool, typer.Option("--list", help="List the exporters.")] = False,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Export a plan as a launchable framework config.

    Examples:
      accelmap plan llama-3.1-70b --cluster 64xH100 --train --json > plan.json
      accelmap export megatron --from plan.json --out launch/
      accelmap export --list
    """
    from accelmap.errors import InputError
    from accelmap.export.base import exporters, load_plan_file

    if list_:
        rows = [{"name": e.name, "framework": e.framework, "version": e.version, "url": e.url,
                 "plans": [k.value for k in e.kinds]} for e in exporters().values()]
        if json_out:
            emit_json(rows)
            return
        from rich.table import Table

        t = Table(title="Exporters")
        for c in ("name", "framework", "targets", "plans", "documentation"):
            t.add_column(c)
        for e in exporters().values():
            t.add_row(e.name, e.framework, e.version, ", ".join(k.value for k in e.kinds), e.url)
        console().print(t)
        return
    if fmt is None or from_ is None:
        raise InputError("give a format and --from plan.json (accelmap export --list shows the "
                         "formats)")
    job = load_plan_file(from_, index)
    result = write_export(fmt, job, out, quiet=json_out, catalog=catalog)
    if json_out:
        emit_json({"files": sorted(result.files), "launch": result.launch,
                   "unsupported": result.unsupported, "out": str(out)})
