"""`accelmap validate`: predicted vs measured on published cases, with the error summary."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap import api
from accelmap.cli import report as rep
from accelmap.cli.common import DbOpt, JsonOpt, ProfileOpt, console, emit_json
from accelmap.cli.fanout import RayOpt
from accelmap.cli.validate_local import (
    BatchOpt,
    CompiledOpt,
    DecodeOpt,
    DeviceOpt,
    DtypeOpt,
    HwOpt,
    ImplOpt,
    LocalOpt,
    ScaleOpt,
    SeqOpt,
    StepsOpt,
    WarmupOpt,
)

if TYPE_CHECKING:
    from accelmap.api.validation import GroupStats, Prediction, Summary

CasesOpt = Annotated[
    list[Path] | None,
    typer.Option("--cases", help="Measurements CSV (inference, training or matmul layout, "
                 "recognised from its header); repeatable.", show_default=False),
]
ShowSkippedOpt = Annotated[
    bool, typer.Option("--show-skipped", help="List skipped rows in the tables too (by default "
                       "they are grouped by reason under the tables).")]

EXAMPLES = (
    "Examples:\n\n"
    "  accelmap validate --cases ../shared/reference/measurements/inference.csv\n\n"
    "  accelmap validate --cases inference.csv --cases matmul.csv --cases training.csv --json"
    "\n\n"
    "Single-device rows use the single-device engine, multi-device rows the distributed engine "
    "(cluster and mapping from the row; the software stack's documented defaults where the row "
    "is silent, each noted). Rows neither can predict (unknown devices or models, missing "
    "sizes) are kept and skipped with the reason. Rows a general parameter was "
    "calibrated on (framework_calibration.yaml 'calibrated_on', and the HBM-bandwidth row "
    "M0021) are marked 'calibration' and left out of the error statistics.\n\n"
    "Signed error: positive = accelmap predicts faster than measured (optimistic).\n\n"
    "Local ground truth (needs PyTorch: pip install 'accelmap[measure]'):\n\n"
    "  accelmap validate --local gpt3-125m --scale tiny --steps 5 --batch 4 --seq 256\n\n"
    "  accelmap validate --local llama-3.1-8b --device cuda --profile my-h100 --json\n\n"
    "  accelmap validate --local llama-3.2-1b --device cuda --impl hf --compiled-decode\n\n"
    "builds the model in PyTorch from its spec (random weights, no downloads; presets above "
    "50 M parameters are scaled down unless --scale full), times training steps "
    "(forward+backward+AdamW), prefill and decode with a KV cache on the device, measures peak "
    "memory, and prints them next to accelmap's prediction for the same device (and calibration "
    "profile). The timings are stored in the measurement store."
)


def validate_cmd(cases: CasesOpt = None, json_out: JsonOpt = False,
                 show_skipped: ShowSkippedOpt = False, local: LocalOpt = None,
                 device: DeviceOpt = None, steps: StepsOpt = 5, warmup: WarmupOpt = 2,
                 batch: BatchOpt = 4, seq: SeqOpt = 256, decode_tokens: DecodeOpt = 32,
                 scale: ScaleOpt = "auto", dtype: DtypeOpt = None, profile: ProfileOpt = None,
                 hw: HwOpt = None, db: DbOpt = None, report: rep.ReportOpt = None,
                 ray: RayOpt = None, impl: ImplOpt = "accelmap",
                 compiled_decode: CompiledOpt = False) -> None:
    """Compare predictions with published measurements (--cases) or a run here (--local)."""
    from accelmap.errors import InputError

    rep.check(report)
    if local is not None:
        if report:
            raise InputError("--report draws --cases validations; save --local --json and "
                             "compare it with --cases instead")
        if cases:
            raise InputError("give either --cases or --local, not both")
        from accelmap.cli.validate_local import validate_local

        validate_local(local, device, steps, warmup, batch, seq, decode_tokens, scale, dtype,
                       profile, hw, db, json_out, impl, compiled_decode)
        return
    if not cases:
        raise InputError("no measurements given: pass --cases FILE.csv (repeatable), e.g. "
                         "--cases ../shared/reference/measurements/inference.csv, or --local "
                         "MODEL to compare with a run on this machine")
    from accelmap.cli.fanout import runner
    from accelmap.cli.plan import _progress

    with _progress(not ray, "predicting the published rows") as progress:
        # reads every file first
        result = api.validate_cases(cases, progress=progress, runner=runner(ray))
    rep.save(report, lambda: api.reports.report_of("validate", result.to_dict(),
                                                   inputs=rep.inputs(),
                                           command=rep.command()))
    if json_out:
        emit_json(result.to_dict())
        return
    con = console()
    for path, ps in result.files:
        table = _rows_table(path, ps, show_skipped)
        if table.row_count:
            con.print(table)
        else:
            con.print(f"{table.title} (reasons below)")
    _print_summary(con, result.summary)


validate_cmd.__doc__ = (validate_cmd.__doc__ or "") + "\n\n" + EXAMPLES


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.1f}" if signed else f"{v:.1f}"


def _rows_table(path: Path, preds: Sequence[Prediction], show_skipped: bool) -> Any:
    from rich.table import Table

    shown = [p for p in preds if show_skipped or p.status is not api.validation.Status.SKIPPED]
    n_skip = sum(p.status is api.validation.Status.SKIPPED for p in preds)
    t = Table(title=f"{path.name}: {len(preds)} rows, {len(preds) - n_skip} predicted, "
                    f"{n_skip} skipped", title_justify="left")
    for col in ("row", "model", "accelerator", "metric", "unit", "measured", "predicted",
                "error %", "status"):
        t.add_column(col, justify="right" if col in ("measured", "predicted", "error %")
                     else "left", overflow="fold")
    for p in shown:
        status = p.status.value
        if p.status is api.validation.Status.SKIPPED:
            status = f"skipped: {p.skipped_reason}"
        elif p.fits is False:
            status += ", predicted NOT to fit"
        t.add_row(p.row_id, p.model_id or p.model, p.accelerator_id or p.accelerator, p.metric,
                  p.unit, _num(p.measured), _num(p.predicted), _pct(p.signed_pct_error, True),
                  status)
    return t


def _stats_row(name: str, s: GroupStats) -> list[str]:
    return [name, str(s.n), _pct(s.median_abs_pct_error), _pct(s.p90_abs_pct_error),
            _pct(s.median_signed_pct_error, True), _pct(s.max_abs_pct_error), str(s.n_not_fit)]


def _print_summary(con: Any, summary: Summary) -> None:
    from rich.table import Table

    t = Table(title="Error summary (scored rows only; abs % error; signed + = optimistic)",
              title_justify="left")
    for col in ("group", "n", "median", "p90", "signed median", "max", "not fit"):
        t.add_column(col, justify="left" if col == "group" else "right")
    t.add_row(*_stats_row("overall", summary.overall), style="bold")
    t.add_section()
    for name, s in summary.by_phase.items():
        t.add_row(*_stats_row(f"phase: {name}", s))
    t.add_section()
    for name, s in summary.by_kind.items():
        t.add_row(*_stats_row(f"kind: {name}", s))
    t.add_section()
    for name, s in summary.by_source.items():
        t.add_row(*_stats_row(f"source: {name}", s))
    con.print(t)
    if summary.calibration_rows:
        con.print("Calibration rows (fitted, not scored): "
                  + api.validation.compress_ids(summary.calibration_rows))
    if summary.not_fitting:
        con.print("[bold]Finding:[/bold] published configurations predicted NOT to fit in "
                  "memory: " + api.validation.compress_ids(summary.not_fitting))
    if summary.skipped:
        con.print(f"Skipped {sum(len(v) for v in summary.skipped.values())} rows:")
        for reason, ids in summary.skipped.items():
            con.print(f"  {len(ids):4d}  {reason}: {api.validation.compress_ids(ids)}",
                      soft_wrap=True)
