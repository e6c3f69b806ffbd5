"""Energy per token, two ways:

1. from the device's power: TDP x time (an upper bound: devices rarely sit at TDP; the catalog
   has no measured average power);
2. from energy per operation and per byte: FLOPs x pJ/FLOP + DRAM bytes x pJ/byte, with the 7 nm
   figures of Jouppi et al. 2021 ("Ten Lessons From Three Generations Shaped Google's TPUv4i",
   ISCA, Table 2; shared hardware/energy.csv, source E3). One multiply-accumulate = 2 FLOPs. This
   counts arithmetic and off-chip traffic only (no control, on-chip movement or idle power): a
   lower bound. The DRAM rows of that table are marked low confidence in the shared data.
"""

from __future__ import annotations

from accelmap.hardware.schema import MemoryKind
from accelmap.ops.graph import Op
from accelmap.units import DType, Num

PJ = 1e-12
# pJ per FLOP (half a MAC): bf16 MAC = 0.21 mult + 0.11 add = 0.32 pJ; fp32 FMA = 1.31 + 0.38;
# int8 MAC = 0.07 + 0.03 (int32 accumulate); fp16 = 0.34 + 0.16. FP8/FP4 have no entry: the int8
# figure is used for 8-bit and below (same multiplier width class).
PJ_PER_FLOP = {
    DType.FP64: 2 * (1.31 + 0.38) / 2,  # no fp64 row: twice the fp32 FMA, an assumption
    DType.FP32: (1.31 + 0.38) / 2,
    DType.TF32: (1.31 + 0.38) / 2,
    DType.BF16: (0.21 + 0.11) / 2,
    DType.FP16: (0.34 + 0.16) / 2,
    DType.FP8: (0.07 + 0.03) / 2,
    DType.INT8: (0.07 + 0.03) / 2,
    DType.FP4: (0.07 + 0.03) / 2,
    DType.INT4: (0.07 + 0.03) / 2,
}
# pJ per byte of DRAM traffic: HBM2 250-450 pJ per 64-bit access (midpoint 350 / 8 bytes),
# GDDR6 350-480 (415 / 8), DDR3/4 1300 / 8; on-chip SRAM (1 MB array) 14 / 8.
PJ_PER_BYTE = {"HBM": 350 / 8, "GDDR": 415 / 8, "LPDDR": 1300 / 8, "DDR": 1300 / 8,
               "SRAM": 14 / 8}


def op_energy_j(ops: list[Op], memory_kind: MemoryKind) -> Num:
    per_byte = PJ_PER_BYTE[memory_kind.family] * PJ
    total = 0.0
    for op in ops:
        total = total + op.count * (op.flops * PJ_PER_FLOP[op.dtype.element_width] * PJ
                                    + op.total_bytes * per_byte)
    return total
