"""Bounded work for the web app: every job runs in a process of its own (``worker``), forked
from a warm forkserver (``multiprocessing``), admitted by one of two ``anyio.CapacityLimiter``
lanes so long searches cannot starve short requests:

- ``QUICK`` (estimate, export, report): ``quick`` at once;
- ``SEARCH`` (plan, compare, validate): ``searches`` at once.

A lane holds at most ``queue`` waiting jobs; past that a request is refused with a 429 (try
again later) instead of waiting without end. A running job is killed (and its request answered)
when its client disconnects, at its wall-clock cap, and on shutdown (``stop``: SIGTERM, SIGINT,
the app's lifespan end). The kernel caps each job's CPU time and address space as well
(``worker.Limits``), so not even an orphaned job outlives its cap.
"""

from __future__ import annotations

import enum
import multiprocessing
import signal
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

import anyio
import anyio.lowlevel

from accelmap.errors import InputError
from accelmap.web import worker
from accelmap.web.worker import Limits

POLL_S = 0.02  # how often a waiting request looks at its job and its client


class Lane(enum.Enum):
    QUICK = "quick"
    SEARCH = "search"


class Busy(Exception):
    """The lane's queue is full: answered 429 with Retry-After."""


class Stopping(Exception):
    """The server is shutting down: answered 503."""


class Gone(Exception):
    """The client disconnected: its job was killed; nobody reads the answer."""


class Internal(Exception):
    """A bug in a job (answered 500 in the app's error shape, the exception named)."""


@dataclass(frozen=True)
class Pool:
    """How many jobs run at once per lane, how many may wait, and each job's caps:
    ``wall_s`` is the wall-clock cap (the soft search cap plus grace for the report),
    ``memory_bytes`` the address-space cap."""

    searches: int = 2
    quick: int = 4
    queue: int = 32
    search_s: float = 20.0
    wall_s: float = 45.0
    memory_bytes: int = 4 * 2**30


class Runner:
    """Runs jobs in capped processes; ``stop`` kills every running one."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(["accelmap.web.worker", "accelmap.web.warm"])
        # one set of lanes per event loop (a server has one; a test client may start several)
        self.lanes: dict[object, dict[Lane, anyio.CapacityLimiter]] = {}
        self.live: set[BaseProcess] = set()
        self.lock = threading.Lock()
        self.stopping = False

    @property
    def limits(self) -> Limits:
        return Limits(search_s=self.pool.search_s, cpu_s=int(self.pool.wall_s) + 1,
                      memory_bytes=self.pool.memory_bytes)

    async def run(self, lane: Lane, job: str, payload: Any,
                  disconnected: Callable[[], Awaitable[bool]]) -> Any:
        """The job's result; InputError (bad input, past a cap), Busy, Stopping, Gone or
        Internal otherwise."""
        if self.stopping:
            raise Stopping
        lanes = self.lanes.setdefault(anyio.lowlevel.current_token(), {
            Lane.QUICK: anyio.CapacityLimiter(self.pool.quick),
            Lane.SEARCH: anyio.CapacityLimiter(self.pool.searches)})
        limiter = lanes[lane]
        if limiter.available_tokens < 1 and limiter.statistics().tasks_waiting >= self.pool.queue:
            raise Busy
        async with limiter:
            return await self._run(job, payload, disconnected)

    async def _run(self, job: str, payload: Any,
                   disconnected: Callable[[], Awaitable[bool]]) -> Any:
        if self.stopping:
            raise Stopping
        recv, send = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=worker.run, args=(job, payload, send, self.limits),
                                daemon=True)
        with self.lock:
            self.live.add(proc)
        try:
            await anyio.to_thread.run_sync(proc.start)
            send.close()
            deadline = anyio.current_time() + self.pool.wall_s
            while not recv.poll():
                if self.stopping:
                    raise Stopping
                if not proc.is_alive() and not recv.poll():
                    raise self._died(proc)
                if anyio.current_time() > deadline:
                    raise self._timeout()
                if await disconnected():
                    raise Gone
                await anyio.sleep(POLL_S)
            try:
                status, value = await anyio.to_thread.run_sync(recv.recv)
            except EOFError:
                raise self._died(proc) from None
        finally:
            _end(proc)
            recv.close()
            with self.lock:
                self.live.discard(proc)
        return self._answer(status, value)

    def _answer(self, status: str, value: Any) -> Any:
        if status == "ok":
            return value
        if status == "input":
            raise InputError(value)
        if status == "memory":
            raise self._memory()
        raise Internal(value)

    def _timeout(self) -> InputError:
        return InputError(f"the request took longer than the web app's {self.pool.wall_s:g} s "
                          "cap: narrow it (one accelerator, fewer devices, fewer requests) or "
                          "use the CLI")

    def _memory(self) -> InputError:
        return InputError(f"the request needs more than the web app's "
                          f"{self.pool.memory_bytes / 2**30:g} GiB memory cap: narrow it or "
                          "use the CLI")

    def _died(self, proc: BaseProcess) -> Exception:
        if self.stopping:
            return Stopping()
        if proc.exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
            return self._timeout()
        return self._memory()  # the kernel ended it past its address-space cap

    def start(self) -> None:
        """Take jobs (again: a test client runs the app's lifespan once per client), and warm
        the forkserver in the background so the first request does not wait for it."""
        self.stopping = False
        from multiprocessing import forkserver

        threading.Thread(target=forkserver.ensure_running, name="accelmap-forkserver",
                         daemon=True).start()

    def stop(self) -> None:
        """Refuse new jobs and kill every running one (shutdown)."""
        self.stopping = True
        with self.lock:
            procs = list(self.live)
        for p in procs:
            _end(p)


def _end(proc: BaseProcess) -> None:
    """Kill the job's process if it runs, and reap it."""
    if proc.pid is None:
        return
    if proc.is_alive():
        proc.kill()
    proc.join(timeout=5)


def on_signals(stop: Callable[[], None]) -> Callable[[], None]:
    """Chain ``stop`` before the current SIGTERM and SIGINT handlers (uvicorn's, which wait for
    running requests before the app's shutdown), so a signal ends running jobs at once; returns
    the undo. Only the main thread can set handlers: elsewhere (a server in a test thread) this
    does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def handler(signum: int, frame: Any) -> None:
        stop()
        prev = before.get(signal.Signals(signum))
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    for s in before:
        signal.signal(s, handler)

    def undo() -> None:
        for s, h in before.items():
            if signal.getsignal(s) is handler:
                signal.signal(s, h)

    return undo
