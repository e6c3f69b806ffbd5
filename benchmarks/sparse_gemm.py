"""2:4 sparsity: the measured sparse/dense GEMM speedups, the fit the model uses, and measured vs
modelled for every row (cost/data/sparse_gemm.yaml; the model in ops/sparsity.py and
cost/sparsity.py).

1. The fit: per (architecture, dtype class) the median of the rows at M >= compute_bound_m.
2. GEMM rows: each SlideSparse row is the sum of a model's four linear layers at M tokens;
   modelled = accelmap's roofline of those GEMMs on the catalog part, dense vs 2:4 (compressed
   weight bytes, compute divided by the fit), vLLM's profile (no per-kernel overhead, as a
   kernel timing has none). Parts outside the catalog (RTX 5080) show the measurement only.
3. Training rows: forward + backward of one linear layer with torchao's SemiSparseLinear;
   modelled through the same ops as a training step (forward and dgrad sparse, wgrad dense).
4. End to end: published whole-model figures against accelmap's estimate of the same job.

Nothing is asserted; the small-M rows show where the model is optimistic: the compressed-bytes
bound is the kernels' best case, which cuSPARSELt misses at M <= 256 (on H100 it is even slower
than dense there).

Run: PYTHONPATH=src python benchmarks/sparse_gemm.py [--rows]
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace

from accelmap import api
from accelmap.api import DType, load_catalog
from accelmap.cost.framework import profile
from accelmap.cost.roofline import Device, time_ops, total_time
from accelmap.cost.sparsity import dtype_class, fitted, layer_gemms, measured, table
from accelmap.ops.graph import ByteKind, Op, Precision, Unit
from accelmap.ops.sparsity import sparse_weights
from accelmap.ops.training import backward_ops
from accelmap.workload import Sparsity

PART = {"A100": "a100-sxm4-80gb", "H100": "h100-sxm5-80gb", "B200": "b200",
        "RTX 4090": "rtx-4090"}
OUT = DType.BF16  # the GEMMs write 16-bit outputs


def _gemm(m: int, n: int, k: int, dt: DType) -> Op:
    return Op(name="layers/mlp/up", unit=Unit.MATRIX, dtype=dt, flops=2.0 * m * n * k,
              bytes={ByteKind.WEIGHTS: float(k * n * dt.bytes),
                     ByteKind.ACTIVATIONS: float(m * k * dt.bytes + m * n * OUT.bytes)},
              gemm=(m, n, k), weight_dtype=dt)


def _modelled(acc_id: str, dt: DType, shapes: list[tuple[int, int]], m: int,
              training: bool = False) -> float:
    acc = load_catalog().accelerators[acc_id]
    dev, fw = Device.of(acc), profile("vllm")
    p = Precision(act=dt, weight=dt, compute=dt)
    fwd = [_gemm(m, n, k, dt) for n, k in shapes]
    ops = fwd + (backward_ops(fwd, DType.FP32) if training else [])
    sparse = sparse_weights(ops, p, training=training)
    return float(total_time(time_ops(ops, dev, fw)) / total_time(time_ops(sparse, dev, fw)))


def fit_table() -> None:
    print("1. Compute-bound 2:4 GEMM speedup per architecture and dtype class (the fit)")
    arch = table()["architectures"]
    for a in arch:
        for cls in ("16-bit", "fp8", "int8"):
            f = fitted(a, cls)
            print(f"  {a:18s} {cls:7s} {f.value:5.2f}x  {f.source}")
    print()


def gemm_rows(show_rows: bool) -> None:
    print("2. Measured vs modelled speedup of the GEMM rows (dense time / 2:4 time)")
    m0 = table()["compute_bound_m"]
    errs: dict[str, list[float]] = {"compute-bound": [], "memory-bound (M <= 256)": []}
    for r in measured():
        acc = PART.get(r.gpu)
        shapes = layer_gemms(r.model) if r.model else [(r.n, r.k)]
        model = _modelled(acc, r.dtype, shapes, r.m) if acc else None
        regime = "compute-bound" if r.m >= m0 else ("memory-bound (M <= 256)" if r.m <= 256
                                                   else "")
        if model is not None and regime:
            errs[regime].append(model / r.speedup - 1)
        if show_rows:
            shown = f"{model:5.2f}" if model is not None else "  -  "
            print(f"  {r.gpu:9s} {r.dtype.value:5s} {r.model or f'{r.n}x{r.k}':12s} "
                  f"M={r.m:6d}  measured {r.speedup:5.2f}  modelled {shown}  ({r.source})")
    for regime, e in errs.items():
        if e:
            print(f"  {regime}: {len(e)} rows, modelled/measured - 1: median "
                  f"{statistics.median(e):+.1%}, mean |err| "
                  f"{statistics.fmean(abs(x) for x in e):.1%}, worst {max(e, key=abs):+.1%}")
    by: dict[tuple[str, str], list[float]] = {}
    for r in measured():
        acc = PART.get(r.gpu)
        if acc and r.m <= 256:
            shapes = layer_gemms(r.model) if r.model else [(r.n, r.k)]
            by.setdefault((r.gpu, dtype_class(r.dtype)), []).append(
                _modelled(acc, r.dtype, shapes, r.m) / r.speedup)
    print("  memory-bound rows, modelled / measured by part: " + ", ".join(
        f"{g} {c} {statistics.median(v):.2f}" for (g, c), v in sorted(by.items())))
    print()


def training_rows() -> None:
    print("3. Training: forward + backward of one linear layer (wgrad dense)")
    for r in table()["training"]:
        dt = DType(r["dtype"])
        model = _modelled(PART[r["gpu"]], dt, [(r["n"], r["k"])], r["m"], training=True)
        print(f"  {r['gpu']} {dt.value} M={r['m']} n={r['n']} k={r['k']}: measured "
              f"{r['speedup']:.3f}x, modelled {model:.3f}x ({r['source']})")
    print()


def _serve_ratio(weights: str, batch: int, prompt: int, output: int,
                 what: str) -> float:
    spec = api.load_model("llama-3.1-8b")
    system = api.load_system(hw="h100-sxm5-80gb")
    wl = api.inference(batch, prompt, output, weights=weights)
    if what == "offline":
        load = api.serving_load("offline", requests=1000)
        runs = [api.serve(spec, system, replace(wl, sparsity=s), api.serving_mapping(),
                          framework="vllm", load=load) for s in Sparsity]
        return float(runs[1].metrics["output_tokens_per_s"]
                     / runs[0].metrics["output_tokens_per_s"])
    ests = [api.estimate(spec, system, replace(wl, sparsity=s), api.serving_mapping(),
                         framework="vllm") for s in Sparsity]
    return float(ests[0].total_time_s / ests[1].total_time_s)


def end_to_end() -> None:
    print("4. End to end: published vs accelmap (llama-3.1-8b on h100-sxm5-80gb, vLLM profile)")
    ours = {
        "HPCAI": ("fp8 offline, 1000 requests of 1024 in / 1024 out, output tokens/s",
                  _serve_ratio("fp8", 1, 1024, 1024, "offline")),
        "NM-FP8": ("fp8 one request, 1024 in / 1024 out, latency",
                   _serve_ratio("fp8", 1, 1024, 1024, "latency")),
    }
    for r in table()["end_to_end"]:
        mine = ours.get(r["source"])
        shown = f"accelmap {mine[1]:.2f}x ({mine[0]})" if mine else "no catalog model"
        print(f"  {r['what']}: published {r['speedup']:.2f}x; {shown} [{r['source']}]")


if __name__ == "__main__":
    fit_table()
    gemm_rows("--rows" in sys.argv)
    training_rows()
    end_to_end()
