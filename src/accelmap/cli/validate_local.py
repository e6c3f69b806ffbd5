"""`accelmap validate --local MODEL`: a real run on this machine next to the prediction."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from accelmap.cli.common import console, emit_json, fmt

LocalOpt = Annotated[str | None, typer.Option(
    "--local", help="Run this model (preset, spec YAML or config.json) on the local device and "
    "compare time and peak memory with the prediction.", show_default=False)]
DeviceOpt = Annotated[str | None, typer.Option(
    "--device", help="--local: cpu, cuda, cuda:1, ... (default: cuda if available, else cpu).",
    show_default=False)]
StepsOpt = Annotated[int, typer.Option("--steps", min=1, help="--local: timed steps (median).")]
WarmupOpt = Annotated[int, typer.Option("--warmup", min=0, help="--local: untimed steps first.")]
BatchOpt = Annotated[int, typer.Option("--batch", min=1, help="--local: sequences per step.")]
SeqOpt = Annotated[int, typer.Option("--seq", min=1, help="--local: training sequence and "
                                     "prompt length.")]
DecodeOpt = Annotated[int, typer.Option("--decode-tokens", min=1, help="--local: tokens "
                                        "generated one at a time (decode steps).")]
ScaleOpt = Annotated[str, typer.Option(
    "--scale", help="--local: auto (presets above 50 M parameters become tiny), tiny (~2-4 M), "
    "small (~20-30 M) or full.")]
DtypeOpt = Annotated[str | None, typer.Option(
    "--dtype", help="--local: fp32, bf16 or fp16 (default: bf16 on GPUs, fp32 on CPUs).",
    show_default=False)]
HwOpt = Annotated[str | None, typer.Option(
    "--hw", help="--local: catalog accelerator to predict with (default: from the device name "
    "for GPUs, the local CPU description for CPUs).", show_default=False)]


def validate_local(model: str, device: str | None, steps: int, warmup: int, batch: int,
                   seq: int, decode_tokens: int, scale: str, dtype: str | None,
                   profile: str | None, hw: str | None, db: Path | None,
                   json_out: bool) -> None:
    from accelmap.catalog import load_catalog
    from accelmap.cli.models import load_model
    from accelmap.measure.backends import default_device
    from accelmap.measure.local_run import LocalSettings, measurements, run_local
    from accelmap.measure.store import Store
    from accelmap.validate.local import (
        device_for,
        local_accelerator,
        predict_local,
        profile_for,
        summary,
    )

    catalog = load_catalog()
    spec = load_model(model, catalog)
    dev = device or default_device("validate --local")
    settings = LocalSettings(device=dev, dtype=dtype or ("bf16" if dev.startswith("cuda")
                                                         else "fp32"),
                             batch=batch, seq=seq, steps=steps, warmup=warmup,
                             decode_tokens=decode_tokens)
    store = Store(db)
    prof = profile_for(profile, store)
    acc, fraction, how = local_accelerator(dev, hw, catalog)
    device_for(acc, fraction, prof)  # fail before the run, not after it
    run = run_local(spec, settings, scale)
    cmp = predict_local(run, acc, fraction, prof, how)
    run_id = store.add(measurements(run, acc.id, cmp.predicted))
    if json_out:
        emit_json({"rows": [r.to_dict() for r in cmp.rows], "summary": summary(cmp.rows),
                   "run": {"run_id": run_id, "db": str(store.path), "device": run.device,
                           "model": run.spec.id, "params": run.params,
                           "scale": run.scale_note, "settings": vars(settings),
                           "memory_method": run.memory_method}})
        return
    render(cmp.rows, run, run_id, str(store.path))


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return fmt(v, "bytes") if unit == "B" else fmt(v, "time")


def render(rows: list[Any], run: Any, run_id: str, db: str) -> None:
    from rich.table import Table

    s = run.settings
    con = console()
    con.print(f"Local run: {run.spec.id} on {run.device}, {s.dtype}, batch {s.batch}, seq "
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
