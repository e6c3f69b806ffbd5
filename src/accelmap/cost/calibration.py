"""Calibration profiles: achievable throughput measured on the user's own device.

A profile replaces the datasheet-derived defaults of ``cost/efficiency.py`` for one device:
the best measured matmul efficiency per dtype (measured FLOP/s / catalog dense peak), an
optional efficiency-vs-size curve, and the measured memory bandwidth. ``accelmap calibrate``
builds profiles from stored measurements; ``--profile NAME`` selects one, and every estimate
says whether it used datasheet defaults or a measured profile.

A profile of a device the catalog does not have (this machine's CPU, ``hardware/local.py``)
carries the device's description (``device``), so that the profile alone makes the device
addressable (``--hw local`` or its id) on any machine that reads the store. What eager PyTorch
costs on the device beyond the roofline is measured too: the host seconds per dispatched op
(``dispatch_s``, by pass: ``forward`` and ``backward``; ``measure/overhead.py``) and the fused
attention kernel's efficiency by keys per query (``attention_curve``, forward and backward;
``measure/attention.py``).
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
    # host seconds per dispatched eager op, by pass ("forward", "backward"): measured on a micro
    # transformer (measure/overhead.py); used by the eager CPU stack (cost/eager_cpu.py)
    dispatch_s: dict[str, float] = field(default_factory=dict)
    # fused attention (SDPA) efficiency vs the matrix peak of ``attention_dtype``, by pass and
    # head dim ("forward/64"): (keys per query, efficiency) points sorted by keys
    attention_curve: dict[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    attention_kernel: str | None = None  # which SDPA kernel ran ("flash (cpu)", "math", ...)
    attention_dtype: DType | None = None
    threads: int | None = None  # host threads the measurements ran with (CPU)
    # facts of a device the catalog lacks ({"cpu": hardware.local.facts_to_dict(...)})
    device: dict[str, Any] | None = None
    # skinny GEMMs (few rows against a weight matrix; measure/matmul.py SKINNY), timed from
    # cold caches: per dtype, per row count m, (weight elements n x k, efficiency) sorted
    skinny_curve: dict[DType, dict[int, tuple[tuple[float, float], ...]]] = field(
        default_factory=dict)

    def skinny_at(self, dtype: DType, m: Any, weights: Any) -> Any:
        """Efficiency of an m-row GEMM against ``weights`` (n x k) elements from the skinny
        curves: linear in log(weights) along each measured m, then linear in log(m) between
        the two measured row counts around ``m`` (flat beyond the ends); None where ``m`` is
        above the largest measured row count or nothing was measured."""
        rows = self.skinny_curve.get(dtype)
        if not rows or np.any(np.asarray(m) > max(rows)):
            return None
        ms = sorted(rows)

        def along(r: int) -> Any:
            pts = rows[r]
            return np.interp(np.log(np.maximum(np.asarray(weights, dtype=float), 1.0)),
                             np.log([w for w, _ in pts]), [e for _, e in pts])

        effs = np.array([along(r) for r in ms])
        x = np.log(np.maximum(np.asarray(m, dtype=float), 1.0))
        if np.ndim(x) == 0:
            return np.interp(x, np.log(ms), effs)
        return np.array([np.interp(xi, np.log(ms), effs[:, i]) for i, xi in enumerate(x)])

    def attention_at(self, backward: bool, head_dim: Any, keys: Any) -> Any:
        """Measured attention efficiency for ``keys`` per query (linear in log keys between
        points, flat beyond), from the curve of the nearest measured head dim; None where the
        pass was not measured."""
        pass_ = "backward" if backward else "forward"
        dims = [int(k.split("/")[1]) for k in self.attention_curve if k.startswith(pass_ + "/")]
        if not dims:
            return None
        hd = float(np.asarray(head_dim if head_dim is not None else max(dims)).mean())
        near = min(dims, key=lambda d: (abs(np.log(d / max(hd, 1.0))), -d))
        curve = self.attention_curve[f"{pass_}/{near}"]
        x = np.log(np.maximum(np.asarray(keys, dtype=float), 1.0))
        return np.interp(x, np.log([k for k, _ in curve]), [e for _, e in curve])

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
            "dispatch_s": dict(self.dispatch_s),
            "attention_curve": {k: [[n, e] for n, e in pts]
                                for k, pts in self.attention_curve.items()},
            "attention_kernel": self.attention_kernel,
            "attention_dtype": self.attention_dtype.value if self.attention_dtype else None,
            "threads": self.threads,
            "device": self.device,
            "skinny_curve": {d.value: {str(m): [[w, e] for w, e in pts]
                                       for m, pts in rows.items()}
                             for d, rows in self.skinny_curve.items()},
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
            dispatch_s={str(k): float(v) for k, v in (d.get("dispatch_s") or {}).items()},
            attention_curve={str(k): tuple((float(n), float(e)) for n, e in pts)
                             for k, pts in (d.get("attention_curve") or {}).items()},
            attention_kernel=d.get("attention_kernel"),
            attention_dtype=DType(d["attention_dtype"]) if d.get("attention_dtype") else None,
            threads=int(d["threads"]) if d.get("threads") else None,
            device=d.get("device"),
            skinny_curve={DType(k): {int(m): tuple((float(w), float(e)) for w, e in pts)
                                     for m, pts in rows.items()}
                          for k, rows in (d.get("skinny_curve") or {}).items()},
        )
