"""`accelmap validate --local MODEL`: a real run on this machine next to the prediction."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from accelmap import api
from accelmap.cli.common import MAX_LOCAL_BATCH, MAX_LOCAL_SEQ, MAX_REPS, console, emit_json, fmt

LocalOpt = Annotated[str | None, typer.Option(
    "--local", help="Run this model (preset, spec YAML or config.json) on the local device and "
    "compare time and peak memory with the prediction.", show_default=False)]
DeviceOpt = Annotated[str | None, typer.Option(
    "--device", help="--local: cpu, cuda, cuda:1, ... (default: cuda if available, else cpu).",
    show_default=False)]
StepsOpt = Annotated[int, typer.Option("--steps", min=1, max=MAX_REPS,
                                       help="--local: timed steps (median).")]
WarmupOpt = Annotated[int, typer.Option("--warmup", min=0, max=MAX_REPS,
                                        help="--local: untimed steps first.")]
BatchOpt = Annotated[int, typer.Option("--batch", min=1, max=MAX_LOCAL_BATCH,
                                       help="--local: sequences per step.")]
SeqOpt = Annotated[int, typer.Option("--seq", min=1, max=MAX_LOCAL_SEQ,
                                     help="--local: training sequence and "
                                     "prompt length.")]
DecodeOpt = Annotated[int, typer.Option("--decode-tokens", min=1, max=MAX_LOCAL_SEQ,
                                        help="--local: tokens "
                                        "generated one at a time (decode steps).")]
ScaleOpt = Annotated[str, typer.Option(
    "--scale", help="--local: auto (presets above 50 M parameters become tiny), tiny (~2-4 M), "
    "small (~20-30 M) or full.")]
DtypeOpt = Annotated[str | None, typer.Option(
    "--dtype", help="--local: fp32, bf16 or fp16 (default: bf16 on GPUs, fp32 on CPUs).",
    show_default=False)]
ImplOpt = Annotated[str, typer.Option(
    "--impl", help="--local: whose model runs: accelmap (the project's PyTorch model) or hf "
    "(Hugging Face transformers from the preset's config, random weights; needs the hf extra).")]
CompiledOpt = Annotated[bool, typer.Option(
    "--compiled-decode", help="--local --impl hf: also time decode over a StaticCache under "
    "torch.compile(mode='reduce-overhead') (compiles first: minutes on a CPU).")]
HwOpt = Annotated[str | None, typer.Option(
    "--hw", help="--local: catalog accelerator to predict with (default: from the device name "
    "for GPUs, the local CPU description for CPUs; 'local' = the device of the newest local "
    "profile). Without --profile the newest profile of that accelerator is used, and said.",
    show_default=False)]


def validate_local(model: str, device: str | None, steps: int, warmup: int, batch: int,
                   seq: int, decode_tokens: int, scale: str, dtype: str | None,
                   profile: str | None, hw: str | None, db: Path | None,
                   json_out: bool, impl: str = "accelmap", compiled_decode: bool = False) -> None:
    result = api.validate_local(model, device, steps=steps, warmup=warmup, batch=batch, seq=seq,
                                decode_tokens=decode_tokens, scale=scale, dtype=dtype,
                                profile=profile, hw=hw, db=db, impl=impl,
                                compiled_decode=compiled_decode)
    if json_out:
        emit_json(result.to_dict())
        return
    render(list(result.rows), result.run, result.run_id, result.db)


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return fmt(v, "bytes") if unit == "B" else fmt(v, "time")


def render(rows: list[Any], run: Any, run_id: str, db: str) -> None:
    from rich.table import Table

    s = run.settings
    con = console()
    con.print(f"Local run ({s.impl}): {run.spec.id} on {run.device}, {s.dtype}, batch "
              f"{s.batch}, seq "
              f"{s.seq}, {s.decode_tokens} decode tokens, median of {s.steps} after "
              f"{s.warmup} warm-up", soft_wrap=True)
    t = Table()
    for col in ("row", "metric", "measured", "predicted", "error %", "status"):
        t.add_column(col, justify="right" if col in ("measured", "predicted", "error %")
                     else "left")
    for r in rows:
        err = "-" if r.signed_pct_error is None else f"{r.signed_pct_error:+.1f}"
        status = r.status.value if r.skipped_reason is None else f"skipped: {r.skipped_reason}"
        t.add_row(r.row_id, r.metric, _value(r.measured, r.unit), _value(r.predicted, r.unit),
                  err, status)
    con.print(t)
    for note in rows[0].notes if rows else ():
        con.print(f"  {note}", soft_wrap=True)
    con.print("  signed error: + = accelmap predicts faster / smaller than measured")
    con.print(f"  stored as run {run_id} in {db}")
