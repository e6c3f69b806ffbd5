"""Fan-out speed: one sweep of 20,000 points in this process vs ``--ray local`` on the same
machine, as a ratio, with the results checked identical (issue 26: >= 1.6x on 2 cores).

The sweep: Llama 3.2 1B, a training step (batch 8, seq 2048) on one H100 SXM, over 200 memory
bandwidths (1-8 TB/s) x 100 BF16 peaks (0.4-2 PFLOP/s) = 20,000 estimates. Timed:

- single: ``api.sweep`` in this process (the default path; no Ray imported);
- ray: the same call with ``api.runner("local")``, end to end: Ray's start on this machine's
  CPUs, shipping the model and system once, the tasks, gathering, the shutdown;
- ray, warm: the same again on a Ray already started (a notebook, a cluster connected to:
  what the map itself costs).

The load average before and after is printed: the machine may be shared, and other work on
its cores takes them from both runs alike but not evenly over time.

Run: python benchmarks/ray_sweep.py [--bandwidths 200] [--peaks 100] [--cpus N] [--no-cold]
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from accelmap import api

MODEL, HW = "llama-3.2-1b", "h100-sxm5-80gb"


def params(bandwidths: int, peaks: int) -> list[str]:
    return [f"memory_bandwidth=1TB/s..8TB/s:{bandwidths}",
            f"bf16=400TFLOP/s..2000TFLOP/s:{peaks}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bandwidths", type=int, default=200)
    ap.add_argument("--peaks", type=int, default=100)
    ap.add_argument("--cpus", type=int, default=None, help="CPUs for the local Ray "
                    "(default: all of this machine's)")
    ap.add_argument("--no-cold", action="store_true", help="skip the end-to-end run (Ray "
                    "started inside): the single-process and warm runs only")
    a = ap.parse_args()
    spec, system = api.load_model(MODEL), api.load_system(hw=HW)
    wl = api.training(8, 2048)
    ps = params(a.bandwidths, a.peaks)
    n = a.bandwidths * a.peaks
    cap = max(n, 1)
    print(f"{n:,} points: {MODEL} training step on 1 x {HW}, {ps[0]} x {ps[1]}; "
          f"{os.cpu_count()} CPUs; load average before {_load()}")

    t, c = time.perf_counter(), time.process_time()
    single = api.sweep(spec, system, wl, ps, max_points=cap)
    t_single, c_single = time.perf_counter() - t, time.process_time() - c
    print(f"single process: {t_single:8.1f} s  ({t_single / n * 1e3:.2f} ms a point; "
          f"{c_single:.1f} CPU-s); load {_load()}")

    cold, t_ray = single, float("nan")
    if not a.no_cold:
        runner = api.Runner("local", num_cpus=a.cpus)
        t = time.perf_counter()
        cold = api.sweep(spec, system, wl, ps, max_points=cap, runner=runner)
        t_ray = time.perf_counter() - t
        print(f"--ray local:    {t_ray:8.1f} s  (Ray started and shut down inside); "
              f"load {_load()}")

    t_warm, warm, c_ray, procs = _warm(spec, system, wl, ps, cap, a.cpus)
    print(f"ray, warm:      {t_warm:8.1f} s  (Ray already running; {c_ray:.1f} CPU-s in "
          f"{procs} Ray processes: workers, raylet, GCS); load {_load()}")

    same = single.to_dict() == cold.to_dict() == warm.to_dict()
    print(f"identical rows: {same} ({len(single.rows):,} rows, "
          f"{sum(1 for r in single.rows if r['feasible']):,} feasible)")
    e2e = "skipped" if a.no_cold else f"{t_single / t_ray:.2f}x"
    print(f"speed-up, end to end: {e2e};  with Ray up: "
          f"{t_single / t_warm:.2f}x  (target >= 1.6x on 2 cores)")
    cpus = a.cpus or os.cpu_count() or 1
    if c_ray > 0:
        # CPU seconds do not depend on what else runs on the cores: on idle cores the warm
        # map takes at least c_ray / cpus, so the speed-up is at most c_single / (c_ray / cpus)
        print(f"CPU-seconds: {c_single:.1f} single vs {c_ray:.1f} on Ray: on {cpus} idle cores "
              f"the map with Ray up would be at most {c_single / (c_ray / cpus):.2f}x faster "
              f"(Ray's overhead {c_ray / c_single - 1:+.0%} CPU)")
    if not same:
        raise SystemExit("the Ray rows differ from the single-process rows")


def _warm(spec: Any, system: Any, wl: Any, ps: list[str], cap: int, cpus: int | None
          ) -> tuple[float, Any, float, int]:
    """Wall seconds and rows of the map on a Ray already up, and the CPU seconds its
    processes (every descendant of this one: GCS, raylet, workers) spent on it."""
    import ray

    ray.init(num_cpus=cpus or os.cpu_count(), include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    try:
        before = _tree_cpu()
        t = time.perf_counter()
        out = api.sweep(spec, system, wl, ps, max_points=cap, runner=api.Runner("local"))
        wall = time.perf_counter() - t
        after = _tree_cpu()
        cpu = sum(v - before.get(k, 0.0) for k, v in after.items())
        return wall, out, cpu, len(after)
    finally:
        ray.shutdown()


def _tree_cpu() -> dict[int, float]:
    """user + system CPU seconds of every live descendant of this process (Linux /proc)."""
    stats: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command: state, ppid, ... utime (14th field of the line), stime (15th)
        stats[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    me, out, frontier = os.getpid(), {}, {os.getpid()}
    while frontier:
        kids = {p for p, (pp, _) in stats.items() if pp in frontier and p != me}
        kids -= set(out)
        out.update({p: stats[p][1] for p in kids})
        frontier = kids
    return out


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min) / {five:.1f} (5 min)"


if __name__ == "__main__":
    main()
