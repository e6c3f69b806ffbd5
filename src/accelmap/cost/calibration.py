"""Calibration profiles: achievable throughput measured on the user's own device.

A profile replaces the datasheet-derived defaults of ``cost/efficiency.py`` for one device:
the best measured matmul efficiency per dtype (measured FLOP/s / catalog dense peak), an
optional efficiency-vs-size curve, and the measured memory bandwidth. ``accelmap calibrate``
builds profiles from stored measurements; ``--profile NAME`` selects one, and every estimate
says whether it used datasheet defaults or a measured profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelmap.units import DType

PROFILE_SCHEMA = 1  # version of the stored JSON form (to_dict / from_dict)


@dataclass(frozen=True)
class CalibrationProfile:
    name: str
    accelerator_id: str
    matmul_efficiency: dict[DType, float] = field(default_factory=dict)  # best, vs dense peak
    # (GEMM FLOPs, efficiency) points, sorted by FLOPs: the achievable curve by size
    matmul_curve: dict[DType, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    bandwidth: float | None = None  # achievable device-memory bytes/s
    source: str = ""  # "measured on <device> at <time> (run <id>)"
    # the dense peak (FLOP/s) each efficiency was divided by, so a changed catalog can rescale
    matmul_peak: dict[DType, float] = field(default_factory=dict)
    # measured cost of one eager op (measure/overhead.py); replaces the eager launch default
    kernel_overhead_s: float | None = None

    def efficiency_at(self, dtype: DType, flops: Any) -> Any:
        """Achievable efficiency of a GEMM of ``flops`` FLOPs from the measured curve:
        linear in log(FLOPs) between points, flat beyond the ends; the best efficiency where
        the dtype has no curve, None where it has neither. ``flops`` may be an array."""
        curve = self.matmul_curve.get(dtype)
        if not curve:
            return self.matmul_efficiency.get(dtype)
        x = np.log(np.maximum(np.asarray(flops, dtype=float), 1.0))
        xs = np.log([f for f, _ in curve])
        ys = np.array([e for _, e in curve])
        return np.interp(x, xs, ys)

    def to_dict(self) -> dict[str, Any]:
        """The stored form (``measure/store.py`` keeps it as JSON): SI units, dtype names."""
        return {
            "schema": PROFILE_SCHEMA,
            "name": self.name,
            "accelerator_id": self.accelerator_id,
            "matmul_efficiency": {d.value: e for d, e in self.matmul_efficiency.items()},
            "matmul_curve": {d.value: [[f, e] for f, e in pts]
                             for d, pts in self.matmul_curve.items()},
            "matmul_peak_flops": {d.value: p for d, p in self.matmul_peak.items()},
            "bandwidth_bytes_per_s": self.bandwidth,
            "kernel_overhead_s": self.kernel_overhead_s,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CalibrationProfile:
        return cls(
            name=str(d["name"]),
            accelerator_id=str(d["accelerator_id"]),
            matmul_efficiency={DType(k): float(v)
                               for k, v in d.get("matmul_efficiency", {}).items()},
            matmul_curve={DType(k): tuple((float(f), float(e)) for f, e in pts)
                          for k, pts in d.get("matmul_curve", {}).items()},
            bandwidth=(float(d["bandwidth_bytes_per_s"])
                       if d.get("bandwidth_bytes_per_s") is not None else None),
            source=str(d.get("source", "")),
            matmul_peak={DType(k): float(v) for k, v in d.get("matmul_peak_flops", {}).items()},
            kernel_overhead_s=(float(d["kernel_overhead_s"])
                               if d.get("kernel_overhead_s") is not None else None),
        )
