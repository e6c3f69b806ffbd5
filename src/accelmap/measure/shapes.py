"""Candidate GEMM shapes for the matmul sweep, derived from the device's structure.

Nothing here is tuned to one accelerator. A device is reduced to a :class:`Structure`:

- the **work tile** one compute unit produces per wave: the CTA tile of
  :func:`accelmap.cost.efficiency.geometry` (256 x 128 on GPUs and CPUs, the MXU side on TPUs),
  rounded up to a multiple of the device's native matrix tile when the catalog gives one (AMX
  16 x 16 x 32 on Intel CPUs, 320 x 320 on Groq ...);
- the **k step**: the native tile's depth (AMX 32 bf16), else the systolic side, else the smaller
  work-tile side (128: a multiple of every tensor-core MMA depth);
- the **units** that each take one tile per wave: SMs, CUs, TensorCores or CPU cores;
- the **memory** the three operands may occupy, of which they use at most ``MEMORY_FRACTION``.

The sweep climbs a :func:`ladder` of shapes whose tile count fills 1, 2, 3, 4, 6, 8, 12 ...
whole waves (near-square outputs, k = sqrt(m n)), tries :func:`variants` of the best sizes
(other aspect ratios and depths with the same whole-wave tile count), then :func:`refine`
proposes the neighbours of the best shape one or two tiles away in each dimension, which leave
the whole-wave grid on purpose: the measured optimum is not always where the model says (Stas
Bekman's ``mamf-finder.py`` searches the same way, by brute force over a range).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from accelmap.cost.efficiency import DEFAULT_TILE, geometry
from accelmap.hardware.schema import Accelerator

MEMORY_FRACTION = 0.5  # operands use at most half the memory: workspace, flush buffer, allocator
ASPECTS = (0.25, 0.5, 2.0, 4.0)  # m/n ratios tried by variants() besides the near-square ladder
K_FACTORS = (0.5, 2.0)  # depths tried by variants(), relative to sqrt(m n)
REFINE_STEPS = (-2, -1, 1, 2)  # tiles (k steps for k) that refine() moves each dimension by
MAX_WAVES = 1 << 20  # ladder stops here even when neither memory nor time caps it


@dataclass(frozen=True)
class Structure:
    """What shape generation needs to know about a device."""

    tile: tuple[int, int]  # output tile (m, n) one compute unit computes per wave
    k_step: int  # k is kept a multiple of this
    units: int  # compute units that each take one tile per wave (>= 1)
    memory_bytes: float  # memory the operands may come from (before MEMORY_FRACTION)


@dataclass(frozen=True, order=True)
class Gemm:
    """C[m, n] = A[m, k] @ B[k, n]."""

    m: int
    n: int
    k: int

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def operand_bytes(self, element_bytes: float) -> float:
        """A, B and C together (C in the input dtype)."""
        return (self.m * self.k + self.k * self.n + self.m * self.n) * element_bytes

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def _ceil_to(x: float, q: int) -> int:
    return max(q, math.ceil(x / q) * q)


def structure(acc: Accelerator, units: int | None = None,
              memory_bytes: float | None = None) -> Structure:
    """The device's GEMM structure from its catalog entry; ``units`` and ``memory_bytes``
    override the catalog with what the runtime reports (SMs torch sees, free memory)."""
    geo = geometry(acc)
    cu = acc.compute_units
    native = cu.matrix_tile if cu and cu.matrix_tile else None
    tm, tn = geo.tile
    if native:
        tm = _ceil_to(tm, native[0])
        tn = _ceil_to(tn, native[1] if len(native) > 1 else native[0])
        k_step = native[2] if len(native) > 2 else max(native)
    else:
        k_step = geo.systolic or min(geo.tile)
    count = units or geo.units or (cu.count.value if cu else 1)
    return Structure(tile=(tm, tn), k_step=k_step, units=max(1, count),
                     memory_bytes=memory_bytes if memory_bytes is not None else acc.memory_bytes)


def generic_structure(units: int = 1, memory_bytes: float = 8 * 2.0**30) -> Structure:
    """A device the catalog does not know: the default CTA tile over ``units`` compute units."""
    return Structure(tile=DEFAULT_TILE, k_step=min(DEFAULT_TILE), units=max(1, units),
                     memory_bytes=memory_bytes)


def waves() -> Iterator[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, 24 ...: powers of two and three times powers of two."""
    p = 1
    while p <= MAX_WAVES:
        yield p
        if p >= 2:
            yield p * 3 // 2  # 3, 6, 12 ... between p and 2p
        p *= 2


def _pairs(tiles: int) -> list[tuple[int, int]]:
    """All (i, j) with i * j == tiles."""
    out = []
    for i in range(1, math.isqrt(tiles) + 1):
        if tiles % i == 0:
            out += [(i, tiles // i), (tiles // i, i)]
    return sorted(set(out))


def _closest(s: Structure, tiles: int, aspect: float) -> Gemm:
    """Output tiling of ``tiles`` whole tiles whose m/n is closest to ``aspect``; k = sqrt(mn)."""
    tm, tn = s.tile
    i, j = min(_pairs(tiles), key=lambda p: (abs(math.log(p[0] * tm / (p[1] * tn) / aspect)),
                                             p[0]))
    m, n = i * tm, j * tn
    return Gemm(m, n, _ceil_to(math.sqrt(m * n), s.k_step))


def fits(g: Gemm, s: Structure, element_bytes: float, max_flops: float | None = None) -> bool:
    """Operands within MEMORY_FRACTION of the memory, and FLOPs within the time cap."""
    if min(g.m, g.n, g.k) <= 0:
        return False
    if g.operand_bytes(element_bytes) > s.memory_bytes * MEMORY_FRACTION:
        return False
    return max_flops is None or g.flops <= max_flops


def ladder(s: Structure, element_bytes: float, max_flops: float | None = None) -> list[Gemm]:
    """Near-square GEMMs filling 1, 2, 3, 4, 6 ... whole waves, smallest first, up to the
    memory and time caps."""
    out: list[Gemm] = []
    for w in waves():
        g = _closest(s, w * s.units, 1.0)
        if not fits(g, s, element_bytes, max_flops):
            break
        out.append(g)
    return out


def tiles_of(g: Gemm, s: Structure) -> int:
    """Output tiles of ``g`` (whole tiles; a partial tile counts as one)."""
    return math.ceil(g.m / s.tile[0]) * math.ceil(g.n / s.tile[1])


def variants(g: Gemm, s: Structure, element_bytes: float,
             max_flops: float | None = None) -> list[Gemm]:
    """Other shapes with the same whole-wave tile count as ``g``: other m/n aspect ratios, and
    k at K_FACTORS of sqrt(m n)."""
    tiles = tiles_of(g, s)
    out = {_closest(s, tiles, a) for a in ASPECTS}
    out |= {Gemm(g.m, g.n, _ceil_to(f * math.sqrt(g.m * g.n), s.k_step)) for f in K_FACTORS}
    out.discard(g)
    return sorted((v for v in out if fits(v, s, element_bytes, max_flops)),
                  key=lambda v: (v.flops, v))


def refine(best: Gemm, s: Structure, element_bytes: float | None = None,
           max_flops: float | None = None) -> list[Gemm]:
    """Neighbours of ``best``: each dimension moved by REFINE_STEPS tiles (k by k steps), one
    dimension at a time, plus all three up and all three down one step."""
    tm, tn = s.tile
    steps = (tm, tn, s.k_step)
    out: set[Gemm] = set()
    for axis, q in enumerate(steps):
        for d in REFINE_STEPS:
            dims = [best.m, best.n, best.k]
            dims[axis] += d * q
            out.add(Gemm(*dims))
    for d in (-1, 1):
        out.add(Gemm(best.m + d * tm, best.n + d * tn, best.k + d * s.k_step))
    out.discard(best)
    keep = [g for g in out if min(g.m, g.n, g.k) > 0 and (
        element_bytes is None or fits(g, s, element_bytes, max_flops))]
    return sorted(keep, key=lambda g: (g.flops, g))


def candidates(s: Structure, element_bytes: float, max_flops: float | None = None
               ) -> list[Gemm]:
    """The ladder and the variants of every rung, smallest first (for inspection and tests)."""
    out: set[Gemm] = set()
    for g in ladder(s, element_bytes, max_flops):
        out.add(g)
        out.update(variants(g, s, element_bytes, max_flops))
    return sorted(out, key=lambda g: (g.flops, g))
