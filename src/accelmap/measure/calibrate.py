"""Stored measurements -> a calibration profile for one accelerator (``accelmap calibrate``).

Pure functions: no store, no clock. For one accelerator ``acc``:

- ``matmul_efficiency[dtype]`` = best measured GEMM FLOP/s of that dtype / the dense matrix
  peak that the roofline multiplies the efficiency with (``Device.peak(dtype, MATRIX)``: the
  catalog's peak, or the local device's derived peak when ``acc`` is the local device), so that
  ``peak x efficiency`` reproduces the best measurement exactly;
- ``matmul_curve[dtype]`` = (GEMM FLOPs, efficiency) points: the upper envelope over shapes
  (the best shape in each half-octave of FLOPs, ``CURVE_BINS_PER_OCTAVE``), made non-decreasing
  in FLOPs by isotonic regression (pool adjacent violators; Barlow et al. 1972), because a larger
  GEMM can always be run at least as efficiently as a smaller one (split it) and dips between
  neighbouring sizes are timing noise or a missed shape, not a property of the device;
- ``skinny_curve[dtype][m]`` = (weight elements n x k, efficiency) of the newest run's skinny
  GEMMs (few rows, cold caches: the GEMMs of decoding on a CPU), which the roofline uses for a
  GEMM of up to the largest measured m rows in place of the square shapes' curve;
- ``bandwidth`` = best measured copy/read bandwidth (``BANDWIDTH_KERNELS``), B/s;
- ``kernel_overhead_s`` and ``dispatch_s``: the newest per-op overhead and seconds per
  dispatched aten op by pass (``measure/overhead.py``);
- ``attention_curve``: per pass and head dim, (keys per query, efficiency vs the matrix peak)
  of the newest attention run (``measure/attention.py``), best per sequence length;
- ``threads``: the host threads of the newest run (a CPU profile holds for that many);
- ``device``: the accelerator's description when it is the local CPU (``hardware/local.py``),
  so the profile makes the device addressable where the catalog lacks it;
- ``source`` names the device, the software, the time of the newest measurement and the runs.

Dtypes that were not measured are left out: the roofline keeps its datasheet-derived default
for them (and says so per estimate).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.roofline import Device
from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator
from accelmap.measure.records import Kind, Measurement
from accelmap.ops.graph import Unit
from accelmap.units import DType, parse_dtype

CURVE_BINS_PER_OCTAVE = 2  # one envelope point per half-octave (factor sqrt 2) of GEMM FLOPs
BANDWIDTH_KERNELS = ("copy", "read")  # STREAM-style kernels that bound the memory term
_SHAPE = re.compile(r"(\d+)\s*[x×*]\s*(\d+)\s*[x×*]\s*(\d+)")
@dataclass(frozen=True)
class Best:
    """The best measurement of one dtype (matmul) or of memory bandwidth."""

    value: float  # FLOP/s or B/s
    label: str  # shape "MxNxK" or kernel and size
    run_id: str
    peak: float | None  # what it is compared with (dense peak, catalog bandwidth)
    peak_source: str = ""  # which peak: "bf16", "bf16 (no fp32 matrix peak)", "catalog"

    @property
    def efficiency(self) -> float | None:
        return self.value / self.peak if self.peak else None


def gemm_flops(m: Measurement) -> float | None:
    """2 M N K of a matmul measurement: ``settings['flops']``, ``settings`` m/n/k, or the
    'MxNxK' label (None when none of these is there)."""
    s = m.settings
    if isinstance(s.get("flops"), int | float) and s["flops"] > 0:
        return float(s["flops"])
    dims = [s.get(k, s.get(k.upper())) for k in ("m", "n", "k")]
    sizes = [float(d) for d in dims if isinstance(d, int | float) and d > 0]
    if len(sizes) == 3:
        return 2.0 * math.prod(sizes)
    hit = _SHAPE.search(m.label)
    if hit:
        return 2.0 * math.prod(float(g) for g in hit.groups())
    return None


def matmul_peak(acc: Accelerator, dtype: DType) -> tuple[float, str]:
    """The dense peak that the roofline multiplies a matmul efficiency with, FLOP/s, and
    which peak it is (the roofline falls back to another dtype's where ``dtype`` has none)."""
    return Device.of(acc).peak(dtype, Unit.MATRIX)


def _kernel(m: Measurement) -> str:
    k = m.settings.get("kernel")
    return str(k).lower() if k else (m.label.split() or [""])[0].lower()


def _own(ms: Iterable[Measurement], acc: Accelerator, kind: Kind) -> list[Measurement]:
    return [m for m in ms if m.kind is kind and m.accelerator_id == acc.id and m.value > 0
            and math.isfinite(m.value)]


def best_matmul(ms: Iterable[Measurement], acc: Accelerator) -> dict[DType, Best]:
    out: dict[DType, Best] = {}
    for m in _own(ms, acc, Kind.MATMUL):
        d = parse_dtype(m.dtype)
        if d is not None and (d not in out or m.value > out[d].value):
            out[d] = Best(m.value, m.label, m.run_id, *matmul_peak(acc, d))
    return dict(sorted(out.items(), key=lambda kv: list(DType).index(kv[0])))


def best_bandwidth(ms: Iterable[Measurement], acc: Accelerator) -> Best | None:
    cands = [m for m in _own(ms, acc, Kind.BANDWIDTH) if _kernel(m) in BANDWIDTH_KERNELS]
    if not cands:
        return None
    m = max(cands, key=lambda x: x.value)
    return Best(m.value, m.label, m.run_id, acc.memory_bandwidth, "catalog")


def isotonic(values: Sequence[float]) -> list[float]:
    """Least-squares non-decreasing fit, equal weights (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, n2), (m1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    return [m for m, n in blocks for _ in range(int(n))]


def envelope(points: Iterable[tuple[float, float]],
             bins_per_octave: int = CURVE_BINS_PER_OCTAVE) -> tuple[tuple[float, float], ...]:
    """Best (FLOPs, efficiency) per 1/bins_per_octave octave of FLOPs, sorted, then isotonic."""
    best: dict[int, tuple[float, float]] = {}
    for f, e in points:
        b = round(math.log2(f) * bins_per_octave)
        if b not in best or e > best[b][1]:
            best[b] = (f, e)
    pts = [best[b] for b in sorted(best)]
    smooth = isotonic([e for _, e in pts])
    return tuple((f, e) for (f, _), e in zip(pts, smooth, strict=True))


def _skinny(m: Measurement) -> bool:
    return m.settings.get("phase") == "skinny"


def skinny_curves(ms: Iterable[Measurement], acc: Accelerator
                  ) -> dict[DType, dict[int, tuple[tuple[float, float], ...]]]:
    """Per dtype and row count m: (weight elements n x k, efficiency) of the newest run's
    skinny GEMMs (measure/matmul.py SKINNY, cold caches), sorted by weight size."""
    own = [m for m in _own(ms, acc, Kind.MATMUL) if _skinny(m)]
    out: dict[DType, dict[int, dict[float, float]]] = {}
    for dtype in {parse_dtype(m.dtype) for m in own} - {None}:
        assert dtype is not None
        mine = [m for m in own if parse_dtype(m.dtype) is dtype]
        newest = [m for m in mine if m.run_id == mine[-1].run_id]
        peak, _ = matmul_peak(acc, dtype)
        for m in newest:
            rows, n, k = (int(m.settings[x]) for x in ("m", "n", "k"))
            if peak > 0:
                best = out.setdefault(dtype, {}).setdefault(rows, {})
                best[float(n * k)] = max(m.value / peak, best.get(float(n * k), 0.0))
    return {d: {r: tuple(sorted(p.items())) for r, p in sorted(rows.items())}
            for d, rows in out.items()}


def matmul_curves(ms: Iterable[Measurement], acc: Accelerator
                  ) -> dict[DType, tuple[tuple[float, float], ...]]:
    """The square shapes' envelope per dtype (skinny shapes have a curve of their own)."""
    points: dict[DType, list[tuple[float, float]]] = {}
    for m in _own(ms, acc, Kind.MATMUL):
        if _skinny(m):
            continue
        d, f = parse_dtype(m.dtype), gemm_flops(m)
        if d is None or f is None:
            continue
        peak, _ = matmul_peak(acc, d)
        if peak > 0:
            points.setdefault(d, []).append((f, m.value / peak))
    return {d: envelope(p) for d, p in points.items()}


def describe(ms: Sequence[Measurement], acc: Accelerator) -> str:
    """'measured on <device> (<software>) up to <time>, runs a, b; ...'"""
    own = [m for m in ms if m.accelerator_id == acc.id]
    devices = sorted({m.device for m in own})
    runs = sorted({m.run_id for m in own if m.run_id})
    newest = max((m.created_at for m in own if m.created_at), default="unknown time")
    env: dict[str, str] = {}
    for m in own:
        env.update({k: v for k, v in m.environment.facts().items()
                    if k in ("torch", "numpy", "cuda", "driver", "backend")})
    software = ", ".join(f"{k} {v}" for k, v in sorted(env.items()))
    return (f"measured on {'; '.join(devices) or acc.id}"
            + (f" ({software})" if software else "")
            + f" up to {newest}, run{'s' if len(runs) != 1 else ''} {', '.join(runs) or '-'}")


def calibrate(ms: Sequence[Measurement], acc: Accelerator, name: str | None = None
              ) -> CalibrationProfile:
    """The profile of ``acc`` from its matmul and bandwidth measurements in ``ms`` (others,
    and other devices' measurements, are ignored)."""
    matmul = best_matmul(ms, acc)
    bw = best_bandwidth(ms, acc)
    if not matmul and bw is None:
        raise InputError(f"no matmul or copy/read bandwidth measurements of {acc.id} to "
                         f"calibrate from; run 'accelmap measure matmul' and 'accelmap measure "
                         f"bandwidth' on that device first")
    eff = {d: b.value / b.peak for d, b in matmul.items() if b.peak}
    notes = [describe(ms, acc)]
    notes += [f"{d.value} {b.value / 1e12:.3g} TFLOP/s at {b.label}" for d, b in matmul.items()]
    above = [d.value for d, e in eff.items() if e > 1.0]
    if above:
        notes.append(f"above the catalog peak for {', '.join(above)}: check the catalog entry")
    notes.append(f"bandwidth {bw.value / 1e9:.0f} GB/s ({bw.label})" if bw else
                 "bandwidth not measured (datasheet-derived default kept)")
    overhead = per_op_overhead(ms, acc)
    if overhead is not None:
        notes.append(f"eager op overhead {overhead * 1e6:.1f} us")
    dispatch = dispatch_seconds(ms, acc)
    if dispatch:
        notes.append("eager dispatch " + ", ".join(f"{p} {s * 1e6:.2f} us"
                                                   for p, s in sorted(dispatch.items())))
    curve, kernel, att_dtype = attention_curves(ms, acc, want=training_dtypes(matmul, acc))
    if curve:
        notes.append(f"attention {kernel} ({att_dtype.value if att_dtype else '?'}), "
                     f"{len(curve)} curves")
    elif kernel:  # measured, but only in a dtype the device does not train or serve in
        notes.append(f"attention measured in {att_dtype.value if att_dtype else '?'} only "
                     f"(kernel {kernel}): not put in this profile, whose GEMMs run in "
                     f"{'/'.join(d.value for d in training_dtypes(matmul, acc))}; measure it "
                     "with `accelmap measure attention --dtype bf16`")
    threads = newest_threads(ms, acc)
    from accelmap.hardware.local import facts_to_dict, local_cpu, local_facts

    # this machine's CPU: keep its facts, so the profile describes the device anywhere
    device = ({"cpu": facts_to_dict(local_facts())} if acc.id == local_cpu().id else None)
    return CalibrationProfile(name=name or acc.id, accelerator_id=acc.id, matmul_efficiency=eff,
                              matmul_curve=matmul_curves(ms, acc),
                              bandwidth=bw.value if bw else None, source="; ".join(notes),
                              matmul_peak={d: b.peak for d, b in matmul.items() if b.peak},
                              kernel_overhead_s=overhead, dispatch_s=dispatch,
                              attention_curve=curve, attention_kernel=kernel,
                              attention_dtype=att_dtype, threads=threads, device=device,
                              skinny_curve=skinny_curves(ms, acc))


def per_op_overhead(ms: Iterable[Measurement], acc: Accelerator) -> float | None:
    """The newest measured eager per-op overhead of this device (measure/overhead.py)."""
    own = [m for m in _own(ms, acc, Kind.OVERHEAD) if "pass" not in m.settings]
    return own[-1].value if own else None


def dispatch_seconds(ms: Iterable[Measurement], acc: Accelerator) -> dict[str, float]:
    """The newest seconds per dispatched aten op of each pass ('forward', 'backward')."""
    out: dict[str, float] = {}
    for m in _own(ms, acc, Kind.OVERHEAD):
        if "pass" in m.settings:
            out[str(m.settings["pass"])] = m.value  # later rows are newer
    return out


HALF = (DType.BF16, DType.FP16)


def training_dtypes(matmul: dict[DType, Any], acc: Accelerator) -> tuple[DType, ...]:
    """The dtypes a profile's attention curves must be in: on a GPU, the 16-bit dtypes (what
    it trains and serves in: flash attention runs in bf16/fp16 only, FlashAttention-2 README),
    those measured first; elsewhere any."""
    from accelmap.hardware.schema import DeviceClass

    if acc.device_class is not DeviceClass.GPU:
        return ()
    return tuple(d for d in matmul if d in HALF) or HALF


def attention_curves(ms: Iterable[Measurement], acc: Accelerator, want: tuple[DType, ...] = ()
                     ) -> tuple[dict[str, tuple[tuple[float, float], ...]], str | None,
                                DType | None]:
    """Per 'pass/head_dim': (keys, efficiency) of the newest attention run of ``acc`` in one of
    the ``want`` dtypes (any when empty), the best per sequence length, efficiency against the
    matrix peak of its dtype; the kernel PyTorch chose and the dtype. Where only other dtypes
    were measured: no curves, and the newest run's kernel and dtype (to say why)."""
    own = _own(ms, acc, Kind.ATTENTION)
    if not own:
        return {}, None, None
    fitting = [m for m in own if not want or parse_dtype(m.dtype) in want]
    if not fitting:
        return {}, str(own[-1].settings.get("kernel") or "unknown"), parse_dtype(own[-1].dtype)
    run = fitting[-1].run_id
    newest = [m for m in fitting if m.run_id == run]
    dtype = parse_dtype(newest[0].dtype)
    if dtype is None:
        return {}, None, None
    peak, _ = matmul_peak(acc, dtype)
    best: dict[str, dict[float, float]] = {}
    for m in newest:
        s = m.settings
        key = f"{s['pass']}/{int(s['head_dim'])}"
        keys = float(s["keys"])
        eff = m.value / peak if peak else 0.0
        best.setdefault(key, {})[keys] = max(eff, best.get(key, {}).get(keys, 0.0))
    curves = {k: tuple(sorted(v.items())) for k, v in sorted(best.items())}
    return curves, str(newest[0].settings.get("kernel") or "unknown"), dtype


def newest_threads(ms: Iterable[Measurement], acc: Accelerator) -> int | None:
    """Host threads of the newest measurement of ``acc`` that records them."""
    own = [m for m in ms if m.accelerator_id == acc.id and m.environment.threads]
    return own[-1].environment.threads if own else None
