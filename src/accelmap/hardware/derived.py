"""Figures derived from catalog values, for comparing accelerators apples to apples.

- ridge point (Williams, Waterman & Patterson 2009, "Roofline"): peak FLOP/s divided by memory
  bandwidth, in FLOP per byte. An operator with lower arithmetic intensity is memory-bound.
- bytes per FLOP: memory bandwidth / bf16 peak, the inverse view (decode needs ~1 B/FLOP-ish
  ratios that no modern accelerator offers, which is why batch-1 decode is memory-bound).
- memory per dollar: device memory (bytes) per USD of one device-hour.
- FLOP/s per watt at TDP, and per USD/h.
- the 16-bit and 8-bit peaks a one-line summary shows: bf16 (else fp16), and fp8 (else int8,
  then counted in integer OP/s).

These are datasheet ratios; achievable figures come from the engine's efficiency curves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from accelmap.hardware.schema import Accelerator
from accelmap.units import DType

# Order used when a single "headline" dtype is needed for a device: the 16-bit training format
# first, then what inference-only parts offer.
HEADLINE_DTYPES = (DType.BF16, DType.FP16, DType.FP8, DType.INT8, DType.FP32)


def headline_dtype(acc: Accelerator) -> DType | None:
    return next((d for d in HEADLINE_DTYPES if acc.peak(d) is not None), None)


@dataclass(frozen=True)
class DerivedFigures:
    ridge_flop_per_byte: dict[DType, float]
    bytes_per_flop: float | None  # memory bandwidth / headline peak
    memory_bytes_per_usd_hour: float | None
    flops_per_watt: float | None  # headline peak / TDP
    flops_per_usd_hour: float | None
    headline: DType | None
    peak_16bit: float | None = None  # bf16, else fp16
    peak_8bit: float | None = None  # fp8, else int8
    peak_8bit_is_integer: bool = False  # True when peak_8bit is the int8 figure (OP/s)


def derive(acc: Accelerator) -> DerivedFigures:
    bw = acc.memory_bandwidth
    ridge = {}
    if bw:
        ridge = {d: acc.peak(d) / bw for d in acc.dtypes}  # type: ignore[operator]
    head = headline_dtype(acc)
    peak = acc.peak(head) if head else None
    price = acc.price.usd_per_hour.value if acc.price else None
    tdp = acc.tdp.value if acc.tdp else None
    return DerivedFigures(
        ridge_flop_per_byte=ridge,
        bytes_per_flop=(bw / peak) if (bw and peak) else None,
        memory_bytes_per_usd_hour=(acc.memory_bytes / price) if price else None,
        flops_per_watt=(peak / tdp) if (peak and tdp) else None,
        flops_per_usd_hour=(peak / price) if (peak and price) else None,
        headline=head,
        peak_16bit=acc.peak(DType.BF16) or acc.peak(DType.FP16),
        peak_8bit=acc.peak(DType.FP8) or acc.peak(DType.INT8),
        peak_8bit_is_integer=acc.peak(DType.FP8) is None and acc.peak(DType.INT8) is not None,
    )


def compared_dtypes(accs: Iterable[Accelerator]) -> list[DType]:
    """The dtypes at least one of ``accs`` has a peak for, in ``DType`` order (widest first)."""
    accs = list(accs)
    return [d for d in DType if any(a.peak(d) for a in accs)]
