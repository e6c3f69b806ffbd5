"""Calibration profiles: achievable throughput measured on the user's own device.

A profile replaces the datasheet-derived defaults of ``cost/efficiency.py`` for one device:
the best measured matmul efficiency per dtype (measured FLOP/s / catalog dense peak), an
optional efficiency-vs-size curve, and the measured memory bandwidth. ``accelmap calibrate``
builds profiles from stored measurements; ``--profile NAME`` selects one, and every estimate
says whether it used datasheet defaults or a measured profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelmap.units import DType


@dataclass(frozen=True)
class CalibrationProfile:
    name: str
    accelerator_id: str
    matmul_efficiency: dict[DType, float] = field(default_factory=dict)  # best, vs dense peak
    # (GEMM FLOPs, efficiency) points, sorted by FLOPs: the achievable curve by size
    matmul_curve: dict[DType, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    bandwidth: float | None = None  # achievable device-memory bytes/s
    source: str = ""  # "measured on <device> at <time> (run <id>)"
