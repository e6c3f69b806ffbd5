"""`accelmap export`: write a plan as a framework's launch configuration."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from accelmap import api
from accelmap.cli.common import MAX_COUNT, CatalogOpt, JsonOpt, console, emit_json, get_catalog

if TYPE_CHECKING:
    from accelmap.api.exports import ExportResult, PlanJob


def write_export(fmt: str, job: PlanJob, out: Path | str, quiet: bool = False,
                 catalog: list[Path] | None = None, force: bool = False) -> ExportResult:
    """Run one exporter on a job, write its files under ``out`` and say what was written."""
    done = api.export_plan(fmt, job, out, get_catalog(catalog), force=force)
    if not quiet:
        exporter, result = done.exporter, done.result
        con = console()
        con.print(f"{exporter.framework} ({exporter.version}): wrote "
                  + ", ".join(str(p) for p in done.paths), highlight=False, markup=False)
        # launch lines hold shell syntax such as "${ARGS[@]}": print them verbatim
        con.print(f"launch: {result.launch}", highlight=False, markup=False)
        for field in result.unsupported:
            con.print(f"not expressible in {exporter.framework}: {field}", highlight=False,
                      markup=False)
        for note in result.notes:
            con.print(f"note: {note}", highlight=False, markup=False)
    return done.result


def export_cmd(
    fmt: Annotated[str | None, typer.Argument(help="Format (see --list).")] = None,
    from_: Annotated[Path | None, typer.Option("--from", help="JSON written by "
                                               "`accelmap plan --json`.")] = None,
    index: Annotated[int, typer.Option("--index", min=0, max=MAX_COUNT,
                                       help="Which plan of the file.")] = 0,
    out: Annotated[Path, typer.Option("--out", help="Folder to write into.")] = Path("."),
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite files in --out that hold other content (never a link, a "
        "directory or a device).")] = False,
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

    if list_:
        found = api.list_exporters()
        rows = [api.exports.exporter_row(e) for e in found]
        if json_out:
            emit_json(rows)
            return
        from rich.table import Table

        t = Table(title="Exporters")
        for c in ("name", "framework", "targets", "plans", "documentation"):
            t.add_column(c)
        for e in found:
            t.add_row(e.name, e.framework, e.version, ", ".join(k.value for k in e.kinds), e.url)
        console().print(t)
        return
    if fmt is None or from_ is None:
        raise InputError("give a format and --from plan.json (accelmap export --list shows the "
                         "formats)")
    job = api.load_plan(from_, index)
    result = write_export(fmt, job, out, quiet=json_out, catalog=catalog, force=force)
    if json_out:
        emit_json({"files": sorted(result.files), "launch": result.launch,
                   "unsupported": result.unsupported, "notes": result.notes,
                   "out": str(out)})
