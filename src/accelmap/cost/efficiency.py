"""Achievable, not peak: what fraction of the datasheet a device really delivers.

Matmul: the maximum achievable matmul FLOPS measured by shape sweep (``data/
achievable_matmul.yaml``, from the shared measurements) divided by the catalog's dense peak. A
device without a measurement takes the median over measured devices of its vendor and class, then
over all measured devices, and the estimate says which default it used. On top of that best-case
efficiency, a GEMM of a given shape loses to

- tile quantization: the kernel computes whole tiles, so an m x n output costs
  ceil(m/tm)*tm x ceil(n/tn)*tn (NVIDIA, "Matrix Multiplication Background User's Guide",
  sec. "Tile Quantization"); small m uses small tiles (down to the 16-row MMA shape, PTX ISA
  mma.m16n8k16) as cuBLAS heuristics do, and up to 8 tokens the swapped operands' 8-wide side;
- wave quantization: tiles run in waves of one tile per SM/CU; a last partial wave idles the rest
  (same guide, sec. "Wave Quantization": 133 tiles on 132 SMs take two waves). Too few tiles are
  split along k (split-K) up to the SM count, as cuBLAS does for skinny GEMMs;
- on TPUs the systolic array pads k and n to the MXU size (128, or 256 on v6e; Google, "Cloud TPU
  performance guide", sec. "Tiling/padding").

Memory: achievable HBM bandwidth is 1700 of 2039 GB/s on A100 80GB (gpt-fast README, measured
"about 1700 GB/s"; shared matmul.csv row M0021), i.e. 0.834; no other device has a published
stream measurement in the shared data, so this fraction is the default for every device, and the
output says so. A user's own measurements replace these (issue "measure").
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from accelmap.hardware.schema import Accelerator, DeviceClass
from accelmap.units import DType, Num

BANDWIDTH_EFFICIENCY = 1700 / 2039  # gpt-fast README, A100 80GB: "about 1700 GB/s" (row M0021)
BANDWIDTH_SOURCE = "default 0.834 of peak (A100 measurement, gpt-fast M0021; not this device)"

MMA_M = 16  # smallest tensor-core tile rows (PTX mma.m16n8k16)
# Fewer tokens than that run with the operands swapped (the weight on the MMA's M side), so the
# tokens fill its N = 8 side: CUTLASS/cuBLAS skinny-GEMM kernels and TensorRT-LLM's, PTX
# mma.m16n8k16.
MMA_N = 8
# CTA tile of large GEMMs (NVIDIA matmul guide, A100 example); also the AMD/Gaudi default
DEFAULT_TILE = (256, 128)
SPLIT_K_MIN = 256  # do not split k below 256 per split (keeps each split a full MMA pipeline)


@lru_cache(maxsize=1)
def training_fit() -> dict[str, Any]:
    """The few physical parameters fitted once on all shared training rows
    (fitters/fit_training.py writes cost/data/training_fit.yaml with the rows it used)."""
    path = Path(str(resources.files("accelmap").joinpath("cost/data/training_fit.yaml")))
    return dict(yaml.safe_load(path.read_text()) or {})


def sustained_fraction() -> float:
    """Fraction of the best-shape microbenchmark (MAMF) a GEMM sustains inside a whole step:
    the microbenchmark times one GEMM shape back to back with warm caches and the clock the
    power budget allows for GEMMs alone, while a step interleaves GEMMs with attention,
    memory-bound kernels and communication under one power and thermal budget. One value for
    every device and stack, fitted on the shared training rows; the residual the fit
    absorbs is reported with the validation figures."""
    return float(training_fit().get("sustained_gemm_fraction", {}).get("value", 1.0))


@lru_cache(maxsize=1)
def gemm_k_overhead() -> float:
    """k0 of ``k_efficiency``: the elements of the reduction dimension a GEMM's output tile
    spends outside its main loop. Each tile fills its software pipeline (stages x the K step)
    before its first MMA and writes its output after its last, so a GEMM of reduction length K
    runs at K / (K + k0) of a long-K one. Measured, not fitted on runs: least squares over the
    39 bf16 GEMMs of the H200 sweep under 2 TFLOP (``../shared/gpu/h200-sxm-2026-11``; larger
    ones run long enough to drop to the power-limited clock), each divided by the tile and wave
    model's efficiency: k0 = 496, rms 1.5 points (cost/data/gemm_k_overhead.yaml, written by
    ``fitters/derive_k_overhead.py``). Hopper's tiles; no Ampere or Blackwell sweep is stored,
    so every GPU takes it. training_fit.yaml's ``gemm_k_overhead`` overrides it (the fitters'
    experiments)."""
    fitted = training_fit().get("gemm_k_overhead")
    if fitted is not None:
        return float(fitted["value"])
    path = Path(str(resources.files("accelmap").joinpath("cost/data/gemm_k_overhead.yaml")))
    return float((yaml.safe_load(path.read_text()) or {}).get("value", 0.0))


# the best-shape measurement's reduction length when its row states no shape (the MAMF
# searches' best shapes have K of 1,024 to 8,192; matmul.csv)
DEFAULT_REFERENCE_K = 4096.0


def reference_k(acc_id: str, dtype: DType) -> float:
    """K of the best shape the device's GEMM efficiency was measured at (its row's
    ``shape``, MxNxK), the length ``k_efficiency`` is relative to."""
    row = measured_matmul().get(acc_id, {}).get(dtype.value) or \
        measured_matmul().get(acc_id, {}).get("bf16") or {}
    shape = str(row.get("shape", ""))
    parts = shape.lower().split("x")
    return float(parts[2]) if len(parts) == 3 and parts[2].isdigit() else DEFAULT_REFERENCE_K


def k_efficiency(k: Num, ref_k: float, k0: float | None = None) -> Num:
    """A GEMM of reduction length ``k`` against the measured best shape's ``ref_k``:
    (k / (k + k0)) / (ref_k / (ref_k + k0)), at most 1 (a longer K than the best shape's does
    not beat the measured best: the search would have found it)."""
    k0 = gemm_k_overhead() if k0 is None else k0
    if k0 <= 0:
        return np.ones_like(np.asarray(k, dtype=float)) if np.ndim(k) else 1.0
    kk = np.maximum(np.asarray(k, dtype=float), 1.0)
    return np.minimum((kk / (kk + k0)) / (ref_k / (ref_k + k0)), 1.0)


@lru_cache(maxsize=1)
def measured_matmul() -> dict[str, dict[str, dict[str, Any]]]:
    """Measured best-shape efficiency per device and dtype: the generated table
    (achievable_matmul.yaml), the hand-kept microscaling rows (achievable_block_scaled.yaml,
    public FP4 GEMM measurements with their sources) and hand-kept public rows of parts the
    shared table lacks (achievable_published.yaml)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in ("achievable_matmul.yaml", "achievable_block_scaled.yaml",
                 "achievable_published.yaml"):
        path = Path(str(resources.files("accelmap").joinpath(f"cost/data/{name}")))
        for dev, rows in (yaml.safe_load(path.read_text()) or {}).items():
            out.setdefault(dev, {}).update(rows)
    return out


def _same_format(table: dict[str, dict[str, dict[str, Any]]], dtype: DType
                 ) -> MatmulEfficiency | None:
    """A microscaling format the device has no row for borrows the rows measured in that very
    format on other parts (B200's NVFP4 for B300/GB200), before its own 16-bit or FP8 figure:
    the FP4 GEMMs measured so far reach about half the fraction of peak that BF16 does."""
    if dtype.block_format is None:
        return None
    rows = {k: v[dtype.value] for k, v in table.items() if dtype.value in v}
    if not rows:
        return None
    value = statistics.median(float(r["efficiency"]) for r in rows.values())
    return MatmulEfficiency(value, f"default: {dtype.value} measured on {', '.join(rows)} "
                            f"({'; '.join(str(r['source']) for r in rows.values())})", False)


@dataclass(frozen=True)
class MatmulEfficiency:
    value: float
    source: str  # "measured (M0005)" or "default: median of 7 measured NVIDIA gpu devices"
    measured: bool


def matmul_efficiency(acc: Accelerator, dtype: DType, exclude: str | None = None
                      ) -> MatmulEfficiency:
    """Best-shape efficiency for ``acc`` and ``dtype``; ``exclude`` drops one device's own
    measurement (leave-one-out validation)."""
    table = {k: v for k, v in measured_matmul().items() if k != exclude}
    own = table.get(acc.id, {})
    if dtype.value in own:
        e = own[dtype.value]
        return MatmulEfficiency(float(e["efficiency"]), f"measured ({e['source']})", True)
    borrowed = _same_format(table, dtype)
    if borrowed is not None:
        return borrowed
    # same device, other dtype: its bf16 figure is the closest evidence, but an 8-bit
    # measurement does not speak for 16-bit GEMMs: FP8 kernels reach a lower fraction of their
    # (doubled) peak than bf16 on every device measured in both (H100 0.71 vs 0.80, B200 0.76
    # vs 0.78, GH200 0.78 vs 0.84: achievable_matmul.yaml), so an H200 with only an fp8 row
    # takes its vendor's bf16 peers rather than its own fp8 figure.
    wide = dtype.bytes >= 2 and not any(DType(k).bytes >= 2 for k in own)
    if own and not wide:
        # a microscaling format nobody measured takes its element width's row (MXFP8: FP8)
        key = (dtype.element_width.value if dtype.element_width.value in own
               else "bf16" if "bf16" in own else next(iter(own)))
        e = own[key]
        return MatmulEfficiency(float(e["efficiency"]),
                                f"measured {key} ({e['source']}) used for {dtype.value}", True)
    from accelmap.catalog import load_catalog

    cat = load_catalog()
    rows = [
        v.get(dtype.value) or v.get("bf16") or next(iter(v.values()))
        for k, v in table.items()
        if k in cat.accelerators and cat.accelerators[k].vendor == acc.vendor
        and cat.accelerators[k].device_class == acc.device_class
        # a device with only 8-bit rows speaks neither for itself nor for its peers in 16 bits
        and not (wide and (k == acc.id or not any(DType(d).bytes >= 2 for d in v)))
    ]
    # a board measured below its die's design power (``peer: false``) speaks for itself only
    peers = [r["efficiency"] for r in rows if r.get("peer", True)]
    if peers:
        return MatmulEfficiency(
            statistics.median(peers),
            f"default: median of {len(peers)} measured {acc.vendor} {acc.device_class.value} "
            "devices", False)
    everyone = [v.get("bf16", next(iter(v.values())))["efficiency"] for v in table.values()]
    return MatmulEfficiency(statistics.median(everyone),
                            f"default: median of all {len(everyone)} measured devices", False)


@dataclass(frozen=True)
class GemmGeometry:
    tile: tuple[int, int]
    units: int  # SMs/CUs that each take one tile per wave; 0 = no wave model (systolic)
    systolic: int  # MXU side for TPUs (pads k and n); 0 = not systolic


def geometry(acc: Accelerator) -> GemmGeometry:
    cu = acc.compute_units
    if acc.device_class == DeviceClass.TPU:
        side = cu.matrix_tile[0] if cu and cu.matrix_tile else 128
        return GemmGeometry(tile=(side, side), units=0, systolic=side)
    if acc.device_class in (DeviceClass.SRAM_MACHINE, DeviceClass.FPGA):
        # Dataflow machines have no GPU thread-block tile: a systolic matrix unit pads k and n
        # to its side where the catalog gives one (Groq's 320x320 MXM, Abts et al. ISCA 2020
        # sec. 4); MIMD core arrays run any shape unpadded (Cerebras at Hot Chips 2020: "no
        # padding required"), and so do FPGA overlays sized at compile time to the model.
        side = cu.matrix_tile[0] if cu and cu.matrix_tile else 0
        return GemmGeometry(tile=(max(side, 1), max(side, 1)), units=0, systolic=side)
    units = cu.count.value if cu and acc.device_class == DeviceClass.GPU else 0
    return GemmGeometry(tile=DEFAULT_TILE, units=units, systolic=0)


def _ceil_to(x: Num, q: Num) -> Num:
    return np.ceil(np.asarray(x, dtype=float) / q) * q


def shape_efficiency(m: Num, n: Num, k: Num, geo: GemmGeometry) -> Num:
    """Fraction of the padded, wave-quantized work that is useful (1.0 = perfect shape)."""
    m = np.maximum(np.asarray(m, dtype=float), 1.0)
    n = np.asarray(n, dtype=float)
    k = np.asarray(k, dtype=float)
    if geo.systolic or geo.tile == (1, 1):
        s = max(geo.systolic, 1)
        return (n / _ceil_to(n, s)) * (k / _ceil_to(k, s))
    tn = geo.tile[1]
    # small m: the smallest power-of-two tile >= m, at least the MMA height; below it the
    # swapped-operand kernel's N = 8 side
    tm = np.where(m <= MMA_N, MMA_N, np.clip(2.0 ** np.ceil(np.log2(m)), MMA_M, geo.tile[0]))
    tiles_m = np.ceil(m / tm)
    tiles_n = np.ceil(n / tn)
    tile_eff = (m * n) / (tiles_m * tm * tiles_n * tn)
    if not geo.units:
        return tile_eff
    tiles = tiles_m * tiles_n
    splits = np.clip(np.floor(geo.units / tiles), 1.0, np.maximum(np.floor(k / SPLIT_K_MIN), 1.0))
    work = tiles * splits
    waves = np.ceil(work / geo.units)
    return tile_eff * work / (waves * geo.units)
