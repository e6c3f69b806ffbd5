"""Fit the small-message latency of NVSwitch all-reduces and write collective_latency.yaml.

Rule (documented, general, never per row): NCCL's tuner prices a ring all-reduce at
``baseLat + 2(n-1) x hwLat + bytes / bw`` (NVIDIA/nccl src/graph/tuning.cc; LL protocol for small
messages). accelmap keeps that form and NCCL's base latency (6.6 us, N12) and fits the one
per-step latency ``hwLat`` of the LL protocol on NVSwitch scale-up tiers to **every single-node
all-reduce row of collectives.csv whose payload is at most 128 KiB** (the latency-bound end of
the sweeps, where the bandwidth term is under 2 us on every NVLink generation), by least squares
on the log of time. Time of a row = payload / algbw (nccl-tests PERFORMANCE.md, N16; algbw =
busbw x n / (2(n-1)) where a row gives only busbw). The catalog's 0.47 us (NCCL hwLat NVLink LL,
an older tuning table) gives 14 us at 8 ranks; the rows measure 39-53 us.

The shared rows hold only 8-rank single-node sweeps (A100 nccl-tests; H200 and B200
all_reduce_bench.py), so the rank dependence is NCCL's ring form, not measured: 2 ranks pay 2
steps, 8 ranks 14. The fitted value replaces the tier's latency for NCCL collectives on NVSwitch
tiers (``link_for_tier``), while NCCL's tuner still chooses the algorithm with its own constant
(``Link.tuner_latency_s``: at 8 ranks it picks the ring over NVLS for small buffers, as the
H200 rows say). Training is insensitive (its collectives are megabytes: training.csv median and
p90 unchanged). Held-out check on the TP decode rows of inference.csv (gpt-fast, tp 2/4/8,
fitters/fit_framework_profiles.py): this per-step form gives a leave-one-out median of
10.4 %; a per-call constant (the same 44 us at every rank count) gives 16.7 %.

Custom one-shot all-reduce (vLLM ``csrc/custom_all_reduce.cuh``, PR #2192; TensorRT-LLM
``cpp/tensorrt_llm/kernels/customAllReduceKernels.cu``; SGLang's port): each rank reads its
peers' buffers over NVLink and reduces in one kernel, without NCCL's ring steps. Its latency is
fitted (least squares, ``base + per_rank x (n-1) + (n-1)/n x bytes / bandwidth``) to the table
measured on H100 in sgl-project/sglang PR #2904 (vLLM's custom all-reduce, without CUDA graphs,
tp 2/4/8, 512 B to 1 MiB). It applies only where a framework profile says the stack runs it
(``FrameworkProfile.custom_all_reduce``) and only when it is faster than NCCL.

Reads: data/reference/measurements/collectives.csv (or the path given).
Writes: src/accelmap/cost/data/collective_latency.yaml.

Run: python fitters/fit_collective_latency.py [path/to/collectives.csv]
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import yaml

try:
    from scipy.optimize import least_squares
except ImportError:  # the fitters' extra (pyproject.toml: fit)
    raise SystemExit(f"{Path(__file__).name} needs SciPy: pip install 'accelmap[fit]'") from None

from accelmap.api import load_catalog
from accelmap.cost import collectives as co
from accelmap.hardware.schema import LinkRole

sys.path.insert(0, str(Path(__file__).resolve().parent))
import derive_collective_efficiency as dce

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT / "data" / "reference" / "measurements" / "collectives.csv"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "collective_latency.yaml"
MAX_PAYLOAD = 128 * 2**10
# sgl-project/sglang PR #2904 (H100, without CUDA graph), vLLM custom all-reduce latency in ms
# for tp 2 / 4 / 8 at each data size in bytes.
CUSTOM_SOURCE = ("sgl-project/sglang PR #2904 'optimize custom allreduce kernel', unit-test "
                 "table 'vllm' (vLLM custom_all_reduce.cuh on H100, without CUDA graph)")
CUSTOM_MS = {512: (0.0095, 0.0091, 0.0101), 4096: (0.0088, 0.0085, 0.0093),
             32768: (0.0087, 0.0092, 0.0118), 262144: (0.0129, 0.0206, 0.0241),
             524288: (0.0177, 0.0269, 0.0304), 1048576: (0.0266, 0.0402, 0.0450)}
HEADER = ("# Small-message all-reduce latency: fitters/fit_collective_latency.py (rule in its\n"
          "# docstring). Do not edit by hand.\n")


def small_rows(path: Path) -> list[tuple[str, str, int, float, float]]:
    """(row id, accelerator id, ranks, payload bytes, measured seconds) of the fitted rows."""
    cat = load_catalog()
    rows = []
    for r in csv.DictReader(path.open()):
        if not r["collective"].startswith("all-reduce") or r["num_nodes"] != "1":
            continue
        system = dce.SYSTEMS.get(r["hardware"])
        s = dce._payload_bytes(r["payload"])
        if system is None or s > MAX_PAYLOAD:
            continue
        tier = next(t for t in cat.systems[system.preset].tiers
                    if t.role is LinkRole.SCALE_UP)
        if tier.topology.value != "switch":
            continue
        n = int(r["num_gpus"])
        alg = (float(r["algbw_GBps"]) if r["algbw_GBps"]
               else float(r["busbw_GBps"]) * n / (2 * (n - 1)))
        rows.append((r["row_id"], system.accelerators[0], n, s, s / (alg * 1e9)))
    return rows


def nccl_time(acc: str, n: int, s: float, step: float) -> float:
    cat = load_catalog()
    system = next(m for m in dce.SYSTEMS.values() if m.accelerators[0] == acc)
    tier = next(t for t in cat.systems[system.preset].tiers if t.role is LinkRole.SCALE_UP)
    link = co.link_for_tier(tier, acc, fitted_latency=False)
    from dataclasses import replace
    return float(co.collective_time(co.Collective.ALL_REDUCE, s, n,
                                    replace(link, latency_s=step,
                                            tuner_latency_s=link.latency_s)))


def fit_step(rows: list[tuple[str, str, int, float, float]]) -> float:
    def resid(x: np.ndarray) -> np.ndarray:
        return np.array([np.log(nccl_time(a, n, s, x[0] * 1e-6) / t) for _, a, n, s, t in rows])

    return float(least_squares(resid, [1.0], bounds=([0.0], [20.0])).x[0] * 1e-6)


def fit_custom() -> tuple[float, float, float]:
    pts = [(n, s, ms * 1e-3) for s, row in CUSTOM_MS.items()
           for n, ms in zip((2, 4, 8), row, strict=True)]

    def resid(x: np.ndarray) -> np.ndarray:
        base, per, bw = x[0] * 1e-6, x[1] * 1e-6, x[2] * 1e9
        return np.array([np.log((base + per * (n - 1) + (n - 1) / n * s / bw) / t)
                         for n, s, t in pts])

    x = least_squares(resid, [8.0, 0.5, 30.0], bounds=([0, 0, 1], [50, 10, 1000])).x
    return float(x[0] * 1e-6), float(x[1] * 1e-6), float(x[2] * 1e9)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_CSV
    rows = small_rows(path)
    step = float(f"{fit_step(rows):.4g}")
    for rid, acc, n, s, t in rows:
        m = nccl_time(acc, n, s, step)
        print(f"{rid} {acc:16s} n={n} {int(s):>7d} B measured {t * 1e6:6.1f} us, "
              f"fitted model {m * 1e6:6.1f} us ({(m / t - 1) * 100:+.1f} %)")
    base, per, bw = fit_custom()
    print(f"NCCL LL step latency on NVSwitch: {step * 1e6:.3g} us "
          f"(8 ranks: {(co.NCCL_BASE_LATENCY_S + 14 * step) * 1e6:.1f} us floor)")
    print(f"custom one-shot all-reduce: {base * 1e6:.3g} us + {per * 1e6:.3g} us/rank, "
          f"{bw / 1e9:.3g} GB/s")
    data = {
        "nvswitch_nccl": {
            "step_latency_s": step,
            "rule": f"least squares on log time, single-node all-reduce rows <= {MAX_PAYLOAD} B "
                    "on NVSwitch systems; NCCL ring form baseLat + 2(n-1) x hwLat",
            "fitted_on": [r[0] for r in rows],
            "ranks_measured": sorted({r[2] for r in rows}),
        },
        "custom_all_reduce": {
            "base_s": float(f"{base:.4g}"), "per_rank_s": float(f"{per:.4g}"),
            "bandwidth": float(f"{bw:.4g}"), "source": CUSTOM_SOURCE,
        },
    }
    OUT.write_text(HEADER + yaml.safe_dump(data, sort_keys=False, width=100))
    co.measured_latency.cache_clear()
    co.link_for_tier.cache_clear()  # its links were built from the old latencies
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
