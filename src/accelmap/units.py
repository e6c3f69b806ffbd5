"""SI units inside, human units at the edges.

Every quantity inside accelmap is a plain float in base SI units: bytes, FLOP, seconds, bytes per
second, FLOP per second, watts, hertz, US dollars per hour. This module parses the strings people
and datasheets write ("3.35 TB/s", "989.4 TFLOP/s", "400 Gb/s", "80 GiB") into those floats and
formats them back.

Prefixes follow SI (k = 1e3 ... E = 1e18) and IEC (Ki = 2**10 ... Ei = 2**60). Datasheets quote
memory bandwidth and link rates in decimal units (1 TB/s = 1e12 B/s; 1 Gb/s = 1e9 bit/s), and HBM
capacity in binary-ish marketing "GB" that vendors mean as 1e9 bytes for bandwidth but often
GiB-sized stacks for capacity (an "80 GB" H100 reports 85,520,809,984 bytes = 79.6 GiB). The
catalog therefore records capacity in the unit the source states and this module keeps them apart.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from accelmap.errors import InputError

# A quantity that is a float (or int) for one value, or a numpy array over the planner's
# table of candidates: the cost model's arithmetic is array-friendly throughout. One alias
# for every module (issue 25).
Num: TypeAlias = Any


class Dimension(StrEnum):
    """What a quantity measures; the base unit is in the comment."""

    BYTES = "bytes"  # B
    BANDWIDTH = "bandwidth"  # B/s
    FLOPS = "flops"  # FLOP/s (also integer operations per second, OP/s)
    FLOP = "flop"  # FLOP
    POWER = "power"  # W
    FREQUENCY = "frequency"  # Hz
    TIME = "time"  # s
    PRICE_RATE = "price_rate"  # USD per hour: the one non-SI base, as every price list quotes it
    ENERGY = "energy"  # J


class DType(StrEnum):
    """Numeric formats for compute peaks, weights, activations and KV cache.

    ``fp4`` is the bare 4-bit width: the catalog's key for the 4-bit tensor-core peak, and, as a
    user's word, "the device's native 4-bit format" (``engine/formats.py`` resolves it to
    ``nvfp4`` or ``mxfp4``). The block-scaled formats carry their scales (``BlockFormat``):
    their ``bytes`` is the storage per value *including* its share of the block scale.
    """

    FP64 = "fp64"
    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    FP4 = "fp4"
    INT4 = "int4"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"
    MXFP6 = "mxfp6"
    MXFP8 = "mxfp8"

    @property
    def bytes(self) -> float:
        """Storage of one element, block scales included (NVFP4 4.5 bits = 0.5625 B). TF32 is
        stored in 32-bit words (NVIDIA A100 whitepaper)."""
        fmt = BLOCK_FORMATS.get(self)
        return fmt.bits_per_value / 8 if fmt else _DTYPE_BYTES[self]

    @property
    def is_integer(self) -> bool:
        return self in (DType.INT8, DType.INT4)

    @property
    def block_format(self) -> BlockFormat | None:
        """The block-scaling layout of a microscaling format; None for a plain one."""
        return BLOCK_FORMATS.get(self)

    @property
    def element_width(self) -> DType:
        """The plain format whose tensor-core rate a block-scaled format runs at (NVFP4 and
        MXFP4 at the FP4 rate, MXFP8 at FP8's); MXFP6 at FP8's unless a part lists its own
        (B200: "FP6 is the same rate" as FP8; MI355X runs FP6 at its FP4 rate)."""
        fmt = BLOCK_FORMATS.get(self)
        return fmt.element if fmt else self

    @property
    def is_4bit_float(self) -> bool:
        return self in (DType.FP4, DType.NVFP4, DType.MXFP4)


@dataclass(frozen=True)
class BlockFormat:
    """A microscaling format: ``block`` elements of ``element_bits`` share one ``scale_bits``
    scale; NVFP4 adds one FP32 scale per tensor (``tensor_scale_bytes``)."""

    element: DType  # the plain width whose peak the GEMM runs at
    element_bits: int  # E2M1 = 4, E3M2/E2M3 = 6, E4M3/E5M2 = 8
    block: int  # values per scale
    scale_bits: int
    scale_format: str  # "E4M3" (NVFP4) or "E8M0" (OCP MX: a power of two)
    tensor_scale_bytes: int  # second-level scale per tensor (NVFP4: one FP32)
    source: str

    @property
    def bits_per_value(self) -> float:
        """Element bits plus the block scale's share: NVFP4 4 + 8/16 = 4.5, MXFP4 4 + 8/32 =
        4.25, MXFP6 6.25, MXFP8 8.25 (the per-tensor FP32 scale is a constant per tensor)."""
        return self.element_bits + self.scale_bits / self.block


# OCP Microscaling Formats (MX) Specification v1.0 (2023), sec. 5 "Concrete MX-compliant
# formats", Table 1: MXFP8 (E5M2/E4M3), MXFP6 (E3M2/E2M3), MXFP4 (E2M1), block size 32, one
# E8M0 scale (8 bits) per block.
_OCP_MX = "OCP Microscaling Formats (MX) Specification v1.0, sec. 5 Table 1"
# NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference" (NVIDIA
# technical blog, June 2025) and "Pretraining Large Language Models with NVFP4" (arXiv
# 2509.25149, sec. 2): E2M1 values, one FP8 E4M3 scale per 16 values, one FP32 scale per tensor.
_NVFP4 = "NVIDIA NVFP4 blog (2025) and arXiv 2509.25149 sec. 2"
BLOCK_FORMATS: dict[DType, BlockFormat] = {
    DType.NVFP4: BlockFormat(DType.FP4, 4, 16, 8, "E4M3", 4, _NVFP4),
    DType.MXFP4: BlockFormat(DType.FP4, 4, 32, 8, "E8M0", 0, _OCP_MX),
    DType.MXFP6: BlockFormat(DType.FP8, 6, 32, 8, "E8M0", 0, _OCP_MX),
    DType.MXFP8: BlockFormat(DType.FP8, 8, 32, 8, "E8M0", 0, _OCP_MX),
}

# Library and checkpoint spellings of the formats (PyTorch, NumPy, JAX dtype names; the
# quantization names of published checkpoints) -> DType values.
_DTYPE_ALIASES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16",
                  "bfloat16": "bf16", "float64": "fp64", "double": "fp64",
                  "tensorfloat32": "tf32", "float8": "fp8", "float8_e4m3fn": "fp8",
                  "float4_e2m1fn_x2": "fp4", "nv_fp4": "nvfp4", "mx_fp4": "mxfp4",
                  "mx_fp8": "mxfp8", "mx_fp6": "mxfp6", "w4a16": "int4", "w8a8": "int8"}


def parse_dtype(text: str | None) -> DType | None:
    """'bf16', 'bfloat16', 'torch.float32', 'NVFP4' -> DType; None when not a known format."""
    if not text:
        return None
    t = text.strip().lower().removeprefix("torch.").removeprefix("numpy.").replace("-", "_")
    t = _DTYPE_ALIASES.get(t, t).replace("_", "")
    try:
        return DType(t)
    except ValueError:
        return None


def known_dtype_words() -> str:
    """The precision words accepted everywhere, for a refusal line."""
    return ", ".join(d.value for d in DType)


_DTYPE_BYTES: dict[DType, float] = {
    DType.FP64: 8.0,
    DType.FP32: 4.0,
    DType.TF32: 4.0,
    DType.BF16: 2.0,
    DType.FP16: 2.0,
    DType.FP8: 1.0,
    DType.INT8: 1.0,
    DType.FP4: 0.5,
    DType.INT4: 0.5,
}

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_IEC = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_SMALL = {"m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9, "p": 1e-12}

# Base symbol -> (dimension, factor to SI base). Bits are converted to bytes (8 bits per byte).
_BASE_UNITS: dict[str, tuple[Dimension, float]] = {
    "B": (Dimension.BYTES, 1.0),
    "b": (Dimension.BYTES, 1 / 8),
    "B/s": (Dimension.BANDWIDTH, 1.0),
    "Bps": (Dimension.BANDWIDTH, 1.0),
    "b/s": (Dimension.BANDWIDTH, 1 / 8),
    "bps": (Dimension.BANDWIDTH, 1 / 8),
    "FLOP/s": (Dimension.FLOPS, 1.0),
    "FLOPS": (Dimension.FLOPS, 1.0),
    "OP/s": (Dimension.FLOPS, 1.0),
    "OPS": (Dimension.FLOPS, 1.0),
    "FLOP": (Dimension.FLOP, 1.0),
    "W": (Dimension.POWER, 1.0),
    "Hz": (Dimension.FREQUENCY, 1.0),
    "s": (Dimension.TIME, 1.0),
    "J": (Dimension.ENERGY, 1.0),
    "USD/h": (Dimension.PRICE_RATE, 1.0),
    "$/h": (Dimension.PRICE_RATE, 1.0),
}

_BASE_SYMBOL: dict[Dimension, str] = {
    Dimension.BYTES: "B",
    Dimension.BANDWIDTH: "B/s",
    Dimension.FLOPS: "FLOP/s",
    Dimension.FLOP: "FLOP",
    Dimension.POWER: "W",
    Dimension.FREQUENCY: "Hz",
    Dimension.TIME: "s",
    Dimension.PRICE_RATE: "USD/h",
    Dimension.ENERGY: "J",
}

_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\s].*?)?\s*$")


def _split_unit(unit: str) -> tuple[float, Dimension]:
    """Return (factor to SI, dimension) for a unit such as 'TB/s', 'GiB', 'Gb/s', 'us'."""
    if unit in _BASE_UNITS:
        dim, factor = _BASE_UNITS[unit]
        return factor, dim
    for table in (_IEC, _SI, _SMALL):
        for prefix, scale in sorted(table.items(), key=lambda kv: -len(kv[0])):
            if prefix and unit.startswith(prefix) and unit[len(prefix) :] in _BASE_UNITS:
                dim, factor = _BASE_UNITS[unit[len(prefix) :]]
                if table is _SMALL and dim not in (Dimension.TIME, Dimension.ENERGY):
                    continue  # "mB" is not a unit anyone means; refuse rather than guess
                return scale * factor, dim
    raise InputError(
        f"unknown unit {unit!r}: use one of B, b, B/s, b/s, FLOP/s, OP/s, W, Hz, s, J, USD/h "
        "with an SI (k, M, G, T, P) or IEC (Ki, Mi, Gi, Ti) prefix, for example '3.35 TB/s'"
    )


def parse_quantity(
    text: str | float | int, expected: Dimension | None = None, require_unit: bool = False
) -> float:
    """Parse '3.35 TB/s' into 3.35e12 (SI base units).

    A bare number is accepted only when ``expected`` is given and ``require_unit`` is false, and is
    then taken as already in SI base units. Raises :class:`InputError` with a sentence on
    anything else.
    """
    if isinstance(text, bool):
        raise InputError(f"expected a quantity with a unit, got {text!r}")
    if isinstance(text, int | float):
        if expected is None or require_unit:
            raise InputError(f"the number {text!r} needs a unit, for example '{text} GB'")
        value = float(text)
        dim = expected
    else:
        m = _QUANTITY.match(text)
        if not m:
            raise InputError(f"cannot read {text!r} as a quantity: write a number and a unit, "
                             "for example '80 GB' or '989 TFLOP/s'")
        number, unit = m.group(1), (m.group(2) or "")
        if not unit:
            if expected is None or require_unit:
                raise InputError(f"{text!r} has no unit: write it as, for example, '{number} GB'")
            factor, dim = 1.0, expected
        else:
            factor, dim = _split_unit(unit)
        value = float(number) * factor
    if expected is not None and dim is not expected:
        raise InputError(
            f"{text!r} is a {dim.value} quantity, but a {expected.value} quantity "
            f"(base unit {_BASE_SYMBOL[expected]}) is needed here"
        )
    if not math.isfinite(value):
        raise InputError(f"{text!r} is not a finite number")
    return value


def base_symbol(dim: Dimension) -> str:
    return _BASE_SYMBOL[dim]


def format_quantity(value: float, dim: Dimension, digits: int = 3, binary: bool = False) -> str:
    """Format an SI value with a decimal (or binary) prefix: 3.35e12, BANDWIDTH -> '3.35 TB/s'."""
    symbol = _BASE_SYMBOL[dim]
    if dim is Dimension.PRICE_RATE:
        return f"{value:.2f} {symbol}"
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {symbol}"
    if dim is Dimension.TIME and abs(value) < 1:
        for prefix, scale in (("m", 1e-3), ("µ", 1e-6), ("n", 1e-9)):
            if abs(value) >= scale:
                return f"{value / scale:.{digits}g} {prefix}{symbol}"
        return f"{value:.{digits}g} {symbol}"
    if dim is Dimension.TIME and abs(value) >= 1000:
        # Kiloseconds and megaseconds read badly: long times go to minutes, hours, days.
        for unit, scale in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
            if abs(value) >= 2 * scale:
                x = float(f"{value / scale:.{digits}g}")  # round to `digits` significant
                decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
                text = f"{x:,.{decimals}f}"
                return f"{text.rstrip('0').rstrip('.') if decimals else text} {unit}"
    table = _IEC if binary else {k: v for k, v in _SI.items() if k != "K"}
    best_prefix, best_scale = "", 1.0
    for prefix, scale in sorted(table.items(), key=lambda kv: kv[1]):
        if abs(value) >= scale:
            best_prefix, best_scale = prefix, scale
    return f"{value / best_scale:.{digits}g} {best_prefix}{symbol}"
