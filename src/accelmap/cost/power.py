"""Energy you can check: per-operator energy from pJ per FLOP and pJ per byte, plus static
power, the average power it implies, and that power against the TDP.

    E(step) = sum over ops [ FLOPs x e_flop(dtype, node) + device-memory bytes x e_byte(kind) ]
              + collective bytes x e_link(tier) + P_static x t(step)

- **e_flop**: Jouppi et al. 2021 ("Ten Lessons From Three Generations Shaped Google's
  TPUv4i", ISCA, Table 2) give one multiply-add at 7 nm: bf16 0.21 + 0.11 pJ, fp16 0.34 +
  0.16, fp32 1.31 + 0.38, int8 0.07 + 0.03 (int32 accumulate); a FLOP is half a MAC
  (``energy.PJ_PER_FLOP``). Other nodes scale by ``node_scale``: above 7 nm as Horowitz's 45 nm
  table (ISSCC 2014) relates to Jouppi's 7 nm one (the same ops cost 2.86x at 45 nm: energy ~
  node^0.565); below 7 nm by TSMC's stated iso-speed power gains (N5 vs N7 -30 %, N3E vs N5
  -30 %). A bare MAC is not what a chip spends per FLOP: operands cross register files and
  SRAM, clocks toggle, control runs. A datapath overhead multiplies the bare MAC, per part:
  **anchored on its TDP** where it has one (a dense GEMM at the part's achievable matmul
  fraction is what pins a GPU or TPU at its power limit: the overhead is the one that makes
  static + GEMM power = TDP), else ``DATAPATH_OVERHEAD`` = 3.7, the A100's anchored value
  (400 W at 86.9 % of 312 TFLOP/s, matmul.csv M0002; ``calibration_check``). The anchored
  overheads differ by part (B200 ~2, TPU v4 ~2.2, H100 ~3.2, A100 3.7): newer and systolic
  designs spend less per FLOP than node scaling alone says, which is why one fitted constant
  cannot serve every part.
- **e_byte**: device memory per byte (``energy.PJ_PER_BYTE``: HBM 250-450 pJ per 64-bit
  access, midpoint, from the same Jouppi table; GDDR6 350-480; DDR/LPDDR 1300; on-chip SRAM
  14 pJ per 64-bit read of a 1 MB array).
- **e_link**: bytes that cross a scale-up link at 5 pJ/bit (long-reach 112G PAM4 SerDes of
  ISSCC 2021-22: 4-6 pJ/bit; NVLink-C2C on package is 1.3 pJ/bit, NVIDIA Grace Hopper
  whitepaper), a scale-out network at 30 pJ/bit (a 400 Gb/s NIC and optics at both ends,
  ~12 W per 400G module: 30 pJ/bit).
- **static power**: what a busy chip draws whatever its FLOP rate (leakage, clocks at full
  boost, uncore): ``STATIC_FRACTION`` = 60 % of TDP, fitted on the one published mean power
  of a whole training run (PaLM on TPU v4: 170 W of 192 W). Real chips under a training load
  draw 75-90 % of TDP even at 30-45 % MFU; a floor of 15 % (the idle figure) would put GPT-3's
  V100s at 135 W where Patterson et al. measured 330 W per processor with its host.

The power check: E / t per device must not exceed the TDP. A model that predicts more means
the part would be power-limited (its clock drops, the step takes longer): the energy is then
TDP x t and the report says so. A part with no published TDP (TPU v5e/v5p/v6e, Trainium,
Inferentia, Apple) gets a **derived** one: the power of a dense GEMM at its achievable
fraction and the A100-anchored overhead, over (1 - static fraction), marked as derived.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accelmap.cost.energy import PJ, PJ_PER_BYTE, PJ_PER_FLOP
from accelmap.cost.roofline import OpTime
from accelmap.hardware.schema import Accelerator, MemoryKind
from accelmap.units import DType

# A busy chip draws this share of its TDP whatever its FLOP rate: leakage, clock trees at full
# boost, uncore and the data movement that waits. Fitted on one published measurement: PaLM
# 540B trained on 6144 TPU v4 drew 170 W per chip on average (Google's measured mean, maximum
# 192 W: Jouppi et al. ISCA 2023, the catalog's tpu-v4 TDP note); this model gives 170 W for
# the catalog's PaLM run at 0.60. Checked, not fitted, on GPT-3 on V100 (Patterson et al. 2021)
# and Llama 3.1 8B serving on H100 (ML.ENERGY) in benchmarks/whatif_cases.py. An idle chip
# draws less (cost/ownership.py's 15 %).
STATIC_FRACTION = 0.60
STATIC_SOURCE = ("a busy chip's floor at 60 % of TDP, fitted on PaLM 540B on TPU v4 (Google "
                 "measured a 170 W mean of 192 W, Jouppi et al. ISCA 2023)")
# For parts without a TDP: the A100's TDP-anchored overhead (400 W at a bf16 GEMM running at
# the measured 86.9 % of 312 TFLOP/s, matmul.csv M0002, with the 60 % floor): 160 W of dynamic
# power / (271 TFLOP/s x 0.16 pJ) = 3.7.
DATAPATH_OVERHEAD = 3.7
OVERHEAD_SOURCE = ("chip energy per FLOP = 3.7 x the bare MAC of Jouppi et al. 2021: the A100's "
                   "TDP-anchored value (400 W at a bf16 GEMM at the measured 86.9 % of peak, "
                   "matmul.csv M0002)")
PJ_PER_BIT_SCALE_UP = 5.0
PJ_PER_BIT_SCALE_OUT = 30.0
LINK_SOURCE = ("links: 5 pJ/bit scale-up (112G PAM4 SerDes, ISSCC 2021-22), 30 pJ/bit "
               "scale-out (400G NIC + optics, ~12 W per module)")

# Energy of the same operation relative to 7 nm. Above 7 nm: (node / 7)^0.565, the exponent
# that takes Horowitz's 45 nm table to Jouppi's 7 nm one (fp32 mult 3.7 -> 1.31, fp16 mult
# 1.1 -> 0.34, int8 mult 0.2 -> 0.07: 0.35x over 45 -> 7 nm). Below: TSMC's iso-speed power
# reductions, N5 vs N7 -30 % (TSMC N5 announcement), N3E vs N5 -30 to -35 %.
NODE_EXPONENT = 0.565
NODE_BELOW_7 = {5.0: 0.70, 4.0: 0.70, 3.0: 0.49, 2.0: 0.37}
NODE_SOURCE = ("node scaling: Horowitz ISSCC 2014 (45 nm) vs Jouppi et al. ISCA 2021 (7 nm) "
               "above 7 nm; TSMC's N5/N3 iso-speed power gains below")


def node_scale(nm: float) -> float:
    """Energy of one operation at ``nm`` relative to 7 nm."""
    if nm >= 7.0:
        return (nm / 7.0) ** NODE_EXPONENT
    for n in sorted(NODE_BELOW_7, reverse=True):
        if nm >= n:
            return NODE_BELOW_7[n]
    return NODE_BELOW_7[min(NODE_BELOW_7)]


# Process node by release year, for parts whose die is not in hardware/data/silicon.yaml: the
# leading-edge node data-centre accelerators shipped on that year (V100 12 nm 2017, A100 7 nm
# 2020, H100 4 nm 2022, B200 4 nm 2024); a derived guess, labelled as such.
def node_of(acc: Accelerator) -> tuple[float, str]:
    from accelmap.hardware.claims import bundled_silicon

    si = bundled_silicon(acc.id)
    if si is not None:
        return si.node_nm, f"{si.process} ({si.source.split(':')[0]})"
    y = acc.release_year
    nm = 16.0 if y <= 2017 else 12.0 if y <= 2019 else 7.0 if y <= 2021 else 4.0
    return nm, f"~{nm:g} nm from its release year {y} (die not in silicon.yaml)"


def flop_energy_j(dtype: DType, nm: float, overhead: float = DATAPATH_OVERHEAD) -> float:
    """Joules per FLOP on the chip at ``nm``: the bare MAC x the datapath overhead."""
    return PJ_PER_FLOP[dtype.element_width] * PJ * node_scale(nm) * overhead


def byte_energy_j(kind: MemoryKind) -> float:
    return PJ_PER_BYTE[kind.family] * PJ


@dataclass(frozen=True)
class DeviceEnergy:
    """What one device of ``acc`` spends: per FLOP by dtype, per byte, static watts."""

    acc: Accelerator
    nm: float
    node_source: str
    static_w: float
    tdp_w: float
    tdp_derived: bool
    overhead: float = DATAPATH_OVERHEAD
    overhead_source: str = OVERHEAD_SOURCE

    def flop_j(self, dtype: DType) -> float:
        return flop_energy_j(dtype, self.nm, self.overhead)

    def ops_j(self, times: Iterable[OpTime]) -> tuple[float, float]:
        """(compute J, memory J) of ops as timed (count included); a fused op's bytes stay
        on chip (it runs inside its neighbour's kernel)."""
        e_b = byte_energy_j(self.acc.device_memory.kind)
        flop = byte = 0.0
        for t in times:
            op = t.op
            flop += float(op.count * op.flops) * self.flop_j(op.dtype)
            if not t.fused:
                byte += float(op.count * op.total_bytes) * e_b
        return flop, byte


def gemm_dynamic_w(acc: Accelerator, nm: float, fraction: float) -> float:
    """Dynamic watts of a dense GEMM at ``fraction`` of the best 16-bit (else any) peak, at
    the A100-anchored overhead (the GEMM condition that pins a chip at its TDP)."""
    d = _gemm_dtype(acc)
    if d is None:
        return 0.0
    return fraction * (acc.peak(d) or 0.0) * flop_energy_j(d, nm)


def _gemm_dtype(acc: Accelerator) -> DType | None:
    return next((x for x in (DType.BF16, DType.FP16, DType.FP32, DType.FP8, DType.INT8)
                 if acc.peak(x)), None)


def device_energy(acc: Accelerator, matmul_fraction: float | None = None,
                  peers: Sequence[Accelerator] = ()) -> DeviceEnergy:
    """The part's energy figures. With a TDP, the datapath overhead is anchored on it: a dense
    GEMM at ``matmul_fraction`` of peak (default: the part's achievable fraction,
    cost.efficiency) plus static power draws the TDP. Without one, the anchored overhead of
    the newest ``peers`` part of the same vendor and class with a TDP (TPU v4 for a later TPU),
    else the A100's, gives a derived TDP."""
    nm, src = node_of(acc)
    d = _gemm_dtype(acc)
    if matmul_fraction is None and d is not None:
        from accelmap.cost.efficiency import matmul_efficiency

        matmul_fraction = matmul_efficiency(acc, d).value
    if acc.tdp is None or d is None:
        k, ksrc = DATAPATH_OVERHEAD, OVERHEAD_SOURCE
        kin = sorted((p for p in peers if p.tdp is not None and p.id != acc.id
                      and p.vendor == acc.vendor and p.device_class == acc.device_class
                      and _gemm_dtype(p) is not None), key=lambda p: p.release_year)
        if kin:
            ref = device_energy(kin[-1])
            k, ksrc = ref.overhead, f"{kin[-1].id}'s TDP-anchored overhead ({ref.overhead_source})"
        tdp = gemm_dynamic_w(acc, nm, matmul_fraction or 0.0) * k / DATAPATH_OVERHEAD / (
            1 - STATIC_FRACTION)
        return DeviceEnergy(acc, nm, src, STATIC_FRACTION * tdp, tdp, True, k, ksrc)
    tdp = acc.tdp.value
    assert matmul_fraction is not None
    rate = matmul_fraction * (acc.peak(d) or 0.0)
    dyn = tdp * (1 - STATIC_FRACTION)
    k = dyn / (rate * PJ_PER_FLOP[d] * PJ * node_scale(nm)) if rate else DATAPATH_OVERHEAD
    return DeviceEnergy(acc, nm, src, STATIC_FRACTION * tdp, tdp, False, k,
                        f"anchored on the TDP: a {d.value} GEMM at {matmul_fraction:.1%} of "
                        f"peak + static = {tdp:g} W -> {k:.2f} x the bare MAC")


def link_energy_j(comm_s: dict[str, Any], tiers: dict[str, tuple[float, str]]) -> float:
    """Energy of the bytes collectives move: exposed or hidden, each axis's time x its link
    bandwidth gives the bytes it carried (a bound: the links ran at their modelled rate)."""
    total = 0.0
    for axis, seconds in comm_s.items():
        bw, role = tiers.get(axis, (0.0, "scale-up"))
        pj = PJ_PER_BIT_SCALE_OUT if role == "scale-out" else PJ_PER_BIT_SCALE_UP
        total += float(seconds) * bw * 8 * pj * PJ
    return total


def calibration_check(a100: Accelerator) -> float:
    """The fitted case, with the fixed overhead: A100 SXM power at a large bf16 GEMM (8192^3)
    running at 86.9 % of its peak: should be its 400 W TDP."""
    nm, _ = node_of(a100)
    rate = 0.869 * (a100.peak(DType.BF16) or 0.0)
    n = 8192
    flops = 2.0 * n**3
    seconds = flops / rate
    bytes_ = 3 * n * n * 2  # A, B read and C written once from HBM (tiles reuse the rest)
    dyn = flops * flop_energy_j(DType.BF16, nm) + bytes_ * byte_energy_j(
        a100.device_memory.kind)
    return STATIC_FRACTION * (a100.tdp.value if a100.tdp else 0.0) + dyn / seconds
