"""Planner speed: candidates per second on one core, and wall time for two large searches.

Goals (issue "Planner"): >= 1,000,000 candidates/s; Llama 3.1 405B on 16,384 H100 <= 2 s;
DeepSeek-V3 on 2,048 H800 with expert parallelism <= 2 s.

- "vectorized" is ``engine.train.compose`` on one array of candidates (the inner loop);
- "end to end" is ``plan_training`` (operator-graph profile once per tp/ep/cp/micro-batch/
  recompute group, then the vectorized composition), evaluated candidates / wall time.

Run: python benchmarks/planner_speed.py
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the goal says

import numpy as np

from accelmap.api import Mapping, System, Training, load_catalog
from accelmap.api.estimates import OverlapPolicy
from accelmap.cost.framework import profile
from accelmap.engine.train import compose, layer_profile
from accelmap.hardware.cluster import parse_cluster
from accelmap.search.planner import plan_training
from accelmap.workload import Recompute


def vectorized_rate(n: int = 1_000_000) -> float:
    cat = load_catalog()
    cluster = parse_cluster("16384xH100", cat)
    spec = cat.models["llama-3.1-405b"]
    system, fw = System.of(cluster), profile("megatron")
    wl = Training(batch=2048, seq_len=8192)
    prof = layer_profile(spec, system.device, fw, wl, Mapping(tp=8, recompute=Recompute.FULL))
    rng = np.random.default_rng(0)
    pp = rng.choice([2.0, 4.0, 8.0, 16.0], n)
    dp = cluster.devices / (8 * pp)
    zero = rng.choice([0, 1, 2, 3], n)
    vpp = rng.choice([1.0, 2.0], n)

    def run(k: int) -> float:
        start = time.perf_counter()
        table = Mapping(dp=dp[:k], tp=8, pp=pp[:k], virtual_stages=vpp[:k], zero=zero[:k],
                        recompute=Recompute.FULL)
        compose(prof, system, wl, fw, OverlapPolicy(), table, detail=False)  # the planner's
        return time.perf_counter() - start

    run(1000)  # warm-up: the collective-efficiency table loads once per process, not per call
    return n / statistics.median(run(n) for _ in range(3))


def end_to_end(model: str, cluster: str, seq: int, batch: int) -> tuple[float, int, int, str]:
    cat = load_catalog()
    start = time.perf_counter()
    r = plan_training(cat.models[model], parse_cluster(cluster, cat), seq, batch, top=1,
                      explain=False)
    best = " ".join(f"{k}={v}" for k, v in r.plans[0].mapping_dict().items()) if r.plans else "-"
    return time.perf_counter() - start, r.evaluated, r.feasible, best


def main() -> None:
    load_catalog()  # warm the catalog cache (what a second query in one process costs)
    print(f"vectorized composition: {vectorized_rate():,.0f} candidates/s (one core)")
    for model, cluster, seq, batch in (("llama-3.1-405b", "16384xH100", 8192, 2048),
                                       ("deepseek-v3", "2048xH800", 4096, 3840)):
        secs, n, ok, best = end_to_end(model, cluster, seq, batch)
        print(f"{model} on {cluster}: {secs:.2f} s wall, {n:,} candidates "
              f"({n / secs:,.0f}/s end to end), {ok:,} feasible; best {best}")


if __name__ == "__main__":
    main()
