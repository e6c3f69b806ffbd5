"""`accelmap measure list/show/export` (the measurement store) and `accelmap calibrate`.

Also the `--profile NAME` / `--db PATH` options that `estimate`, `roofline` and `plan` share,
and ``load_profile`` that turns them into a CalibrationProfile.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap.cli.common import (
    CatalogOpt,
    DbOpt,
    JsonOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)

if TYPE_CHECKING:
    from accelmap.catalog import Catalog
    from accelmap.cost.calibration import CalibrationProfile
    from accelmap.hardware.schema import Accelerator
    from accelmap.measure.store import Store

KindOpt = Annotated[str | None, typer.Option(
    "--kind", help="Only this kind: matmul, bandwidth, collective, local_run.")]

_UNIT_DIM = {"FLOP/s": "flops", "B/s": "bandwidth", "s": "time"}


def open_store(db: Path | None, must_exist: bool = False) -> Store:
    from accelmap.errors import InputError
    from accelmap.measure.store import ENV_DB, Store, default_path

    path = db.expanduser() if db is not None else default_path()
    if must_exist and not path.exists():
        raise InputError(f"no measurement store at {path}: run 'accelmap measure ...' and "
                         f"'accelmap calibrate' first, or give --db PATH (or set {ENV_DB})")
    return Store(path)


def load_profile(name: str | None, db: Path | None) -> CalibrationProfile | None:
    """The named profile from the store (None when no name was given)."""
    if name is None:
        return None
    return open_store(db, must_exist=True).load_profile(name)


def _kind(text: str | None) -> Any:
    from accelmap.errors import InputError
    from accelmap.measure.records import Kind

    if text is None:
        return None
    try:
        return Kind(text.lower())
    except ValueError:
        raise InputError(f"unknown measurement kind {text!r}; use one of "
                         f"{', '.join(k.value for k in Kind)}") from None


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

    store = open_store(db)
    runs = store.runs(_kind(kind))
    profiles = store.list_profiles()
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


def _find_run(store: Store, run_id: str) -> str:
    from accelmap.errors import InputError

    ids = [r.run_id for r in store.runs()]
    if run_id in ids:
        return run_id
    hits = sorted({i for i in ids if i.startswith(run_id)})
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise InputError(f"run id {run_id!r} matches {len(hits)} runs ({', '.join(hits[:5])}); "
                         "give more characters")
    recent = ", ".join(ids[-5:]) or "none stored yet"
    raise InputError(f"no run {run_id!r} in {store.path}; recent runs: {recent} "
                     "('accelmap measure list' lists them all)")


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
    store = open_store(db, must_exist=True)
    rid = _find_run(store, run_id)
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
    store = open_store(db, must_exist=True)
    n = store.export(out, format, kind=_kind(kind))
    if json_out:
        emit_json({"path": str(out), "format": format.lower(), "measurements": n})
    else:
        console().print(f"wrote {n} measurements to {out}", highlight=False)


def _local_accelerator() -> Accelerator | None:
    """This machine's CPU as an accelerator (``hardware/local.py``); None where that cannot be
    described (the module missing or the OS saying too little)."""
    try:
        from accelmap.hardware.local import local_cpu
    except ImportError:
        return None
    try:
        return local_cpu()
    except (OSError, ValueError):
        return None


def _accelerator(hw: str | None, store: Store, catalog: Catalog) -> Accelerator:
    from accelmap.errors import InputError, NotFoundError
    from accelmap.lookup import resolve

    local = _local_accelerator()
    stored = store.accelerators()
    if hw is None:
        if local is not None and local.id in stored:
            return local
        if len(stored) != 1:
            raise InputError("give --hw ACCELERATOR (stored measurements are of: "
                             f"{', '.join(stored) or 'none yet'})")
        hw = stored[0]
    if local is not None and hw.lower() in ("local", "cpu", local.id):
        return local
    try:
        return resolve(hw, catalog.accelerators, "accelerator", "accelmap hw list")
    except NotFoundError:
        if hw in stored:
            raise InputError(f"{hw} has measurements but no catalog entry to compare them "
                             "with; add it to a --catalog folder") from None
        raise


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
    from accelmap.measure.calibrate import best_bandwidth, best_matmul, calibrate

    store = open_store(db, must_exist=True)
    cat = get_catalog(catalog)
    acc = _accelerator(hw, store, cat)
    ms = store.query(accelerator_id=acc.id)
    profile = calibrate(ms, acc, name)
    store.save_profile(profile)
    matmul, bw = best_matmul(ms, acc), best_bandwidth(ms, acc)
    if json_out:
        emit_json({"store": str(store.path), "profile": profile.to_dict(),
                   "matmul": {d.value: {"best_flops": b.value, "label": b.label,
                                        "run_id": b.run_id, "peak_flops": b.peak,
                                        "peak_source": b.peak_source,
                                        "efficiency": b.efficiency}
                              for d, b in matmul.items()},
                   "bandwidth": None if bw is None else {
                       "best_bytes_per_s": bw.value, "label": bw.label, "run_id": bw.run_id,
                       "catalog_bytes_per_s": bw.peak, "efficiency": bw.efficiency}})
        return
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
    con.print(f"use it: accelmap estimate MODEL --hw {acc.id} --profile {profile.name}"
              + (f" --db {db}" if db is not None else ""), highlight=False)
