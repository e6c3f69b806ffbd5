"""`accelmap measure collectives`: torchrun on this machine, nccl-tests bus bandwidth."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from accelmap import api
from accelmap.cli.common import MAX_PROCS, DbOpt, JsonOpt, console, emit_json

NprocOpt = Annotated[int, typer.Option("--nproc", min=1, max=MAX_PROCS,
                                       help="Processes (one per GPU; on a CPU "
                                       "any number, each with one thread).")]
SizesOpt = Annotated[str, typer.Option("--sizes", help="Per-rank message sizes, comma list; "
                                       "K/M/G are powers of 1024 (nccl-tests).")]
OpsOpt = Annotated[str, typer.Option("--ops", help="all, or a comma list of all_reduce, "
                                     "all_gather, reduce_scatter, all_to_all, send_recv.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds before torchrun "
                                           "is stopped.")]

EXAMPLES = (
    "Examples:\n\n"
    "  accelmap measure collectives --nproc 8 --sizes 1M,64M,1G\n\n"
    "  accelmap measure collectives --nproc 2 --ops all_reduce,all_gather --json\n\n"
    "Across nodes, start the worker on every node with torchrun's rendezvous arguments:\n\n"
    "  torchrun --nnodes 2 --node-rank 0 --rdzv-backend c10d --rdzv-endpoint HOST:29500 "
    "--nproc-per-node 8 -m accelmap.measure.collectives --sizes 64M,1G\n\n"
    "NCCL on GPUs, Gloo on CPUs. algbw = size / time; busbw = algbw x 2(n-1)/n (all-reduce), "
    "x (n-1)/n (all-gather, reduce-scatter, all-to-all), x 1 (send/recv), as nccl-tests "
    "PERFORMANCE.md defines them. Results go to the measurement store (accelmap measure list)."
)


def collectives_cmd(nproc: NprocOpt = 2, sizes: SizesOpt = "1K,64K,1M,16M",
                    ops: OpsOpt = "all", db: DbOpt = None, json_out: JsonOpt = False,
                    timeout: TimeoutOpt = 600.0) -> None:
    """Measure collectives with torch.distributed (torchrun) as nccl-tests does; store them."""
    from accelmap.cli.plan import _progress

    with _progress(True, f"measuring collectives on {nproc} processes"):
        report = api.measure_collectives(nproc=nproc, sizes=sizes, ops=ops, db=db,
                                         timeout=timeout)
    if json_out:
        emit_json(report)
        return
    render(report)


collectives_cmd.__doc__ = (collectives_cmd.__doc__ or "") + "\n\n" + EXAMPLES


def render(report: dict[str, Any]) -> None:
    from rich.table import Table

    rows = report.get("rows", [])
    n = rows[0]["world_size"] if rows else 0
    t = Table(title=f"Collectives: {report.get('backend')}, {n} ranks, {report.get('device')}",
              title_justify="left")
    for col in ("op", "size", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                "spread"):
        t.add_column(col, justify="left" if col in ("op", "type") else "right")
    for r in rows:
        t.add_row(r["op"], api.measurement.human_bytes(r["size_bytes"]), str(r["count"]),
                  r["dtype"],
                  f"{r['time_s'] * 1e6:,.1f}", f"{r['algbw'] / 1e9:.3f}",
                  f"{r['busbw'] / 1e9:.3f}", f"{r['spread']:.0%}")
    con = console()
    con.print(t)
    con.print(f"run {report.get('run_id')} stored in {report.get('db')}")
