"""Regenerate src/accelmap/cost/data/collective_efficiency.yaml from the shared measurements.

Reads data/reference/measurements/collectives.csv (measured nccl-tests / all_reduce_bench
bus bandwidths, Stas Bekman's ML Engineering network chapter) and the few *measured* rows of
data/reference/hardware/network.csv (nccl-tests issues N1-N11), maps each system to catalog
accelerator ids through the explicit tables below, and writes, per row, the achieved fraction of
the per-direction line rate of *our catalog's* tier (so a datasheet disagreement shows up instead
of cancelling out):

- ring-class collectives (ring all-reduce, all-gather, reduce-scatter): efficiency = busbw / line,
  with busbw as nccl-tests defines it (doc/PERFORMANCE.md, N16): busbw equals the per-rank link
  bandwidth a flat point-to-point algorithm would need.
- in-network all-reduce (NVLink SHARP / NVLS): nccl-tests still applies 2(n-1)/n, so the row's
  algbw = busbw * n / (2(n-1)), and the hardware bandwidth that algbw implies is
  algbw * (n+1)/n (S. Jeaugey, nccl-tests issue #212 and PR #239: "algobw = busbw * n/(n+1)" for
  NVLS, where busbw is the NVLink bandwidth): efficiency = that / line.
- scale-out (multi-node ring): a node's n rings leave through its n NICs (one per GPU), so the
  ring busbw is bounded by the node's NIC aggregate: efficiency = busbw / (NICs x NIC rate)
  ("46-48 GB/s per NDR NIC ... 8 NICs -> ~370-385 GB/s node busbw", N2).

Full-mesh scale-up (MI300X Infinity Fabric): a group of n < 8 GPUs can use only n-1 of the 7
links, so the line rate of an n-GPU row is tier x (n-1)/(domain-1) (network.csv, AMD row: "any
pair only 64 GB/s/dir -> all-reduce must use all links").

Per (system, role, collective, algorithm, ranks) the row kept is: nccl-tests before other tools,
then the largest payload (the bandwidth-bound end of the sweep). ``efficiency`` lists the figure
``link_for_tier`` uses per accelerator and role (all-reduce at the most ranks), ``defaults`` the
median per topology class for accelerators without a measurement.

Reads: data/reference/measurements/collectives.csv and
  data/reference/hardware/network.csv (or those under the folder given).
Writes: src/accelmap/cost/data/collective_efficiency.yaml.

Run: python fitters/derive_collective_efficiency.py [path/to/reference]
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from accelmap.api import load_catalog
from accelmap.hardware.schema import LinkRole, Topology

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REF = ROOT / "data" / "reference"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "collective_efficiency.yaml"

SCALE_UP = LinkRole.SCALE_UP.value
SCALE_OUT = LinkRole.SCALE_OUT.value


@dataclass(frozen=True)
class SystemMap:
    label: str
    accelerators: tuple[str, ...]  # catalog ids the measurement applies to
    preset: str  # catalog system whose tier gives the line rate
    default_algorithm: str  # what "NCCL default" ran for large messages on this system
    nics_per_node: int = 8  # for multi-node rows: NICs (one per GPU) that carry the rings


# collectives.csv 'hardware' column -> system. "NCCL default" on NVSwitch systems with NVLink
# SHARP is NVLS for large all-reduces (row C0045's own note: "NVLS at >=2MiB"); A100 has no NVLS.
SYSTEMS: dict[str, SystemMap] = {
    "8x H200 node (NVLink 4, NVSwitch)": SystemMap(
        "8x H200 SXM (NVLink 4, NVSwitch)", ("h200-sxm",), "dgx-h200", "in_network"),
    "8x H200 node (NVLink 4)": SystemMap(
        "8x H200 SXM (NVLink 4, NVSwitch)", ("h200-sxm",), "dgx-h200", "in_network"),
    "8x B200 node p6-b200.48xlarge (NVLink 5)": SystemMap(
        "8x B200 (p6-b200, NVLink 5)", ("b200",), "dgx-b200", "in_network"),
    "P6-B200 nodes (8x B200, NVLink 5 intra; 8x 50GBps EFA v4 per node)": SystemMap(
        "8x B200 (p6-b200, NVLink 5; 8 x 50 GB/s EFA v4 per node)", ("b200",), "dgx-b200",
        "in_network", nics_per_node=8),
    "8x A100 node (NVLink 3)": SystemMap(
        "8x A100 SXM (NVLink 3, NVSwitch)", ("a100-sxm4-80gb", "a100-sxm4-40gb"), "dgx-a100",
        "ring"),
    "8x AMD MI300X node": SystemMap(
        "8x MI300X (Infinity Fabric full mesh)", ("mi300x",), "mi300x-8", "ring"),
}


@dataclass(frozen=True)
class NetworkRow:
    """A measured row of network.csv, named by (category, item, system_or_scope)."""

    key: tuple[str, str, str]
    system: SystemMap
    role: str
    algorithm: str
    ranks: int | None  # None: not stated
    nics: int = 0  # scale-out rows: NICs the busbw is spread over (0: scale-up)
    note: str = ""


NETWORK_ROWS = (
    NetworkRow(("intra-node measured", "AR busbw ring (NVLS off)", "8x H100 SXM (DGX/HGX)"),
               SystemMap("8x H100 SXM (NVLink 4, NVSwitch)", ("h100-sxm5-80gb",), "dgx-h100",
                         "in_network"), SCALE_UP, "ring", 8),
    NetworkRow(("intra-node measured", "AR busbw NVLS (NVLink SHARP)", "8x H100 SXM"),
               SystemMap("8x H100 SXM (NVLink 4, NVSwitch)", ("h100-sxm5-80gb",), "dgx-h100",
                         "in_network"), SCALE_UP, "in_network", 8),
    NetworkRow(("intra-node measured", "AR busbw", "8x H800 SXM"),
               SystemMap("8x H800 SXM (NVLink 4, 8 links)", ("h800-sxm5",), "dgx-h800",
                         "in_network"), SCALE_UP, "in_network", 8,
               note="algorithm not stated; busbw 215 exceeds the 200 GB/s line rate, which only "
                    "in-switch reduction allows, so it is read as NVLS (the catalog tier says "
                    "no in-network reduction: this figure is not used for it)"),
    NetworkRow(("scale-out measured", "NCCL AR busbw expectation per NDR NIC", "H100 multi-node"),
               SystemMap("H100 nodes, 8 x 400G NDR InfiniBand", ("h100-sxm5-80gb",), "dgx-h100",
                         "ring"), SCALE_OUT, "ring", None, nics=1,
               note="stated per NIC as an expectation by the NCCL team ('measured/expected')"),
    NetworkRow(("scale-out measured", "Multi-node AR busbw", "A100 nodes with 4x HDR per node"),
               SystemMap("A100 nodes, 4 x 200G HDR InfiniBand per node",
                         ("a100-sxm4-80gb", "a100-sxm4-40gb"), "dgx-a100", "ring"),
               SCALE_OUT, "ring", None, nics=4),
)

SKIPPED = [
    "network.csv 8x H200 ~475 GB/s (N4): same system as collectives.csv C0021, which is used",
    "network.csv 8x A100 ~200-235 GB/s (N6, N7): collectives.csv C0044 (234.89) is used",
    "network.csv 8x B200 ~830? GB/s (N8): marked unverified ('?')",
    "network.csv GB200 NVL72 MNNVL ~811 GB/s over 8 GPUs (N9): algorithm (ring or NVLS) not "
    "stated and the URL was not recorded",
    "network.csv GB200 nvbandwidth ~770? GB/s (N10): point-to-point, direction not stated",
]


def _number(text: str) -> float:
    """'~370 (368.8)' -> 368.8; '46-48' -> 47; '~476-480' -> 478; '215' -> 215."""
    paren = re.search(r"\(([\d.]+)\)", text)
    if paren:
        return float(paren.group(1))
    nums = [float(x) for x in re.findall(r"[\d.]+", text)]
    return sum(nums[:2]) / len(nums[:2])


def _payload_bytes(text: str) -> float:
    m = re.match(r"\s*([\d.]+)\s*(GiB|MiB|KiB|B)\s*$", text)
    if not m:
        raise ValueError(f"cannot read payload {text!r}")
    scale = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}[m.group(2)]
    return float(m.group(1)) * scale


def _collective(text: str) -> str:
    head = text.split(",")[0].strip().lower()
    return {"all-reduce": "all_reduce", "all-gather": "all_gather",
            "reduce-scatter": "reduce_scatter"}[head]


def _algorithm(text: str, system: SystemMap, collective: str, nodes: int) -> str:
    if "NVLS_ENABLE=0" in text or text.lower().startswith("ring"):
        return "ring"
    if "NVLS" in text:
        return "in_network"
    if nodes > 1:  # across nodes the busbw is NIC-bound: read as the rail rings (see docstring)
        return "ring"
    return system.default_algorithm if collective == "all_reduce" else "ring"


def _tier_line(preset_id: str, role: str, ranks: int | None) -> tuple[float, str]:
    """Per-device per-direction line rate of the preset's tier (bytes/s) and how it was read."""
    cat = load_catalog()
    preset = cat.systems[preset_id]
    tier = next(t for t in preset.tiers if t.role.value == role)
    bw = tier.bandwidth_per_direction.value
    if tier.topology is Topology.FULL_MESH and ranks and 1 < ranks < tier.domain_size:
        frac = (ranks - 1) / (tier.domain_size - 1)
        return bw * frac, (f"{preset_id} {role} {bw / 1e9:g} GB/s x {ranks - 1}/"
                           f"{tier.domain_size - 1} links (full mesh)")
    return bw, f"{preset_id} {role} {bw / 1e9:g} GB/s"


def _record(system: SystemMap, role: str, collective: str, algorithm: str, ranks: int | None,
            nodes: int | None, busbw: float, algbw: float | None, payload: str, source: str,
            tool: str, nics: int = 0, note: str = "") -> dict[str, Any]:
    if role == SCALE_OUT:
        nic_rate, tier_text = _tier_line(system.preset, role, ranks)
        line = nic_rate * nics
        how = f"busbw / ({nics} NIC x {nic_rate / 1e9:g} GB/s)"
        line_text = f"{nics} x ({tier_text})"
    else:
        line, line_text = _tier_line(system.preset, role, ranks)
        how = "busbw / line"
    if algbw is None and ranks and ranks > 1:
        algbw = busbw * ranks / (2 * (ranks - 1)) if collective == "all_reduce" else (
            busbw * ranks / (ranks - 1))
    achieved = busbw * 1e9
    if algorithm == "in_network" and ranks:
        achieved = (algbw or 0.0) * 1e9 * (ranks + 1) / ranks
        how = "algbw x (n+1)/n / line (NVLS moves (n+1)/n x S per rank, nccl-tests #212)"
    rec: dict[str, Any] = {
        "system": system.label,
        "accelerators": list(system.accelerators),
        "role": role,
        "collective": collective,
        "algorithm": algorithm,
        "ranks": ranks,
        "nodes": nodes,
        "payload": payload,
        "busbw_GBps": round(busbw, 3),
        "algbw_GBps": round(algbw, 2) if algbw else None,
        "line_rate_GBps": round(line / 1e9, 3),
        "line_rate": line_text,
        "efficiency": round(achieved / line, 4),
        "formula": how,
        "source": source,
        "tool": tool,
    }
    if note:
        rec["note"] = note
    return rec


def _tool_rank(tool: str) -> int:
    return 0 if tool.startswith("nccl-tests") else 1


def from_collectives(path: Path) -> list[dict[str, Any]]:
    best: dict[tuple[Any, ...], tuple[tuple[Any, ...], dict[str, Any]]] = {}
    for row in csv.DictReader(path.open()):
        system = SYSTEMS[row["hardware"]]
        ranks, nodes = int(row["num_gpus"]), int(row["num_nodes"])
        collective = _collective(row["collective"])
        algorithm = _algorithm(row["algorithm"], system, collective, nodes)
        role = SCALE_UP if nodes == 1 else SCALE_OUT
        tool = row["software"].split(";")[0].strip()
        algbw = float(row["algbw_GBps"]) if row["algbw_GBps"] else None
        rec = _record(system, role, collective, algorithm, ranks, nodes,
                      float(row["busbw_GBps"]), algbw, row["payload"], row["row_id"], tool,
                      nics=system.nics_per_node if role == SCALE_OUT else 0)
        key = (system.label, role, collective, algorithm, ranks)
        rank = (_tool_rank(tool), -_payload_bytes(row["payload"]), row["row_id"])
        if key not in best or rank < best[key][0]:
            best[key] = (rank, rec)
    return [rec for _, rec in best.values()]


def from_network(path: Path) -> list[dict[str, Any]]:
    rows = {(r["category"], r["item"], r["system_or_scope"]): r
            for r in csv.DictReader(path.open())}
    out = []
    for nr in NETWORK_ROWS:
        row = rows[nr.key]
        value = _number(row["value"])
        sources = row["source_ids"].replace(";", ", ")
        nodes = 1 if nr.role == SCALE_UP else None
        out.append(_record(nr.system, nr.role, "all_reduce", nr.algorithm, nr.ranks, nodes, value,
                           None, "large (as stated)", f"network.csv ({sources}): {row['value']}",
                           "nccl-tests", nics=nr.nics, note=nr.note))
    return out


def summarise(records: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per accelerator/role/algorithm: the all-reduce figure at the most ranks (collectives.csv
    first); per topology class: the median over systems."""
    cat = load_catalog()
    chosen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rec in records:
        if rec["collective"] != "all_reduce" or rec.get("note", "").startswith("algorithm not"):
            continue
        for acc in rec["accelerators"]:
            key = (acc, rec["role"], rec["algorithm"])
            old = chosen.get(key)
            rank = (-(rec["ranks"] or 0), rec["source"].startswith("network"),
                    _tool_rank(rec["tool"]))
            if old is None or rank < (-(old["ranks"] or 0), old["source"].startswith("network"),
                                      _tool_rank(old["tool"])):
                chosen[key] = rec
    table: dict[str, Any] = {}
    for (acc, role, algo), rec in sorted(chosen.items()):
        table.setdefault(acc, {}).setdefault(role, {})[algo] = {
            "efficiency": rec["efficiency"], "source": rec["source"], "system": rec["system"]}

    def klass(rec: dict[str, Any]) -> str:
        if rec["role"] == SCALE_OUT:
            return "fat-tree"
        preset = cat.systems[SYSTEMS_BY_LABEL[rec["system"]]]
        tier = next(t for t in preset.tiers if t.role.value == SCALE_UP)
        return tier.topology.value

    per_system: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rec in chosen.values():  # one figure per system (A100 40/80 GB share one row)
        per_system[(rec["system"], rec["role"], rec["algorithm"])] = rec
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in per_system.values():
        groups.setdefault((klass(rec), rec["algorithm"]), []).append(rec)
        if rec["role"] == SCALE_UP:
            groups.setdefault(("any-scale-up", rec["algorithm"]), []).append(rec)
    defaults: dict[str, Any] = {}
    for (k, algo), recs in sorted(groups.items()):
        recs.sort(key=lambda r: r["efficiency"])
        defaults.setdefault(k, {})[algo] = {
            "efficiency": round(statistics.median(r["efficiency"] for r in recs), 4),
            "of": [f"{r['system']}: {r['efficiency']} ({r['source']})" for r in recs],
        }
    return table, defaults


SYSTEMS_BY_LABEL = {s.label: s.preset for s in SYSTEMS.values()} | {
    nr.system.label: nr.system.preset for nr in NETWORK_ROWS}


def main() -> None:
    ref = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_REF
    records = from_collectives(ref / "measurements" / "collectives.csv")
    records += from_network(ref / "hardware" / "network.csv")
    records.sort(key=lambda r: (r["role"], r["system"], r["collective"], r["algorithm"],
                                r["ranks"] or 0))
    table, defaults = summarise(records)
    header = (
        "# Achievable collective bandwidth / catalog line rate (per device, per direction).\n"
        "# Generated by fitters/derive_collective_efficiency.py from shared/reference/\n"
        "# measurements/collectives.csv (row ids C....) and the measured rows of\n"
        "# hardware/network.csv (source ids N..); do not edit by hand.\n"
        "# ring: efficiency = busbw / line; in_network (NVLS): algbw x (n+1)/n / line;\n"
        "# scale-out: busbw / (NICs per node x NIC rate). See the script's docstring.\n"
    )
    doc = {"efficiency": table, "defaults": defaults, "measurements": records,
           "skipped": SKIPPED}
    OUT.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=100))
    print(f"wrote {OUT}: {len(records)} measurements, {len(table)} accelerators")
    for rec in records:
        ranks = str(rec["ranks"] or "?")
        print(f"  {rec['system'][:44]:44s} {rec['role']:9s} {rec['collective']:14s} "
              f"{rec['algorithm']:10s} n={ranks:<3s} busbw={rec['busbw_GBps']:8.2f} "
              f"line={rec['line_rate_GBps']:7.1f} eff={rec['efficiency']:.3f} {rec['source']}")
    for k, v in defaults.items():
        print("  default", k, {a: d["efficiency"] for a, d in v.items()})


if __name__ == "__main__":
    main()
