"""Schema of the hardware catalog: accelerators and the systems built from them.

One YAML file describes one accelerator (``data/accelerators/*.yaml``) or one system preset
(``data/systems/*.yaml``). Every number is a :mod:`accelmap.cited` value: unit, scope, source.
Peaks are *dense*; where a datasheet only gives a with-sparsity figure the catalog halves it and
says so in the note (NVIDIA Ampere+ datasheets mark sparse figures with an asterisk).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from accelmap.cited import (
    Capacity,
    CatalogEntry,
    CitedCount,
    Clock,
    DeviceBandwidth,
    Frozen,
    Latency,
    LinkBandwidth,
    NodeCapacity,
    PeakRate,
    Power,
    PriceRate,
    TierBandwidth,
    _as_source_tuple,
)
from accelmap.units import DType

# The most devices of one system or cluster: ten times the largest ever built, so that a typo
# such as 10^12 devices is one clear line rather than a hang.
MAX_DEVICES = 10_000_000


class DeviceClass(StrEnum):
    GPU = "gpu"
    TPU = "tpu"
    ASIC = "asic"
    SRAM_MACHINE = "sram-machine"
    FPGA = "fpga"
    EDGE_NPU = "edge-npu"
    CPU = "cpu"


class MemoryKind(StrEnum):
    HBM2 = "HBM2"
    HBM2E = "HBM2e"
    HBM3 = "HBM3"
    HBM3E = "HBM3e"
    GDDR6 = "GDDR6"
    GDDR6X = "GDDR6X"
    GDDR7 = "GDDR7"
    LPDDR4X = "LPDDR4X"
    LPDDR5 = "LPDDR5"
    LPDDR5X = "LPDDR5X"
    DDR4 = "DDR4"
    DDR5 = "DDR5"
    SRAM = "SRAM"

    @property
    def family(self) -> str:
        """HBM, GDDR, LPDDR, DDR or SRAM: the family that sets plausible bandwidth bounds."""
        for fam in ("HBM", "GDDR", "LPDDR", "DDR", "SRAM"):
            if self.value.startswith(fam):
                return fam
        raise AssertionError(self)  # pragma: no cover - every member starts with a family


class MemoryRole(StrEnum):
    DEVICE = "device"  # where weights and activations live (HBM; SRAM on SRAM machines)
    ONCHIP = "on-chip"  # caches and scratchpads (L2, Infinity Cache, VMEM, SBUF)
    HOST = "host"  # memory reachable over a coherent link (GH200 LPDDR5X, SN40L DDR)


class ComputeUnitKind(StrEnum):
    MATRIX = "matrix"  # tensor cores, MXU/systolic arrays, AMX tiles, AI engines
    VECTOR = "vector"  # SIMT/CUDA cores, vector units, SIMD lanes


class LinkRole(StrEnum):
    SCALE_UP = "scale-up"  # NVLink, Infinity Fabric, ICI, NeuronLink, on-package fabrics
    SCALE_OUT = "scale-out"  # InfiniBand, RoCE/Ethernet, DCN
    HOST = "host"  # PCIe, NVLink-C2C to the host CPU


class MemoryLevel(Frozen):
    name: str
    kind: MemoryKind
    role: MemoryRole
    capacity: Capacity
    bandwidth: DeviceBandwidth | None = None


class ComputeUnits(Frozen):
    """The parallel engines of the chip; their count drives wave quantization later."""

    count: CitedCount
    clock: Clock | None = None
    # Native matrix-unit tile (M, N[, K]) in elements, e.g. a TPU MXU is 128 x 128.
    matrix_tile: tuple[int, ...] | None = None


class Link(Frozen):
    name: str
    role: LinkRole
    bandwidth_per_direction: LinkBandwidth
    count: int = Field(gt=0, le=100_000)
    latency: Latency | None = None

    @property
    def aggregate_per_direction(self) -> float:
        """Bytes/s one device can push over all links of this kind in one direction."""
        return self.bandwidth_per_direction.value * self.count


class PriceQuote(Frozen):
    """Indicative price of one device-hour: a snapshot, not a list price."""

    usd_per_hour: PriceRate
    date: str = Field(pattern=r"^\d{4}-\d{2}(-\d{2})?$", description="YYYY-MM of the quote")
    market: str = Field(description="where and how: 'RunPod on-demand', 'GCP list', ...")


class Topology(StrEnum):
    SWITCH = "switch"  # full-bandwidth switch inside the domain (NVSwitch)
    FULL_MESH = "full-mesh"  # point-to-point links to every peer (MI300X Infinity Fabric, Gaudi)
    TORUS_2D = "torus-2d"  # TPU v5e/v6e ICI
    TORUS_3D = "torus-3d"  # TPU v4/v5p ICI, Trn2 UltraServer
    MESH_2D = "mesh-2d"  # a torus-shaped slice too small to wrap around (TPU v5e 2x4)
    MESH_3D = "mesh-3d"
    RING = "ring"
    FAT_TREE = "fat-tree"  # non-blocking Clos over InfiniBand/RoCE
    RAIL_OPTIMIZED = "rail-optimized"  # fat-tree where GPU i of every node shares leaf switch i
    SINGLE = "single"  # no network: one device


class SparseSupport(Frozen):
    """The matrix units' 2:4 structured-sparsity mode (two of every four weights zero): the
    dtypes it runs, and whose measured sparse GEMMs stand for this part (cost/sparsity.py's
    table, by architecture). A datasheet's "with sparsity" peaks are this mode."""

    dtypes: tuple[DType, ...] = Field(min_length=1)
    architecture: str = Field(min_length=1, description="key of cost/data/sparse_gemm.yaml")
    source: tuple[str, ...]
    note: str | None = None
    # sparse / dense peak where it is below 2 (Blackwell Ultra's FP4: 144 vs 105 PF per HGX)
    ceiling: dict[DType, float] = Field(default_factory=dict)

    @field_validator("source", mode="before")
    @classmethod
    def _sources(cls, v: Any) -> tuple[str, ...]:
        return _as_source_tuple(v)


class BlockScaledSupport(Frozen):
    """The microscaling formats the matrix units run natively (block scales applied inside the
    tensor-core instruction: Blackwell's ``tcgen05.mma`` block-scaled kinds, CDNA4's MFMA
    scaled ops). A format not listed runs weight-only: its weights are dequantized to the
    activations' dtype before a 16-bit or FP8 GEMM (W4A16), as on Hopper and CDNA3."""

    dtypes: tuple[DType, ...] = Field(min_length=1)
    source: tuple[str, ...]
    note: str | None = None

    @field_validator("source", mode="before")
    @classmethod
    def _sources(cls, v: Any) -> tuple[str, ...]:
        return _as_source_tuple(v)

    @model_validator(mode="after")
    def _check(self) -> BlockScaledSupport:
        plain = [d.value for d in self.dtypes if d.block_format is None]
        if plain:
            raise ValueError(f"block_scaled lists microscaling formats only, not {plain}")
        return self


class Accelerator(CatalogEntry):
    """One accelerator (GPU, TPU chip, wafer, FPGA card, CPU socket ...)."""

    vendor: str
    device_class: DeviceClass = Field(alias="class")
    form_factor: str | None = None
    release_year: int = Field(ge=1990, le=2035)
    matrix: dict[DType, PeakRate] = Field(default_factory=dict)
    vector: dict[DType, PeakRate] = Field(default_factory=dict)
    compute_units: ComputeUnits | None = None
    memory: tuple[MemoryLevel, ...]
    tdp: Power | None = None
    links: tuple[Link, ...] = ()
    scale_up_domain: CitedCount | None = None
    # how the scale-up links join the domain when no system preset says (a full mesh gives a
    # pair only its own point-to-point links: Gaudi, MI300X); a switch when not stated
    scale_up_topology: Topology | None = None
    price: PriceQuote | None = None
    # 2:4 structured sparsity of the matrix units; None: the part has none (or none is known)
    sparsity_2_4: SparseSupport | None = None
    # microscaling formats (nvfp4, mxfp4, mxfp6, mxfp8) the matrix units run natively; None: none
    block_scaled: BlockScaledSupport | None = None
    # the figures a what-if (--set, hardware/whatif.py) changed: never set in a catalog file
    what_if: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> Accelerator:
        if not self.matrix and not self.vector:
            raise ValueError("give at least one dense peak under 'matrix' or 'vector'")
        if not any(m.role == MemoryRole.DEVICE for m in self.memory):
            raise ValueError("one memory level needs role 'device' (where the weights live)")
        return self

    # --- derived views -------------------------------------------------------------------
    @property
    def device_memory(self) -> MemoryLevel:
        """The memory level weights live in: the first with role 'device'."""
        return next(m for m in self.memory if m.role == MemoryRole.DEVICE)

    @property
    def memory_bytes(self) -> float:
        return self.device_memory.capacity.value

    @property
    def memory_bandwidth(self) -> float | None:
        bw = self.device_memory.bandwidth
        return bw.value if bw else None

    def peak(self, dtype: DType) -> float | None:
        """Best dense peak for ``dtype`` over matrix and vector units, FLOP/s (None: none)."""
        entry = self.peak_entry(dtype)
        return entry[1].value if entry else None

    def peak_entry(self, dtype: DType) -> tuple[str, PeakRate] | None:
        best: tuple[str, PeakRate] | None = None
        for unit_name, table in (("matrix", self.matrix), ("vector", self.vector)):
            if dtype in table and (best is None or table[dtype].value > best[1].value):
                best = (unit_name, table[dtype])
        block = self.block_scaled_peak(dtype) if isinstance(dtype, DType) else None
        if best is None and block is not None:
            best = ("matrix", block)
        return best

    def runs_natively(self, dtype: DType) -> bool:
        """Whether the matrix units take ``dtype`` as a GEMM input: a plain format with a
        matrix peak, or a microscaling format listed under ``block_scaled``."""
        if dtype.block_format is not None:
            return self.block_scaled is not None and dtype in self.block_scaled.dtypes
        return dtype in self.matrix

    def block_scaled_peak(self, dtype: DType) -> PeakRate | None:
        """A microscaling format's dense matrix peak: its own catalog entry where the part lists
        one (MI355X's MXFP6 at the FP4 rate), else its element width's (NVFP4 and MXFP4 at the
        FP4 rate, MXFP8 and MXFP6 at FP8's); None where the part does not run it natively."""
        if dtype.block_format is None or not self.runs_natively(dtype):
            return None
        return self.matrix.get(dtype) or self.matrix.get(dtype.element_width)

    @property
    def native_fp4(self) -> DType | None:
        """The part's own 4-bit format, what the word ``fp4`` means on it: NVFP4 on NVIDIA
        Blackwell, MXFP4 on parts that run only the OCP format (CDNA4); None without FP4
        tensor cores."""
        for d in (DType.NVFP4, DType.MXFP4):
            if self.runs_natively(d):
                return d
        return None

    @property
    def dtypes(self) -> list[DType]:
        return [d for d in DType if self.peak(d) is not None]

    def links_by_role(self, role: LinkRole) -> list[Link]:
        return [link for link in self.links if link.role == role]

    def bandwidth_per_direction(self, role: LinkRole) -> float:
        """Sum over the device's links of one role, bytes/s per direction (0 when none)."""
        return sum(link.aggregate_per_direction for link in self.links_by_role(role))


class NetworkTier(Frozen):
    """One level of the network: what a device reaches and at what per-direction bandwidth."""

    name: str
    role: LinkRole
    topology: Topology
    domain_size: int = Field(gt=0, le=MAX_DEVICES,
                             description="devices reachable inside this tier")
    bandwidth_per_direction: TierBandwidth
    latency: Latency | None = None
    in_network_reduction: bool = Field(
        default=False, description="switch-side reduction (NVLink SHARP / NVLS, IB SHARP)"
    )


class SystemPreset(CatalogEntry):
    """A named system: accelerator x devices per node x nodes, with its network tiers."""

    accelerator: str = Field(description="id of an accelerator in the catalog")
    devices_per_node: int = Field(gt=0, le=MAX_DEVICES)
    nodes: int = Field(default=1, gt=0, le=MAX_DEVICES)
    torus: tuple[int, ...] | None = Field(default=None, description="ICI torus/mesh shape")
    # OS hosts one node spans where the node is a scale-up domain of several (GB200 NVL72: 18
    # compute trays of 4 GPUs); a job is scheduled in whole hosts (hardware/cluster.py)
    hosts_per_node: int = Field(default=1, gt=0, le=MAX_DEVICES)
    tiers: tuple[NetworkTier, ...]
    host_memory: NodeCapacity | None = None
    price: PriceQuote | None = None

    @model_validator(mode="after")
    def _check(self) -> SystemPreset:
        if self.torus is not None:
            size = 1
            for d in self.torus:
                if d <= 0:
                    raise ValueError(f"torus dimensions must be positive, got {self.torus}")
                size *= d
            if size != self.devices:
                raise ValueError(
                    f"torus {self.torus} holds {size} devices but the system has "
                    f"{self.devices} (devices_per_node x nodes)"
                )
        if not self.tiers:
            raise ValueError("give at least one network tier")
        if self.devices > MAX_DEVICES:
            raise ValueError(f"{self.devices:,} devices is more than the {MAX_DEVICES:,} a "
                             "system may have")
        return self

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes
