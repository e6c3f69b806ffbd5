"""`accelmap measure matmul` and `accelmap measure bandwidth`: what this hardware really achieves.

On a machine without a GPU, install PyTorch's CPU wheel (`pip install torch --index-url
https://download.pytorch.org/whl/cpu`): the default wheel on Linux brings the CUDA libraries,
gigabytes that a CPU never uses.

Both store every measurement in the measurement store (``--db``, else ``$ACCELMAP_DB``, else the
user's data directory) and compare with the catalog: the accelerator named by ``--hw``, else one
guessed from the device name, else (on the CPU) a description of the local CPU whose peaks are
derived from its ISA flags. The sub-app that holds these commands is wired in ``cli/app.py``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap import api
from accelmap.cli.common import (
    MAX_REPS,
    CatalogOpt,
    DbOpt,
    JsonOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)
from accelmap.cli.plan import _progress

if TYPE_CHECKING:
    from accelmap.api.measurement import BandwidthRun, MatmulRun

DeviceOpt = Annotated[str, typer.Option(
    "--device", "-d", help="Torch device: cpu, cuda, cuda:1, mps, xpu ... (cpu also works "
    "without PyTorch, through NumPy).")]
HwOpt = Annotated[str | None, typer.Option(
    "--hw", help="Catalog accelerator to compare with (id or name; 'local' = this CPU's "
    "description). Default: guessed from the device name; on the CPU the local description.",
    show_default=False)]
BackendOpt = Annotated[str | None, typer.Option(
    "--backend", help="torch or numpy (default: torch when installed, else numpy on the CPU).",
    show_default=False)]
RepsOpt = Annotated[int, typer.Option("--reps", min=1, max=MAX_REPS,
                                      help="Timed repetitions per shape/size "
                                      "(median and spread over these).")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Compare with --hw even when it is not the device measured (the run is "
    "stored as that accelerator's; calibrate still ignores it).")]
FlushOpt = Annotated[bool | None, typer.Option(
    "--flush/--no-flush", help="Write a buffer twice the last-level cache before every "
    "repetition (default: on, except for matmul on the CPU).", show_default=False)]

MATMUL_EXAMPLES = (
    "Examples:\n\n"
    "  accelmap measure matmul                      # this CPU, bf16, torch (or numpy)\n\n"
    "  accelmap measure matmul --dtype bf16 --dtype fp32 --budget 30s\n\n"
    "  accelmap measure matmul --device cuda --dtype bf16 --dtype fp8 --hw h100-sxm5-80gb\n\n"
    "  accelmap measure matmul --backend numpy --dtype fp32 --json\n\n"
    "Shapes are derived from the device: multiples of its matrix tile whose tile count fills "
    "whole waves of its compute units, within its memory and the time budget, then refined "
    "around the best shape."
)
BANDWIDTH_EXAMPLES = (
    "Examples:\n\n"
    "  accelmap measure bandwidth                   # this CPU: copy, read, write\n\n"
    "  accelmap measure bandwidth --device cuda --hw h100-sxm5-80gb --budget 20s\n\n"
    "  accelmap measure bandwidth --kernel copy --json\n\n"
    "Buffers are at least 4x the on-chip memory (STREAM's rule); copy counts read + write bytes."
)


def _warn(lines: tuple[str, ...]) -> None:
    for line in lines:
        sys.stderr.write(line + "\n")


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f} %" if x is not None else "-"


def matmul_cmd(
    device: DeviceOpt = "cpu",
    dtype: Annotated[list[str], typer.Option(
        "--dtype", help="bf16, fp16, fp32, tf32, fp8, int8, fp64; repeatable.")] = ["bf16"],  # noqa: B006
    hw: HwOpt = None,
    budget: Annotated[str, typer.Option(
        "--budget", help="Time of sweeping per dtype: 30s, 2min (a bare number is seconds; "
        "0.1 s to one day).")] = "30s",
    backend: BackendOpt = None,
    reps: RepsOpt = 5,
    flush: FlushOpt = None,
    force: ForceOpt = False,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Maximum achievable matmul FLOPS: sweep GEMM shapes, report the best vs the dense peak."""
    with _progress(True, f"measuring matmul ({budget} per dtype)"):
        run = api.measure_matmul(device, dtype, hw, budget, backend, reps, flush, db,
                                 get_catalog(catalog), force=force)
    _warn(run.warnings)
    if json_out:
        emit_json(run.to_dict())
        return
    _print_matmul(run)


matmul_cmd.__doc__ = (matmul_cmd.__doc__ or "") + "\n\n" + MATMUL_EXAMPLES


def bandwidth_cmd(
    device: DeviceOpt = "cpu",
    kernel: Annotated[list[str], typer.Option(
        "--kernel", help="copy, read, write; repeatable.")] = ["copy", "read", "write"],  # noqa: B006
    hw: HwOpt = None,
    budget: Annotated[str, typer.Option(
        "--budget", help="Time for all kernels and sizes together: 20s, 1min (a bare number is "
        "seconds; 0.1 s to one day).")] = "20s",
    backend: BackendOpt = None,
    size: Annotated[list[str] | None, typer.Option(
        "--size", help="Buffer size such as '2 GiB' (repeatable); default: 4x and 8x the "
        "on-chip memory.", show_default=False)] = None,
    reps: RepsOpt = 5,
    flush: FlushOpt = None,
    force: ForceOpt = False,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Achievable memory bandwidth: copy/read/write over buffers far above the caches."""
    with _progress(True, "measuring memory bandwidth"):
        run = api.measure_bandwidth(device, kernel, hw, budget, backend, size, reps, flush,
                                    db, get_catalog(catalog), force=force)
    _warn(run.warnings)
    if json_out:
        emit_json(run.to_dict())
        return
    _print_bandwidth(run)


bandwidth_cmd.__doc__ = (bandwidth_cmd.__doc__ or "") + "\n\n" + BANDWIDTH_EXAMPLES


def _print_matmul(run: MatmulRun) -> None:
    from rich.table import Table

    results, acc, how = run.results, run.accelerator, run.compared_with
    con = console()
    first = results[0]
    table = Table(title=f"Maximum achievable matmul: {first.device}")
    for col in ("dtype", "backend", "best", "shape (MxNxK)", "dense peak", "efficiency",
                "spread", "shapes", "time"):
        table.add_column(col, justify="left" if col in ("dtype", "backend", "shape (MxNxK)")
                         else "right")
    for r in results:
        peak = fmt(r.peak, "flops") if r.peak else "-"
        table.add_row(r.dtype.value, r.backend, fmt(r.best_flops_per_s, "flops"), r.best_shape,
                      ("~" if r.peak_derived else "") + peak, _pct(r.efficiency),
                      _pct(r.best.timing.spread), str(len(r.points)), f"{r.elapsed_s:.1f} s")
    con.print(table)
    for r in results:
        curve = Table(title=f"{r.dtype.value}: efficiency vs GEMM size (fastest shape per size)")
        for col in ("GFLOP", "shape", "achieved", "efficiency", "phase"):
            curve.add_column(col, justify="left" if col in ("shape", "phase") else "right")
        for p in r.curve:
            curve.add_row(f"{p.gemm.flops / 1e9:,.3g}", p.gemm.label, fmt(p.flops_per_s, "flops"),
                          _pct(p.efficiency), p.phase)
        con.print(curve)
    who = f"{acc.name} ({acc.id}); {how}" if acc else how
    con.print(f"Compared with: {who}. '~' marks a derived peak (cores x FLOP/cycle x clock).")
    con.print(f"Stored {sum(len(r.measurements) for r in results)} measurements in {run.db} "
              f"(run {run.run_id}).")


def _print_bandwidth(run: BandwidthRun) -> None:
    from rich.table import Table

    r, acc, how = run.result, run.accelerator, run.compared_with
    con = console()
    table = Table(title=f"Achievable memory bandwidth: {r.device} ({r.backend})")
    for col in ("kernel", "buffer", "achieved", "catalog", "efficiency", "spread", "best"):
        table.add_column(col, justify="left" if col in ("kernel", "best") else "right")
    for p in r.points:
        best = r.best(p.kind)
        table.add_row(p.kind, fmt(p.buffer_bytes, "bytes"), fmt(p.bytes_per_s, "bandwidth"),
                      fmt(r.catalog, "bandwidth"), _pct(p.efficiency), _pct(p.timing.spread),
                      "*" if best is p else "")
    con.print(table)
    who = f"{acc.name} ({acc.id}); {how}" if acc else how
    con.print(f"Compared with: {who}. Caches: {fmt(r.cache_bytes, 'bytes')} ({r.cache_source}); "
              "copy counts read + write bytes.")
    con.print(f"Stored {len(r.measurements)} measurements in {run.db} (run {run.run_id}).")


def overhead_cmd(
    device: DeviceOpt = "cpu",
    hw: HwOpt = None,
    reps: RepsOpt = 7,
    force: ForceOpt = False,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Per-operation overhead of eager PyTorch: the fixed cost of one tiny op (dispatch,
    launch, inter-kernel gap), and the host seconds per dispatched aten op inside a micro
    transformer (forward pass; backward and optimizer). `accelmap calibrate` puts both in the
    profile: the first replaces the eager launch default for eager stacks (eager, megatron,
    fsdp), the second is what eager PyTorch on a CPU (eager-cpu) pays per dispatch.

    Examples:
      accelmap measure overhead --device cuda
      accelmap measure overhead --device cpu --json
    """
    with _progress(True, "measuring per-kernel overhead"):
        run = api.measure_overhead(device, hw, reps, db, get_catalog(catalog), force=force)
    _warn(run.warnings)
    if json_out:
        emit_json(run.to_dict())
        return
    result = run.result
    con = console()
    con.print(f"{result.device}: {result.seconds_per_op * 1e6:.2f} µs per eager op "
              f"(spread {100 * result.spread:.1f} %); stored as run {run.run_id} in "
              f"{run.db}", highlight=False)
    for phase, s in sorted(result.dispatch_s.items()):
        if phase == "graph-replay":
            con.print(f"  {s * 1e6:.2f} µs per kernel of a replayed CUDA graph (graph stacks)",
                      highlight=False)
            continue
        con.print(f"  {s * 1e6:.2f} µs per dispatched aten op, {phase} pass of a micro "
                  "transformer (the eager stacks' host cost)", highlight=False)


def attention_cmd(
    device: DeviceOpt = "cpu",
    dtype: Annotated[list[str], typer.Option(
        "--dtype", help="fp32, bf16 or fp16; repeatable (each measured). Default: the "
        "device's own, bf16 on a GPU (flash kernels), fp32 on a CPU.")] = [],  # noqa: B006
    hw: HwOpt = None,
    budget: Annotated[float, typer.Option(
        "--budget", min=0.1, help="Seconds for all sequence lengths and head dims.")] = 10.0,
    reps: RepsOpt = 5,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Fused causal attention (PyTorch's scaled_dot_product_attention), forward and backward:
    which kernel PyTorch picks on this device and its efficiency against the matrix peak by
    sequence length, for head dims 64 and 128. `accelmap calibrate` puts the curves in the
    profile, where they replace the GEMM-relative attention rule.

    Examples:
      accelmap measure attention                    # this CPU, fp32
      accelmap measure attention --device cuda --dtype bf16 --budget 20
    """
    asked: list[str | None] = list(dtype) or [None]  # none: the device's own dtype
    for one in asked:
        _attention_one(api.measure_attention(device, one, hw, budget, reps, db,
                                             get_catalog(catalog)), json_out)


def _attention_one(run: Any, json_out: bool) -> None:
    if json_out:
        emit_json(run.to_dict())
        return
    from rich.table import Table

    r = run.result
    con = console()
    t = Table(title=f"Fused attention: {r.device}, {r.dtype.value}, kernel {r.kernel}")
    for col in ("head dim", "seq", "keys/query", "pass", "achieved", "efficiency", "time"):
        t.add_column(col, justify="left" if col == "pass" else "right")
    for p in r.points:
        eff = p.flops_per_s / r.peak if r.peak else None
        t.add_row(str(p.head_dim), str(p.seq), f"{p.keys:g}",
                  "backward" if p.backward else "forward", fmt(p.flops_per_s, "flops"),
                  _pct(eff), fmt(p.seconds, "time"))
    con.print(t)
    con.print(f"Compared with: {run.compared_with}; efficiency against the dtype's matrix "
              "peak, FLOPs counted as the operator graph counts them (causal mean keys, "
              "backward 2.5x forward).")
    con.print(f"Stored {len(r.measurements)} measurements in {run.db} (run {run.run_id}).")
