"""`accelmap report FROM.json` and the `--report FILE.html` option of estimate, plan, compare
and validate: a result as one self-contained HTML file of pictures (needs the web extra)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap import api

if TYPE_CHECKING:
    from accelmap.api.reports import Report

ReportOpt = Annotated[Path | None, typer.Option(
    "--report", help="Also write an HTML report (charts, inputs, version; one offline file; "
    "needs pip install 'accelmap[web]').", show_default=False)]

# options that say how to print, not what was computed
_NOT_INPUTS = {"report", "json_out", "catalog", "db"}


def check(path: Path | None) -> None:
    """Fail on a bad --report path (or a missing plotly) before any work."""
    if path is not None:
        api.reports.check_report_path(path)


def _ctx() -> Any:
    """The running command's click context (typer >= 0.20 vendors click as typer._click)."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import get_current_context  # type: ignore[no-redef]
    return get_current_context(silent=True)


def inputs() -> dict[str, Any]:
    """The options the running command was given (not their defaults): its inputs, for the
    report."""
    ctx = _ctx()
    if ctx is None:
        return {}
    out = {}
    for k, v in ctx.params.items():
        source = ctx.get_parameter_source(k)
        if k in _NOT_INPUTS or v in (None, [], ()) or getattr(source, "name", "") == "DEFAULT":
            continue
        out[k] = [str(x) for x in v] if isinstance(v, list | tuple) else (
            str(v) if isinstance(v, Path) else v)
    return out


def command() -> str:
    """'accelmap plan' (the command path, whatever the program was called)."""
    ctx = _ctx()
    path = ctx.command_path if ctx is not None else ""
    return " ".join(["accelmap", *path.split(" ")[1:]])


def save(path: Path | None, make: Callable[[], Report | tuple[Report, str]],
         option: str = "--report") -> None:
    """Build the report (only when asked for), write it and say where, on stderr (stdout may
    be --json)."""
    if path is None:
        return
    out = api.write_report(make(), path, option)
    sys.stderr.write(f"report: {out} (open it in a browser; it needs no network)\n")


def report_cmd(
    source: Annotated[Path, typer.Argument(
        help="A result saved with --json: estimate, plan, compare, validate, roofline, a "
             "serving simulation.", show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="HTML file to write (default: FROM with .html).",
        show_default=False)] = None,
) -> None:
    """Draw a saved --json result as one self-contained HTML report.

    Examples:
      accelmap plan llama-3.1-8b --cluster 8xH100 --train --json > plan.json
      accelmap report plan.json                 # writes plan.html
      accelmap report validate.json --out docs/validation.html
    """
    target = out or source.with_suffix(".html")
    api.reports.check_report_path(target, "--out")
    save(target, lambda: api.saved_report_html(source), "--out")
