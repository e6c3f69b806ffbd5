"""Collectives through torch.distributed, measured and reported the way nccl-tests does.

One process per device, started by torchrun (NCCL on GPUs, Gloo on CPUs, chosen automatically)::

    torchrun --nproc-per-node 8 -m accelmap.measure.collectives --sizes 1M,64M,1G
    torchrun --nnodes 2 --node-rank 0 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        --nproc-per-node 8 -m accelmap.measure.collectives --ops all_reduce

``accelmap measure collectives`` starts the single-machine form itself (:func:`run_collectives`).

What is timed, following nccl-tests (NVIDIA/nccl-tests, doc/PERFORMANCE.md; src/common.cu):

- sizes are per-rank buffers as nccl-tests counts them (``cost/collectives.py``): the all-reduce
  buffer, the all-gather OUTPUT, the reduce-scatter INPUT, the all-to-all send buffer, the
  send/recv message; K/M/G are powers of 1024 as in ``nccl-tests -b 8 -e 128M``; the element
  count is rounded down to a multiple of the world size, as nccl-tests does;
- all-reduce runs in place (torch's all_reduce is), the others out of place;
- send/recv: every rank sends to rank+1 and receives from rank-1 at the same time (nccl-tests
  sendrecv_perf);
- warm-up iterations, then per repetition: barrier, device sync, ``iters`` back-to-back
  collectives, device sync; time = elapsed / iters; the per-rank times are averaged across ranks
  (nccl-tests' default ``-a 1``); the median over repetitions is reported with its spread;
- algbw = size / time, busbw = algbw x bus factor (2(n-1)/n all-reduce, (n-1)/n all-gather,
  reduce-scatter and all-to-all, 1 send/recv): ``cost.collectives.bus_bandwidth``.

Rank 0 stores one :class:`Measurement` (kind ``collective``, value = busbw in B/s) per op and
size, and prints the table (``--json``: a JSON object); the other ranks print nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from accelmap.cost.collectives import Collective, bus_bandwidth, bus_factor
from accelmap.errors import AccelmapError, InputError
from accelmap.measure.backends import TORCH_HINT, import_torch
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.torch_backend import TorchBackend

if TYPE_CHECKING:
    from accelmap.measure.environment import Environment

OPS: tuple[Collective, ...] = (Collective.ALL_REDUCE, Collective.ALL_GATHER,
                               Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL,
                               Collective.SEND_RECV)
DEFAULT_SIZES = "1K,64K,1M,16M"
WARMUP = 5  # nccl-tests -w default
MAX_ITERS = 20  # nccl-tests -n default; fewer for large messages (see TARGET_REP_S)
REPS = 5
TARGET_REP_S = 0.05  # auto iterations: about 50 ms per repetition
_SUFFIX = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


class CollectivesError(AccelmapError):
    """torchrun or the measurement processes failed; the message carries their last words."""


@dataclass(frozen=True)
class CollectiveResult:
    op: str
    size_bytes: int  # actual per-rank buffer (after rounding the count)
    count: int  # elements
    dtype: str
    world_size: int
    time_s: float  # median over repetitions of the rank-averaged time per collective
    spread: float  # (max - min) / median of the repetitions
    algbw: float  # B/s
    busbw: float  # B/s
    bus_factor: float
    iters: int
    reps: int
    in_place: bool


MAX_MESSAGE_BYTES = 64 * 2**30  # per rank: past any device's memory for one collective


def parse_sizes(text: str) -> list[int]:
    """'1K,64K,1M,16M' -> bytes; K/M/G are binary (nccl-tests), 'KiB'/'KB' read the same."""
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?)(?:I?B)?", part.upper())
        if not m:
            raise InputError(f"cannot read message size {part!r}; write e.g. 1K,64K,1M,16M "
                             "(K/M/G are powers of 1024, as in nccl-tests)")
        size = int(float(m.group(1)) * _SUFFIX[m.group(2)])
        if size <= 0:
            raise InputError(f"message size {part!r} must be positive")
        if size > MAX_MESSAGE_BYTES:
            raise InputError(f"message size {part[:30]!r} is more than 64G per rank; write e.g. "
                             "1K,64K,1M,16M")
        out.append(size)
    if not out:
        raise InputError("no message sizes given; write e.g. --sizes 1K,64K,1M")
    return out


def parse_ops(text: str) -> list[Collective]:
    if text.strip().lower() in ("", "all"):
        return list(OPS)
    out: list[Collective] = []
    for name in (p.strip().lower().replace("-", "_") for p in text.split(",")):
        if name in ("sendrecv", "p2p"):
            name = "send_recv"
        if name not in {o.value for o in OPS}:
            raise InputError(f"unknown collective {name!r}; use all or a comma list of "
                             f"{', '.join(o.value for o in OPS)}")
        out.append(Collective(name))
    return out


def human_bytes(n: float) -> str:
    for unit, scale in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:g}{unit}"
    return f"{n:g}B" if n < 1024 else f"{n / 1024:.3g}K"


# --- the worker (runs in every torchrun process) ------------------------------------------------
def _dtype(torch: Any, name: str) -> Any:
    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if name not in table:
        raise InputError(f"unknown dtype {name!r}; use fp32, bf16 or fp16")
    return table[name]


def _op_fn(be: TorchBackend, op: Collective, size: int, dtype: Any, rank: int,
           n: int) -> tuple[Callable[[], None], int, int]:
    """The collective as a no-argument call on preallocated buffers; (call, count, bytes)."""
    import torch.distributed as dist

    torch, device = be.torch, be.dev

    elem = torch.empty((), dtype=dtype).element_size()
    # send/recv moves the whole message; the others a multiple of n elements (nccl-tests)
    count = max(size // elem, 1) if op is Collective.SEND_RECV else max(size // elem // n, 1) * n
    full = torch.ones(count, dtype=dtype, device=device)
    shard = torch.ones(count // n, dtype=dtype, device=device)
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if op is Collective.ALL_REDUCE:
        def call() -> None:
            dist.all_reduce(full)
    elif op is Collective.ALL_GATHER:
        def call() -> None:
            ag(full, shard)
    elif op is Collective.REDUCE_SCATTER:
        def call() -> None:
            rs(shard, full)
    elif op is Collective.ALL_TO_ALL:
        out = torch.empty_like(full)

        def call() -> None:
            dist.all_to_all_single(out, full)
    else:
        recv = torch.empty_like(full)
        nxt, prv = (rank + 1) % n, (rank - 1) % n

        def call() -> None:
            ops = [dist.P2POp(dist.isend, full, nxt), dist.P2POp(dist.irecv, recv, prv)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
    return call, count, count * elem


def _measure(be: TorchBackend, call: Callable[[], None], n: int, iters: int, reps: int,
             warmup: int) -> tuple[list[float], int]:
    """Rank-averaged seconds per collective for each repetition, and the iterations used."""
    import torch.distributed as dist

    torch, device, sync = be.torch, be.dev, be.synchronize

    for _ in range(warmup):
        call()
    sync()
    if iters <= 0:  # auto: about TARGET_REP_S per repetition, the slowest rank decides
        t0 = time.perf_counter()
        call()
        sync()
        one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
        dist.all_reduce(one, op=dist.ReduceOp.MAX)
        iters = int(min(MAX_ITERS, max(1, TARGET_REP_S // max(float(one.item()), 1e-9))))
    times = []
    for _ in range(reps):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        sync()
        times.append((time.perf_counter() - t0) / iters)
    t = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(t)  # sum over ranks, then the mean (nccl-tests -a 1)
    return [float(x) / n for x in t.cpu().tolist()], iters


def run_worker(args: argparse.Namespace) -> list[CollectiveResult]:
    torch = import_torch("measuring collectives")
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available() and args.backend in ("auto", "nccl")
    backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(local_rank)
    be = TorchBackend(torch, f"cuda:{local_rank}" if cuda else "cpu")
    dist.init_process_group(backend)
    try:
        rank, n = dist.get_rank(), dist.get_world_size()
        dtype = _dtype(torch, args.dtype)
        results = []
        for op in parse_ops(args.ops):
            if op is Collective.SEND_RECV and n < 2:
                continue
            for size in parse_sizes(args.sizes):
                call, count, nbytes = _op_fn(be, op, size, dtype, rank, n)
                times, iters = _measure(be, call, n, args.iters, args.reps, args.warmup)
                med = statistics.median(times)
                results.append(CollectiveResult(
                    op=op.value, size_bytes=nbytes, count=count, dtype=args.dtype, world_size=n,
                    time_s=med, spread=(max(times) - min(times)) / med, algbw=nbytes / med,
                    busbw=float(bus_bandwidth(op, nbytes, n, med)),
                    bus_factor=float(bus_factor(op, n)), iters=iters, reps=len(times),
                    in_place=op is Collective.ALL_REDUCE))
        if rank == 0:
            env = be.environment(args.accelerator_id).with_settings(
                distributed=backend, world_size=str(n))
            _report(args, results, backend, env)
        dist.barrier()
        return results
    finally:
        dist.destroy_process_group()


def _report(args: argparse.Namespace, results: list[CollectiveResult], backend: str,
            env: Environment) -> None:
    from accelmap.measure.store import Store

    nodes = max(1, int(os.environ.get("WORLD_SIZE", "1"))
                // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    dev = env.label
    settings_base = {"backend": backend, "nodes": nodes, "warmup": args.warmup,
                     "timing": "median of repetitions; per repetition the mean over ranks"}
    ms = [Measurement(kind=Kind.COLLECTIVE, environment=env, dtype=r.dtype,
                      label=f"{r.op} {human_bytes(r.size_bytes)} x {r.world_size}",
                      value=r.busbw, unit="B/s", median=r.busbw, spread=r.spread,
                      repetitions=r.reps,
                      settings={**settings_base, **asdict(r)})
          for r in results]
    store = Store(args.db) if args.db else Store()
    run_id = store.add(ms) if ms else ""
    if args.json:
        sys.stdout.write(json.dumps({"run_id": run_id, "db": str(store.path), "backend": backend,
                                     "device": dev, "nodes": nodes,
                                     "rows": [asdict(r) for r in results]}) + "\n")
    else:
        sys.stdout.write(format_table(results, backend, dev, run_id, str(store.path)))
    sys.stdout.flush()


def format_table(results: Sequence[CollectiveResult], backend: str, device: str, run_id: str,
                 db: str) -> str:
    """nccl-tests-like table: size, count, type, op, time, algbw, busbw (GB/s = 1e9 B/s)."""
    n = results[0].world_size if results else 0
    lines = [f"# {backend}, {n} ranks, {device}; run {run_id} stored in {db}",
             f"# {'op':<15}{'size':>10}{'count':>12}{'type':>6}{'time(us)':>12}"
             f"{'algbw(GB/s)':>13}{'busbw(GB/s)':>13}{'spread':>8}"]
    for r in results:
        lines.append(f"  {r.op:<15}{human_bytes(r.size_bytes):>10}{r.count:>12}{r.dtype:>6}"
                     f"{r.time_s * 1e6:>12.1f}{r.algbw / 1e9:>13.3f}{r.busbw / 1e9:>13.3f}"
                     f"{r.spread:>8.1%}")
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torchrun --nproc-per-node N -m accelmap.measure.collectives",
        description="Measure collectives (nccl-tests definitions of algbw and busbw); rank 0 "
                    "stores the results and prints the table.")
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help="comma list of per-rank sizes, K/M/G = 1024^1..3 (default %(default)s)")
    p.add_argument("--ops", default="all", help="all, or a comma list of "
                   + ",".join(o.value for o in OPS))
    p.add_argument("--dtype", default="fp32", help="fp32 (nccl-tests default), bf16 or fp16")
    p.add_argument("--backend", default="auto", choices=["auto", "nccl", "gloo"],
                   help="auto: NCCL when CUDA is available, else Gloo")
    p.add_argument("--iters", type=int, default=0,
                   help=f"collectives per repetition (default: auto, up to {MAX_ITERS})")
    p.add_argument("--reps", type=int, default=REPS, help="timed repetitions (median)")
    p.add_argument("--warmup", type=int, default=WARMUP, help="untimed warm-up collectives")
    p.add_argument("--db", default=None, help="measurement store (default: $ACCELMAP_DB or the "
                   "user data directory)")
    p.add_argument("--accelerator-id", default=None, help="catalog id to store with the rows")
    p.add_argument("--json", action="store_true", help="rank 0 prints JSON instead of a table")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.reps < 1:
        raise SystemExit("--reps must be at least 1")
    try:
        parse_sizes(args.sizes)  # fail before the process group is formed
        parse_ops(args.ops)
        run_worker(args)
    except AccelmapError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    return 0


# --- the launcher (used by `accelmap measure collectives`) --------------------------------------
def run_collectives(nproc: int = 2, sizes: str = DEFAULT_SIZES, ops: str = "all",
                    db: str | os.PathLike[str] | None = None, timeout: float = 600.0,
                    extra: Sequence[str] = (), torchrun_args: Sequence[str] = ()) -> dict[str, Any]:
    """Start ``torchrun --standalone --nproc-per-node nproc -m accelmap.measure.collectives``
    and return rank 0's JSON report: ``{"run_id", "db", "backend", "device", "rows": [...]}``.

    ``torchrun_args`` replace ``--standalone`` (e.g. ``--nnodes 2 --rdzv-endpoint ...``);
    ``extra`` are passed to the worker (``--iters 10``, ``--dtype bf16``)."""
    torch = import_torch("measuring collectives")
    if nproc < 1:
        raise InputError(f"--nproc must be at least 1, got {nproc}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    limit = gpus or max(4, 2 * (os.cpu_count() or 1))
    if nproc > limit and not torchrun_args:
        where = f"{gpus} GPUs" if gpus else f"{os.cpu_count()} CPU cores"
        raise InputError(f"--nproc {nproc} is more processes than this machine runs at once "
                         f"({where}; at most {limit}): lower --nproc")
    if not (math.isfinite(timeout) and 1 <= timeout <= 86_400):
        raise InputError(f"--timeout must be 1 to 86400 seconds, got {timeout}")
    parse_sizes(sizes)
    parse_ops(ops)
    cmd = [sys.executable, "-m", "torch.distributed.run",
           *(torchrun_args or ["--standalone"]), "--nproc-per-node", str(nproc),
           "-m", "accelmap.measure.collectives", "--sizes", sizes, "--ops", ops, "--json",
           *(["--db", str(db)] if db else []), *extra]
    try:
        # its own session, so that a timeout stops torchrun's workers too, not torchrun alone
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
    except OSError as e:
        raise CollectivesError(f"cannot start torchrun ({e}); {TORCH_HINT}") from None
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(child)
        raise CollectivesError(f"torchrun did not finish within {timeout:g} s; try fewer or "
                               "smaller --sizes") from None
    except BaseException:  # Ctrl-C: no worker is left behind
        _stop_group(child)
        raise
    proc = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    report = _last_json(proc.stdout)
    if proc.returncode != 0 or report is None:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise CollectivesError(f"torchrun exited with status {proc.returncode}; last output:\n"
                               f"{tail}")
    return report


def _stop_group(child: subprocess.Popen[str]) -> None:
    """Kill torchrun and every worker it started (they share its session's process group)."""
    import signal

    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()
    child.communicate()


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and "rows" in data:
                return data
    return None


if __name__ == "__main__":
    raise SystemExit(main())
