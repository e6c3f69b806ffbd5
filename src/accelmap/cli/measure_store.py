"""`accelmap measure list/show/export` (the measurement store) and `accelmap calibrate`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from accelmap import api
from accelmap.cli.common import (
    CatalogOpt,
    DbOpt,
    JsonOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)

KindOpt = Annotated[str | None, typer.Option(
    "--kind", help="Only this kind: matmul, bandwidth, collective, local_run.")]

_UNIT_DIM = {"FLOP/s": "flops", "B/s": "bandwidth", "s": "time"}


def _value(value: float, unit: str) -> str:
    dim = _UNIT_DIM.get(unit)
    return fmt(value, dim) if dim else f"{value:.4g} {unit}"


def list_cmd(kind: KindOpt = None, db: DbOpt = None, json_out: JsonOpt = False) -> None:
    """List the stored measurement runs (newest last) and the calibration profiles.

    Examples:
      accelmap measure list
      accelmap measure list --kind matmul --json
      accelmap measure list --db ./lab.sqlite
    """
    from dataclasses import asdict

    store = api.open_store(db)
    runs = store.runs(api.measurement.measurement_kind(kind))
    profiles = store.list_profiles()
    for line in store.damaged_profiles():
        sys.stderr.write(f"warning: {line}\n")
    if json_out:
        emit_json({"store": str(store.path), "runs": [asdict(r) for r in runs],
                   "profiles": [{"name": p.name, "accelerator_id": p.accelerator_id,
                                 "created_at": p.created_at} for p in profiles]})
        return
    from rich.table import Table

    con = console()
    if not runs:
        con.print(f"no measurements in {store.path}"
                  + (f" of kind {kind}" if kind else "")
                  + ": run 'accelmap measure matmul' (or bandwidth, collectives)")
    else:
        t = Table(title=f"Measurement runs in {store.path}")
        for c in ("run", "time (UTC)", "kind", "device", "accelerator", "points", "best"):
            t.add_column(c, justify="right" if c in ("points", "best") else "left")
        for r in runs:
            t.add_row(r.run_id, r.created_at, r.kind, r.device, r.accelerator_id or "-",
                      str(r.count), _value(r.best, r.unit))
        con.print(t)
    for p in profiles:
        con.print(f"profile {p.name}: {p.accelerator_id}, made {p.created_at}", highlight=False)


def show_cmd(
    run_id: Annotated[str, typer.Argument(help="Run id (or a unique prefix) from "
                                          "`accelmap measure list`.")],
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show every measurement of one run, with its device, software and settings.

    Examples:
      accelmap measure show 3f2a9c1b07de
      accelmap measure show 3f2a --json
    """
    store = api.open_store(db, must_exist=True)
    rid = api.measurement.find_run(store, run_id)
    ms = store.query(run_id=rid)
    if json_out:
        emit_json({"run_id": rid, "store": str(store.path),
                   "measurements": [m.to_dict() for m in ms]})
        return
    from rich.table import Table

    con = console()
    first = ms[0]
    con.print(f"run [bold]{rid}[/bold]: {first.kind.value} on {first.device} "
              f"({first.accelerator_id or 'no catalog id'}), {first.created_at}")
    facts = first.environment.facts()
    if facts:
        con.print("environment: " + ", ".join(f"{k} {v}" for k, v in sorted(facts.items())),
                  highlight=False)
    t = Table()
    for c in ("dtype", "label", "value", "median", "spread", "reps", "settings"):
        t.add_column(c, justify="right" if c in ("value", "median", "spread", "reps")
                     else "left")
    for m in ms:
        settings = " ".join(f"{k}={v}" for k, v in sorted(m.settings.items()))
        t.add_row(m.dtype or "-", m.label, _value(m.value, m.unit), _value(m.median, m.unit),
                  f"{m.spread:.1%}", str(m.repetitions), settings)
    con.print(t)


def export_cmd(
    out: Annotated[Path, typer.Option("--out", help="File to write.")],
    format: Annotated[str, typer.Option("--format", help="json (measurements and profiles) "
                                        "or csv (measurements, one row each).")] = "json",
    kind: KindOpt = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Export stored measurements to a JSON or CSV file.

    Examples:
      accelmap measure export --out measurements.json
      accelmap measure export --out matmul.csv --format csv --kind matmul
    """
    store = api.open_store(db, must_exist=True)
    n = store.export(out, format, kind=api.measurement.measurement_kind(kind))
    for line in store.damaged_profiles():
        sys.stderr.write(f"warning: {line} (not exported)\n")
    if json_out:
        emit_json({"path": str(out), "format": format.lower(), "measurements": n})
    else:
        console().print(f"wrote {n} measurements to {out}", highlight=False)


def calibrate_cmd(
    name: Annotated[str | None, typer.Option(
        "--name", help="Profile name (default: the accelerator id); an existing profile of "
                       "that name is replaced.")] = None,
    hw: Annotated[str | None, typer.Option(
        "--hw", help="Accelerator whose measurements to use (catalog id or name; default: "
                     "this machine's CPU, or the only accelerator in the store).")] = None,
    db: DbOpt = None,
    json_out: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Turn stored matmul and bandwidth measurements into a named calibration profile.

    A profile holds, for one accelerator: the best measured matmul efficiency
    per dtype, the efficiency-vs-GEMM-size curve, and the measured bandwidth.
    `estimate`, `roofline` and `plan` use it with --profile NAME in place of
    the datasheet-derived defaults.

    Examples:
      accelmap measure matmul --dtype bf16 && accelmap measure bandwidth
      accelmap calibrate --hw h100-sxm5-80gb --name my-h100
      accelmap estimate llama-3.1-8b --hw h100-sxm5-80gb --profile my-h100
    """
    store = api.open_store(db, must_exist=True)
    cal = api.calibrate(store, hw, name, get_catalog(catalog))
    if json_out:
        emit_json(cal.to_dict())
        return
    profile, acc, matmul, bw = cal.profile, cal.accelerator, cal.matmul, cal.bandwidth
    from rich.table import Table

    con = console()
    con.print(f"profile [bold]{profile.name}[/bold] for {acc.id}, saved in {store.path}")
    t = Table(title="Measured vs catalog")
    for c in ("what", "measured", "at", "vs peak", "peak used", "fraction", "curve points"):
        t.add_column(c, justify="left" if c in ("what", "at", "peak used") else "right")
    for d, b in matmul.items():
        t.add_row(f"matmul {d.value}", fmt(b.value, "flops"), b.label, fmt(b.peak, "flops"),
                  b.peak_source, f"{b.efficiency:.1%}" if b.efficiency is not None else "-",
                  str(len(profile.matmul_curve.get(d, ()))))
    if bw is not None:
        t.add_row("memory bandwidth", fmt(bw.value, "bandwidth"), bw.label,
                  fmt(bw.peak, "bandwidth"), "catalog" if bw.peak else "not in the catalog",
                  f"{bw.efficiency:.1%}" if bw.efficiency is not None else "-", "-")
    con.print(t)
    con.print(f"source: {profile.source}", highlight=False)
    at = f" --db {db}" if db is not None else ""
    con.print(f"use it: accelmap estimate MODEL --hw {acc.id} --profile {profile.name}{at}",
              highlight=False)
    if profile.device is not None:  # a measured local device: addressable as 'local' too
        con.print(f"     or: accelmap estimate MODEL --hw local{at}   (the newest local "
                  f"profile); accelmap validate --local MODEL{at} uses it too", highlight=False)
