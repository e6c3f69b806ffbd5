"""Plausibility: does a device spec respect physics and what has shipped?

A catalog entry can be well-formed and still impossible: 100 TB/s from HBM3 stacks, or 20 PFLOP/s
at 700 W. The checks here are pure functions over an :class:`Accelerator`; each returns
:class:`Implausible` findings that name the field, the bound it breaks, the bound's source and by
how much it is exceeded. They never refuse a part: the catalog loader records them, ``accelmap hw
show`` prints them, a user catalog prints them on stderr, and an estimate on the part carries them
in its assumptions.

A bundled part whose figure really is past a bound (a marketing figure, a system-level TDP) says
so in its ``doubts``: a doubt that names the bound's key (e.g. ``fp8-per-watt``) marks the finding
*explained*. The bundled catalog must have no unexplained finding
(``tests/hardware/test_plausibility.py``).

Bounds (constants below, each with its source):

- memory bandwidth per memory kind: per-stack (HBM) or per-pin x widest bus (GDDR, LPDDR, DDR)
  limits from JEDEC and the fastest parts the memory makers announced; SRAM by area (a reticle-
  limited package, or the one wafer-scale engine that ships);
- memory capacity per kind: largest shipped HBM stack x the most stacks on one package; SRAM by
  area as above;
- dense FLOP/s per watt at TDP per dtype: 2x the best part in the bundled catalog (the margin is
  about two process generations of perf/W; a part past it is more likely a sparse or system-level
  figure than a breakthrough);
- TDP against memory traffic and compute together;
- consistency: matrix >= vector peak of the same dtype, and lower precisions no slower than
  higher ones (fp8 >= bf16, int4 >= int8 ...);
- sparse-vs-dense confusion: a peak exactly 2x the dense peak of a known part of the same vendor
  with the same memory (a "with sparsity" datasheet figure entered as dense).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accelmap.hardware.schema import Accelerator, ComputeUnitKind, MemoryKind, MemoryLevel
from accelmap.units import Dimension, DType, format_quantity

GiB = 2**30


@dataclass(frozen=True)
class Implausible:
    """One broken bound: which field, which bound, its source, and how far past it."""

    field: str  # YAML path of the figure, as catalog errors name it: 'memory.0.bandwidth'
    bound: str  # short key of the bound ('hbm3-bandwidth'); a doubt naming it explains it
    value: str  # the figure as the part states it ('100 TB/s')
    limit: str  # the bound ('6.55 TB/s (8 stacks x 819 GB/s)')
    factor: float  # how far past the bound (value / limit, >= 1)
    source: str  # where the bound comes from
    explained: bool = False  # a doubt of the part names this bound

    def sentence(self) -> str:
        """One line: 'field 'memory.0.bandwidth' 100 TB/s breaks hbm3-bandwidth ...'."""
        tail = " (explained in the part's doubts)" if self.explained else ""
        return (f"field '{self.field}': {self.value} breaks {self.bound}: {self.limit}, "
                f"exceeded {self.factor:.2f}x (source: {self.source}){tail}")

    def to_dict(self) -> dict[str, object]:
        return {"field": self.field, "bound": self.bound, "value": self.value,
                "limit": self.limit, "factor": self.factor, "source": self.source,
                "explained": self.explained, "message": self.sentence()}


def _q(value: float, dim: Dimension) -> str:
    return format_quantity(value, dim)


# -- memory bandwidth and capacity ---------------------------------------------------------------
# The most HBM stacks on one package today: 8 (AMD MI300X/MI325X/MI355X, NVIDIA B200/B300: 8 stacks
# of HBM3/HBM3e; see the bundled b200.yaml and mi355x.yaml notes).
MAX_HBM_STACKS = 8
HBM_BUS_BITS = 1024  # every HBM generation up to HBM3e: a 1024-bit interface per stack


@dataclass(frozen=True)
class StackBound:
    gbps_per_pin: float
    stack_capacity_gib: float
    source: str  # of the per-pin rate
    capacity_source: str

    @property
    def stack_bandwidth(self) -> float:
        return self.gbps_per_pin * 1e9 * HBM_BUS_BITS / 8


HBM_BOUNDS: dict[MemoryKind, StackBound] = {
    # JESD235B HBM2: 2.4 Gb/s per pin = 307 GB/s and up to 8 GB per stack (Samsung Aquabolt 2018,
    # 8-high 8 Gb dies; techspot.com/news/93182 table of JESD235A/B/C and JESD238)
    MemoryKind.HBM2: StackBound(2.4, 8, "JEDEC JESD235B / Samsung Aquabolt: 2.4 Gb/s x 1024 "
                                        "bits = 307 GB/s per stack",
                                "JEDEC JESD235B / Samsung Aquabolt: 8 GB per stack"),
    # HBM2e: SK hynix 3.6 Gb/s = 460 GB/s (hexus.net, 2019); Samsung Flashbolt 4.2 Gb/s = 538 GB/s
    # "maximum tested" (newelectronics.co.uk, 2020); JESD235C allows 12-high 16 Gb = 24 GB
    MemoryKind.HBM2E: StackBound(4.2, 24, "Samsung Flashbolt HBM2e 4.2 Gb/s = 538 GB/s per stack "
                                          "(fastest announced)",
                                 "JEDEC JESD235C: 12-high 16 Gb = 24 GB per stack"),
    # JESD238 HBM3: 6.4 Gb/s per pin = 819 GB/s per stack (JEDEC press release, Jan 2022);
    # largest shipped stack 24 GB (12-high 16 Gb, Samsung Icebolt; MI300X 8 x 24 = 192 GB)
    MemoryKind.HBM3: StackBound(6.4, 24, "JEDEC JESD238 HBM3: 6.4 Gb/s x 1024 bits = 819 GB/s "
                                         "per stack",
                                "largest HBM3 stack shipped: 24 GB, 12-high (Samsung Icebolt)"),
    # HBM3e: Samsung Shinebolt 12-high 36 GB at 10 Gb/s = 1.28 TB/s per stack, the fastest stack
    # announced (AnandTech 21278, Feb 2024; Micron and SK hynix quote ~1.2 TB/s at 9.2-9.6 Gb/s)
    MemoryKind.HBM3E: StackBound(10.0, 36, "Samsung Shinebolt HBM3e: 10 Gb/s x 1024 bits = "
                                           "1.28 TB/s per stack",
                                 "largest HBM3e stack shipped: 36 GB, 12-high (Samsung, Micron)"),
}


@dataclass(frozen=True)
class BusBound:
    gbps_per_pin: float
    bus_bits: int
    source: str

    @property
    def bandwidth(self) -> float:
        return self.gbps_per_pin * 1e9 * self.bus_bits / 8


# The widest GDDR bus shipped is 512 bits (NVIDIA RTX 5090, bundled rtx-5090.yaml: 28 Gb/s x 512
# bits = 1.792 TB/s). The widest LPDDR interface is 1024 bits (Apple M3 Ultra: LPDDR5-6400 x 1024
# bits = 819 GB/s, bundled m3-ultra.yaml). A CPU socket has at most 12 DDR5 channels of 64 bits
# (AMD EPYC 9004/9005, Intel Xeon 6; bundled epyc-9654.yaml).
BUS_BOUNDS: dict[MemoryKind, BusBound] = {
    # Samsung 24 Gb/s GDDR6, the fastest GDDR6 announced (pcgamer.com, 2022)
    MemoryKind.GDDR6: BusBound(24, 512, "Samsung 24 Gb/s GDDR6 x 512-bit bus (widest shipped)"),
    # Micron 24 Gb/s GDDR6X in production (tweaktown.com 87829, 2022)
    MemoryKind.GDDR6X: BusBound(24, 512, "Micron 24 Gb/s GDDR6X x 512-bit bus"),
    # JEDEC JESD239 GDDR7: up to 192 GB/s per 32-bit device = 48 Gb/s per pin (JEDEC, Mar 2024)
    MemoryKind.GDDR7: BusBound(48, 512, "JEDEC JESD239 GDDR7: 192 GB/s per x32 device "
                                        "(48 Gb/s per pin) x 512-bit bus"),
    # LPDDR4X 4266 MT/s, LPDDR5 6400 MT/s (JEDEC JESD209-4/-5 data rates, LPDDR table on
    # everything.explained.today/Mobile_DDR); LPDDR5X 10.7 Gb/s (Samsung, notebookcheck 2024)
    MemoryKind.LPDDR4X: BusBound(4.266, 1024, "JEDEC LPDDR4X 4266 MT/s x 1024-bit interface"),
    MemoryKind.LPDDR5: BusBound(6.4, 1024, "JEDEC LPDDR5 6400 MT/s x 1024-bit interface "
                                           "(Apple M3 Ultra)"),
    MemoryKind.LPDDR5X: BusBound(10.7, 1024, "Samsung LPDDR5X 10.7 Gb/s x 1024-bit interface"),
    # DDR4-3200 is the top JEDEC DDR4 bin; JESD79-5C DDR5 defines up to 8800 MT/s (Intel Xeon 6
    # runs DDR5-8800 MRDIMMs, 2024); 12 channels x 64 bits per socket
    MemoryKind.DDR4: BusBound(3.2, 12 * 64, "JEDEC DDR4-3200 x 12 channels of 64 bits"),
    MemoryKind.DDR5: BusBound(8.8, 12 * 64, "JEDEC JESD79-5C DDR5-8800 x 12 channels of 64 bits"),
}

# SRAM scales with silicon area. Cerebras WSE-3 (TSMC 5 nm, 46,225 mm2 wafer) publishes 44 GB of
# SRAM at 21 PB/s (cerebras.ai, March 2024; bundled wse-3.yaml): per mm2 that is ~0.95 MB and
# ~454 GB/s. A package that is not a wafer holds at most ~4 reticles of silicon (858 mm2 each;
# NVIDIA B200 is 2, CoWoS-L interposers reach ~3.3): bound = WSE-3's density x 4 reticles x a
# margin of 2 (a denser node, an SRAM-only die). A wafer-scale part is bound by WSE-3 itself x 2.
WSE3_AREA_MM2 = 46_225
WSE3_SRAM_BYTES = 44e9
WSE3_SRAM_BANDWIDTH = 21e15
RETICLE_MM2 = 858
MAX_RETICLES_PER_PACKAGE = 4
SRAM_MARGIN = 2.0
SRAM_SOURCE_WAFER = "Cerebras WSE-3 (44 GB, 21 PB/s on a 46,225 mm2 wafer) x 2"
SRAM_SOURCE_PACKAGE = ("Cerebras WSE-3 SRAM per mm2 x 4 reticles (858 mm2 each) x 2: the most a "
                       "non-wafer package can hold")


def _is_wafer(acc: Accelerator) -> bool:
    text = f"{acc.name} {acc.form_factor or ''} {acc.description or ''}".lower()
    return "wafer" in text


def _sram_bounds(acc: Accelerator) -> tuple[float, float, str]:
    """(capacity, bandwidth, source) bounds for the SRAM of ``acc``."""
    if _is_wafer(acc):
        return (WSE3_SRAM_BYTES * SRAM_MARGIN, WSE3_SRAM_BANDWIDTH * SRAM_MARGIN,
                SRAM_SOURCE_WAFER)
    area = RETICLE_MM2 * MAX_RETICLES_PER_PACKAGE * SRAM_MARGIN / WSE3_AREA_MM2
    return WSE3_SRAM_BYTES * area, WSE3_SRAM_BANDWIDTH * area, SRAM_SOURCE_PACKAGE


@dataclass(frozen=True)
class MemoryBounds:
    capacity: float | None  # bytes, None: no bound for this kind
    bandwidth: float | None  # B/s
    capacity_source: str = ""
    bandwidth_source: str = ""


_STACKS = f"; at most {MAX_HBM_STACKS} stacks per package (MI355X, B200)"


def memory_bounds(acc: Accelerator, level: MemoryLevel) -> MemoryBounds:
    """The capacity and bandwidth bounds of one memory level, with their sources."""
    kind = level.kind
    if kind in HBM_BOUNDS:
        b = HBM_BOUNDS[kind]
        return MemoryBounds(b.stack_capacity_gib * GiB * MAX_HBM_STACKS,
                            b.stack_bandwidth * MAX_HBM_STACKS,
                            b.capacity_source + _STACKS, b.source + _STACKS)
    if kind in BUS_BOUNDS:
        return MemoryBounds(None, BUS_BOUNDS[kind].bandwidth, "", BUS_BOUNDS[kind].source)
    cap, bw, source = _sram_bounds(acc)  # SRAM, the one kind left
    return MemoryBounds(cap, bw, source, source)


def check_memory(acc: Accelerator) -> list[Implausible]:
    """Bandwidth and capacity of every memory level against its kind's bound."""
    out = []
    for i, level in enumerate(acc.memory):
        bounds = memory_bounds(acc, level)
        cap_bound, bw_bound = bounds.capacity, bounds.bandwidth
        kind = level.kind.value
        bw = level.bandwidth.value if level.bandwidth else None
        if bw is not None and bw_bound is not None and bw > bw_bound * (1 + _ROUNDING):
            out.append(Implausible(
                f"memory.{i}.bandwidth", f"{kind.lower()}-bandwidth",
                f"{_q(bw, Dimension.BANDWIDTH)} of {kind}",
                f"{kind} reaches at most {_q(bw_bound, Dimension.BANDWIDTH)}"
                + (f" ({MAX_HBM_STACKS} stacks x "
                   f"{_q(bw_bound / MAX_HBM_STACKS, Dimension.BANDWIDTH)})"
                   if level.kind in HBM_BOUNDS else ""),
                bw / bw_bound, bounds.bandwidth_source))
        cap = level.capacity.value
        if cap_bound is not None and cap > cap_bound * (1 + _ROUNDING):
            out.append(Implausible(
                f"memory.{i}.capacity", f"{kind.lower()}-capacity",
                f"{_q(cap, Dimension.BYTES)} of {kind}",
                f"{kind} holds at most {_q(cap_bound, Dimension.BYTES)} on one package"
                + (f" ({MAX_HBM_STACKS} stacks x {HBM_BOUNDS[level.kind].stack_capacity_gib:g} "
                   "GiB)" if level.kind in HBM_BOUNDS else ""),
                cap / cap_bound, bounds.capacity_source))
    return out


# -- compute efficiency --------------------------------------------------------------------------
# Best dense FLOP/s per watt at TDP in the bundled catalog, per dtype (part, FLOP/s, W). The test
# suite checks that these are the catalog's best, so the table moves when a better part lands.
@dataclass(frozen=True)
class EfficiencyReference:
    part: str
    flops: float
    watts: float

    @property
    def per_watt(self) -> float:
        return self.flops / self.watts


EFFICIENCY_REFERENCE: dict[DType, EfficiencyReference] = {
    DType.FP64: EfficiencyReference("mi300x", 163.4e12, 750),  # AMD CDNA3 matrix fp64
    DType.FP32: EfficiencyReference("l4", 30.3e12, 72),  # NVIDIA L4, 72 W
    DType.TF32: EfficiencyReference("b100", 875e12, 700),  # Blackwell at 700 W
    DType.BF16: EfficiencyReference("b100", 1750e12, 700),
    DType.FP16: EfficiencyReference("b100", 1750e12, 700),
    DType.FP8: EfficiencyReference("b100", 3500e12, 700),
    DType.INT8: EfficiencyReference("b100", 3500e12, 700),
    DType.FP4: EfficiencyReference("b300", 13125e12, 1100),  # Blackwell Ultra HGX, 1100 W
    # int4 shares the 4-bit datapath bound (A100 PCIe's 1248 TOPS at 300 W is below it)
    DType.INT4: EfficiencyReference("b300", 13125e12, 1100),
}
# How far past the best shipped part a spec may go before it is implausible: ~2 process
# generations of perf/W (Hopper -> Blackwell gained ~1.8x dense fp8 per W at 700 W: H100 SXM
# 1979 TFLOP/s vs B100 3500 TFLOP/s).
EFFICIENCY_MARGIN = 2.0
_ROUNDING = 0.01  # datasheets round; 1 % past a bound is rounding, not physics


def efficiency_bound(dtype: DType) -> float:
    """Most dense FLOP/s per watt plausible today for ``dtype`` (a microscaling format: its
    element width's, whose datapath it runs on)."""
    return EFFICIENCY_REFERENCE[dtype.element_width].per_watt * EFFICIENCY_MARGIN


def _peak_field(acc: Accelerator, dtype: DType) -> tuple[str, float] | None:
    entry = acc.peak_entry(dtype)
    return (f"{entry[0]}.{dtype.value}", entry[1].value) if entry else None


def _flops(value: float, dtype: DType) -> str:
    text = _q(value, Dimension.FLOPS)
    return text.replace("FLOP/s", "OP/s") if dtype.is_integer else text


def check_efficiency(acc: Accelerator) -> list[Implausible]:
    """Dense FLOP/s per watt at TDP against 2x the best shipped part, per dtype."""
    if acc.tdp is None:
        return []
    watts = acc.tdp.value
    out = []
    for dtype in acc.dtypes:
        found = _peak_field(acc, dtype)
        assert found is not None
        field, peak = found
        per_w, bound = peak / watts, efficiency_bound(dtype)
        if per_w > bound * (1 + _ROUNDING):
            ref = EFFICIENCY_REFERENCE[dtype.element_width]
            out.append(Implausible(
                field, f"{dtype.value}-per-watt",
                f"{_flops(peak, dtype)} at {_q(watts, Dimension.POWER)} "
                f"= {per_w / 1e12:.2f} T/s per W",
                f"at most {bound / 1e12:.2f} T/s per W dense {dtype.value}",
                per_w / bound,
                f"{EFFICIENCY_MARGIN:g}x the best bundled part, {ref.part} "
                f"({_flops(ref.flops, dtype)} at {ref.watts:g} W)"))
    return out


# Energy of moving DRAM data: ~6 pJ/bit for HBM2e and ~7.5 pJ/bit for GDDR6 (device average,
# Kylo Lab memory comparison table); 2 pJ/bit is a floor no DRAM interface reaches today.
DRAM_PJ_PER_BIT_FLOOR = 2.0
DRAM_ENERGY_SOURCE = ("DRAM traffic at >= 2 pJ/bit (HBM2e ~6, GDDR6 ~7.5 pJ/bit) plus compute at "
                      f"{EFFICIENCY_MARGIN:g}x the best shipped FLOP/s per W")


def check_power_budget(acc: Accelerator) -> list[Implausible]:
    """TDP against what the memory traffic and the fastest dtype need at the best efficiency."""
    if acc.tdp is None:
        return []
    watts = acc.tdp.value
    mem_w = sum(m.bandwidth.value * 8 * DRAM_PJ_PER_BIT_FLOOR * 1e-12 for m in acc.memory
                if m.bandwidth is not None and m.kind is not MemoryKind.SRAM)
    compute = [(acc.peak(d) or 0.0) / efficiency_bound(d) for d in acc.dtypes]
    compute_w = max(compute, default=0.0)
    need = mem_w + compute_w
    # only when both parts matter: compute alone past its bound is check_efficiency's finding
    if mem_w > 0 and need > watts * (1 + _ROUNDING) and compute_w <= watts:
        return [Implausible(
            "tdp", "power-budget", f"TDP {_q(watts, Dimension.POWER)}",
            f"memory traffic needs >= {_q(mem_w, Dimension.POWER)} and compute >= "
            f"{_q(compute_w, Dimension.POWER)}", need / watts, DRAM_ENERGY_SOURCE)]
    return []


# -- consistency ---------------------------------------------------------------------------------
# (lower precision, higher precision): the narrower format is never slower on the same chip, as
# every vendor's datasheet ladder shows (e.g. H100: fp8 = 2 x bf16; A100: int4 = 2 x int8).
PRECISION_LADDER: tuple[tuple[DType, DType], ...] = (
    (DType.FP4, DType.FP8), (DType.FP8, DType.BF16), (DType.FP8, DType.FP16),
    (DType.INT4, DType.INT8), (DType.BF16, DType.TF32), (DType.FP16, DType.TF32),
    (DType.TF32, DType.FP32), (DType.FP32, DType.FP64),
)
LADDER_SOURCE = "narrower formats run at least as fast on the same chip (vendor datasheets)"
MATRIX_SOURCE = "matrix units exist to beat the vector units on the same dtype"


def check_consistency(acc: Accelerator) -> list[Implausible]:
    """Matrix peak below vector peak for one dtype; a narrower format slower than a wider one."""
    out = []
    for dtype, m in acc.matrix.items():
        v = acc.vector.get(dtype)
        if v is not None and m.value * (1 + _ROUNDING) < v.value:
            out.append(Implausible(
                f"matrix.{dtype.value}", "matrix-below-vector",
                f"matrix {dtype.value} {_flops(m.value, dtype)}",
                f"at least the vector peak {_flops(v.value, dtype)}", v.value / m.value,
                MATRIX_SOURCE))
    for low, high in PRECISION_LADDER:
        lo, hi = _peak_field(acc, low), _peak_field(acc, high)
        if lo is None or hi is None or lo[1] * (1 + _ROUNDING) >= hi[1]:
            continue
        out.append(Implausible(
            lo[0], f"{low.value}-below-{high.value}", f"{low.value} {_flops(lo[1], low)}",
            f"at least the {high.value} peak {_flops(hi[1], high)} ({hi[0]})", hi[1] / lo[1],
            LADDER_SOURCE))
    return out


def _same_memory(a: Accelerator, b: Accelerator) -> bool:
    ma, mb = a.device_memory, b.device_memory
    if ma.kind is not mb.kind or abs(ma.capacity.value / mb.capacity.value - 1) > 0.05:
        return False
    if ma.bandwidth is None or mb.bandwidth is None:
        return True
    return abs(ma.bandwidth.value / mb.bandwidth.value - 1) <= 0.05


SPARSE_SOURCE = ("NVIDIA Ampere+ datasheets mark 2:4-sparse tensor figures with an asterisk; the "
                 "catalog wants dense peaks (halve a sparse figure)")


def check_sparse_confusion(acc: Accelerator, known: Iterable[Accelerator]) -> list[Implausible]:
    """A peak exactly 2x the dense peak of a known part of the same vendor with the same memory:
    most likely a with-sparsity figure entered as dense."""
    hits: dict[tuple[ComputeUnitKind, DType], tuple[float, float, list[str]]] = {}
    for other in known:
        if other.id == acc.id or other.vendor.lower() != acc.vendor.lower():
            continue
        if not _same_memory(acc, other):
            continue
        for unit, table in ((ComputeUnitKind.MATRIX, acc.matrix),
                            (ComputeUnitKind.VECTOR, acc.vector)):
            theirs = other.matrix if unit is ComputeUnitKind.MATRIX else other.vector
            for dtype, v in table.items():
                ref = theirs.get(dtype)
                if ref is not None and abs(v.value / (2 * ref.value) - 1) <= _ROUNDING:
                    # one finding a field, naming every part it matches (H100 and H800 share
                    # the dense rates and the memory)
                    hits.setdefault((unit, dtype), (v.value, ref.value, []))[2].append(other.id)
    return [Implausible(f"{unit.value}.{dtype.value}", "sparse-as-dense",
                        f"{_flops(mine, dtype)}",
                        f"the dense {dtype.value} of {', '.join(ids)} (same vendor, same memory) "
                        f"is {_flops(ref, dtype)}: a with-sparsity figure?", 2.0, SPARSE_SOURCE)
            for (unit, dtype), (mine, ref, ids) in hits.items()]


# -- all checks ----------------------------------------------------------------------------------
def check(acc: Accelerator, known: Sequence[Accelerator] = ()) -> list[Implausible]:
    """Every check on ``acc``; ``known`` parts (the bundled catalog) feed the sparse check.
    A finding whose bound key appears in one of the part's doubts is marked explained."""
    found = [*check_memory(acc), *check_efficiency(acc), *check_power_budget(acc),
             *check_consistency(acc), *check_sparse_confusion(acc, known)]
    doubts = " ".join(acc.doubts)
    return [f if f.bound not in doubts else _explained(f) for f in found]


def _explained(f: Implausible) -> Implausible:
    return Implausible(f.field, f.bound, f.value, f.limit, f.factor, f.source, explained=True)


def warnings(acc: Accelerator, known: Sequence[Accelerator] = ()) -> list[str]:
    """The unexplained findings as 'warning: ...' lines (what an estimate's assumptions carry)."""
    return [f"warning: implausible {acc.id} {f.sentence()}" for f in check(acc, known)
            if not f.explained]
