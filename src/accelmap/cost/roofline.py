"""Roofline per operator on one accelerator: compute time at achievable throughput, memory time
at achievable bandwidth, an explicit overlap rule, and per-kernel overhead.

time = overlap(compute, memory) + kernels x overhead, with overlap MAX (a kernel streams memory
while its units compute: the roofline model of Williams, Waterman & Patterson 2009) or SUM (no
overlap, a pessimistic bound). The bound is whichever term is larger.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from accelmap.cost.alignment import alignment_efficiency
from accelmap.cost.attention import (
    KERNEL_SPEED,
    attention_efficiency,
    clock_scale,
    relative_to_gemm,
)
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.eager_passes import eager_factor
from accelmap.cost.efficiency import (
    BANDWIDTH_EFFICIENCY,
    BANDWIDTH_SOURCE,
    geometry,
    k_efficiency,
    matmul_efficiency,
    reference_k,
    shape_efficiency,
    sustained_fraction,
)
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.cost.host import Launch
from accelmap.cost.sparsity import sparse_speedup
from accelmap.hardware.schema import Accelerator, DeviceClass
from accelmap.ops.graph import ByteKind, Op, Stage, Unit
from accelmap.units import DType, Num

ATTENTION_RELATIVE_EFFICIENCY = relative_to_gemm()  # ~0.84, derived in cost.attention



# Stacks that launch every kernel eagerly: a measured per-op overhead replaces their default.
# (CUDA-graph stacks keep their calibrated inter-kernel gap.)
EAGER_STACKS = (Framework.EAGER, Framework.MEGATRON, Framework.FSDP)


class Overlap(StrEnum):
    MAX = "max"
    SUM = "sum"


@dataclass(frozen=True)
class OpTime:
    op: Op
    compute_s: Num  # per occurrence
    memory_s: Num
    overhead_s: Num
    time_s: Num  # per occurrence, including overhead
    achievable_flops: Num  # FLOP/s this op's compute term assumed (dense FLOPs for 2:4 GEMMs)
    fused: bool = False  # absorbed into a neighbouring kernel by the framework

    @property
    def total_s(self) -> Num:
        return self.time_s * self.op.count

    @property
    def bound(self) -> str:
        if self.fused:
            return "fused"
        return "compute" if np.all(self.compute_s >= self.memory_s) else "memory"


@dataclass(frozen=True)
class Device:
    """The accelerator with the achievable figures the roofline uses, and where they come from."""

    acc: Accelerator
    bandwidth: float  # achievable device-memory bandwidth, B/s
    bandwidth_source: str
    fraction: float = 1.0  # part of the catalog device in use (one GCD of an MI250X = 0.5)
    exclude_measurement: str | None = None  # leave-one-out validation
    profile: CalibrationProfile | None = None  # the user's own measurements (accelmap calibrate)

    @classmethod
    def of(cls, acc: Accelerator, fraction: float = 1.0, exclude: str | None = None,
           profile: CalibrationProfile | None = None) -> Device:
        if profile is not None and profile.accelerator_id != acc.id:
            from accelmap.errors import InputError

            raise InputError(f"calibration profile {profile.name!r} was measured on "
                             f"{profile.accelerator_id}, not {acc.id}: calibrate {acc.id} "
                             "or choose a profile of that device")
        if profile is not None and profile.bandwidth:
            return cls(acc, profile.bandwidth * fraction,
                       f"measured {profile.bandwidth / 1e9:.0f} GB/s (profile {profile.name})",
                       fraction, exclude, profile)
        bw = (acc.memory_bandwidth or 0.0) * BANDWIDTH_EFFICIENCY * fraction
        return cls(acc, bw, BANDWIDTH_SOURCE, fraction, exclude, profile)

    @property
    def calibration(self) -> str:
        """What the achievable figures come from, for every estimate's assumptions."""
        if self.profile is None:
            return "datasheet-derived defaults (no measured profile)"
        return f"measured profile {self.profile.name!r}: {self.profile.source}"

    def peak(self, dtype: DType, unit: Unit) -> tuple[float, str]:
        """Dense peak for an op: its dtype on its unit, falling back to a slower path."""
        acc = self.acc
        table = acc.matrix if unit is Unit.MATRIX else acc.vector
        if dtype in table:
            return table[dtype].value * self.fraction, dtype.value
        block = acc.block_scaled_peak(dtype) if unit is Unit.MATRIX else None
        if block is not None:  # a microscaling format at its element width's rate
            return block.value * self.fraction, f"{dtype.value} (block-scaled tensor cores)"
        if unit is Unit.MATRIX and dtype in acc.vector:
            # no matrix engine for this dtype (fp32 on AMX CPUs, GPUs without tf32 use): the
            # same dtype on the vector units, before any other dtype
            return acc.vector[dtype].value * self.fraction, f"{dtype.value} (vector units)"
        for fallback in (DType.BF16, DType.FP16, DType.FP32):
            p = acc.peak(fallback)
            if p:
                return p * self.fraction, f"{fallback.value} (no {dtype.value} {unit.value} peak)"
        p = max(acc.peak(d) or 0.0 for d in DType)
        return p * self.fraction, "best available dtype"

    def matmul_efficiency(self, dtype: DType) -> tuple[float, str]:
        if self.profile is not None and dtype in self.profile.matmul_efficiency:
            return (self.profile.matmul_efficiency[dtype],
                    f"measured (profile {self.profile.name})")
        e = matmul_efficiency(self.acc, dtype, exclude=self.exclude_measurement)
        return e.value, e.source

    @property
    def ridge_point(self) -> float:
        p, _ = self.peak(DType.BF16, Unit.MATRIX)
        return p / self.bandwidth if self.bandwidth else float("inf")


def time_op(op: Op, dev: Device, fw: FrameworkProfile, overlap: Overlap = Overlap.MAX) -> OpTime:
    if not dev.bandwidth:
        from accelmap.errors import InputError

        raise InputError(f"{dev.acc.id} has no memory bandwidth in the catalog, so its time "
                         "cannot be predicted: add memory.bandwidth to its YAML, or measure it "
                         "(`accelmap measure bandwidth`, `accelmap calibrate`) and pass "
                         "--profile NAME")
    fused = op.fusable and fw.fuses_elementwise
    peak, _ = dev.peak(op.dtype, op.unit)
    if op.unit is Unit.MATRIX:
        eff, _ = dev.matmul_efficiency(op.dtype)
        if op.gemm is not None:
            # a measured profile knows how efficiency falls with GEMM size: use its curve
            curve = (dev.profile.efficiency_at(op.dtype, op.flops)
                     if dev.profile is not None and op.dtype in dev.profile.matmul_curve
                     else None)
            if dev.profile is not None and dev.profile.skinny_curve:
                # few rows: the measured skinny GEMMs (cold weights), not the square curve
                m, n, k = op.gemm
                skinny = dev.profile.skinny_at(op.dtype, m, n * k)
                curve = curve if skinny is None else skinny
            base = eff if curve is None else curve
            # a measured curve holds its own size effects; else the short-K loss against the
            # best shape's K (efficiency.k_efficiency)
            k_eff = k_efficiency(op.gemm[2], reference_k(dev.acc.id, op.dtype)) \
                if curve is None and not _measured_cpu(dev) else 1.0
            eff = base * _shape(op.gemm, dev) * _sustained(dev) * k_eff
            eff = eff * alignment_efficiency(op, dev.acc, fw)  # 16-byte model dimensions
        elif (measured := _measured_attention(op, dev)) is not None:
            eff = measured  # this device's own SDPA, measured (accelmap measure attention)
        elif (measured_gen := attention_efficiency(
                dev.acc, op.attention_keys if op.attention_keys is not None else 1e9,
                op.stage is Stage.BACKWARD_DGRAD, fw.attention)) is not None:
            eff = measured_gen * KERNEL_SPEED[fw.attention] * clock_scale(dev.acc)
        else:  # no attention measurement for this device: relative to its GEMM efficiency
            eff = eff * ATTENTION_RELATIVE_EFFICIENCY * KERNEL_SPEED[fw.attention]
        achievable = peak * eff
        if op.sparse:  # 2:4-sparse weights: the measured compute-bound gain (cost/sparsity.py)
            achievable = achievable * sparse_speedup(dev.acc, op.dtype).value
    else:
        achievable = peak
    compute = op.flops / np.maximum(achievable, 1.0)
    if np.any(op.dequant_flops):  # weight-only conversion on the vector units, in the kernel
        vector, _ = dev.peak(DType.FP32, Unit.VECTOR)
        compute = compute + op.dequant_flops / np.maximum(vector, 1.0)
    # a fused op folded into its neighbour moves nothing of its own; one fused into a kernel of
    # its own (fw.fused_pass: Inductor) still reads and writes its elements once
    memory = 0.0 * compute if fused and not fw.fused_pass else op.total_bytes / dev.bandwidth
    if op.weight_dtype in fw.quantized_weight_efficiency and ByteKind.WEIGHTS in op.bytes:
        # dequantizing kernels stream their weights below the 16-bit GEMM's bandwidth
        slow = op.bytes[ByteKind.WEIGHTS] / dev.bandwidth
        memory = memory + slow * (1.0 / fw.quantized_weight_efficiency[op.weight_dtype] - 1.0)
    if fw.passes and not fused and op.unit is Unit.VECTOR:  # written-out eager ops
        back = op.stage in (Stage.BACKWARD_DGRAD, Stage.BACKWARD_WGRAD)
        k = eager_factor(op.name, back, fw.stream_dtype or op.dtype, op.dtype, fw.passes)
        memory = memory + op.bytes.get(ByteKind.ACTIVATIONS, 0.0) * (k - 1.0) / dev.bandwidth
    if fused:
        compute = 0.0 * compute  # its arithmetic hides inside the kernel it is fused into
    kernel_eff = fw.efficiency_on(dev.acc)  # the stack's kernels on this part (cost/framework.py)
    if kernel_eff != 1.0:
        compute, memory = compute / kernel_eff, memory / kernel_eff
    body = np.maximum(compute, memory) if overlap is Overlap.MAX else compute + memory
    per_op = fw.kernel_overhead_s
    if fw.name in EAGER_STACKS and dev.profile is not None and dev.profile.kernel_overhead_s:
        per_op = dev.profile.kernel_overhead_s  # measured on this device (measure overhead)
    if fw.dispatches is not None and fw.launch is Launch.IN_SERIES:
        per_op = host_dispatch_s(op, dev, fw)  # eager CPU: every dispatch in series (eager_cpu)
    overhead = 0.0 if fused else per_op
    return OpTime(op, compute, memory, overhead + 0.0 * body, body + overhead, achievable, fused)


def _measured_cpu(dev: Device) -> bool:
    """A CPU with a measured profile: its matmul curve holds the shapes a CPU runs slowly
    (``measure/matmul.py``: skinny GEMMs) and was timed on the cores a step runs on."""
    return dev.profile is not None and dev.acc.device_class is DeviceClass.CPU


def _shape(gemm: tuple[Num, Num, Num], dev: Device) -> Num:
    """Tile and wave quantization (``efficiency.shape_efficiency``): a GPU's CTA tiles and SM
    waves. A measured CPU has neither: BLAS blocks into register tiles of a few rows and masks
    the remainder, and what small and skinny GEMMs lose is in the measured curve."""
    return 1.0 if _measured_cpu(dev) else shape_efficiency(*gemm, geometry(dev.acc))


def _sustained(dev: Device) -> float:
    """The share of the microbenchmarked GEMM rate a GEMM keeps inside a step
    (``efficiency.sustained_fraction``: fitted on GPU training rows, where a step's mix of
    kernels runs under one power and clock budget). A CPU measured by ``accelmap measure`` is
    exempt: its sweep ran on the same cores, at the same all-core vector clocks, for seconds
    on end, which is what a CPU step sustains; the GPU power fit does not describe it."""
    return 1.0 if _measured_cpu(dev) else sustained_fraction()


def _measured_attention(op: Op, dev: Device) -> Num | None:
    """The device's measured attention efficiency for this op (profile.attention_curve), in
    the dtype it was measured in; None where not measured."""
    prof = dev.profile
    if prof is None or not prof.attention_curve or op.attention_keys is None:
        return None
    if prof.attention_dtype is not None and op.dtype is not prof.attention_dtype:
        return None
    backward = op.stage is Stage.BACKWARD_DGRAD
    return prof.attention_at(backward, op.head_dim, op.attention_keys)


def host_dispatch_s(op: Op, dev: Device, fw: FrameworkProfile) -> float:
    """Host seconds of one graph op under eager PyTorch on a CPU: its aten dispatches x the
    measured seconds per dispatch of its pass (cost/eager_cpu.py)."""
    assert fw.dispatches is not None
    backward = op.stage in (Stage.BACKWARD_DGRAD, Stage.BACKWARD_WGRAD, Stage.OPTIMIZER)
    n = fw.dispatches.of(op.name, backward, serving=fw.serving)
    measured = dev.profile.dispatch_s if dev.profile is not None else {}
    each = measured.get("backward" if backward else "forward") or fw.kernel_overhead_s
    return n * each


def time_ops(ops: list[Op], dev: Device, fw: FrameworkProfile,
             overlap: Overlap = Overlap.MAX) -> list[OpTime]:
    return [time_op(op, dev, fw, overlap) for op in ops]


def total_time(times: list[OpTime]) -> Num:
    return sum(t.total_s for t in times)
