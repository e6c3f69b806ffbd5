"""Cold-start time of the CLI: `accelmap --help` (goal <= 0.3 s) and `accelmap hw list`.

Each command runs in a fresh interpreter, as a user would start it; prints the median and the
spread over N runs. Run: python benchmarks/cold_start.py [N]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = [
    ["--help"],
    ["hw", "list"],
    ["hw", "list", "--json"],
    ["models", "list"],
]


def time_command(args: list[str], runs: int) -> list[float]:
    exe = shutil.which("accelmap")
    base = [exe] if exe else [sys.executable, "-m", "accelmap.cli.app"]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(base + args, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    time_command(["--help"], 1)  # warm the OS file cache, as any second start would be
    print(f"{'command':32s} {'median s':>9s} {'min s':>7s} {'max s':>7s}   (n={runs})")
    for args in COMMANDS:
        t = time_command(args, runs)
        print(f"{'accelmap ' + ' '.join(args):32s} {statistics.median(t):9.3f} {min(t):7.3f} "
              f"{max(t):7.3f}")


if __name__ == "__main__":
    main()
