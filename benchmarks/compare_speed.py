"""Wall time of `accelmap compare` over every catalog part (the issue's goal: <= 10 s).

    PYTHONPATH=src python3 benchmarks/compare_speed.py

Prints one line per job: parts, feasible rows, classes covered and seconds (the catalog load
counted once, outside). Never asserts on time.
"""

from __future__ import annotations

import time

from accelmap import api

JOBS = (
    ("llama-3.1-8b serving, batch 1", dict(model="llama-3.1-8b", batch=1)),
    ("llama-3.1-70b serving, batch 1", dict(model="llama-3.1-70b", batch=1)),
    ("llama-3.1-70b serving, batch 32, $50/h", dict(model="llama-3.1-70b", batch=32,
                                                   budget_usd_h=50.0)),
    ("llama-3.1-405b serving, batch 1", dict(model="llama-3.1-405b", batch=1)),
    ("llama-3.1-8b training, 1M tokens/step", dict(model="llama-3.1-8b", train=True,
                                                   global_batch_tokens="1M")),
)


def main() -> None:
    t0 = time.perf_counter()
    cat = api.load_catalog()
    print(f"catalog: {len(cat.accelerators)} parts loaded in {time.perf_counter() - t0:.2f} s")
    for label, kw in JOBS:
        t = time.perf_counter()
        cmp = api.compare_accelerators(catalog=cat, **kw)  # type: ignore[arg-type]
        wall = time.perf_counter() - t
        ok = [r for r in cmp.rows if r.feasible]
        classes = sorted({r.device_class for r in ok})
        print(f"{label:42} {len(cmp.rows)} parts, {len(ok)} feasible, "
              f"{len(classes)} classes feasible, {wall:.2f} s")


if __name__ == "__main__":
    main()
