"""Wall time of `accelmap frontier` (issue 22 part 6's goal: `--hw any` in <= 60 s on 2 cores),
and what each sweep found.

    PYTHONPATH=src python3 benchmarks/frontier_speed.py [--hw any] [--model deepseek-r1]

Prints one line per accelerator (points simulated, layouts that ran, the front's ends) and the
wall time of the whole sweep. Never asserts on time.
"""

from __future__ import annotations

import argparse
import os
import time

from accelmap import api


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="any")
    ap.add_argument("--model", default="deepseek-r1")
    ap.add_argument("--weights", default="fp4")
    ap.add_argument("--isl", type=int, default=1024)
    ap.add_argument("--osl", type=int, default=1024)
    a = ap.parse_args()
    cat = api.load_catalog()
    t = time.perf_counter()
    f = api.frontier(a.model, hw=a.hw, isl=a.isl, osl=a.osl, weights=a.weights, catalog=cat)
    wall = time.perf_counter() - t
    for c in f.curves:
        front = c.front
        ends = (f"{front[0].tokens_per_s_per_user:,.0f} tok/s/user at "
                f"{front[0].tokens_per_s_per_device:,.0f} tok/s/dev .. "
                f"{front[-1].tokens_per_s_per_user:,.0f} at "
                f"{front[-1].tokens_per_s_per_device:,.0f}") if front else "no point"
        layouts = sorted({p.layout for p in c.points})
        print(f"{c.cluster:28} {len(c.points):3} points, {len(layouts)} layouts ran, "
              f"{len(c.skipped)} not; front {ends}")
    print(f"{a.model} {a.weights} {a.isl}/{a.osl} on --hw {a.hw}: {len(f.curves)} accelerators, "
          f"{sum(len(c.points) for c in f.curves)} points in {wall:.1f} s "
          f"(goal <= 60 s on 2 cores; this machine has {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
