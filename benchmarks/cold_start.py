"""Cold-start time of the CLI: `accelmap --help` (goal <= 0.3 s) and `accelmap hw list`
(goal <= 0.4 s) on a 2-core machine.

Each command runs N times in a fresh interpreter, as a user would start it, and the script
prints the median and the minimum wall time, and the median CPU time (user + system) of the
child, which a busy machine disturbs less than the wall clock. The first run of each command
is not counted: it warms the OS file cache and writes the parsed-catalog cache
(``~/.cache/accelmap``), as any second start finds them.

    python benchmarks/cold_start.py                 # this checkout's src/, 11 runs each
    python benchmarks/cold_start.py -n 21 --src /tmp/old/src   # A/B: interleaved runs
    python benchmarks/cold_start.py --exe accelmap  # an installed console script

With ``--src DIR`` or ``--exe PATH`` (repeatable) each command alternates between the programs,
run by run, so a load spike on a shared machine hits them alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = [
    ["--help"],
    ["hw", "list"],
    ["hw", "list", "--json"],
    ["models", "list"],
    ["hw", "show", "h100-sxm5-80gb"],
]
GOALS = {"--help": 0.3, "hw list": 0.4}

# what the console script does (pip's generated `accelmap` wrapper)
ENTRY = "import sys; from accelmap.cli.app import main; sys.exit(main())"
HERE_SRC = Path(__file__).resolve().parents[1] / "src"


def run_once(base: list[str], args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(base + args, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"accelmap {' '.join(args)} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def targets(opts: argparse.Namespace) -> list[tuple[str, list[str], dict[str, str]]]:
    """(label, command prefix, environment) per program under test."""
    env = {**os.environ, "COLUMNS": "200"}
    if opts.exe:
        return [(exe, [exe], env) for exe in opts.exe]
    out = []
    for src in opts.src or [str(HERE_SRC)]:
        path = os.pathsep.join([src, env["PYTHONPATH"]]) if env.get("PYTHONPATH") else src
        out.append((src, [sys.executable, "-c", ENTRY], {**env, "PYTHONPATH": path}))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=11)
    ap.add_argument("--src", action="append", help="a source tree (…/src) to time; repeatable")
    ap.add_argument("--exe", action="append",
                    help="time this console script instead (e.g. accelmap); repeatable")
    opts = ap.parse_args(argv)
    progs = targets(opts)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, n={opts.runs}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'command':34s} {'median s':>9s} {'min s':>7s} {'cpu s':>7s}  goal  program")
    for args in COMMANDS:
        for _, base, env in progs:  # warm-up, not counted
            run_once(base, args, env)
        times: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in progs}
        for _ in range(opts.runs):
            for label, base, env in progs:
                times[label].append(run_once(base, args, env))
        name = " ".join(args)
        goal = GOALS.get(name)
        for label, _, _ in progs:
            wall = [w for w, _ in times[label]]
            cpu = [c for _, c in times[label]]
            med = statistics.median(wall)
            mark = "" if goal is None else ("ok" if med <= goal else f">{goal}")
            print(f"{'accelmap ' + name:34s} {med:9.3f} {min(wall):7.3f} "
                  f"{statistics.median(cpu):7.3f}  {mark:4s}  {label}")


if __name__ == "__main__":
    main()
