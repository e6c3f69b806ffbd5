"""How much of the CPUs other processes took while a timed region ran (Linux).

A timing on a shared machine measures the machine's load as much as the kernel: on a 2-core VM
with two other busy processes, a two-thread eager PyTorch step ran 3-5x its quiet time, because
every OpenMP parallel region waits at its barrier for the thread that the scheduler parked.
Nothing in a prediction can know that, so the run says it instead of hiding it.

Busy time comes from ``/proc/stat`` (the ``cpuN`` lines of the CPUs this process may run on, its
affinity: user, nice, system, irq, softirq and steal jiffies; proc(5)) and the process's own
from ``/proc/self/stat`` (utime + stime of all its threads, fields 14-15); both in clock ticks
(``SC_CLK_TCK``). What the others used is the busy time of our CPUs less our own, over the wall
time: in cores. ``steal`` (a hypervisor running other guests on our vCPUs) counts as taken too.
Elsewhere: unknown (None).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

# Other processes busy for more than this many cores on average make a timing suspect: a
# quarter of a core is ~25 % of one thread's time, more than the spread of a quiet run.
BUSY_WARNING_CORES = 0.25
_STAT = Path("/proc/stat")
_SELF = Path("/proc/self/stat")


def _ours() -> set[str] | None:
    """'cpuN' names of the CPUs this process may run on (None: all of them)."""
    try:
        return {f"cpu{n}" for n in os.sched_getaffinity(0)}
    except (AttributeError, OSError):
        return None


def busy_ticks(stat: str, cpus: set[str] | None) -> float:
    """Busy ticks (user nice system irq softirq steal) of ``cpus`` ('cpuN') in a /proc/stat
    text; all CPUs (the aggregate line) when ``cpus`` is None."""
    total = 0.0
    for line in stat.splitlines():
        f = line.split()
        if not f or not f[0].startswith("cpu") or len(f) < 8:
            continue
        if (f[0] == "cpu") != (cpus is None) or (cpus is not None and f[0] not in cpus):
            continue
        v = [float(x) for x in f[1:]]
        total += v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0.0)
    return total


def _ticks() -> tuple[float, float] | None:
    """(busy ticks of our CPUs incl. steal, this process's ticks), or None off Linux."""
    try:
        stat = _STAT.read_text()
        own = _SELF.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the ')' of comm: state is field 3, so utime (14) and stime (15) are at 11 and 12
    return busy_ticks(stat, _ours()), float(own[11]) + float(own[12])


@dataclass(frozen=True)
class Load:
    """What other processes (and the hypervisor) took during the timed regions."""

    others_cores: float  # mean cores busy with other work
    seconds: float  # wall time observed

    @property
    def busy(self) -> bool:
        return self.others_cores > BUSY_WARNING_CORES

    def sentence(self, cores: int | None = None) -> str:
        of = f" of {cores}" if cores else ""
        text = (f"other processes kept {self.others_cores:.2f}{of} cores busy during the "
                f"timed runs ({self.seconds:.1f} s observed)")
        if self.busy:
            text += ("; the measured times include that contention and are not comparable "
                     "with a prediction for a quiet machine: rerun when it is idle")
        return text

    def to_dict(self) -> dict[str, float]:
        return {"others_cores": self.others_cores, "seconds": self.seconds}


class LoadMeter:
    """Accumulates other processes' CPU use over several timed regions: ``with meter: ...``."""

    def __init__(self) -> None:
        self.hz = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self.others = 0.0  # ticks
        self.wall = 0.0  # seconds
        self.available = _ticks() is not None
        self._start: tuple[float, float, float] | None = None

    def __enter__(self) -> LoadMeter:
        t = _ticks()
        self._start = None if t is None else (*t, time.perf_counter())
        return self

    def __exit__(self, *exc: object) -> None:
        t = _ticks()
        if t is None or self._start is None:
            return
        busy0, own0, w0 = self._start
        self.others += max(0.0, (t[0] - busy0) - (t[1] - own0))
        self.wall += time.perf_counter() - w0
        self._start = None

    def load(self) -> Load | None:
        """None where /proc is not readable or nothing was observed."""
        if not self.available or self.wall <= 0:
            return None
        return Load(self.others / self.hz / self.wall, self.wall)
