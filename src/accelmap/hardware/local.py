"""Describe the local CPU as an :class:`Accelerator` when the catalog does not have it.

Facts come from this machine (``/proc/cpuinfo``, ``/proc/meminfo``, ``/sys/devices/system/cpu``,
``lscpu``); dense peaks are *derived* as cores x FLOP/cycle/core x clock from the ISA flags, the
same way the catalog derives its Xeon and EPYC peaks, and are marked ``derived: true``:

- AMX (``amx_bf16``): 1024 BF16 FLOP/cycle/core, ``amx_int8``: 2048 INT8 OP/cycle/core (Intel,
  "Accelerate AI Workloads with Intel AMX", p. 4, quoted in PyTorch's AMX recipe);
- AVX-512 (``avx512f``): 2 FMA units x 16 FP32 lanes x 2 FLOP = 64 FP32 FLOP/cycle/core (the same
  Intel brief: "64 FP32 operations per cycle"); parts with one 512-bit FMA unit reach half;
- AVX2 with FMA: 2 x 8 x 2 = 32; AVX without FMA: 16 (one add and one multiply port x 8 lanes);
  SSE: 8; Arm NEON (``asimd``): 2 pipes x 4 lanes x 2 = 16 (uncertain: cores have 2 to 4 pipes);
- ``avx512_bf16`` without AMX: VDPBF16PS, 2 ports x 16 lanes x 2 products x 2 FLOP = 128
  (uncertain);
- FP64 is half the FP32 rate on every vector ISA above.

The clock is the base frequency where the OS exposes it, else the "@ 2.60GHz" of the model name,
else the highest "cpu MHz" in /proc/cpuinfo; sustained all-core (and AMX) clocks differ, so a
measurement may land above or below the derived peak. Memory bandwidth stays unknown (``None``):
the channel count and speed of the DIMMs are not visible from inside the OS, least of all in a VM.

The cores are those this process may run on (its CPU affinity, ``os.sched_getaffinity``): under
``taskset -c 0`` the device is a one-core slice of the CPU, ``local-<model>-1c``, with one
core's peaks, which is what PyTorch then computes with (one thread).

The facts are plain data (:func:`facts_to_dict`), so a calibration profile can carry them and
describe the device again on any machine (``describe(facts_from_dict(...))``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelmap.cited import Source
from accelmap.hardware.schema import Accelerator

AMX_BF16_FLOP_PER_CYCLE = 1024  # Intel AMX brief p. 4: 1,024 BF16 operations per cycle per core
AMX_INT8_OP_PER_CYCLE = 2048  # same: 2,048 INT8 operations per cycle per core
AVX512_BF16_FLOP_PER_CYCLE = 128  # VDPBF16PS: 2 ports x 16 lanes x 2 products x 2 FLOP
# FP32 FLOP/cycle/core by vector ISA, best first (flag needed, FLOP/cycle, how it is counted)
FP32_RATES = (
    ("avx512f", 64, "AVX-512: 2 FMA units x 16 FP32 lanes x 2 FLOP"),
    ("avx2+fma", 32, "AVX2: 2 FMA units x 8 FP32 lanes x 2 FLOP"),
    ("avx", 16, "AVX: 1 add + 1 multiply port x 8 FP32 lanes"),
    ("asimd", 16, "Arm NEON: 2 pipes x 4 FP32 lanes x 2 FLOP (2 to 4 pipes by core)"),
    ("sse2", 8, "SSE: 1 add + 1 multiply port x 4 FP32 lanes"),
)
# Launch year of the newest ISA extension seen (schema needs a year; the model's is unknown)
ISA_YEARS = (("amx_tile", 2023), ("avx512_bf16", 2020), ("avx512f", 2017), ("avx2", 2013),
             ("asimd", 2011), ("avx", 2011))
DEFAULT_YEAR = 2010

SOURCES: dict[str, Source] = {
    "local-intel-amx": Source(
        title="Intel, 'Accelerate AI Workloads with Intel AMX' (solution brief), p. 4: 2,048 "
              "INT8 and 1,024 BF16 operations per cycle per core with AMX, vs 64 FP32 "
              "operations per cycle with AVX-512; quoted in PyTorch's AMX recipe",
        url="https://www.intel.com/content/www/us/en/products/docs/accelerator-engines/"
            "advanced-matrix-extensions/ai-solution-brief.html",
        also=("https://pytorch.org/tutorials/recipes/amx.html",
              "https://www.intel.com/content/www/us/en/products/docs/accelerator-engines/"
              "advanced-matrix-extensions/overview.html")),
    "local-intel-avx512": Source(
        title="Intel 64 and IA-32 Architectures Optimization Reference Manual: cores with two "
              "512-bit FMA units retire 2 x 16 FP32 FMAs per cycle (AVX2 cores 2 x 8)",
        url="https://www.intel.com/content/www/us/en/developer/articles/technical/"
            "intel-sdm.html"),
    "local-host": Source(
        title="This machine, read by accelmap.hardware.local: /proc/cpuinfo, /proc/meminfo, "
              "/sys/devices/system/cpu, lscpu"),
}


@dataclass(frozen=True)
class CpuFacts:
    """What the OS says about the local CPU."""

    model: str
    vendor: str
    cores: int  # physical cores this OS can run on
    clock_hz: float | None
    clock_from: str  # "base_frequency", "model name", "cpu MHz"
    flags: frozenset[str]
    memory_bytes: float  # MemTotal
    available_bytes: float | None = None  # MemAvailable
    caches: tuple[tuple[int, float], ...] = ()  # (level, bytes over all instances), L2 and up
    machine: str = field(default_factory=platform.machine)


# --- parsing (pure) ------------------------------------------------------------------------
def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model, vendor, flags, highest 'cpu MHz' and physical core count from /proc/cpuinfo."""
    model = vendor = ""
    flags: set[str] = set()
    mhz: list[float] = []
    cores: set[tuple[str, str]] = set()
    processors = 0
    phys = core = ""
    for line in [*text.splitlines(), ""]:
        key, _, value = (s.strip() for s in line.partition(":"))
        if not key:  # end of one processor's block
            if phys or core:
                cores.add((phys, core))
            phys = core = ""
        elif key == "processor":
            processors += 1
        elif key in ("model name", "Model") and not model:
            model = value
        elif key in ("vendor_id", "CPU implementer") and not vendor:
            vendor = value
        elif key in ("flags", "Features"):
            flags.update(value.split())
        elif key == "cpu MHz":
            mhz.append(float(value))
        elif key == "physical id":
            phys = value
        elif key == "core id":
            core = value
    return {"model": model, "vendor": vendor, "flags": frozenset(flags),
            "mhz": max(mhz) if mhz else None, "cores": len(cores) or processors or None}


def parse_meminfo(text: str) -> tuple[float, float | None]:
    """(MemTotal, MemAvailable) in bytes; /proc/meminfo's 'kB' are KiB."""
    values = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if m:
            values[m.group(1)] = int(m.group(2)) * 1024.0
    if "MemTotal" not in values:
        raise ValueError("no MemTotal line in /proc/meminfo")
    return values["MemTotal"], values.get("MemAvailable")


_SIZE = re.compile(r"([\d.]+)\s*([KMGT]i?B?|[KMG])?", re.IGNORECASE)
_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> float:
    """'491520K', '480 MiB', '2048 KB' -> bytes (cache sizes are binary in Linux)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise ValueError(f"cannot read {text!r} as a size")
    return float(m.group(1)) * _SCALE[(m.group(2) or "")[:1].lower()]


def parse_lscpu(text: str) -> dict[str, Any]:
    """Cores (cores per socket x sockets) and cache totals ('L3 cache: 480 MiB (1 instance)')."""
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines())}
    out: dict[str, Any] = {}
    with contextlib.suppress(KeyError, ValueError):
        out["cores"] = int(fields["Core(s) per socket"]) * int(fields.get("Socket(s)", "1"))
    caches = []
    for level in (2, 3, 4):
        raw = fields.get(f"L{level} cache")
        if raw:
            caches.append((level, parse_size(raw.split("(")[0])))
    out["caches"] = tuple(caches)
    mhz = fields.get("CPU max MHz")
    if mhz:
        out["max_mhz"] = float(mhz)
    return out


def clock_from_model(model: str) -> float | None:
    """'Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz' -> 2.5e9."""
    m = re.search(r"@\s*([\d.]+)\s*GHz", model)
    return float(m.group(1)) * 1e9 if m else None


# --- reading this machine (I/O) ------------------------------------------------------------
def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def sys_caches(root: Path = Path("/sys/devices/system/cpu")) -> tuple[tuple[int, float], ...]:
    """(level, bytes) for data/unified caches of level 2 and up, summed over their instances."""
    seen: dict[tuple[int, str], float] = {}
    for idx in sorted(root.glob("cpu[0-9]*/cache/index[0-9]*")):
        kind = _read(idx / "type").strip()
        lvl = _read(idx / "level").strip()
        raw = _read(idx / "size").strip()
        if kind == "Instruction" or not lvl.isdigit() or not raw or int(lvl) < 2:
            continue
        seen[(int(lvl), _read(idx / "shared_cpu_list").strip())] = parse_size(raw)
    totals: dict[int, float] = {}
    for (level, _), size in seen.items():
        totals[level] = totals.get(level, 0.0) + size
    return tuple(sorted(totals.items()))


def _lscpu() -> str:
    try:
        return subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5,
                              env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def read_cpu_facts() -> CpuFacts:
    """Read /proc, /sys and lscpu (Linux); elsewhere fall back to os.cpu_count and platform."""
    info = parse_cpuinfo(_read("/proc/cpuinfo"))
    ls = parse_lscpu(_lscpu())
    try:
        total, avail = parse_meminfo(_read("/proc/meminfo"))
    except ValueError:
        total, avail = 8 * 2.0**30, None  # not Linux: an unknown amount, marked uncertain below
    base = _read("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency").strip()
    clock, source = None, ""
    if base.isdigit():
        clock, source = int(base) * 1e3, "base_frequency"  # kHz
    elif clock_from_model(info["model"]):
        clock, source = clock_from_model(info["model"]), "model name"
    elif info["mhz"]:
        clock, source = info["mhz"] * 1e6, "cpu MHz"
    elif ls.get("max_mhz"):
        clock, source = ls["max_mhz"] * 1e6, "lscpu CPU max MHz"
    cores = ls.get("cores") or info["cores"] or os.cpu_count() or 1
    return CpuFacts(model=info["model"] or platform.processor() or "unknown CPU",
                    vendor=info["vendor"], cores=min(cores, usable_cpus() or cores),
                    clock_hz=clock, clock_from=source, flags=info["flags"], memory_bytes=total,
                    available_bytes=avail, caches=sys_caches() or ls.get("caches", ()))


def usable_cpus() -> int | None:
    """Logical CPUs this process may run on (its affinity mask; os.cpu_count() elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def facts_to_dict(f: CpuFacts) -> dict[str, Any]:
    """The facts as JSON-ready data (a calibration profile stores them)."""
    return {"model": f.model, "vendor": f.vendor, "cores": f.cores, "clock_hz": f.clock_hz,
            "clock_from": f.clock_from, "flags": sorted(f.flags),
            "memory_bytes": f.memory_bytes, "available_bytes": f.available_bytes,
            "caches": [list(c) for c in f.caches], "machine": f.machine}


def facts_from_dict(d: dict[str, Any]) -> CpuFacts:
    """:func:`facts_to_dict` read back; a malformed record is a ValueError."""
    try:
        return CpuFacts(model=str(d["model"]), vendor=str(d.get("vendor", "")),
                        cores=int(d["cores"]),
                        clock_hz=float(d["clock_hz"]) if d.get("clock_hz") else None,
                        clock_from=str(d.get("clock_from", "")),
                        flags=frozenset(str(x) for x in d.get("flags", ())),
                        memory_bytes=float(d["memory_bytes"]),
                        available_bytes=(float(d["available_bytes"])
                                         if d.get("available_bytes") else None),
                        caches=tuple((int(lv), float(sz)) for lv, sz in d.get("caches", ())),
                        machine=str(d.get("machine") or platform.machine()))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"not a CPU description: {e}") from None


def llc_bytes() -> float | None:
    """All cache levels from L2 up, summed over instances (caches may be exclusive)."""
    caches = sys_caches() or parse_lscpu(_lscpu()).get("caches", ())
    return sum(size for _, size in caches) or None


# --- the description (pure) ----------------------------------------------------------------
def _slug(text: str) -> str:
    text = re.sub(r"\((r|tm|c)\)", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "cpu"


def _vendor(raw: str) -> str:
    return {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "0x41": "Arm", "0x61": "Apple"
            }.get(raw, raw or "unknown")


def _rate(flop_per_cycle: float, cores: int, clock: float, how: str, src: str,
          uncertain: bool = False, op: str = "FLOP") -> dict[str, Any]:
    value = flop_per_cycle * cores * clock
    unit = "GOP/s" if op == "OP" else "GFLOP/s"
    return {"value": f"{value / 1e9:.6g} {unit}", "source": [src, "local-host"],
            "derived": True, "uncertain": uncertain,
            "note": f"derived: {how} = {flop_per_cycle:g} {op}/cycle/core x {cores} cores x "
                    f"{clock / 1e9:.4g} GHz"}


def describe(f: CpuFacts) -> Accelerator:
    """The local CPU as an Accelerator (class cpu) with derived peaks; pure."""
    flags = set(f.flags)
    if {"avx2", "fma"} <= flags:
        flags.add("avx2+fma")
    if "sse2" not in flags and f.machine in ("x86_64", "AMD64"):
        flags.add("sse2")  # every x86-64 CPU has SSE2
    clock = f.clock_hz or 1e9
    doubts = ["Dense peaks are derived from ISA flags x cores x clock, not from a datasheet; "
              "sustained all-core and AMX clocks differ from the clock used."]
    if not f.clock_hz:
        doubts.append("The clock is unknown; 1 GHz is assumed for the derived peaks.")
    matrix: dict[str, Any] = {}
    vector: dict[str, Any] = {}
    tile: tuple[int, ...] | None = None
    if "amx_bf16" in flags:
        matrix["bf16"] = _rate(AMX_BF16_FLOP_PER_CYCLE, f.cores, clock, "AMX TMUL",
                               "local-intel-amx")
        tile = (16, 16, 32)  # TDPBF16PS: C[16x16 fp32] += A[16x32 bf16] B[32x16 bf16]
    if "amx_int8" in flags:
        matrix["int8"] = _rate(AMX_INT8_OP_PER_CYCLE, f.cores, clock, "AMX TMUL",
                               "local-intel-amx", op="OP")
    if "avx512_bf16" in flags:
        vector["bf16"] = _rate(AVX512_BF16_FLOP_PER_CYCLE, f.cores, clock,
                               "AVX512_BF16 VDPBF16PS", "local-intel-avx512", uncertain=True)
    for flag, rate, how in FP32_RATES:
        if flag in flags:
            vector["fp32"] = _rate(rate, f.cores, clock, how, "local-intel-avx512",
                                   uncertain=flag == "asimd")
            vector["fp64"] = _rate(rate / 2, f.cores, clock, how + " / 2 for FP64",
                                   "local-intel-avx512", uncertain=flag == "asimd")
            break
    if not vector and not matrix:  # unknown ISA: one scalar FMA per cycle, flagged
        vector["fp32"] = _rate(2, f.cores, clock, "scalar FMA (ISA unknown)", "local-host",
                               uncertain=True)
    ddr = "DDR5" if "amx_tile" in flags else "DDR4"
    memory: list[dict[str, Any]] = [{
        "name": "system memory", "kind": ddr, "role": "device",
        "capacity": {"value": f"{f.memory_bytes / 1024:.0f} KiB", "source": "local-host",
                     "note": "MemTotal from /proc/meminfo"}}]
    doubts.append(f"Memory kind {ddr} is guessed from the ISA generation; its bandwidth is "
                  "unknown (measure it with `accelmap measure bandwidth`).")
    for level, size in f.caches:
        memory.append({"name": f"L{level}", "kind": "SRAM", "role": "on-chip",
                       "capacity": {"value": f"{size / 2**20:.6g} MiB", "source": "local-host",
                                    "note": "all instances together"}})
    year = next((y for flag, y in ISA_YEARS if flag in flags), DEFAULT_YEAR)
    doubts.append(f"release_year {year} is the launch year of the newest ISA extension seen, "
                  "not the model's.")
    clock_entry: dict[str, Any] | None = None
    if f.clock_hz:
        clock_entry = {"value": f"{f.clock_hz / 1e6:.6g} MHz", "source": "local-host",
                       "note": f"from {f.clock_from}"}
    data = {
        "id": f"local-{_slug(f.model)}-{f.cores}c",
        "name": f"{f.model} ({f.cores} cores, this machine)",
        "vendor": _vendor(f.vendor), "class": "cpu", "release_year": year,
        "description": "The local CPU, described by accelmap.hardware.local from the OS; "
                       "peaks derived from ISA flags.",
        "matrix": matrix, "vector": vector,
        "compute_units": {"count": {"value": f.cores, "unit": "core", "source": "local-host"},
                          "clock": clock_entry, "matrix_tile": tile},
        "memory": memory, "sources": SOURCES, "doubts": doubts,
    }
    return Accelerator.model_validate(data)


def is_local_id(accelerator_id: str | None) -> bool:
    return bool(accelerator_id) and str(accelerator_id).startswith("local-")


@lru_cache(maxsize=1)
def local_facts() -> CpuFacts:
    """What the OS says about this machine's CPU (read once per process)."""
    return read_cpu_facts()


@lru_cache(maxsize=1)
def local_cpu() -> Accelerator:
    """This machine's CPU (read once per process)."""
    return describe(local_facts())
