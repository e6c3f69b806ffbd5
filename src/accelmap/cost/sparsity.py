"""How much faster a weight GEMM computes on 2:4-sparse weights, and where it cannot.

The sparse tensor cores double the math rate (Mishra et al. 2021, arXiv 2104.08378), but the
measured GEMMs do not double: a compute-bound 2:4 GEMM runs 1.3-1.8x faster than the dense one
(cuSPARSELt vs cuBLASLt on Llama/Qwen layer shapes; PyTorch's CUTLASS kernels 1.38x on A100).
The model takes one compute-bound speedup per (architecture, dtype class): the median of the
measured rows with M >= ``compute_bound_m`` tokens in ``data/sparse_gemm.yaml``, capped at 2
and at a part's own sparse/dense peak ratio (``SparseSupport.ceiling``). The roofline divides a
sparse GEMM's compute time by it; its memory time already reads the compressed weights
(ops/sparsity.py), which is where decode gains. An architecture without rows for a dtype class
borrows, in order: fp4 -> its fp8 rows; then every architecture's rows of the class (pooled).
CDNA3/CDNA4 are credited no compute speedup (measured little benefit in isolation).

What the model does not capture, and benchmarks/sparse_gemm.py shows: at small M the measured
cuSPARSELt kernels fall short of the compressed-bytes bound and are even slower than dense on
H100 (0.74-1.2x at M = 64), so the memory-bound gains are the kernels' best case.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator, DeviceClass
from accelmap.units import DType

MAX_SPEEDUP = 2.0  # 2:4 skips half the multiplies: the sparse tensor cores' rate is 2x dense

# what the catalog says when a part has no sparse mode, by class
_NO_MODE = {
    DeviceClass.GPU: "its matrix units have no 2:4 sparse mode: NVIDIA's sparse tensor cores "
                     "start with Ampere, AMD's with CDNA3",
    DeviceClass.TPU: "a TPU's MXUs run dense matmuls only",
}


def dtype_class(dtype: DType) -> str:
    """The measured rows a dtype's GEMM borrows: 16-bit, fp8, int8 or fp4."""
    return "16-bit" if dtype in (DType.BF16, DType.FP16) else dtype.value


@dataclass(frozen=True)
class Measured:
    """One measured GEMM: speedup = dense time / 2:4 time at ``m`` tokens x ``n`` x ``k``."""

    gpu: str
    arch: str
    dtype: DType
    m: int
    n: int
    k: int
    speedup: float
    source: str
    model: str | None = None  # summed over this model's four linear layers (SLIDESPARSE-B)


@dataclass(frozen=True)
class SparseSpeedup:
    value: float  # compute-bound dense / sparse time of a weight GEMM
    source: str  # what the value rests on, for every estimate's assumptions


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    path = Path(str(resources.files("accelmap").joinpath("cost/data/sparse_gemm.yaml")))
    return dict(yaml.safe_load(path.read_text()) or {})


def layer_gemms(model: str) -> list[tuple[int, int]]:
    """(n, k) of the four linear layers SlideSparse times: fused QKV, O, fused gate-up, down."""
    s = table()["shapes"][model]
    d, hd = s["d"], s["head_dim"]
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    return [(q + 2 * kv, d), (d, q), (2 * s["ffn"], d), (d, s["ffn"])]


@lru_cache(maxsize=1)
def measured() -> tuple[Measured, ...]:
    """Every GEMM row of the table, one per M."""
    t = table()
    out = []
    for row in t["gemms"]:
        ms = row.get("m", t["slidesparse_m"])
        for m, s in zip(ms, row["speedup"], strict=True):
            out.append(Measured(row["gpu"], row["arch"], DType(row["dtype"]), int(m),
                                int(row.get("n", 0)), int(row.get("k", 0)), float(s),
                                row.get("source", "SLIDESPARSE-B"), row.get("model")))
    return tuple(out)


def _rows(arch: str | None, cls: str) -> list[Measured]:
    m0 = table()["compute_bound_m"]
    return [r for r in measured() if r.m >= m0 and dtype_class(r.dtype) == cls
            and (arch is None or r.arch == arch)]


@lru_cache(maxsize=64)
def fitted(arch: str, cls: str) -> SparseSpeedup:
    """The compute-bound speedup of ``arch``'s ``cls`` GEMMs (median of its measured rows)."""
    info = table()["architectures"].get(arch)
    if info is None:
        raise KeyError(f"architecture {arch!r} is not in cost/data/sparse_gemm.yaml")
    if "speedup" in info:
        return SparseSpeedup(float(info["speedup"]), f"{info['note']} ({info['source']})")
    for a, c, how in ((arch, cls, ""), (arch, "fp8" if cls == "fp4" else None, "fp8 rows, "
                                       "no fp4 measurement; "),
                      (None, cls, f"no {arch} {cls} measurement; ")):
        rows = _rows(a, c) if c else []
        if rows:
            med = statistics.median(r.speedup for r in rows)
            srcs = ", ".join(sorted({r.source for r in rows}))
            lo, hi = min(r.speedup for r in rows), max(r.speedup for r in rows)
            where = f"{info['measured_on']} {c}" if a else f"{c} (every measured part)"
            return SparseSpeedup(
                min(med, MAX_SPEEDUP),
                f"{how}median of {len(rows)} measured {where} GEMMs at M >= "
                f"{table()['compute_bound_m']} tokens ({lo:.2f}-{hi:.2f}x; {srcs})")
    raise KeyError(f"no measured 2:4 GEMM of class {cls}")


def unsupported(acc: Accelerator, dtype: DType) -> str | None:
    """Why ``acc`` cannot run ``dtype`` GEMMs 2:4-sparse, or None when it can."""
    sp = acc.sparsity_2_4
    if sp is None:
        why = _NO_MODE.get(acc.device_class,
                           f"no 2:4 sparse matrix mode is known for this {acc.device_class.value}")
        return f"2:4 sparsity is not supported on {acc.id} ({why}); drop --sparsity"
    if dtype not in sp.dtypes:
        runs = ", ".join(d.value for d in sp.dtypes)
        return (f"2:4 sparsity is not supported on {acc.id} for {dtype.value} GEMMs (its sparse "
                f"mode runs {runs}); drop --sparsity")
    return None


def check_supported(acc: Accelerator, dtype: DType) -> None:
    """Raise the one-line InputError when ``acc`` has no 2:4 mode for ``dtype``."""
    why = unsupported(acc, dtype)
    if why is not None:
        raise InputError(why)


def sparse_speedup(acc: Accelerator, dtype: DType) -> SparseSpeedup:
    """Compute-bound dense / 2:4 time of a ``dtype`` weight GEMM on ``acc``."""
    check_supported(acc, dtype)
    sp = acc.sparsity_2_4
    assert sp is not None
    fit = fitted(sp.architecture, dtype_class(dtype))
    ceiling = sp.ceiling.get(dtype)
    if ceiling is not None and ceiling < fit.value:
        return SparseSpeedup(ceiling, f"{acc.id}'s sparse/dense {dtype.value} peak ratio "
                                      f"{ceiling:g} (below the measured {fit.value:.2f})")
    return fit
