"""Fan-out: map a pure function over work items, in this process or on a Ray cluster.

    from accelmap.fanout import Runner
    out = Runner().map(point, items, context)               # [point(context, x) for x in items]
    out = Runner("local").map(point, items, context)        # the same list, from a local Ray
    out = Runner("ray://head:10001").map(point, items, context)  # from an existing cluster

``point(context, item)`` must be a pure, picklable function (module level, or a closure
cloudpickle can carry) and ``context`` what every item shares (the model, the system, the
workload, the catalog): it is shipped once to the cluster's object store (``ray.put``) and
each task gets a reference to it plus a slice of the items. The slices are contiguous and
about four per CPU of the cluster (``chunks``), so a task is seconds of work, not one point,
and the results come back in item order: the same list the single-process map gives.

A task that raises is run again, up to ``retries`` times, each failure said through the
progress hook; one that still fails cancels the others and raises ``FanoutError`` (one line:
which slice, which item range, what it raised). Ctrl-C cancels every task still queued or
running. A Ray this call started (``local``) is shut down in a ``finally``; on a cluster
connected to, the driver disconnects and the cluster keeps running; a Ray the caller had
already initialised is used and left as it was (several maps, one start).

Without an address nothing here imports Ray: the default is the plain in-process map.
Addresses: ``local`` (start Ray on this machine's CPUs, ``num_cpus`` of them if given),
``auto`` (the Ray already running on this machine or cluster node, as ``ray start`` left
it), ``ray://HOST:PORT`` (Ray Client to a cluster's head, port 10001 by default) or
``HOST:PORT`` (the head's GCS, from a node of the cluster). See Ray's docs, "Ray Client" and
``ray.init``: https://docs.ray.io/en/latest/cluster/running-applications/job-submission/ray-client.html
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from accelmap.errors import InputError

C = TypeVar("C")
T = TypeVar("T")
R = TypeVar("R")

ENV = "ACCELMAP_RAY"  # the address, when --ray is not given
TASKS_PER_CPU = 4  # slices per CPU: enough to balance uneven points, few enough to amortise
MAX_CHUNK = 2_000  # items in one task at most
CONNECT_TIMEOUT_S = 5.0  # how long an address may take to answer a TCP connect
CANCEL_WAIT_S = 10.0  # how long cancelled tasks get to stop before Ray shuts down
INSTALL = "pip install 'accelmap[ray]' (or pip install 'ray[client]')"


class FanoutError(InputError):
    """A task failed on every try, Ray is missing, or the address does not answer."""


class Progress(Protocol):
    """What the map says while it runs: the CLI draws it (rich, on stderr)."""

    def start(self, total: int, what: str) -> None: ...

    def advance(self, n: int) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


def chunks(n: int, workers: int, per_worker: int = TASKS_PER_CPU,
           max_chunk: int = MAX_CHUNK) -> list[tuple[int, int]]:
    """Contiguous [start, stop) slices covering range(n): about ``per_worker`` per worker,
    none longer than ``max_chunk``, sizes differing by at most one."""
    if n <= 0:
        return []
    k = min(n, max(workers * per_worker, -(-n // max_chunk), 1))
    base, extra = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        stop = start + base + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def _run_chunk(shared: tuple[Callable[[Any, Any], Any], Any], items: Sequence[Any]
               ) -> list[Any]:
    fn, context = shared
    return [fn(context, it) for it in items]


def check_address(address: str) -> str:
    """The address as Ray takes it; a malformed one is a ``FanoutError``."""
    a = address.strip()
    if a.lower() in ("local", "auto"):
        return a.lower()
    hostport = a.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host and a.startswith("ray://"):
        host, port = hostport, "10001"
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in host:
        raise FanoutError(f"--ray {address!r}: give local, auto, ray://HOST:PORT (Ray Client, "
                          "port 10001 by default) or HOST:PORT (the head's GCS)")
    return f"ray://{host}:{port}" if a.startswith("ray://") else f"{host}:{port}"


def _reachable(address: str) -> None:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as e:
        raise FanoutError(f"--ray {address}: cannot reach it ({e.strerror or e}); is the "
                          "cluster up (ray start --head) and the port open?") from None


@contextlib.contextmanager
def _connected(address: str, num_cpus: int | None) -> Iterator[Any]:
    """Ray, initialised for ``address``; shut down (or disconnected) on the way out. A Ray
    the caller already initialised (a notebook, a test, ``frontier``'s several maps) is used
    as it is and left running."""
    import sys

    mod = sys.modules.get("ray")
    if mod is not None and mod.is_initialized():
        yield mod
        return
    try:
        import ray
    except ImportError:
        raise FanoutError(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    import logging

    kw: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False,
                          "configure_logging": True}
    if address == "local":
        kw.update(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                  include_dashboard=False)
    else:
        if address != "auto":
            _reachable(address)
        # the same accelmap runs on the cluster: its source travels with the job
        kw.update(address=address,
                  runtime_env={"py_modules": [str(Path(__file__).resolve().parent)]})
    try:
        ray.init(**kw)
    except Exception as e:  # ConnectionError, RuntimeError, grpc errors: all one line
        with contextlib.suppress(Exception):
            ray.shutdown()
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise FanoutError(f"--ray {address}: Ray did not start or connect: {first}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


@dataclass(frozen=True)
class Runner:
    """Where a map runs: ``address`` None in this process (the default), else on Ray."""

    address: str | None = None
    progress: Progress | None = None
    retries: int = 2  # tries after the first, per task
    num_cpus: int | None = None  # local only: CPUs for Ray (default: all of this machine's)

    @property
    def distributed(self) -> bool:
        return self.address is not None

    def map(self, fn: Callable[[C, T], R], items: Sequence[T], context: C,
            what: str = "points") -> list[R]:
        """``[fn(context, x) for x in items]``, in order, wherever this runner runs."""
        if self.address is None:
            return [fn(context, it) for it in items]
        address = check_address(self.address)
        with _connected(address, self.num_cpus) as ray:
            return _ray_map(ray, fn, list(items), context, self, what)


def runner(address: str | None, progress: Progress | None = None) -> Runner:
    """The runner for ``--ray ADDRESS``, else ``$ACCELMAP_RAY``, else this process."""
    a = address if address is not None else (os.environ.get(ENV) or None)
    return Runner(check_address(a) if a else None, progress)


def _cpus(ray: Any) -> int:
    try:
        return max(int(ray.cluster_resources().get("CPU", 1)), 1)
    except Exception:  # pragma: no cover - a cluster that does not say
        return 1


def _ray_map(ray: Any, fn: Callable[[Any, Any], Any], items: list[Any], context: Any,
             runner: Runner, what: str) -> list[Any]:
    slices = chunks(len(items), _cpus(ray))
    shared = ray.put((fn, context))  # once: every task gets this reference
    task = ray.remote(_run_chunk).options(max_retries=runner.retries, retry_exceptions=False)
    out: list[list[Any] | None] = [None] * len(slices)
    pending: dict[Any, tuple[int, int]] = {}  # ref -> (slice index, tries so far)

    def submit(k: int, tries: int) -> None:
        a, b = slices[k]
        pending[task.remote(shared, items[a:b])] = (k, tries)

    prog = runner.progress
    if prog:
        prog.start(len(items), what)
    retried = 0
    try:
        for k in range(len(slices)):
            submit(k, 0)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                k, tries = pending.pop(ref)
                try:
                    out[k] = ray.get(ref)
                except (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError) as e:
                    a, b = slices[k]
                    why = _cause(e)
                    if tries >= runner.retries:
                        raise FanoutError(
                            f"task {k + 1} of {len(slices)} ({what} {a + 1}-{b}) failed "
                            f"{tries + 1} times: {why}") from None
                    retried += 1
                    if prog:
                        prog.note(f"task {k + 1} of {len(slices)} ({what} {a + 1}-{b}) "
                                  f"failed ({why}); retry {tries + 1} of {runner.retries}")
                    submit(k, tries + 1)
                    continue
                if prog:
                    prog.advance(slices[k][1] - slices[k][0])
    finally:
        for ref in pending:  # an error or Ctrl-C: nothing left queued or running
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if pending:  # let the cancellations land before the shutdown (Ray's core worker
            # can abort on a cancel reply that arrives while it shuts down)
            with contextlib.suppress(Exception):
                ray.wait(list(pending), num_returns=len(pending), timeout=CANCEL_WAIT_S)
        if prog:
            prog.close()
    if prog and retried:
        prog.note(f"{retried} task{'s' if retried > 1 else ''} failed and ran again")
    return [r for part in out for r in (part or [])]


def _cause(e: BaseException) -> str:
    """What a remote task raised, on one line: the original exception, not Ray's wrapper."""
    inner = getattr(e, "cause", None)
    src = inner if isinstance(inner, BaseException) else e
    text = (str(src).strip().splitlines() or [""])[-1 if src is e else 0]
    return f"{type(src).__name__}: {text}" if text else type(src).__name__

